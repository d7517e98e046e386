//! Across V3 between the devnet's two chains (issue 25): the published SpokePool behind its proxy on
//! 84532 and on the peer 11155420, and the devnet's relayer, checked onchain on both chains. A
//! deposit waits while the relayer is paused and is filled once it resumes (the recipient paid the
//! output on the destination); a deposit left past its fill deadline is never filled, and the
//! devnet's refund (the origin spoke's admin root bundle and refund leaf) pays its depositor back.
#![allow(clippy::panic, clippy::expect_used)] // Tests fail by panicking, saying what failed.
#![allow(clippy::too_many_arguments)] // The spoke's deposit and event, as sol! binds them.

mod common;

use alloy::primitives::{Address, B256, Bytes, U256};
use alloy::providers::{DynProvider, Provider, ProviderBuilder};
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
        function pauseDeposits(bool pause) external;
        event FundsDeposited(bytes32 inputToken, bytes32 outputToken, uint256 inputAmount, uint256 outputAmount, uint256 indexed destinationChainId, uint256 indexed depositId, uint32 quoteTimestamp, uint32 fillDeadline, uint32 exclusivityDeadline, bytes32 indexed depositor, bytes32 recipient, bytes32 exclusiveRelayer, bytes message);
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
    let (who, _) = devnet.account(from);
    let wallet = devnet.wallet(from);
    IERC20::new(devnet.usdc(), &wallet)
        .approve(c.home_spoke, amount)
        .send()
        .await
        .expect("approve")
        .get_receipt()
        .await
        .expect("approved");
    let now = u32::try_from(devnet.latest_header().await.timestamp).expect("a 32-bit time");
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
        IERC20::new(c.peer_usdc, &c.peer)
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
    // Once: a second refund of the same deposit is refused and pays nothing.
    let (status, body) = control(
        &c.relayer,
        "/refund",
        json!({"chainId": 84532, "depositId": expiring.depositId.to_string()}),
    )
    .await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(devnet.balance(devnet.usdc(), who).await, before);
    assert_eq!(peer_balance().await, start_peer + U256::from(99_500_000u64));
}

/// The owner's audit entries of `kind` about `intent_id`, once at least one is there (the leg
/// watcher looks every few seconds, the audit chain every 200 ms).
async fn bridge_events(gw: &Gateway, agent: &Agent, kind: &str, intent_id: &str) -> Vec<Value> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let export = reqwest::Client::new()
            .get(format!("{}/api/v1/audit?format=jsonl", gw.url))
            .bearer_auth(&agent.session)
            .send()
            .await
            .expect("the gateway answers")
            .text()
            .await
            .expect("the export");
        let found: Vec<Value> = export
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|e| e["kind"] == kind && e["subject"] == intent_id)
            .collect();
        if !found.is_empty() {
            return found;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no {kind} for {intent_id}: {export}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
}

/// A read under its own idempotency key (a fresh reading each time): its first result.
async fn read_first(gw: &Gateway, agent: &Agent, action: &str, params: Value, key: &str) -> Value {
    read_keyed(gw, agent, action, params, key).await["results"][0].clone()
}

#[tokio::test]
async fn a_bridge_through_the_gateway_is_quoted_deposited_filled_and_an_expired_one_refunded() {
    let devnet = Devnet::start();
    let c = chains(&devnet);
    let db = devnet.dir.path().join("gw.db");
    let database_url = format!("sqlite://{}", db.display());
    let gw = start_gateway(&devnet.gateway_config("main", &database_url), false);
    let agent = onboard(
        &gw,
        &database_url,
        "bridger@example.com",
        &[
            "get-bridge-quote",
            "bridge-tokens",
            "check-bridge-status",
            "get-bridge-tokens",
        ],
    )
    .await;
    devnet
        .fund(
            agent.address,
            U256::from(10u64).pow(U256::from(18u64)),
            usdc(500),
        )
        .await;
    let on_peer = || async {
        IERC20::new(c.peer_usdc, &c.peer)
            .balanceOf(agent.address)
            .call()
            .await
            .expect("balance")
    };
    let mut reads = 0;
    let mut status = |params: Value| {
        reads += 1;
        let key = format!("status-{reads}");
        let (gw, agent) = (&gw, &agent);
        async move { read_first(gw, agent, "check-bridge-status", params, &key).await }
    };

    // The quote: 100 USDC less the route's 5 bps.
    let quoted = read_first(
        &gw,
        &agent,
        "get-bridge-quote",
        json!({"token": "USDC", "amount": "100", "toChain": PEER}),
        "quote-1",
    )
    .await;
    let q = &quoted["data"];
    assert_eq!(
        (
            q["inputAmount"].clone(),
            q["outputAmount"].clone(),
            q["feeBps"].clone(),
            q["feeAmount"].clone(),
            q["route"]["destinationSpoke"]
                .as_str()
                .map(str::to_ascii_lowercase),
            q["route"]["outputToken"]
                .as_str()
                .map(str::to_ascii_lowercase),
        ),
        (
            json!("100"),
            json!("99.95"),
            json!(5),
            json!("0.05"),
            Some(c.peer_spoke.to_string().to_ascii_lowercase()),
            Some(c.peer_usdc.to_string().to_ascii_lowercase()),
        ),
        "{quoted}"
    );
    let refused = read_first(
        &gw,
        &agent,
        "get-bridge-quote",
        json!({"token": "USDC", "amount": "100", "toChain": 1}),
        "quote-2",
    )
    .await;
    assert_eq!(refused["code"], json!("ROUTE_NOT_SUPPORTED"), "{refused}");

    // Bridged while the relayer is paused: pending on the destination.
    assert_eq!(control(&c.relayer, "/pause", json!({})).await.0, 200);
    let (code, body) = execute_stating(
        &gw,
        &agent,
        "bridge-tokens",
        json!({"token": "USDC", "amount": "100", "toChainId": PEER}),
        "bridge-1",
        0.0,
    )
    .await;
    assert_eq!(
        (code, body["data"]["status"].clone()),
        (200, json!("confirmed")),
        "{body}"
    );
    let bridge = body["data"]["data"]["bridge"].clone();
    assert_eq!(
        (bridge["toChain"].clone(), bridge["outputAmount"].clone()),
        (json!(PEER), json!("99.95")),
        "{body}"
    );
    let tx = body["data"]["txHash"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert_eq!(
        devnet.balance(devnet.usdc(), agent.address).await,
        usdc(400)
    );
    let pending = status(json!({"fromChain": 84532, "transactionHash": tx})).await;
    assert_eq!(
        (
            pending["data"]["status"].clone(),
            pending["data"]["substatus"].clone(),
            pending["data"]["depositId"].clone(),
            pending["data"]["sending"]["amount"].clone(),
            pending["data"]["receiving"].clone(),
        ),
        (
            json!("PENDING"),
            json!("WAIT_DESTINATION_TRANSACTION"),
            bridge["depositId"].clone(),
            json!("100"),
            Value::Null
        ),
        "{pending}"
    );

    // The intent shows the bridge leg: queued while the deposit waits for its fill.
    let intent_id = body["data"]["intentId"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let intent_status = || async {
        get(
            format!(
                "{}/api/v1/agent/execute-intent/status?intentId={intent_id}",
                gw.url
            ),
            &agent.key,
        )
        .await
        .1
    };
    let waiting = intent_status().await;
    assert_eq!(
        (
            waiting["status"].clone(),
            waiting["results"][0]["data"]["leg"]["status"].clone(),
            waiting["results"][0]["data"]["leg"]["substatus"].clone(),
        ),
        (
            json!("queued"),
            json!("PENDING"),
            json!("WAIT_DESTINATION_TRANSACTION")
        ),
        "{waiting}"
    );

    // Resumed: filled; DONE only once the recipient has the output on the destination.
    assert_eq!(control(&c.relayer, "/resume", json!({})).await.0, 200);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let done = loop {
        let s = status(json!({"fromChain": 84532, "depositId": bridge["depositId"].clone()})).await;
        if s["data"]["status"] == "DONE" {
            break s;
        }
        assert_eq!(s["data"]["status"], json!("PENDING"), "{s}");
        assert!(std::time::Instant::now() < deadline, "never filled: {s}");
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    };
    assert_eq!(
        (
            done["data"]["substatus"].clone(),
            done["data"]["receiving"]["amount"].clone(),
            done["data"]["receiving"]["chainId"].clone(),
        ),
        (json!("COMPLETED"), json!("99.95"), json!(PEER)),
        "{done}"
    );
    assert_eq!(on_peer().await, U256::from(99_950_000u64));
    let ended = wait_ended(&gw.url, &agent.key, &intent_id).await;
    assert_eq!(
        (
            ended["status"].clone(),
            ended["results"][0]["data"]["leg"]["status"].clone()
        ),
        (json!("completed"), json!("DONE")),
        "{ended}"
    );

    // The gateway follows the leg by itself: the owner's audit trail (and so their webhooks and
    // event stream) gets one bridge.completed for the intent, with the fill.
    let completed = bridge_events(&gw, &agent, "bridge.completed", &intent_id).await;
    assert_eq!(
        completed
            .iter()
            .map(|e| (
                e["data"]["leg"]["status"].clone(),
                e["data"]["leg"]["receiving"]["amount"].clone(),
                e["data"]["txHash"].clone()
            ))
            .collect::<Vec<_>>(),
        [(json!("DONE"), json!("99.95"), json!(tx))],
        "{completed:?}"
    );

    // build-tx for a user's wallet: the approval first, then the deposit; viem signs and sends them,
    // and the relayer fills it for the user on the peer.
    let (user, user_key) = devnet.account(4);
    let (code, built) = post(
        format!("{}/api/v1/agent/build-tx", gw.url),
        json!({"agentApiKey": agent.key, "action": "bridge-tokens", "chainId": 84532,
               "walletAddress": user.to_string(),
               "params": {"token": "USDC", "amount": "20", "toChainId": PEER}}),
    )
    .await;
    assert_eq!(code, 200, "{built}");
    let txs = built["data"]["transactions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(txs.len(), 2, "{built}");
    assert!(
        txs[0]["description"]
            .as_str()
            .is_some_and(|d| d.starts_with("Approve")),
        "{built}"
    );
    assert_eq!(
        txs[1]["to"].as_str().map(str::to_ascii_lowercase),
        Some(c.home_spoke.to_string().to_ascii_lowercase()),
        "{built}"
    );
    let user_before = IERC20::new(c.peer_usdc, &c.peer)
        .balanceOf(user)
        .call()
        .await
        .expect("balance");
    let sent = sign_and_send(&devnet, &user_key, &built["data"]);
    let results = sent["results"].as_array().cloned().unwrap_or_default();
    assert!(
        results.len() == 2 && results.iter().all(|x| x["status"] == "success"),
        "{sent}"
    );
    let deposit_tx = results[1]["hash"].as_str().unwrap_or_default().to_owned();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let s = status(json!({"fromChain": 84532, "transactionHash": deposit_tx})).await;
        if s["data"]["status"] == "DONE" {
            break;
        }
        assert_eq!(s["data"]["status"], json!("PENDING"), "{s}");
        assert!(std::time::Instant::now() < deadline, "never filled: {s}");
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    }
    assert_eq!(
        IERC20::new(c.peer_usdc, &c.peer)
            .balanceOf(user)
            .call()
            .await
            .expect("balance"),
        user_before + U256::from(19_990_000u64)
    );

    // A deposit left unfilled past its deadline (the destination's clock moved on an hour):
    // FAILED / EXPIRED, then FAILED / REFUNDED once the refund ran, the depositor paid back.
    assert_eq!(control(&c.relayer, "/pause", json!({})).await.0, 200);
    let (code, body) = execute_stating(
        &gw,
        &agent,
        "bridge-tokens",
        json!({"token": "USDC", "amount": "50", "toChainId": PEER}),
        "bridge-2",
        0.0,
    )
    .await;
    assert_eq!(code, 200, "{body}");
    let late = body["data"]["data"]["bridge"]["depositId"].clone();
    let late_approval = body["data"]["data"]["transactions"][0]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert_eq!(
        devnet.balance(devnet.usdc(), agent.address).await,
        usdc(350)
    );
    for (method, params) in [("evm_increaseTime", json!([3700])), ("evm_mine", json!([]))] {
        c.peer
            .raw_request::<_, Value>(method.into(), params)
            .await
            .expect("the peer's clock moves");
    }
    let expired = status(json!({"fromChain": 84532, "depositId": late})).await;
    assert_eq!(
        (
            expired["data"]["status"].clone(),
            expired["data"]["substatus"].clone()
        ),
        (json!("FAILED"), json!("EXPIRED")),
        "{expired}"
    );
    let (code, refund) = control(
        &c.relayer,
        "/refund",
        json!({"chainId": 84532, "depositId": late.as_str().unwrap_or_default()}),
    )
    .await;
    assert_eq!(code, 200, "{refund}");
    let refunded = status(json!({"fromChain": 84532, "depositId": late})).await;
    assert_eq!(
        (
            refunded["data"]["status"].clone(),
            refunded["data"]["substatus"].clone(),
            refunded["data"]["refund"]["txHash"].clone(),
        ),
        (json!("FAILED"), json!("REFUNDED"), refund["txHash"].clone()),
        "{refunded}"
    );
    assert_eq!(
        devnet.balance(devnet.usdc(), agent.address).await,
        usdc(400)
    );
    assert_eq!(on_peer().await, U256::from(99_950_000u64), "never filled");
    let late_intent = body["data"]["intentId"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let failed = bridge_events(&gw, &agent, "bridge.failed", &late_intent).await;
    assert_eq!(
        failed
            .iter()
            .map(|e| e["data"]["leg"]["status"].clone())
            .collect::<Vec<_>>(),
        [json!("FAILED")],
        "{failed:?}"
    );
    // Looked at again and again, each leg ended once.
    tokio::time::sleep(std::time::Duration::from_secs(4)).await;
    assert_eq!(
        bridge_events(&gw, &agent, "bridge.completed", &intent_id)
            .await
            .len(),
        1
    );

    // Thousands of blocks later on both chains, a status by deposit id is still found: the deposit,
    // its fill and its refund are looked for back from each chain's head in windows a hosted node
    // accepts (never one query from block 0), here across more than two windows of 2,000 blocks.
    for provider in [&devnet.provider, &c.peer] {
        provider
            .raw_request::<_, Value>("anvil_mine".into(), (U256::from(4_500u64),))
            .await
            .expect("blocks mined");
    }
    let again = status(json!({"fromChain": 84532, "depositId": bridge["depositId"].clone()})).await;
    assert_eq!(
        (
            again["data"]["status"].clone(),
            again["data"]["receiving"]["txHash"].clone()
        ),
        (json!("DONE"), done["data"]["receiving"]["txHash"].clone()),
        "{again}"
    );
    let again = status(json!({"fromChain": 84532, "depositId": late})).await;
    assert_eq!(
        (
            again["data"]["substatus"].clone(),
            again["data"]["refund"]["txHash"].clone()
        ),
        (json!("REFUNDED"), refund["txHash"].clone()),
        "{again}"
    );

    // Readiness refuses before anything is written: a route not configured (to chain 1, which
    // this gateway does not read either), and a spoke whose admin paused deposits.
    let reasons = |body: &Value| -> Vec<Value> {
        body["detail"]["blockingReasons"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .iter()
            .map(|r| r["code"].clone())
            .collect()
    };
    let (code, body) = execute_stating(
        &gw,
        &agent,
        "bridge-tokens",
        json!({"token": "USDC", "amount": "10", "toChainId": 1}),
        "bridge-3",
        0.0,
    )
    .await;
    assert_eq!(
        (code, body["code"].clone(), reasons(&body)),
        (
            422,
            json!("VENUE_NOT_READY"),
            vec![json!("VENUE_UNAVAILABLE"), json!("CHAIN_NOT_CONFIGURED")]
        ),
        "{body}"
    );
    let admin = devnet.wallet(0);
    let pause = |on: bool| {
        let spoke = ISpoke::new(c.home_spoke, &admin);
        async move {
            let r = spoke
                .pauseDeposits(on)
                .send()
                .await
                .expect("pauseDeposits")
                .get_receipt()
                .await
                .expect("mined");
            assert!(r.status(), "pauseDeposits reverted");
        }
    };
    // The routes the spokes serve, both ways; a paused spoke's route is listed as unavailable.
    let listed = read_first(&gw, &agent, "get-bridge-tokens", json!({}), "routes-1").await;
    let routes: Vec<(Value, Value, Value)> = listed["data"]["routes"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|r| {
            (
                r["fromChain"].clone(),
                r["toChain"].clone(),
                r["token"].clone(),
            )
        })
        .collect();
    assert_eq!(
        routes,
        [
            (json!(84532), json!(PEER), json!("USDC")),
            (json!(PEER), json!(84532), json!("USDC"))
        ],
        "{listed}"
    );
    pause(true).await;
    let listed = read_first(
        &gw,
        &agent,
        "get-bridge-tokens",
        json!({"fromChain": 84532}),
        "routes-2",
    )
    .await;
    assert_eq!(listed["data"]["routes"], json!([]), "{listed}");
    assert!(
        listed["data"]["unavailable"][0]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("paused")),
        "{listed}"
    );
    let (code, body) = execute_stating(
        &gw,
        &agent,
        "bridge-tokens",
        json!({"token": "USDC", "amount": "10", "toChainId": PEER}),
        "bridge-4",
        0.0,
    )
    .await;
    assert_eq!(
        (code, body["code"].clone(), reasons(&body)),
        (422, json!("VENUE_NOT_READY"), vec![json!("VENUE_PAUSED")]),
        "{body}"
    );
    pause(false).await;
    assert_eq!(
        devnet.balance(devnet.usdc(), agent.address).await,
        usdc(400)
    );

    // A hash no chain knows, and a transaction that is no deposit: NOT_FOUND, never DONE.
    let unknown =
        status(json!({"fromChain": 84532, "transactionHash": format!("0x{}", "ab".repeat(32))}))
            .await;
    assert_eq!(unknown["data"]["status"], json!("NOT_FOUND"), "{unknown}");
    let approval = late_approval;
    let other = status(json!({"fromChain": 84532, "transactionHash": approval})).await;
    assert_eq!(other["data"]["status"], json!("NOT_FOUND"), "{other}");
    assert!(
        other["data"]["substatusMessage"]
            .as_str()
            .is_some_and(|m| m.contains("no Across deposit")),
        "{other}"
    );
}

#[tokio::test]
async fn a_fan_out_bridge_pays_each_delegator_on_the_destination_once() {
    let devnet = Devnet::start();
    let c = chains(&devnet);
    let db = devnet.dir.path().join("gw.db");
    let database_url = format!("sqlite://{}", db.display());
    let gw = start_gateway(&devnet.gateway_config("main", &database_url), false);
    let agent = onboard(
        &gw,
        &database_url,
        "fan-bridge@example.com",
        &["bridge-tokens"],
    )
    .await;
    let devnet_json = devnet.dir.path().join("devnet.json").display().to_string();
    // The agent pays the gas of the redemptions.
    devnet
        .fund(
            agent.address,
            U256::from(10u64).pow(U256::from(18u64)),
            U256::ZERO,
        )
        .await;
    // An EOA upgraded to the stateless DeleGator (EIP-7702), and the devnet's HybridDeleGator.
    let (eoa, eoa_key) = upgraded_eoa(&devnet, &devnet_json).await;
    let hybrid: Address = devnet.spec["smartAccounts"][0]["address"]
        .as_str()
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("no smart account"));
    let owner = devnet.spec["smartAccounts"][0]["ownerIndex"]
        .as_u64()
        .unwrap_or(7) as usize;
    let (_, owner_key) = devnet.account(owner);
    delegate(
        &gw,
        &agent,
        &devnet_json,
        (eoa, "bridge-tokens"),
        &eoa_key,
        false,
    )
    .await;
    delegate(
        &gw,
        &agent,
        &devnet_json,
        (hybrid, "bridge-tokens"),
        &owner_key,
        true,
    )
    .await;
    let on_peer = |who: Address| {
        let peer = c.peer.clone();
        let token = c.peer_usdc;
        async move {
            IERC20::new(token, &peer)
                .balanceOf(who)
                .call()
                .await
                .expect("balance")
        }
    };
    let (eoa_before, hybrid_before) = (on_peer(eoa).await, on_peer(hybrid).await);
    let (eoa_home, hybrid_home) = (
        devnet.balance(devnet.usdc(), eoa).await,
        devnet.balance(devnet.usdc(), hybrid).await,
    );

    // Naming another recipient is refused at submit: each delegator receives its own.
    let (status, refused) = post(
        format!("{}/api/v1/agent/execute-intent", gw.url),
        json!({"agentApiKey": agent.key, "action": "bridge-tokens", "chainId": 84532,
               "params": {"token": "USDC", "amount": "10", "toChainId": PEER, "recipient": agent.address}}),
    )
    .await;
    assert_eq!(
        (status, refused["code"].clone()),
        (400, json!("INVALID_PARAMS")),
        "{refused}"
    );
    let (status, submitted) = post(
        format!("{}/api/v1/agent/execute-intent", gw.url),
        json!({"agentApiKey": agent.key, "action": "bridge-tokens", "chainId": 84532,
               "idempotencyKey": "fan-bridge-1",
               "params": {"token": "USDC", "amount": "10", "toChainId": PEER}}),
    )
    .await;
    assert_eq!(status, 200, "{submitted}");
    let id = submitted["intentId"]
        .as_str()
        .unwrap_or_else(|| panic!("{submitted}"))
        .to_owned();
    let done = wait_ended(&gw.url, &agent.key, &id).await;
    assert_eq!(done["status"], "completed", "{done}");
    let results = done["results"].as_array().cloned().unwrap_or_default();
    assert_eq!(results.len(), 2, "{done}");
    for r in &results {
        assert_eq!(r["success"], json!(true), "{done}");
        assert_eq!(
            r["data"]["bridge"]["outputAmount"],
            json!("9.995"),
            "{done}"
        );
    }
    // Each delegator paid 10 on the origin and receives 9.995 on the peer, once.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while on_peer(eoa).await == eoa_before || on_peer(hybrid).await == hybrid_before {
        assert!(
            std::time::Instant::now() < deadline,
            "the relayer did not fill both"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    for (who, before, home) in [
        (eoa, eoa_before, eoa_home),
        (hybrid, hybrid_before, hybrid_home),
    ] {
        assert_eq!(
            on_peer(who).await,
            before + U256::from(9_995_000u64),
            "{who}"
        );
        assert_eq!(
            devnet.balance(devnet.usdc(), who).await,
            home - usdc(10),
            "{who}"
        );
    }
}
