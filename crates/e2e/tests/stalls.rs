//! A sender that never gives up on a signed nonce, and never sends without its lease (issue 21,
//! findings 6 and 7), on the devnet:
//! - a transaction that stays unmined past the receipt wait (automine off) is answered `pending` with
//!   its hash, never failed; the runner takes it up again, bumps its fees at the same nonce, it is
//!   mined once, and the wallet's next transaction goes through;
//! - a lease taken away just before the nonces are reserved and signed (fault injection): the old
//!   holder reserves nothing, sends nothing and records nothing; the lease's next holder sends the
//!   one transaction;
//! - an x402 settlement that stays unmined, its client gone: the background sweep re-sends and bumps
//!   it; once mined, the client's retry is credited once and the settlement wallet is not stalled.
#![allow(clippy::panic, clippy::expect_used)] // Tests fail by panicking, saying what failed.

mod common;

use std::time::Duration;

use actiongate_chain::payments::x402_payment_header;
use actiongate_core::store::NonceStore;
use actiongate_store::SqlStore;
use alloy::primitives::{Address, U256};
use alloy::signers::local::PrivateKeySigner;
use base64::Engine as _;
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

/// The gateway config with a 2-second receipt wait, so that a stall shows in seconds.
fn quick_receipts(devnet: &Devnet, name: &str, database_url: &str) -> std::path::PathBuf {
    let config = devnet.gateway_config(name, database_url);
    let text = std::fs::read_to_string(&config).expect("read the config");
    assert!(text.contains("[evm]\n"), "{text}");
    let text = text.replace("[evm]\n", "[evm]\nreceipt-timeout-seconds = 2\n");
    std::fs::write(&config, text).expect("write the config");
    config
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
    let config = quick_receipts(&devnet, "stall", &database_url);
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
    let gw = start_gateway_env(&config, &[("STEAL_LEASE_BEFORE_RESERVE", "1")]);
    let agent = funded_agent(&devnet, &gw, &database_url, "fence@example.com").await;
    let recipient = devnet.account(9).0;
    let before = devnet.balance(devnet.usdc(), recipient).await;

    // The lease is taken away just before the nonce is reserved: the worker reserves nothing, signs
    // nothing, sends nothing, records nothing, and the answer says the execution has not ended.
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

/// A standard x402 purchase on the open route (`credits_100` for `payer`): the 402's
/// `PAYMENT-REQUIRED` requirements, answered with an EIP-3009 authorization signed by `key` (as the
/// x402 "exact" EVM client signs it). Answers the invoice id and the `PAYMENT-SIGNATURE` header.
async fn x402_payment(gw: &Gateway, payer: Address, key: &str) -> (String, String) {
    let body = json!({"sku": "credits_100", "userAddress": payer});
    let url = format!("{}/api/v1/credits/buy-with-x402", gw.url);
    let r = reqwest::Client::new()
        .post(&url)
        .json(&body)
        .send()
        .await
        .expect("send");
    assert_eq!(r.status().as_u16(), 402);
    let required: Value = r
        .headers()
        .get("payment-required")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| base64::engine::general_purpose::STANDARD.decode(v).ok())
        .and_then(|b| serde_json::from_slice(&b).ok())
        .expect("a PAYMENT-REQUIRED header");
    let invoice = required["accepts"][0]["extra"]["invoiceId"]
        .as_str()
        .unwrap_or_else(|| panic!("{required}"))
        .to_owned();
    // One authorization per invoice: its nonce is the invoice id's hash.
    let signer: PrivateKeySigner = key.parse().expect("a devnet key");
    let header = x402_payment_header(
        &signer,
        &required,
        alloy::primitives::keccak256(invoice.as_bytes()),
        now_secs(),
    )
    .expect("a payment header");
    (invoice, header)
}

async fn pay(gw: &Gateway, payer: Address, header: &str) -> (u16, Option<String>, Value) {
    let r = reqwest::Client::new()
        .post(format!("{}/api/v1/credits/buy-with-x402", gw.url))
        .header("PAYMENT-SIGNATURE", header)
        .json(&json!({"sku": "credits_100", "userAddress": payer}))
        .send()
        .await
        .expect("send");
    let status = r.status().as_u16();
    let retry = r
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    (status, retry, r.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn an_unmined_settlement_is_swept_then_credited_once() {
    let devnet = Devnet::start();
    let database_url = format!("sqlite://{}", devnet.dir.path().join("settle.db").display());
    let gw = start_gateway(&quick_receipts(&devnet, "settle", &database_url), false);
    let settlement = funded_settlement_wallet(&devnet, &gw).await;
    let recipient = devnet.address(&["x402", "recipient"]);
    let before = devnet.balance(devnet.usdc(), recipient).await;
    let (payer, key) = devnet.account(5);

    // Not mined within the receipt wait: nothing lost, retry later.
    let (invoice, header) = x402_payment(&gw, payer, &key).await;
    rpc(&devnet, "evm_setAutomine", json!([false])).await;
    let (status, retry, body) = pay(&gw, payer, &header).await;
    assert_eq!(
        (status, body["code"].clone(), retry.as_deref()),
        (503, json!("NOT_AVAILABLE"), Some("5")),
        "{body}"
    );

    // The client is gone; the sweep takes the settlement up and bumps it at its nonce.
    let store = SqlStore::connect(&database_url).await.expect("connect");
    let key_of = format!("x402:{invoice}");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let txs = store.execution_txs(&key_of).await.expect("execution txs");
        if txs.first().is_some_and(|t| !t.prior_hashes.is_empty()) {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "not bumped: {txs:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(devnet.nonce(settlement).await, 0, "nothing mined yet");

    // Mined once; the client's retry of the same payment is credited, once.
    rpc(&devnet, "evm_setAutomine", json!([true])).await;
    rpc(&devnet, "evm_mine", json!([])).await;
    let (status, _, body) = pay(&gw, payer, &header).await;
    assert_eq!(
        (status, body["credits"].clone(), body["balance"].clone()),
        (200, json!(100), json!(100)),
        "{body}"
    );
    let (status, _, again) = pay(&gw, payer, &header).await;
    assert_eq!(status, 409, "an authorization pays once: {again}");
    assert_eq!(
        devnet.nonce(settlement).await,
        1,
        "one settlement transaction"
    );

    // The settlement wallet is not stalled: the next purchase settles at once.
    let (_, next) = x402_payment(&gw, payer, &key).await;
    let (status, _, body) = pay(&gw, payer, &next).await;
    assert_eq!(
        (status, body["balance"].clone()),
        (200, json!(200)),
        "{body}"
    );
    assert_eq!(
        devnet.balance(devnet.usdc(), recipient).await - before,
        U256::from(4_000_000u64),
        "two settlements of 2.00, each once"
    );
    store.close().await;
}
