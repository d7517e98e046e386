//! The wallet sender against the devnet's node (anvil), for what only a real node can show: a
//! transaction the node refuses while a later one of the same wallet is already with it leaves no
//! gap behind that one (its nonce is filled with a no-op transfer and the later one is mined).
#![allow(clippy::panic, clippy::expect_used)] // Tests fail by panicking, saying what failed.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use actiongate_api_types::ErrorCode;
use actiongate_chain::plan::{Call, Plan};
use actiongate_chain::sender::{BeforeReserve, SendHooks, WalletSender};
use actiongate_chain::{ChainClients, ChainOptions};
use actiongate_core::chains::{ChainSettings, Chains};
use actiongate_core::clock::SystemClock;
use actiongate_core::error::Error;
use actiongate_core::store::{NonceRequest, Reservation, Store};
use actiongate_store::SqlStore;
use alloy::consensus::Transaction;
use alloy::primitives::{Address, Bytes, U256};
use alloy::providers::Provider;
use alloy::signers::local::PrivateKeySigner;
use serde_json::{Value, json};

use common::*;

const CHAIN: u64 = 84532;

/// An approval of `spender` on the devnet's USDC: ~46,000 gas, ~60,000 with the sender's headroom.
fn approval(usdc: Address, spender: Address) -> Plan {
    let mut data = vec![0x09, 0x5e, 0xa7, 0xb3];
    data.extend_from_slice(&[0u8; 12]);
    data.extend_from_slice(spender.as_slice());
    data.extend_from_slice(&U256::from(1u64).to_be_bytes::<32>());
    Plan {
        calls: vec![Call {
            to: usdc,
            data: Bytes::from(data),
            value: U256::ZERO,
            description: "approve".into(),
        }],
        summary: json!({}),
    }
}

/// A plain transfer of 1 wei: 21,000 gas, 27,300 with the headroom.
fn transfer(to: Address) -> Plan {
    Plan {
        calls: vec![Call {
            to,
            data: Bytes::new(),
            value: U256::from(1u64),
            description: "transfer".into(),
        }],
        summary: json!({}),
    }
}

/// Execution B is reserved while execution A holds the nonce below it (A's reservation is made from
/// B's before-reserve hook); B's transfer goes to the node and waits there above A's nonce. Then the
/// block gas limit drops to 50,000 (from A's hook, after A's simulation), so the node refuses A's
/// approval (its gas limit, ~60,000, is above the block's) on both of A's attempts (the fill and B,
/// 48,300 together, fit in one block). A fails, its nonce is
/// filled with a no-op transfer to the wallet itself, and B is mined right above it.
#[tokio::test]
async fn a_refused_transaction_leaves_no_gap_below_the_next() {
    let devnet = Devnet::start();
    let db = devnet.dir.path().join("nonces.db");
    let store = SqlStore::connect(&format!("sqlite://{}", db.display()))
        .await
        .expect("the store opens");
    store.migrate().await.expect("migrations");
    let store: Arc<dyn Store> = Arc::new(store);
    let settings = ChainSettings {
        name: "devnet".into(),
        rpc_url: Some(devnet.url.clone()),
        tokens: BTreeMap::new(),
        contracts: BTreeMap::new(),
        vaults: BTreeMap::new(),
        price_feeds: BTreeMap::new(),
        price_pools: BTreeMap::new(),
        fx_pairs: Vec::new(),
        prediction_questions: BTreeMap::new(),
        bridge_routes: BTreeMap::new(),
    };
    let options = ChainOptions {
        receipt_timeout: Duration::from_secs(60),
        ..ChainOptions::default()
    };
    let clients = ChainClients::connect(
        &Chains(BTreeMap::from([(CHAIN, settings)])),
        options.clone(),
    )
    .expect("the devnet's client");
    let client = clients.get(CHAIN).expect("the devnet's client").clone();
    let (wallet, key) = devnet.account(9);
    let signer: PrivateKeySigner = key.parse().expect("a devnet key");
    let first = devnet.nonce(wallet).await;

    let hook_store = store.clone();
    let node = devnet.provider.clone();
    let before_reserve: BeforeReserve = Arc::new(move |execution_key: &str| {
        let (store, node, key) = (hook_store.clone(), node.clone(), execution_key.to_owned());
        Box::pin(async move {
            match key.as_str() {
                // A takes the nonce below B's before B reserves (reserved, not signed yet).
                "B" => {
                    let wallet = wallet.to_string();
                    let request = NonceRequest {
                        chain_id: CHAIN,
                        wallet: &wallet,
                        execution_key: "A",
                        count: 1,
                        chain_nonce: first,
                        now: 1,
                        gaps_only: false,
                    };
                    let held = store.reserve_signed(request, None, None).await;
                    assert!(
                        matches!(&held, Ok(Reservation::New(rows)) if rows[0].nonce == first),
                        "{held:?}"
                    );
                }
                // After A's simulation: no block may hold A's approval any more.
                "A" => {
                    let _: Value = node
                        .raw_request("evm_setBlockGasLimit".into(), (U256::from(50_000u64),))
                        .await
                        .expect("the devnet sets the block gas limit");
                }
                _ => {}
            }
        })
    });
    let hooks = SendHooks {
        before_reserve: Some(before_reserve),
        after_send: None,
    };
    let sender = Arc::new(WalletSender::new(
        store.clone(),
        Arc::new(SystemClock),
        options,
        hooks,
    ));

    // B: sent, and waiting in the node above A's nonce.
    let b = {
        let (sender, client, signer) = (sender.clone(), client.clone(), signer.clone());
        let to = devnet.account(8).0;
        tokio::spawn(async move {
            sender
                .execute(&client, &signer, wallet, "B", None, || async {
                    Ok::<_, Error>(transfer(to))
                })
                .await
        })
    };
    // Until B is with the node (queued behind the nonce A holds).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let pool: Value = devnet
            .provider
            .raw_request("txpool_status".into(), ())
            .await
            .expect("the pool's status");
        if pool["queued"] != json!("0x0") || pool["pending"] != json!("0x0") {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "B never reached the node"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        devnet.nonce(wallet).await,
        first,
        "nothing mined above the gap"
    );

    // A: refused by the node twice; its nonce filled.
    let usdc = devnet.usdc();
    let a = sender
        .execute(&client, &signer, wallet, "A", None, || async {
            Ok::<_, Error>(approval(usdc, Address::repeat_byte(0x11)))
        })
        .await;
    assert!(!a.success && !a.pending, "{a:?}");
    let (code, message) = a.error.clone().expect("A's refusal");
    assert_eq!(code, ErrorCode::NotAvailable, "{a:?}");
    assert!(
        message.contains("The node refused the transaction") && message.contains("gas"),
        "the node's own reason: {message}"
    );
    let b = tokio::time::timeout(Duration::from_secs(60), b)
        .await
        .expect("B is mined once the gap is filled")
        .expect("B's task");
    assert!(b.success, "{b:?}");
    assert_eq!(devnet.nonce(wallet).await, first + 2);

    // What fills A's nonce is a no-op: nothing sent anywhere, 0 value, to the wallet itself, mined
    // at or before B's block.
    let b_hash = b.tx_hash.clone().expect("B's transaction");
    let b_block = devnet
        .provider
        .get_transaction_receipt(b_hash.parse().expect("a hash"))
        .await
        .expect("the node answers")
        .and_then(|r| r.block_number)
        .expect("B is mined");
    let mut fill = None;
    for n in b_block.saturating_sub(3)..=b_block {
        let block = devnet
            .provider
            .get_block_by_number(n.into())
            .full()
            .await
            .expect("the node answers")
            .expect("the block");
        if let Some(t) = block
            .transactions
            .into_transactions()
            .find(|t| t.inner.signer() == wallet && t.nonce() == first)
        {
            fill = Some(t);
        }
    }
    let tx = fill.expect("the fill is on the chain");
    assert_eq!(
        (tx.to(), tx.value(), tx.input().len()),
        (Some(wallet), U256::ZERO, 0)
    );
    let _: Value = devnet
        .provider
        .raw_request("evm_setBlockGasLimit".into(), (U256::from(30_000_000u64),))
        .await
        .expect("the devnet sets the block gas limit back");
}
