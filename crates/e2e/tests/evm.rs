//! The EVM lanes on a real chain: anvil from `scripts/devnet` with WETH9 and Uniswap V2 deployed from
//! their published artifacts, the EIP-3009 USDC and the ERC-4626 vault. build-tx answers are signed
//! and sent by viem (not our code); direct executions of a transfer, a swap and a vault deposit are
//! checked by balances read onchain; simulation refusals move no nonce; 20 concurrent executions from
//! one wallet use contiguous nonces; a gateway killed between sending and recording sends nothing
//! twice (SQLite and PostgreSQL).
#![allow(clippy::panic, clippy::expect_used)] // Tests fail by panicking, saying what failed.

mod common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use actiongate_store::SqlStore;
use alloy::primitives::{Address, B256, U256};
use alloy::providers::Provider;
use serde_json::{Value, json};

use actiongate_core::store::NonceStore;
use common::*;

/// How many times the gateway has called `method` on the devnet's chain.
async fn rpc_calls(gw: &Gateway, method: &str) -> f64 {
    let series = format!("actiongate_rpc_calls_total{{chain=\"84532\",method=\"{method}\"}}");
    metric(gw, &series).await.unwrap_or(0.0)
}

async fn execute(
    gw: &Gateway,
    agent: &Agent,
    action: &str,
    params: Value,
    key: &str,
) -> (u16, Value) {
    // The gateway prices each write itself (the devnet's feeds); what is stated only ever adds.
    execute_stating(gw, agent, action, params, key, 100.0).await
}

#[tokio::test]
async fn build_tx_and_direct_execution_move_real_tokens() {
    let devnet = Devnet::start();
    let db = devnet.dir.path().join("gw.db");
    let database_url = format!("sqlite://{}", db.display());
    let gw = start_gateway(&devnet.gateway_config("main", &database_url), false);
    let agent = onboard(
        &gw,
        &database_url,
        "evm@example.com",
        &[
            "swap",
            "swap-v3",
            "transfer",
            "deposit-earn-position",
            "withdraw-earn-position",
            "get-earn-position",
            "get-token-balance",
            "wrap-native",
            "unwrap-native",
        ],
    )
    .await;
    let (usdc_addr, weth_addr) = (devnet.usdc(), devnet.weth());

    // The catalog tells the truth about where the EVM actions run.
    let catalog: Value = reqwest::get(format!("{}/api/v1/agent/actions/catalog", gw.url))
        .await
        .expect("get")
        .json()
        .await
        .unwrap_or(Value::Null);
    let entry = |name: &str| {
        catalog["actions"]
            .as_array()
            .and_then(|a| a.iter().find(|x| x["action"] == name).cloned())
            .unwrap_or(Value::Null)
    };
    let swap = entry("swap");
    assert_eq!(
        (
            swap["enabled"].clone(),
            swap["supportsBuildTx"].clone(),
            swap["supportsExecute"].clone(),
            swap["supportedChains"].clone()
        ),
        (json!(true), json!(true), json!(true), json!([84532])),
        "{swap}"
    );
    let v3 = entry("swap-v3");
    assert_eq!(
        (v3["enabled"].clone(), v3["supportedChains"].clone()),
        (json!(true), json!([84532])),
        "{v3}"
    );
    assert_eq!(
        entry("vote")["enabled"],
        json!(false),
        "no gauge is configured"
    );

    // --- build-tx, signed and sent by viem with a devnet key.
    let (user, user_key) = devnet.account(1);
    let router = devnet.address(&["contracts", "UniswapV2Router02"]);
    let quoted = IRouter::new(router, &devnet.provider)
        .getAmountsOut(usdc(100), vec![usdc_addr, weth_addr])
        .call()
        .await
        .expect("call");
    let quoted = quoted.last().copied().unwrap_or_default();
    let (status, built) = post(
        format!("{}/api/v1/agent/build-tx", gw.url),
        json!({"agentApiKey": agent.key, "action": "swap", "chainId": 84532, "walletAddress": user,
               "params": {"tokenIn": "USDC", "tokenOut": "WETH", "amountIn": "100", "slippageBps": 50}}),
    )
    .await;
    assert_eq!(status, 200, "{built}");
    let txs = built["data"]["transactions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(txs.len(), 2, "an approval first, then the swap: {built}");
    assert!(
        txs[0]["description"]
            .as_str()
            .is_some_and(|d| d.starts_with("Approve")),
        "{built}"
    );
    assert!(
        txs.iter().all(|t| t["nonce"].is_string()
            && t["gas"].is_string()
            && t["maxFeePerGas"].is_string()),
        "{built}"
    );
    let (usdc_before, weth_before) = (
        devnet.balance(usdc_addr, user).await,
        devnet.balance(weth_addr, user).await,
    );
    let sent = sign_and_send(&devnet, &user_key, &built["data"]);
    assert!(
        sent["results"]
            .as_array()
            .is_some_and(|r| r.len() == 2 && r.iter().all(|x| x["status"] == "success")),
        "{sent}"
    );
    assert_eq!(
        usdc_before - devnet.balance(usdc_addr, user).await,
        usdc(100)
    );
    let got = devnet.balance(weth_addr, user).await - weth_before;
    assert!(
        got >= quoted * U256::from(9950u64) / U256::from(10_000u64) && got <= quoted,
        "received {got}, quoted {quoted}"
    );
    // build-tx needs the signer for these actions.
    let (status, body) = post(
        format!("{}/api/v1/agent/build-tx", gw.url),
        json!({"agentApiKey": agent.key, "action": "transfer", "chainId": 84532, "params": {"token": "USDC", "to": user, "amount": "1"}}),
    )
    .await;
    assert_eq!(
        (status, body["code"].clone()),
        (400, json!("INVALID_REQUEST")),
        "{body}"
    );

    // --- direct execution from the agent's own wallet.
    devnet
        .fund(
            agent.address,
            U256::from(10u64).pow(U256::from(18u64)),
            usdc(1000),
        )
        .await;
    let recipient = devnet.account(2).0;
    let before = devnet.balance(usdc_addr, recipient).await;
    let (status, sent) = execute(
        &gw,
        &agent,
        "transfer",
        json!({"token": "USDC", "to": recipient, "amount": "10"}),
        "transfer-1",
    )
    .await;
    assert_eq!(status, 200, "{sent}");
    assert_eq!(sent["data"]["status"], "confirmed", "{sent}");
    let hash = sent["data"]["txHash"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert_eq!(
        devnet.balance(usdc_addr, recipient).await - before,
        usdc(10)
    );
    // A retry with the same key answers the same hash and sends nothing.
    let nonce = devnet.nonce(agent.address).await;
    let (_, again) = execute(
        &gw,
        &agent,
        "transfer",
        json!({"token": "USDC", "to": recipient, "amount": "10"}),
        "transfer-1",
    )
    .await;
    assert_eq!(again["data"]["txHash"], json!(hash));
    assert_eq!(devnet.nonce(agent.address).await, nonce);
    assert_eq!(
        devnet.balance(usdc_addr, recipient).await - before,
        usdc(10)
    );

    let (status, swapped) = execute(
        &gw,
        &agent,
        "swap",
        json!({"tokenIn": "USDC", "tokenOut": "WETH", "amountIn": "50"}),
        "swap-1",
    )
    .await;
    assert_eq!(
        (status, swapped["data"]["status"].clone()),
        (200, json!("confirmed")),
        "{swapped}"
    );
    assert!(devnet.balance(weth_addr, agent.address).await > U256::ZERO);
    assert_eq!(devnet.balance(usdc_addr, agent.address).await, usdc(940));
    let weth_before_v3 = devnet.balance(weth_addr, agent.address).await;
    let (status, swapped) = execute(
        &gw,
        &agent,
        "swap-v3",
        json!({"tokenIn": "USDC", "tokenOut": "WETH", "amountIn": "20", "fee": 3000}),
        "swap-v3-1",
    )
    .await;
    assert_eq!(
        (status, swapped["data"]["status"].clone()),
        (200, json!("confirmed")),
        "{swapped}"
    );
    assert!(
        devnet.balance(weth_addr, agent.address).await > weth_before_v3,
        "the V3 pool paid out WETH"
    );
    assert_eq!(devnet.balance(usdc_addr, agent.address).await, usdc(920));

    let vault = devnet.address(&["vaults", "usdc-vault"]);
    let (status, deposited) = execute(
        &gw,
        &agent,
        "deposit-earn-position",
        json!({"providerId": "erc4626-vaults", "opportunityId": "usdc-vault", "amount": "100"}),
        "deposit-1",
    )
    .await;
    assert_eq!(
        (status, deposited["data"]["status"].clone()),
        (200, json!("confirmed")),
        "{deposited}"
    );
    assert!(
        devnet.balance(vault, agent.address).await > U256::ZERO,
        "the agent holds vault shares"
    );
    assert_eq!(devnet.balance(usdc_addr, agent.address).await, usdc(820));
    // The position read through an intent (a read runs for the agent itself).
    let status = read_for(
        &gw,
        &agent,
        "get-earn-position",
        json!({"providerId": "erc4626-vaults"}),
    )
    .await;
    assert_eq!(
        status["results"][0]["data"]["positions"][0]["assets"],
        json!("100"),
        "{status}"
    );
    // Withdraw part of it, then redeem the rest.
    let (status, withdrawn) = execute(
        &gw,
        &agent,
        "withdraw-earn-position",
        json!({"providerId": "erc4626-vaults", "opportunityId": "usdc-vault", "amount": "40"}),
        "withdraw-1",
    )
    .await;
    assert_eq!(
        (status, withdrawn["data"]["status"].clone()),
        (200, json!("confirmed")),
        "{withdrawn}"
    );
    assert_eq!(devnet.balance(usdc_addr, agent.address).await, usdc(860));
    let (status, redeemed) = execute(
        &gw,
        &agent,
        "withdraw-earn-position",
        json!({"providerId": "erc4626-vaults", "opportunityId": "usdc-vault", "amount": "max"}),
        "withdraw-2",
    )
    .await;
    assert_eq!(
        (status, redeemed["data"]["status"].clone()),
        (200, json!("confirmed")),
        "{redeemed}"
    );
    assert_eq!(
        devnet.balance(vault, agent.address).await,
        U256::ZERO,
        "no shares left"
    );
    assert_eq!(devnet.balance(usdc_addr, agent.address).await, usdc(920));

    // --- refusals before anything is sent or charged: more than the wallet holds is its venue's
    // BALANCE_SHORT (VENUE_NOT_READY, read before the simulation); what the simulation refuses is
    // EXECUTION_REVERTED with the decoded reason.
    let nonce = devnet.nonce(agent.address).await;
    let paid = credits(&gw, &agent).await;
    let (status, refused) = execute(
        &gw,
        &agent,
        "transfer",
        json!({"token": "USDC", "to": recipient, "amount": "5000"}),
        "too-much",
    )
    .await;
    assert_eq!(
        (
            status,
            refused["code"].clone(),
            refused["detail"]["blockingReasons"][0]["code"].clone()
        ),
        (422, json!("VENUE_NOT_READY"), json!("BALANCE_SHORT")),
        "{refused}"
    );
    let (status, refused) = execute(
        &gw,
        &agent,
        "swap",
        json!({"tokenIn": "USDC", "tokenOut": "WETH", "amountIn": "1", "amountOutMin": "1000"}),
        "impossible",
    )
    .await;
    assert_eq!(
        (status, refused["code"].clone()),
        (422, json!("EXECUTION_REVERTED")),
        "{refused}"
    );
    assert!(
        refused["message"]
            .as_str()
            .is_some_and(|m| m.contains("INSUFFICIENT_OUTPUT_AMOUNT")),
        "{refused}"
    );
    assert_eq!(
        devnet.nonce(agent.address).await,
        nonce,
        "a refused simulation moves no nonce"
    );
    assert_eq!(
        credits(&gw, &agent).await,
        paid,
        "a refused simulation is not charged"
    );

    // --- 20 concurrent executions from one wallet: 20 mined, contiguous nonces, no duplicate.
    let third = devnet.account(3).0;
    let before = devnet.balance(usdc_addr, third).await;
    let start_nonce = devnet.nonce(agent.address).await;
    let runs = (0..20).map(|i| {
        let (url, key) = (gw.url.clone(), agent.key.clone());
        tokio::spawn(async move {
            post(
                format!("{url}/api/v1/agent/execute"),
                json!({"agentApiKey": key, "action": "transfer", "chainId": 84532, "idempotencyKey": format!("many-{i}"),
                       "params": {"token": "USDC", "to": third, "amount": "1"}}),
            )
            .await
        })
    });
    let mut nonces = Vec::new();
    for run in runs.collect::<Vec<_>>() {
        let (status, body) = run.await.expect("a task panicked");
        assert_eq!(
            (status, body["data"]["status"].clone()),
            (200, json!("confirmed")),
            "{body}"
        );
        let hash: B256 = body["data"]["txHash"]
            .as_str()
            .and_then(|h| h.parse().ok())
            .unwrap_or_else(|| panic!("{body}"));
        let tx = devnet
            .provider
            .get_transaction_by_hash(hash)
            .await
            .expect("get transaction by hash")
            .unwrap_or_else(|| panic!("{hash} unknown"));
        nonces.push(alloy::consensus::Transaction::nonce(&tx));
    }
    let unique: BTreeSet<u64> = nonces.iter().copied().collect();
    assert_eq!(
        unique.into_iter().collect::<Vec<_>>(),
        (start_nonce..start_nonce + 20).collect::<Vec<_>>(),
        "{nonces:?}"
    );
    assert_eq!(devnet.balance(usdc_addr, third).await - before, usdc(20));

    // --- wrapping, and a balance read for the agent.
    let (status, wrapped) = execute(
        &gw,
        &agent,
        "wrap-native",
        json!({"amount": "0.01"}),
        "wrap-1",
    )
    .await;
    assert_eq!(
        (status, wrapped["data"]["status"].clone()),
        (200, json!("confirmed")),
        "{wrapped}"
    );
    let weth_now = devnet.balance(weth_addr, agent.address).await;
    let (status, unwrapped) = execute(
        &gw,
        &agent,
        "unwrap-native",
        json!({"amount": "0.01"}),
        "unwrap-1",
    )
    .await;
    assert_eq!(
        (status, unwrapped["data"]["status"].clone()),
        (200, json!("confirmed")),
        "{unwrapped}"
    );
    assert_eq!(
        weth_now - devnet.balance(weth_addr, agent.address).await,
        U256::from(10u64).pow(U256::from(16u64))
    );
    let read = read_for(&gw, &agent, "get-token-balance", json!({"token": "USDC"})).await;
    assert_eq!(
        read["results"][0]["data"]["balance"],
        json!("900"),
        "{read}"
    );

    // --- build-tx refuses what would revert, with the reason.
    let (status, body) = post(
        format!("{}/api/v1/agent/build-tx", gw.url),
        json!({"agentApiKey": agent.key, "action": "transfer", "chainId": 84532, "walletAddress": agent.address,
               "params": {"token": "USDC", "to": user, "amount": "5000"}}),
    )
    .await;
    assert_eq!(
        (status, body["code"].clone()),
        (422, json!("EXECUTION_REVERTED")),
        "{body}"
    );
    assert!(
        body["message"]
            .as_str()
            .is_some_and(|m| m.contains("ERC20InsufficientBalance")),
        "{body}"
    );

    // --- a stuck transaction is replaced at its nonce with higher fees; it is paid once.
    rpc(&devnet, "evm_setAutomine", json!([false])).await;
    let sixth = devnet.account(6).0;
    let (before, nonce) = (
        devnet.balance(usdc_addr, sixth).await,
        devnet.nonce(agent.address).await,
    );
    let (status, pending) = execute(
        &gw,
        &agent,
        "transfer",
        json!({"token": "USDC", "to": sixth, "amount": "3"}),
        "stuck-1",
    )
    .await;
    assert_eq!(
        (status, pending["data"]["status"].clone()),
        (200, json!("pending")),
        "{pending}"
    );
    let (lookups_before, waiting) = (
        rpc_calls(&gw, "eth_getTransactionReceipt").await,
        Instant::now(),
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    // While no block comes, the waiting execution does not ask the node for its receipt on every
    // poll (50 ms on a local node: 20 lookups a second for each signing of the transaction, the
    // first and each re-signed one): it sleeps until the chain's receipt watch reads a block
    // holding the transaction, looking for itself only when the watch may have missed a block and
    // at the latest every 60 polls.
    let waited_lookups = rpc_calls(&gw, "eth_getTransactionReceipt").await - lookups_before;
    let waited = waiting.elapsed().as_secs_f64();
    assert!(
        waited_lookups < 12.0 * waited,
        "{waited_lookups} receipt lookups while the transaction waited {waited:.1} s"
    );
    let block_reads = rpc_calls(&gw, "eth_getBlockReceipts").await;
    rpc(&devnet, "evm_mine", json!([])).await;
    rpc(&devnet, "evm_setAutomine", json!([true])).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    let done = loop {
        let (_, answer) = execute(
            &gw,
            &agent,
            "transfer",
            json!({"token": "USDC", "to": sixth, "amount": "3"}),
            "stuck-1",
        )
        .await;
        if answer["data"]["status"] == "confirmed" {
            break answer;
        }
        assert!(
            Instant::now() < deadline,
            "the replaced transaction was not recorded: {answer}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let store = SqlStore::connect(&database_url).await.expect("connect");
    let intent_id = done["data"]["intentId"].as_str().unwrap_or_default();
    let txs = store
        .execution_txs(&format!("{intent_id}:0"))
        .await
        .expect("execution txs");
    store.close().await;
    assert_eq!(txs.len(), 1);
    assert!(
        !txs[0].prior_hashes.is_empty(),
        "the transaction was re-signed: {txs:?}"
    );
    assert_eq!(txs[0].tx_hash.as_deref(), done["data"]["txHash"].as_str());
    // The block that mined it was read by the receipt watch.
    assert!(rpc_calls(&gw, "eth_getBlockReceipts").await > block_reads);
    assert_eq!(devnet.nonce(agent.address).await, nonce + 1);
    assert_eq!(
        devnet.balance(usdc_addr, sixth).await - before,
        usdc(3),
        "paid once"
    );
    // The node's calls are counted by chain, and nothing this gateway signed is left unmined.
    assert!(rpc_calls(&gw, "eth_sendRawTransaction").await > 0.0);
    assert_eq!(
        metric(&gw, "actiongate_unmined_transactions{chain=\"84532\"}").await,
        Some(0.0)
    );
    drop(gw.process);
}

/// Kill the gateway right after it hands a transfer to the node and before it records anything;
/// a new process finds the execution by its reserved nonce and signed hash and sends nothing again.
async fn crash_between_send_and_record(
    devnet: &Devnet,
    name: &str,
    database_url: &str,
    recipient: Address,
) {
    let config = devnet.gateway_config(name, database_url);
    let mut a = start_gateway(&config, true);
    let agent = onboard(
        &a,
        database_url,
        &format!("{name}@example.com"),
        &["transfer"],
    )
    .await;
    devnet
        .fund(
            agent.address,
            U256::from(10u64).pow(U256::from(17u64)),
            usdc(100),
        )
        .await;
    let usdc_addr = devnet.usdc();
    let (before, nonce) = (
        devnet.balance(usdc_addr, recipient).await,
        devnet.nonce(agent.address).await,
    );
    let body = json!({"agentApiKey": agent.key, "action": "transfer", "chainId": 84532, "idempotencyKey": "crash-1",
                      "params": {"token": "USDC", "to": recipient, "amount": "7"}});
    let answered = reqwest::Client::new()
        .post(format!("{}/api/v1/agent/execute", a.url))
        .json(&body)
        .send()
        .await;
    assert!(
        answered.is_err(),
        "the gateway was to die before answering: {answered:?}"
    );
    let exited = a.process.0.wait().expect("wait");
    assert!(!exited.success());
    // The transaction reached the chain before the process died.
    assert_eq!(devnet.nonce(agent.address).await, nonce + 1);
    assert_eq!(devnet.balance(usdc_addr, recipient).await - before, usdc(7));

    let b = start_gateway(&config, false);
    let deadline = Instant::now() + Duration::from_secs(40);
    let done = loop {
        let (status, answer) = post(format!("{}/api/v1/agent/execute", b.url), body.clone()).await;
        assert_eq!(status, 200, "{answer}");
        if answer["data"]["status"] == "confirmed" {
            break answer;
        }
        assert!(
            Instant::now() < deadline,
            "the execution was not recovered: {answer}"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    let hash: B256 = done["data"]["txHash"]
        .as_str()
        .and_then(|h| h.parse().ok())
        .unwrap_or_else(|| panic!("{done}"));
    let tx = devnet
        .provider
        .get_transaction_by_hash(hash)
        .await
        .expect("get transaction by hash")
        .unwrap_or_else(|| panic!("{hash}"));
    assert_eq!(
        alloy::consensus::Transaction::nonce(&tx),
        nonce,
        "the recorded hash is the transaction that was sent"
    );
    assert_eq!(
        devnet.nonce(agent.address).await,
        nonce + 1,
        "nothing was sent again"
    );
    assert_eq!(
        devnet.balance(usdc_addr, recipient).await - before,
        usdc(7),
        "paid once"
    );
    let _ = agent.account_id;
    drop(b);
}

#[tokio::test]
async fn a_crash_between_send_and_record_sends_nothing_twice() {
    let devnet = Devnet::start();
    let sqlite = format!("sqlite://{}", devnet.dir.path().join("crash.db").display());
    crash_between_send_and_record(&devnet, "crash-sqlite", &sqlite, devnet.account(4).0).await;
    let postgres = actiongate_testkit::fresh_postgres_url()
        .await
        .expect("fresh postgres url");
    crash_between_send_and_record(&devnet, "crash-postgres", &postgres, devnet.account(5).0).await;
}
