//! A sender that never gives up on a signed nonce, and never sends without its lease (issue 21,
//! findings 6 and 7), on the devnet:
//! - a transaction that stays unmined past the receipt wait (automine off) is answered `pending` with
//!   its hash, never failed; the runner takes it up again, bumps its fees at the same nonce, it is
//!   mined once, and the wallet's next transaction goes through;
//! - a lease taken away between reserving the nonces and signing (fault injection): the old holder
//!   sends nothing and records nothing; the lease's next holder sends the one transaction.
#![allow(clippy::panic, clippy::expect_used)] // Tests fail by panicking, saying what failed.

mod common;

use std::time::Duration;

use actiongate_core::store::NonceStore;
use actiongate_store::SqlStore;
use alloy::primitives::U256;
use serde_json::{Value, json};

use common::*;

async fn transfer(gw: &Gateway, agent: &Agent, to: &str, key: &str) -> (u16, Value) {
    execute_stating(
        gw,
        agent,
        "transfer",
        json!({"token": "USDC", "to": to, "amount": "1"}),
        key,
        1.0,
    )
    .await
}

async fn funded_agent(devnet: &Devnet, gw: &Gateway, database_url: &str, email: &str) -> Agent {
    let agent = onboard(gw, database_url, email, &["transfer"]).await;
    devnet
        .fund(
            agent.address,
            U256::from(10u64).pow(U256::from(17u64)),
            usdc(10),
        )
        .await;
    agent
}

/// The intent completes, the agent's wallet sent one transaction, and the recipient got 1 USDC once.
async fn completed_once(
    devnet: &Devnet,
    gw: &Gateway,
    agent: &Agent,
    intent: &str,
    recipient: alloy::primitives::Address,
    before: U256,
) {
    let done = wait_intent(gw, agent, intent, 60).await;
    assert_eq!(done["status"], json!("completed"), "{done}");
    assert_eq!(devnet.nonce(agent.address).await, 1, "one transaction");
    assert_eq!(
        devnet.balance(devnet.usdc(), recipient).await - before,
        usdc(1),
        "paid once"
    );
}

#[tokio::test]
async fn an_unmined_transaction_is_pending_then_bumped_and_mined_once() {
    let devnet = Devnet::start();
    let database_url = format!("sqlite://{}", devnet.dir.path().join("stall.db").display());
    let config = devnet.gateway_config("stall", &database_url);
    // A short receipt wait and a quick bump, so that the stall shows in seconds.
    let text = std::fs::read_to_string(&config).expect("read the config");
    assert!(text.contains("[evm]\n"), "{text}");
    let text = text.replace("[evm]\n", "[evm]\nreceipt-timeout-seconds = 2\n");
    std::fs::write(&config, text).expect("write the config");
    let gw = start_gateway(&config, false);
    let agent = funded_agent(&devnet, &gw, &database_url, "stall@example.com").await;
    let recipient = devnet.account(9).0;
    let before = devnet.balance(devnet.usdc(), recipient).await;

    rpc(&devnet, "evm_setAutomine", json!([false])).await;
    let (status, sent) = transfer(&gw, &agent, &recipient.to_string(), "stuck").await;
    assert_eq!(status, 200, "{sent}");
    let data = &sent["data"];
    assert_eq!(data["status"], json!("pending"), "never failed: {sent}");
    let first = data["txHash"]
        .as_str()
        .unwrap_or_else(|| panic!("a pending answer carries its hash: {sent}"))
        .to_owned();
    let intent = data["intentId"].as_str().unwrap_or_default().to_owned();

    // The runner takes the execution up again and re-signs it at its nonce with higher fees.
    let store = SqlStore::connect(&database_url).await.expect("connect");
    let key = format!("{intent}:0");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let bumped = loop {
        let txs = store.execution_txs(&key).await.expect("execution txs");
        if let Some(t) = txs.first().filter(|t| t.prior_hashes.contains(&first)) {
            break t.clone();
        }
        assert!(std::time::Instant::now() < deadline, "not bumped: {txs:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(bumped.nonce, 0, "the same nonce");
    assert_eq!(
        devnet.nonce(agent.address).await,
        0,
        "nothing mined while automine is off"
    );

    // Mined: once, and the intent completes with the mined signing.
    rpc(&devnet, "evm_setAutomine", json!([true])).await;
    rpc(&devnet, "evm_mine", json!([])).await;
    completed_once(&devnet, &gw, &agent, &intent, recipient, before).await;
    let txs = store.execution_txs(&key).await.expect("execution txs");
    assert_eq!(
        (txs.len(), txs[0].state.as_str(), txs[0].receipt_status),
        (1, "mined", Some(1)),
        "{txs:?}"
    );

    // The wallet is not stalled: its next transaction goes through at once.
    let (status, next) = transfer(&gw, &agent, &recipient.to_string(), "next").await;
    assert_eq!(
        (status, next["data"]["status"].clone()),
        (200, json!("confirmed")),
        "{next}"
    );
    assert_eq!(devnet.nonce(agent.address).await, 2);
    store.close().await;
}

#[tokio::test]
async fn a_worker_that_lost_its_lease_sends_nothing() {
    let devnet = Devnet::start();
    let database_url = format!("sqlite://{}", devnet.dir.path().join("fence.db").display());
    let config = devnet.gateway_config("fence", &database_url);
    let gw = start_gateway_env(&config, &[("STEAL_LEASE_AFTER_RESERVE", "1")]);
    let agent = funded_agent(&devnet, &gw, &database_url, "fence@example.com").await;
    let recipient = devnet.account(9).0;
    let before = devnet.balance(devnet.usdc(), recipient).await;

    // The lease is taken away after the nonce is reserved: the worker signs nothing, sends nothing,
    // records nothing, and the answer says the execution has not ended.
    let (status, sent) = transfer(&gw, &agent, &recipient.to_string(), "fenced").await;
    assert_eq!(status, 200, "{sent}");
    assert_eq!(
        (
            sent["data"]["status"].clone(),
            sent["data"]["txHash"].clone()
        ),
        (json!("pending"), Value::Null),
        "{sent}"
    );
    let pool: Value = rpc(
        &devnet,
        "eth_getTransactionCount",
        json!([agent.address, "pending"]),
    )
    .await;
    assert_eq!(pool, json!("0x0"), "nothing sent");

    // When the thief's lease runs out, the runner claims the intent and sends the one transaction.
    let intent = sent["data"]["intentId"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    completed_once(&devnet, &gw, &agent, &intent, recipient, before).await;
}
