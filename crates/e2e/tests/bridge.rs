//! Across V3 between the devnet's two chains (issue 25): the published SpokePool behind its proxy on
//! 84532 and on the peer 11155420, and the devnet's relayer, checked onchain on both chains. A
//! deposit waits while the relayer is paused and is filled once it resumes (the recipient paid the
//! output on the destination); a deposit left past its fill deadline is never filled, and the
//! devnet's refund (the origin spoke's admin root bundle and refund leaf) pays its depositor back.
#![allow(clippy::panic, clippy::expect_used)] // Tests fail by panicking, saying what failed.
#![allow(clippy::too_many_arguments)] // The spoke's deposit and event, as sol! binds them.

mod common;

use alloy::network::EthereumWallet;
use alloy::primitives::{Address, B256, Bytes, U256};
use alloy::providers::{DynProvider, Provider, ProviderBuilder};
use alloy::signers::local::PrivateKeySigner;
use serde_json::{Value, json};

use common::*;

alloy::sol! {
    #[sol(rpc)]
    interface ISpoke {
        struct V3RelayData {
            bytes32 depositor;
            bytes32 recipient;
            bytes32 exclusiveRelayer;
            bytes32 inputToken;
            bytes32 outputToken;
            uint256 inputAmount;
            uint256 outputAmount;
            uint256 originChainId;
            uint256 depositId;
            uint32 fillDeadline;
            uint32 exclusivityDeadline;
            bytes message;
        }
        function deposit(bytes32 depositor, bytes32 recipient, bytes32 inputToken, bytes32 outputToken, uint256 inputAmount, uint256 outputAmount, uint256 destinationChainId, bytes32 exclusiveRelayer, uint32 quoteTimestamp, uint32 fillDeadline, uint32 exclusivityParameter, bytes message) external payable;
        function getV3RelayHash(V3RelayData relayData) external view returns (bytes32);
        function fillStatuses(bytes32) external view returns (uint256);
        event FundsDeposited(bytes32 inputToken, bytes32 outputToken, uint256 inputAmount, uint256 outputAmount, uint256 indexed destinationChainId, uint256 indexed depositId, uint32 quoteTimestamp, uint32 fillDeadline, uint32 exclusivityDeadline, bytes32 indexed depositor, bytes32 recipient, bytes32 exclusiveRelayer, bytes message);
    }
    #[sol(rpc)]
    interface IToken {
        function approve(address spender, uint256 amount) external returns (bool);
        function balanceOf(address owner) external view returns (uint256);
    }
}

const PEER: u64 = 11_155_420;

fn word(a: Address) -> B256 {
    a.into_word()
}

async fn control(url: &str, route: &str, body: Value) -> (u16, Value) {
    let r = reqwest::Client::new()
        .post(format!("{url}{route}"))
        .json(&body)
        .send()
        .await
        .expect("the relayer's control endpoint answers");
    (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
}

struct Chains {
    peer: DynProvider,
    peer_usdc: Address,
    home_spoke: Address,
    peer_spoke: Address,
    relayer: String,
}

fn chains(devnet: &Devnet) -> Chains {
    let peer = &devnet.spec["peers"][0];
    assert_eq!(peer["chainId"], json!(PEER), "{peer}");
    let at = |v: &Value| -> Address {
        v.as_str()
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("an address: {v}"))
    };
    Chains {
        peer: ProviderBuilder::new()
            .connect_http(
                peer["rpcUrl"]
                    .as_str()
                    .and_then(|u| u.parse().ok())
                    .expect("the peer's URL"),
            )
            .erased(),
        peer_usdc: at(&peer["tokens"]["USDC"]["address"]),
        home_spoke: devnet.address(&["contracts", "AcrossSpokePool"]),
        peer_spoke: at(&peer["contracts"]["AcrossSpokePool"]),
        relayer: devnet.spec["across"]["relayer"]["url"]
            .as_str()
            .expect("the relayer's control URL")
            .to_owned(),
    }
}

/// A deposit of `amount` USDC from devnet account `from` on 84532 to itself on the peer, for
/// `output`, filled before `deadline_in` seconds from now: its relay data.
async fn deposit(
    devnet: &Devnet,
    c: &Chains,
    from: usize,
    amount: U256,
    output: U256,
    deadline_in: u32,
) -> ISpoke::V3RelayData {
    let (who, key) = devnet.account(from);
    let signer: PrivateKeySigner = key.parse().expect("a devnet key");
    let wallet = ProviderBuilder::new()
        .wallet(EthereumWallet::from(signer))
        .connect_http(devnet.url.parse().expect("the devnet URL"))
        .erased();
    IToken::new(devnet.usdc(), &wallet)
        .approve(c.home_spoke, amount)
        .send()
        .await
        .expect("approve")
        .get_receipt()
        .await
        .expect("approved");
    let now = u32::try_from(
        devnet
            .provider
            .get_block_by_number(alloy::eips::BlockNumberOrTag::Latest)
            .await
            .expect("block")
            .expect("a latest block")
            .header
            .timestamp,
    )
    .expect("a 32-bit time");
    let receipt = ISpoke::new(c.home_spoke, &wallet)
        .deposit(
            word(who),
            word(who),
            word(devnet.usdc()),
            word(c.peer_usdc),
            amount,
            output,
            U256::from(PEER),
            B256::ZERO,
            now,
            now + deadline_in,
            0,
            Bytes::new(),
        )
        .send()
        .await
        .expect("deposit")
        .get_receipt()
        .await
        .expect("deposited");
    assert!(receipt.status(), "the deposit reverted");
    let event = receipt
        .inner
        .logs()
        .iter()
        .find_map(|l| l.log_decode::<ISpoke::FundsDeposited>().ok())
        .expect("a FundsDeposited event")
        .inner
        .data;
    ISpoke::V3RelayData {
        depositor: event.depositor,
        recipient: event.recipient,
        exclusiveRelayer: event.exclusiveRelayer,
        inputToken: event.inputToken,
        outputToken: event.outputToken,
        inputAmount: event.inputAmount,
        outputAmount: event.outputAmount,
        originChainId: U256::from(84_532u64),
        depositId: event.depositId,
        fillDeadline: event.fillDeadline,
        exclusivityDeadline: event.exclusivityDeadline,
        message: event.message,
    }
}

async fn fill_status(c: &Chains, relay: &ISpoke::V3RelayData) -> U256 {
    let spoke = ISpoke::new(c.peer_spoke, &c.peer);
    let hash = spoke
        .getV3RelayHash(relay.clone())
        .call()
        .await
        .expect("relay hash");
    spoke.fillStatuses(hash).call().await.expect("fill status")
}

#[tokio::test]
async fn across_spokes_and_the_devnet_relayer_fill_wait_and_refund() {
    let devnet = Devnet::start();
    let c = chains(&devnet);
    let (who, _) = devnet.account(3);
    let peer_balance = || async {
        IToken::new(c.peer_usdc, &c.peer)
            .balanceOf(who)
            .call()
            .await
            .expect("balance")
    };
    let start_peer = peer_balance().await;
    assert_eq!(
        start_peer,
        usdc(1_000_000),
        "the peer's USDC funds the test accounts"
    );

    // Paused: the deposit waits, unfilled on the destination.
    assert_eq!(control(&c.relayer, "/pause", json!({})).await.0, 200);
    let relay = deposit(&devnet, &c, 3, usdc(100), U256::from(99_500_000u64), 3600).await;
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    assert_eq!(fill_status(&c, &relay).await, U256::ZERO);
    assert_eq!(peer_balance().await, start_peer);

    // Resumed: filled once, the recipient paid the output on the destination.
    assert_eq!(control(&c.relayer, "/resume", json!({})).await.0, 200);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while fill_status(&c, &relay).await != U256::from(2u64) {
        assert!(
            std::time::Instant::now() < deadline,
            "the relayer did not fill"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    assert_eq!(peer_balance().await, start_peer + U256::from(99_500_000u64));
    // A filled deposit is not refunded.
    let (status, body) = control(
        &c.relayer,
        "/refund",
        json!({"chainId": 84532, "depositId": relay.depositId.to_string()}),
    )
    .await;
    assert_eq!(status, 409, "{body}");

    // A deposit left past its fill deadline while paused is never filled; the refund pays it back.
    assert_eq!(control(&c.relayer, "/pause", json!({})).await.0, 200);
    let before = devnet.balance(devnet.usdc(), who).await;
    let expiring = deposit(&devnet, &c, 3, usdc(50), usdc(49), 2).await;
    assert_eq!(devnet.balance(devnet.usdc(), who).await, before - usdc(50));
    let (status, body) = control(
        &c.relayer,
        "/refund",
        json!({"chainId": 84532, "depositId": expiring.depositId.to_string()}),
    )
    .await;
    assert_eq!(status, 409, "not expired yet: {body}");
    tokio::time::sleep(std::time::Duration::from_secs(4)).await;
    assert_eq!(control(&c.relayer, "/resume", json!({})).await.0, 200);
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    assert_eq!(fill_status(&c, &expiring).await, U256::ZERO);
    let (status, body) = control(
        &c.relayer,
        "/refund",
        json!({"chainId": 84532, "depositId": expiring.depositId.to_string()}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert!(body["txHash"].is_string(), "{body}");
    assert_eq!(devnet.balance(devnet.usdc(), who).await, before);
    assert_eq!(peer_balance().await, start_peer + U256::from(99_500_000u64));
}
