//! Lending and earn on Aave v3 (the devnet deploys it from @aave/core-v3's artifacts), checked
//! onchain: the markets read against the pool's data provider; supplies from the agent's wallet (USDC,
//! and native ETH through the WrappedTokenGateway) by the aToken balances; the position against the
//! pool's `getUserAccountData` (a fixture borrower's debt and health factor, and the debt grown a year
//! later); a build-tx supply signed and sent by viem; a fan-out supply to an EIP-7702 EOA and a
//! HybridDeleGator, once each, and a fan-out repayment of a delegator's debt; borrowing held to the
//! policy's minimum health factor, repaying and withdrawing in full (ERC-20 and ETH); readiness
//! (a frozen reserve, a supply cap, no collateral); and live earn discovery with each filter, an
//! Aave deposit through deposit-earn-position shown by get-earn-position.
#![allow(clippy::panic, clippy::expect_used)] // Tests fail by panicking, saying what failed.

mod common;

use alloy::primitives::{Address, U256};
use alloy::providers::Provider;
use serde_json::{Value, json};
use sha3::{Digest, Keccak256};

use common::*;

alloy::sol! {
    #[sol(rpc)]
    interface IBorrowerPool {
        function supply(address asset, uint256 amount, address onBehalfOf, uint16 referralCode) external;
        function borrow(address asset, uint256 amount, uint256 interestRateMode, uint16 referralCode, address onBehalfOf) external;
    }
}

/// The gas limit of the fixtures' own pool calls: an estimate made in one second and mined in the
/// next misses the gas the pool spends updating its indexes for the time that passed.
const FIXTURE_GAS: u64 = 1_500_000;

/// A direct `supply-lending` from the agent's wallet, confirmed (the gateway prices it itself).
async fn supplied(gw: &Gateway, agent: &Agent, asset: &str, amount: &str, key: &str) {
    let (status, body) = execute_stating(
        gw,
        agent,
        "supply-lending",
        json!({"asset": asset, "amount": amount}),
        key,
        0.0,
    )
    .await;
    assert_eq!(
        (status, body["data"]["status"].clone()),
        (200, json!("confirmed")),
        "{body}"
    );
}

/// `getUserAccountData(user)`'s six words, read straight from the pool.
async fn account_data(devnet: &Devnet, pool: Address, user: Address) -> Vec<U256> {
    let selector = &Keccak256::digest(b"getUserAccountData(address)")[..4];
    let data = format!(
        "0x{}{:0>64}",
        hex::encode(selector),
        hex::encode(user.as_slice())
    );
    let out = rpc(
        devnet,
        "eth_call",
        json!([{"to": pool.to_string(), "data": data}, "latest"]),
    )
    .await;
    let text = out.as_str().unwrap_or_default().trim_start_matches("0x");
    (0..6)
        .map(|i| {
            U256::from_str_radix(text.get(i * 64..(i + 1) * 64).unwrap_or("0"), 16)
                .unwrap_or_default()
        })
        .collect()
}

/// USD with 8 decimals as the gateway writes it: at most 2 places, no trailing zeros.
fn usd(base: U256) -> String {
    let cents = (base / U256::from(1_000_000u64)).to::<u64>();
    let text = format!("{}.{:02}", cents / 100, cents % 100);
    text.trim_end_matches('0').trim_end_matches('.').to_owned()
}

/// A borrower straight to the pool (devnet account 5): 10 WETH supplied, 15,000 USDC borrowed.
async fn borrower_fixture(devnet: &Devnet, pool: Address) -> Address {
    let (borrower, _) = devnet.account(5);
    let wallet = devnet.wallet(5);
    let ten_weth = U256::from(10u64) * U256::from(10u64).pow(U256::from(18u64));
    IWETH::new(devnet.weth(), &wallet)
        .deposit()
        .value(ten_weth)
        .send()
        .await
        .expect("wrap")
        .get_receipt()
        .await
        .expect("wrapped");
    IERC20::new(devnet.weth(), &wallet)
        .approve(pool, ten_weth)
        .send()
        .await
        .expect("approve")
        .get_receipt()
        .await
        .expect("approved");
    let aave_pool = IBorrowerPool::new(pool, &wallet);
    aave_pool
        .supply(devnet.weth(), ten_weth, borrower, 0)
        .gas(FIXTURE_GAS)
        .send()
        .await
        .expect("supply")
        .get_receipt()
        .await
        .expect("supplied");
    let receipt = aave_pool
        .borrow(devnet.usdc(), usdc(15_000), U256::from(2u64), 0, borrower)
        .gas(FIXTURE_GAS)
        .send()
        .await
        .expect("borrow")
        .get_receipt()
        .await
        .expect("borrowed");
    assert!(receipt.status(), "the fixture's borrow reverted");
    borrower
}

#[tokio::test]
async fn aave_supplies_move_real_tokens_and_the_reads_match_the_pool() {
    let devnet = Devnet::start();
    let db = devnet.dir.path().join("gw.db");
    let database_url = format!("sqlite://{}", db.display());
    let gw = start_gateway(&devnet.gateway_config("main", &database_url), false);
    let agent = onboard(
        &gw,
        &database_url,
        "lend@example.com",
        &[
            "supply-lending",
            "get-lending-markets",
            "get-lending-position",
        ],
    )
    .await;
    let pool = devnet.address(&["contracts", "aave", "Pool"]);
    let a_usdc = devnet.address(&["contracts", "aave", "reserves", "USDC", "aToken"]);
    let a_weth = devnet.address(&["contracts", "aave", "reserves", "WETH", "aToken"]);

    // The catalog serves the family where the chain has the pool.
    let catalog: Value = reqwest::get(format!("{}/api/v1/agent/actions/catalog", gw.url))
        .await
        .expect("get")
        .json()
        .await
        .unwrap_or(Value::Null);
    let supply = catalog["actions"]
        .as_array()
        .and_then(|a| a.iter().find(|x| x["action"] == "supply-lending").cloned())
        .unwrap_or(Value::Null);
    assert_eq!(
        (
            supply["enabled"].clone(),
            supply["supportsExecute"].clone(),
            supply["supportsBuildTx"].clone(),
            supply["providerId"].clone(),
            supply["category"].clone()
        ),
        (
            json!(true),
            json!(true),
            json!(true),
            json!("aave-v3"),
            json!("lending")
        ),
        "{supply}"
    );

    // The markets, as the devnet configured them: Base's risk parameters, the seed supply, priced by
    // the pool's oracle (the devnet's Chainlink feeds).
    let markets = read_for(&gw, &agent, "get-lending-markets", json!({})).await;
    assert_eq!(markets["status"], "completed", "{markets}");
    let list = markets["results"][0]["data"]["markets"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let symbols: Vec<&str> = list
        .iter()
        .map(|m| m["symbol"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(symbols, ["USDC", "WETH", "EURC"], "{markets}");
    let usdc_market = &list[0];
    assert_eq!(
        (
            usdc_market["ltvBps"].clone(),
            usdc_market["liquidationThresholdBps"].clone(),
            usdc_market["supplyCap"].clone(),
            usdc_market["borrowCap"].clone(),
            usdc_market["totalSuppliedUsd"].clone(),
            usdc_market["totalBorrowedUsd"].clone(),
            usdc_market["supplyApr"].clone(),
            usdc_market["frozen"].clone(),
            usdc_market["paused"].clone(),
        ),
        (
            json!(7500),
            json!(7800),
            json!("10000000"),
            json!("9000000"),
            json!("1000000"),
            json!("0"),
            json!("0"),
            json!(false),
            json!(false)
        ),
        "{usdc_market}"
    );
    // 200 WETH at the feed's 3,000 USD.
    assert_eq!(list[1]["totalSuppliedUsd"], json!("600000"), "{markets}");

    // A supply from the agent's wallet: an approval then Pool.supply; the aTokens are the agent's.
    devnet
        .fund(
            agent.address,
            U256::from(2u64) * U256::from(10u64).pow(U256::from(18u64)),
            usdc(1_000),
        )
        .await;
    supplied(&gw, &agent, "USDC", "250", "lend-1").await;
    assert_eq!(devnet.balance(a_usdc, agent.address).await, usdc(250));
    assert_eq!(
        devnet.balance(devnet.usdc(), agent.address).await,
        usdc(750)
    );

    // Native ETH through the WrappedTokenGateway: the agent holds aWETH.
    supplied(&gw, &agent, "ETH", "0.5", "lend-2").await;
    assert_eq!(
        devnet.balance(a_weth, agent.address).await,
        U256::from(5u64) * U256::from(10u64).pow(U256::from(17u64))
    );

    // The position equals the pool's own account data.
    let position = read_for(&gw, &agent, "get-lending-position", json!({})).await;
    let p = &position["results"][0]["data"];
    let onchain = account_data(&devnet, pool, agent.address).await;
    assert_eq!(
        (
            p["totalCollateralUsd"].clone(),
            p["totalDebtUsd"].clone(),
            p["availableBorrowsUsd"].clone(),
            p["healthFactor"].clone(),
            p["ltvBps"].clone(),
        ),
        (
            json!(usd(onchain[0])),
            json!(usd(onchain[1])),
            json!(usd(onchain[2])),
            Value::Null,
            json!(onchain[4].to::<u64>()),
        ),
        "{position}"
    );
    // 250 USDC + 0.5 WETH at 3,000.
    assert_eq!(p["totalCollateralUsd"], json!("1750"), "{position}");
    let held: Vec<(Value, Value, Value)> = p["reserves"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|r| {
            (
                r["symbol"].clone(),
                r["supplied"].clone(),
                r["usedAsCollateral"].clone(),
            )
        })
        .collect();
    assert_eq!(
        held,
        [
            (json!("USDC"), json!("250"), json!(true)),
            (json!("WETH"), json!("0.5"), json!(true))
        ],
        "{position}"
    );

    // A borrower (a fixture, straight to the pool): 10 WETH supplied, 15,000 USDC borrowed. The
    // position shows the debt and the health factor as the pool computes them, and the debt grows
    // with time.
    let borrower = borrower_fixture(&devnet, pool).await;
    // Each read its own intent (a repeat within the idempotency window would answer the first).
    let read = |who: Address, key: &'static str| {
        let (gw, agent) = (&gw, &agent);
        async move {
            let (_, intent) = post(
                format!("{}/api/v1/agent/execute-intent", gw.url),
                json!({"agentApiKey": agent.key, "action": "get-lending-position", "chainId": 84532,
                       "idempotencyKey": key, "params": {"walletAddress": who}}),
            )
            .await;
            let id = intent["intentId"]
                .as_str()
                .unwrap_or_else(|| panic!("{intent}"));
            wait_intent(gw, agent, id, 20).await["results"][0]["data"].clone()
        }
    };
    let before = read(borrower, "position-before").await;
    let onchain = account_data(&devnet, pool, borrower).await;
    let health = onchain[5] / U256::from(10u64).pow(U256::from(12u64));
    assert_eq!(
        (
            before["totalDebtUsd"].clone(),
            before["healthFactor"].clone()
        ),
        (
            json!(usd(onchain[1])),
            json!(
                format!(
                    "{}.{:06}",
                    health / U256::from(1_000_000u64),
                    (health % U256::from(1_000_000u64)).to::<u64>()
                )
                .trim_end_matches('0')
                .trim_end_matches('.')
            )
        ),
        "{before}"
    );
    // 30,000 USD of WETH at an 83 % threshold against 15,000 USD of debt: 1.66.
    assert_eq!(before["healthFactor"], json!("1.66"), "{before}");
    rpc(&devnet, "evm_increaseTime", json!([365 * 86_400])).await;
    rpc(&devnet, "evm_mine", json!([])).await;
    let after = read(borrower, "position-after").await;
    let debt = |v: &Value| {
        v["totalDebtUsd"]
            .as_str()
            .and_then(|d| d.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    assert!(
        debt(&after) > debt(&before),
        "the debt grew: {before} then {after}"
    );
    assert_eq!(
        (
            after["reserves"][0]["symbol"].clone(),
            after["reserves"][0]["supplied"].clone(),
            after["reserves"][1]["symbol"].clone(),
            after["reserves"][1]["usedAsCollateral"].clone()
        ),
        (json!("USDC"), json!("0"), json!("WETH"), json!(true)),
        "{after}"
    );

    // build-tx for a user's wallet: the approval first, then the supply; viem signs and sends them.
    let (user, user_key) = devnet.account(3);
    let (status, built) = post(
        format!("{}/api/v1/agent/build-tx", gw.url),
        json!({"agentApiKey": agent.key, "action": "supply-lending", "chainId": 84532,
               "walletAddress": user.to_string(),
               "params": {"asset": "USDC", "amount": "100"}}),
    )
    .await;
    assert_eq!(status, 200, "{built}");
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
        Some(pool.to_string().to_ascii_lowercase()),
        "{built}"
    );
    let sent = sign_and_send(&devnet, &user_key, &built["data"]);
    assert!(
        sent["results"]
            .as_array()
            .is_some_and(|r| r.len() == 2 && r.iter().all(|x| x["status"] == "success")),
        "{sent}"
    );
    assert_eq!(devnet.balance(a_usdc, user).await, usdc(100));
}

#[tokio::test]
async fn a_fan_out_supplies_for_each_delegator_once() {
    let devnet = Devnet::start();
    let db = devnet.dir.path().join("gw.db");
    let database_url = format!("sqlite://{}", db.display());
    let gw = start_gateway(&devnet.gateway_config("main", &database_url), false);
    let agent = onboard(
        &gw,
        &database_url,
        "fan-lend@example.com",
        &["supply-lending"],
    )
    .await;
    let devnet_json = devnet.dir.path().join("devnet.json").display().to_string();
    let a_usdc = devnet.address(&["contracts", "aave", "reserves", "USDC", "aToken"]);
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
    let eoa_usdc = devnet.balance(devnet.usdc(), eoa).await;
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
        (eoa, "supply-lending"),
        &eoa_key,
        false,
    )
    .await;
    delegate(
        &gw,
        &agent,
        &devnet_json,
        (hybrid, "supply-lending"),
        &owner_key,
        true,
    )
    .await;

    // The supply goes to each delegator: naming anyone else is refused at submit, nothing runs.
    let (status, refused) = post(
        format!("{}/api/v1/agent/execute-intent", gw.url),
        json!({"agentApiKey": agent.key, "action": "supply-lending", "chainId": 84532,
               "params": {"asset": "USDC", "amount": "10", "onBehalfOf": agent.address}}),
    )
    .await;
    assert_eq!(
        (status, refused["code"].clone()),
        (400, json!("INVALID_PARAMS")),
        "{refused}"
    );

    let (status, submitted) = post(
        format!("{}/api/v1/agent/execute-intent", gw.url),
        json!({"agentApiKey": agent.key, "action": "supply-lending", "chainId": 84532,
               "idempotencyKey": "fan-supply-1", "params": {"asset": "USDC", "amount": "10"}}),
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
    assert!(
        results.iter().all(|r| r["success"] == json!(true)),
        "{done}"
    );
    // Each delegator holds the aTokens of its own 10 USDC, once.
    assert_eq!(devnet.balance(a_usdc, eoa).await, usdc(10));
    assert_eq!(devnet.balance(a_usdc, hybrid).await, usdc(10));
    assert_eq!(
        eoa_usdc - devnet.balance(devnet.usdc(), eoa).await,
        usdc(10)
    );
}

/// A direct Aave write from the agent's wallet: its HTTP status and body.
async fn lend(gw: &Gateway, agent: &Agent, action: &str, params: Value, key: &str) -> (u16, Value) {
    execute_stating(gw, agent, action, params, key, 0.0).await
}

/// The same, which must be confirmed onchain.
async fn lent(gw: &Gateway, agent: &Agent, action: &str, params: Value, key: &str) {
    let (status, body) = lend(gw, agent, action, params, key).await;
    assert_eq!(
        (status, body["data"]["status"].clone()),
        (200, json!("confirmed")),
        "{action}: {body}"
    );
}

fn eth(tenths: u64) -> U256 {
    U256::from(tenths) * U256::from(10u64).pow(U256::from(17u64))
}

#[tokio::test]
async fn borrowing_stays_above_the_policys_health_factor_and_repays_and_withdraws_in_full() {
    let devnet = Devnet::start();
    let db = devnet.dir.path().join("gw.db");
    let database_url = format!("sqlite://{}", db.display());
    let gw = start_gateway(&devnet.gateway_config("main", &database_url), false);
    let actions = [
        "supply-lending",
        "borrow",
        "repay",
        "withdraw-lending",
        "set-collateral",
        "get-lending-position",
    ];
    let agent = onboard(&gw, &database_url, "borrow@example.com", &actions).await;
    let reserve = |symbol: &str, token: &str| {
        devnet.address(&["contracts", "aave", "reserves", symbol, token])
    };
    let (a_weth, a_usdc) = (reserve("WETH", "aToken"), reserve("USDC", "aToken"));
    let (usdc_debt, weth_debt) = (
        reserve("USDC", "variableDebtToken"),
        reserve("WETH", "variableDebtToken"),
    );
    let usdc_of = |who: Address| {
        let devnet = &devnet;
        async move { devnet.balance(devnet.usdc(), who).await }
    };

    // The policy keeps a health factor of 1.5 unless the owner says otherwise.
    let policy: Value = reqwest::Client::new()
        .get(format!(
            "{}/api/v1/agents/{}/policy",
            gw.url, agent.agent_id
        ))
        .bearer_auth(&agent.session)
        .send()
        .await
        .expect("the gateway answers")
        .json()
        .await
        .unwrap_or(Value::Null);
    assert_eq!(policy["data"]["minHealthFactor"], json!(1.5), "{policy}");

    // 1 ETH of collateral (3,000 USD at an 83 % liquidation threshold: 2,490 USD weighted).
    devnet.fund(agent.address, eth(20), U256::ZERO).await;
    lent(
        &gw,
        &agent,
        "supply-lending",
        json!({"asset": "ETH", "amount": "1"}),
        "b-1",
    )
    .await;
    assert_eq!(devnet.balance(a_weth, agent.address).await, eth(10));

    // 1,000 USDC borrowed leaves a health factor of 2.49: the debt token and the USDC arrive.
    lent(
        &gw,
        &agent,
        "borrow",
        json!({"asset": "USDC", "amount": "1000"}),
        "b-2",
    )
    .await;
    assert_eq!(usdc_of(agent.address).await, usdc(1_000));
    let debt = devnet.balance(usdc_debt, agent.address).await;
    assert!(debt >= usdc(1_000) && debt < usdc(1_001), "{debt}");

    // 700 more would leave 2,490 / 1,700 = 1.46, below 1.5: refused at submit, nothing moves and
    // nothing is charged; preflight names the same check.
    let credits_before = credits(&gw, &agent).await;
    let (status, refused) = lend(
        &gw,
        &agent,
        "borrow",
        json!({"asset": "USDC", "amount": "700"}),
        "b-3",
    )
    .await;
    assert_eq!(
        (status, refused["code"].clone(), refused["error"].clone()),
        (403, json!("POLICY_HEALTH_FACTOR"), json!("INTENT_REJECTED")),
        "{refused}"
    );
    assert!(
        refused["message"]
            .as_str()
            .is_some_and(|m| m.contains("at 1.46") && m.contains("minimum of 1.5")),
        "{refused}"
    );
    assert_eq!(usdc_of(agent.address).await, usdc(1_000));
    assert!(devnet.balance(usdc_debt, agent.address).await < usdc(1_001));
    assert_eq!(credits(&gw, &agent).await, credits_before);
    let (_, report) = post(
        format!("{}/api/v1/agent/preflight?direct=true", gw.url),
        json!({"agentApiKey": agent.key, "action": "borrow", "chainId": 84532,
               "params": {"asset": "USDC", "amount": "700"}}),
    )
    .await;
    let check = report["data"]["checks"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["name"] == "healthFactor").cloned())
        .unwrap_or(Value::Null);
    assert_eq!(
        (check["ok"].clone(), check["code"].clone()),
        (json!(false), json!("POLICY_HEALTH_FACTOR")),
        "{report}"
    );

    // The owner lowers the minimum to 1.2: the same borrow runs, then 0.1 ETH through the
    // gateway (a credit delegation to it first): 2,490 / 2,000 = 1.245.
    set_policy(
        &gw,
        &agent,
        json!({"allowedActions": actions, "dailyLimitUsd": 100000, "minHealthFactor": 1.2}),
    )
    .await;
    lent(
        &gw,
        &agent,
        "borrow",
        json!({"asset": "USDC", "amount": "700"}),
        "b-4",
    )
    .await;
    assert_eq!(usdc_of(agent.address).await, usdc(1_700));
    let eth_before = devnet
        .provider
        .get_balance(agent.address)
        .await
        .expect("balance");
    lent(
        &gw,
        &agent,
        "borrow",
        json!({"asset": "ETH", "amount": "0.1"}),
        "b-5",
    )
    .await;
    let weth_owed = devnet.balance(weth_debt, agent.address).await;
    assert!(
        weth_owed >= eth(1) && weth_owed < eth(1) + eth(1) / U256::from(1000u64),
        "{weth_owed}"
    );
    let eth_after = devnet
        .provider
        .get_balance(agent.address)
        .await
        .expect("balance");
    assert!(
        eth_after > eth_before + eth(1) - eth(1) / U256::from(100u64),
        "0.1 ETH arrived, less the gas: {eth_before} then {eth_after}"
    );

    // Taking the collateral away with debt left is refused, by a withdrawal or by switching it off.
    for (action, params, key) in [
        (
            "withdraw-lending",
            json!({"asset": "ETH", "amount": "max"}),
            "b-6",
        ),
        (
            "set-collateral",
            json!({"asset": "WETH", "enabled": false}),
            "b-7",
        ),
    ] {
        let (status, body) = lend(&gw, &agent, action, params, key).await;
        assert_eq!(
            (status, body["code"].clone()),
            (403, json!("POLICY_HEALTH_FACTOR")),
            "{action}: {body}"
        );
    }
    assert!(
        devnet.balance(a_weth, agent.address).await >= eth(10),
        "the collateral stayed"
    );

    // Repaying max leaves no debt: ETH through the gateway (it refunds the margin), then USDC
    // (10 more for the interest; the pool takes only what is owed).
    lent(
        &gw,
        &agent,
        "repay",
        json!({"asset": "ETH", "amount": "max"}),
        "b-8",
    )
    .await;
    assert_eq!(devnet.balance(weth_debt, agent.address).await, U256::ZERO);
    devnet.fund(agent.address, U256::ZERO, usdc(10)).await;
    let owed = devnet.balance(usdc_debt, agent.address).await;
    lent(
        &gw,
        &agent,
        "repay",
        json!({"asset": "USDC", "amount": "max"}),
        "b-9",
    )
    .await;
    assert_eq!(devnet.balance(usdc_debt, agent.address).await, U256::ZERO);
    let left = usdc_of(agent.address).await;
    assert!(
        left <= usdc(1_710) - owed && left + usdc(1) > usdc(1_710) - owed,
        "paid about what was owed ({owed}): {left} left"
    );

    // Withdrawing max takes the whole supply back (ETH through the gateway, the aWETH approved to
    // it first); a USDC withdrawal to another address pays that address.
    lent(
        &gw,
        &agent,
        "withdraw-lending",
        json!({"asset": "ETH", "amount": "max"}),
        "b-10",
    )
    .await;
    assert_eq!(devnet.balance(a_weth, agent.address).await, U256::ZERO);
    devnet.fund(agent.address, U256::ZERO, usdc(100)).await;
    lent(
        &gw,
        &agent,
        "supply-lending",
        json!({"asset": "USDC", "amount": "100"}),
        "b-11",
    )
    .await;
    let (friend, _) = devnet.account(6);
    let friend_before = usdc_of(friend).await;
    lent(
        &gw,
        &agent,
        "withdraw-lending",
        json!({"asset": "USDC", "amount": "40", "to": friend}),
        "b-12",
    )
    .await;
    assert_eq!(usdc_of(friend).await - friend_before, usdc(40));
    lent(
        &gw,
        &agent,
        "withdraw-lending",
        json!({"asset": "USDC", "amount": "max"}),
        "b-13",
    )
    .await;
    assert_eq!(devnet.balance(a_usdc, agent.address).await, U256::ZERO);
    let position = read_for(&gw, &agent, "get-lending-position", json!({})).await;
    assert_eq!(
        (
            position["results"][0]["data"]["totalDebtUsd"].clone(),
            position["results"][0]["data"]["reserves"].clone()
        ),
        (json!("0"), json!([])),
        "{position}"
    );

    // Withdrawing what is not supplied is the caller's error, named.
    let (status, body) = lend(
        &gw,
        &agent,
        "withdraw-lending",
        json!({"asset": "USDC", "amount": "1"}),
        "b-14",
    )
    .await;
    assert_eq!(
        (status, body["code"].clone()),
        (400, json!("INVALID_PARAMS")),
        "{body}"
    );

    // build-tx of a borrow is checked for the signer's own position: a wallet with no collateral
    // would be left at a health factor of 0; without a signer the rule cannot be checked.
    let (status, body) = post(
        format!("{}/api/v1/agent/build-tx", gw.url),
        json!({"agentApiKey": agent.key, "action": "borrow", "chainId": 84532,
               "walletAddress": friend, "params": {"asset": "USDC", "amount": "5"}}),
    )
    .await;
    assert_eq!(
        (status, body["code"].clone()),
        (403, json!("POLICY_HEALTH_FACTOR")),
        "{body}"
    );
    let (status, body) = post(
        format!("{}/api/v1/agent/build-tx", gw.url),
        json!({"agentApiKey": agent.key, "action": "borrow", "chainId": 84532,
               "params": {"asset": "USDC", "amount": "5"}}),
    )
    .await;
    assert_eq!(
        (status, body["code"].clone()),
        (400, json!("INVALID_REQUEST")),
        "{body}"
    );
}

/// The opportunity ids a discovery read answered, in its order.
fn ids(read: &Value) -> Vec<String> {
    read["results"][0]["data"]["opportunities"]
        .as_array()
        .unwrap_or_else(|| panic!("{read}"))
        .iter()
        .map(|o| o["opportunityId"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[tokio::test]
async fn earn_discovery_reads_aave_and_the_vaults_live_and_routes_an_aave_deposit() {
    let devnet = Devnet::start();
    let db = devnet.dir.path().join("gw.db");
    let database_url = format!("sqlite://{}", db.display());
    // Vault APRs over spans of a minute or more, in a window of a year.
    let config = devnet.gateway_config_with(
        "main",
        &database_url,
        "[earn]\nsample-seconds = 3600\nmin-span-seconds = 60\napr-window-seconds = 31536000\n",
    );
    let gw = start_gateway(&config, false);
    let agent = onboard(
        &gw,
        &database_url,
        "earn@example.com",
        &[
            "get-earn-opportunities",
            "get-earning-opportunities",
            "get-earn-provider",
            "get-earn-position",
            "get-lending-markets",
            "deposit-earn-position",
            "withdraw-earn-position",
        ],
    )
    .await;
    let pool = devnet.address(&["contracts", "aave", "Pool"]);
    let a_usdc = devnet.address(&["contracts", "aave", "reserves", "USDC", "aToken"]);
    let vault = devnet.address(&["vaults", "usdc-vault"]);
    borrower_fixture(&devnet, pool).await;
    devnet
        .fund(
            agent.address,
            U256::from(10u64).pow(U256::from(18u64)),
            usdc(2_000),
        )
        .await;

    // 1,000 USDC into the vault through the gateway, then a first reading of its share price.
    let (status, body) = execute_stating(
        &gw,
        &agent,
        "deposit-earn-position",
        json!({"providerId": "erc4626-vaults", "opportunityId": "usdc-vault", "amount": "1000"}),
        "earn-1",
        0.0,
    )
    .await;
    assert_eq!(body["data"]["status"], "confirmed", "{status} {body}");
    let first = read_keyed(&gw, &agent, "get-earn-opportunities", json!({}), "o-1").await;
    assert_eq!(first["status"], "completed", "{first}");
    let opportunities = first["results"][0]["data"]["opportunities"].clone();
    let vault_now = opportunities
        .as_array()
        .and_then(|l| {
            l.iter()
                .find(|o| o["opportunityId"] == "usdc-vault")
                .cloned()
        })
        .unwrap_or(Value::Null);
    assert_eq!(
        (
            vault_now["providerId"].clone(),
            vault_now["asset"].clone(),
            vault_now["strategyType"].clone(),
            vault_now["tvlUsd"].clone(),
        ),
        (
            json!("erc4626-vaults"),
            json!("USDC"),
            json!("vault"),
            json!(1000.0)
        ),
        "{first}"
    );

    // The vault earns 1 % in 36.5 days (a donation to it): 10 % a year from its share price.
    IERC20::new(devnet.usdc(), devnet.wallet(0))
        .transfer(vault, usdc(10))
        .send()
        .await
        .expect("donate")
        .get_receipt()
        .await
        .expect("donated");
    rpc(&devnet, "evm_increaseTime", json!([365 * 86_400 / 10])).await;
    rpc(&devnet, "evm_mine", json!([])).await;
    let all = read_keyed(&gw, &agent, "get-earn-opportunities", json!({}), "o-2").await;
    let list = all["results"][0]["data"]["opportunities"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        ids(&all),
        ["usdc-vault", "aave-v3:USDC", "aave-v3:EURC", "aave-v3:WETH"],
        "highest APR first, then the deepest: {all}"
    );
    let vault_apr = list[0]["apr"].as_f64().unwrap_or_default();
    assert!((vault_apr - 10.0).abs() < 0.01, "{all}");
    // Aave's APR is the reserve's liquidity rate, as get-lending-markets reads it (in percent here).
    let markets = read_keyed(&gw, &agent, "get-lending-markets", json!({}), "m-1").await;
    let usdc_rate = markets["results"][0]["data"]["markets"][0]["supplyApr"]
        .as_str()
        .and_then(|r| r.parse::<f64>().ok())
        .unwrap_or_default();
    assert!(
        usdc_rate > 0.0,
        "the fixture's borrow pays suppliers: {markets}"
    );
    let aave_usdc = &list[1];
    assert!(
        (aave_usdc["apr"].as_f64().unwrap_or_default() - usdc_rate * 100.0).abs() < 1e-3,
        "{aave_usdc} vs {markets}"
    );
    assert_eq!(
        (
            aave_usdc["providerId"].clone(),
            aave_usdc["strategyType"].clone(),
            aave_usdc["executionSupport"].clone(),
        ),
        (
            json!("aave-v3"),
            json!("lending"),
            json!(["executeIntent", "execute", "buildTx"]),
        ),
        "{aave_usdc}"
    );
    // The seed supply with the interest the fixture's debt has paid it since.
    let tvl = aave_usdc["tvlUsd"].as_f64().unwrap_or_default();
    assert!((1_000_000.0..1_000_100.0).contains(&tvl), "{aave_usdc}");
    assert!(
        aave_usdc["riskNotes"]
            .as_array()
            .is_some_and(|n| !n.is_empty()),
        "{aave_usdc}"
    );

    // Each filter of SPEC's discovery reads.
    let cases = [
        (json!({"asset": "usdc"}), vec!["usdc-vault", "aave-v3:USDC"]),
        (json!({"asset": "ETH"}), vec!["aave-v3:WETH"]),
        (json!({"minApr": 5}), vec!["usdc-vault"]),
        (json!({"chainId": 1}), vec![]),
        (
            json!({"chainId": 84532, "limit": 2}),
            vec!["usdc-vault", "aave-v3:USDC"],
        ),
        (
            json!({"minTvlUsd": 500000}),
            vec!["aave-v3:USDC", "aave-v3:EURC", "aave-v3:WETH"],
        ),
        (json!({"providerId": "erc4626-vaults"}), vec!["usdc-vault"]),
        (
            json!({"providerId": "aave-v3"}),
            vec!["aave-v3:USDC", "aave-v3:EURC", "aave-v3:WETH"],
        ),
        (
            json!({"strategyType": "lending", "asset": "EURC"}),
            vec!["aave-v3:EURC"],
        ),
        (json!({"strategyType": "staking"}), vec![]),
        (
            json!({"executionSupport": "buildTx", "asset": "USDC"}),
            vec!["usdc-vault", "aave-v3:USDC"],
        ),
    ];
    for (i, (params, want)) in cases.into_iter().enumerate() {
        let read = read_keyed(
            &gw,
            &agent,
            "get-earn-opportunities",
            params.clone(),
            &format!("f-{i}"),
        )
        .await;
        assert_eq!(ids(&read), want, "{params}: {read}");
    }
    let limited = read_keyed(
        &gw,
        &agent,
        "get-earn-opportunities",
        json!({"limit": 1}),
        "f-l",
    )
    .await;
    assert_eq!(
        limited["results"][0]["data"]["count"],
        json!(4),
        "{limited}"
    );
    let unknown = read_keyed(
        &gw,
        &agent,
        "get-earn-opportunities",
        json!({"providerId": "nope"}),
        "f-x",
    )
    .await;
    assert_eq!(
        (
            unknown["status"].clone(),
            unknown["results"][0]["code"].clone()
        ),
        (json!("failed"), json!("INVALID_PARAMS")),
        "{unknown}"
    );
    // The older name answers the same.
    let twin = read_keyed(&gw, &agent, "get-earning-opportunities", json!({}), "o-3").await;
    assert_eq!(ids(&twin), ids(&all), "{twin}");
    let provider = read_keyed(
        &gw,
        &agent,
        "get-earn-provider",
        json!({"providerId": "aave-v3"}),
        "p-1",
    )
    .await;
    let p = &provider["results"][0]["data"];
    assert_eq!(
        (
            p["chains"].clone(),
            p["assets"].clone(),
            p["strategies"].clone()
        ),
        (
            json!([84532]),
            json!(["EURC", "USDC", "WETH"]),
            json!(["lending"])
        ),
        "{provider}"
    );

    // An Aave opportunity deposited through deposit-earn-position is a supply: it shows in
    // get-earn-position, and withdraw-earn-position takes it back.
    let (_, body) = execute_stating(
        &gw,
        &agent,
        "deposit-earn-position",
        json!({"providerId": "aave-v3", "opportunityId": "aave-v3:USDC", "amount": "50"}),
        "earn-2",
        0.0,
    )
    .await;
    assert_eq!(body["data"]["status"], "confirmed", "{body}");
    assert_eq!(devnet.balance(a_usdc, agent.address).await, usdc(50));
    let position = read_keyed(
        &gw,
        &agent,
        "get-earn-position",
        json!({"providerId": "earn-router"}),
        "pos-1",
    )
    .await;
    let held: Vec<(Value, Value)> = position["results"][0]["data"]["positions"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|p| (p["opportunityId"].clone(), p["assets"].clone()))
        .collect();
    assert_eq!(held.len(), 2, "{position}");
    assert_eq!(held[1], (json!("aave-v3:USDC"), json!("50")), "{position}");
    assert_eq!(held[0].0, json!("usdc-vault"), "{position}");
    let (_, body) = execute_stating(
        &gw,
        &agent,
        "withdraw-earn-position",
        json!({"providerId": "aave-v3", "opportunityId": "aave-v3:USDC", "amount": "max"}),
        "earn-3",
        0.0,
    )
    .await;
    assert_eq!(body["data"]["status"], "confirmed", "{body}");
    assert_eq!(devnet.balance(a_usdc, agent.address).await, U256::ZERO);
}

alloy::sol! {
    #[sol(rpc)]
    interface IPoolConfigurator {
        function setReserveFreeze(address asset, bool freeze) external;
        function setSupplyCap(address asset, uint256 newSupplyCap) external;
    }
}

/// The codes and messages of the aave-v3 venue's readiness for the agent on the execute lane.
async fn aave_readiness(
    gw: &Gateway,
    agent: &Agent,
    token: &str,
    amount: &str,
) -> Vec<(String, String)> {
    let (status, body) = get(
        format!(
            "{}/api/v1/agent/venues/readiness?venue=aave-v3&chainId=84532&lane=execute&token={token}&amount={amount}",
            gw.url
        ),
        &agent.key,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    body["data"]["blockingReasons"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|r| {
            (
                r["code"].as_str().unwrap_or_default().to_owned(),
                r["message"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

#[tokio::test]
async fn aave_readiness_names_frozen_reserves_caps_and_a_borrower_without_collateral() {
    let devnet = Devnet::start();
    let db = devnet.dir.path().join("gw.db");
    let database_url = format!("sqlite://{}", db.display());
    let gw = start_gateway(&devnet.gateway_config("main", &database_url), false);
    let agent = onboard(
        &gw,
        &database_url,
        "ready-lend@example.com",
        &["supply-lending", "borrow", "get-earn-opportunities"],
    )
    .await;
    devnet
        .fund(
            agent.address,
            U256::from(10u64).pow(U256::from(18u64)),
            usdc(100),
        )
        .await;
    let configurator = IPoolConfigurator::new(
        devnet.address(&["contracts", "aave", "PoolConfigurator"]),
        devnet.wallet(0),
    );
    let eurc = devnet.address(&["contracts", "aave", "reserves", "EURC", "asset"]);

    // Gas and USDC in the wallet, but no collateral in the pool: a borrow cannot run, and one of 10
    // USDC would leave a health factor of 0, below the policy's 1.5.
    let reasons = aave_readiness(&gw, &agent, "USDC", "10").await;
    let codes: Vec<&str> = reasons.iter().map(|(c, _)| c.as_str()).collect();
    assert_eq!(codes, ["BALANCE_SHORT", "HEALTH_FACTOR_LOW"], "{reasons:?}");
    assert!(reasons[0].1.contains("no collateral"), "{reasons:?}");
    assert!(
        reasons[1].1.starts_with("borrow of 10 USDC:") && reasons[1].1.contains("minimum of 1.5"),
        "{reasons:?}"
    );

    // The risk admin freezes EURC: supplies of it are refused before anything is sent, and earn
    // discovery no longer offers it.
    configurator
        .setReserveFreeze(eurc, true)
        .send()
        .await
        .expect("freeze")
        .get_receipt()
        .await
        .expect("frozen");
    let (status, refused) = lend(
        &gw,
        &agent,
        "supply-lending",
        json!({"asset": "EURC", "amount": "10"}),
        "frozen-1",
    )
    .await;
    assert_eq!(
        (status, refused["code"].clone()),
        (422, json!("VENUE_NOT_READY")),
        "{refused}"
    );
    let frozen = refused["detail"]["blockingReasons"]
        .as_array()
        .is_some_and(|r| {
            r.iter().any(|x| {
                x["code"] == "VENUE_PAUSED"
                    && x["message"].as_str().is_some_and(|m| m.contains("frozen"))
            })
        });
    assert!(frozen, "{refused}");
    let eurc_offers = read_for(
        &gw,
        &agent,
        "get-earn-opportunities",
        json!({"asset": "EURC"}),
    )
    .await;
    assert_eq!(ids(&eurc_offers), Vec::<String>::new(), "{eurc_offers}");

    // A supply cap the pool already holds (the seed's 1,000,000 USDC): 10 more do not fit.
    configurator
        .setSupplyCap(devnet.usdc(), U256::from(1_000_000u64))
        .send()
        .await
        .expect("cap")
        .get_receipt()
        .await
        .expect("capped");
    let (status, refused) = lend(
        &gw,
        &agent,
        "supply-lending",
        json!({"asset": "USDC", "amount": "10"}),
        "capped-1",
    )
    .await;
    assert_eq!(
        (status, refused["code"].clone()),
        (422, json!("VENUE_NOT_READY")),
        "{refused}"
    );
    assert!(
        refused["message"]
            .as_str()
            .is_some_and(|m| m.contains("supply cap")),
        "{refused}"
    );
    assert_eq!(
        devnet.balance(devnet.usdc(), agent.address).await,
        usdc(100)
    );
}

#[tokio::test]
async fn a_fan_out_repays_a_delegators_debt_onchain() {
    let devnet = Devnet::start();
    let db = devnet.dir.path().join("gw.db");
    let database_url = format!("sqlite://{}", db.display());
    let gw = start_gateway(&devnet.gateway_config("main", &database_url), false);
    let agent = onboard(&gw, &database_url, "fan-repay@example.com", &["repay"]).await;
    let devnet_json = devnet.dir.path().join("devnet.json").display().to_string();
    let pool = devnet.address(&["contracts", "aave", "Pool"]);
    let usdc_debt = devnet.address(&["contracts", "aave", "reserves", "USDC", "variableDebtToken"]);
    devnet
        .fund(
            agent.address,
            U256::from(10u64).pow(U256::from(18u64)),
            U256::ZERO,
        )
        .await;

    // An EIP-7702 EOA that supplied 100 USDC and borrowed 20 against it, straight to the pool.
    let (eoa, eoa_key) = upgraded_eoa(&devnet, &devnet_json).await;
    let wallet = devnet.wallet(4);
    IERC20::new(devnet.usdc(), &wallet)
        .approve(pool, U256::MAX)
        .send()
        .await
        .expect("approve")
        .get_receipt()
        .await
        .expect("approved");
    let own_pool = IBorrowerPool::new(pool, &wallet);
    own_pool
        .supply(devnet.usdc(), usdc(100), eoa, 0)
        .gas(FIXTURE_GAS)
        .send()
        .await
        .expect("supply")
        .get_receipt()
        .await
        .expect("supplied");
    let receipt = own_pool
        .borrow(devnet.usdc(), usdc(20), U256::from(2u64), 0, eoa)
        .gas(FIXTURE_GAS)
        .send()
        .await
        .expect("borrow")
        .get_receipt()
        .await
        .expect("borrowed");
    assert!(receipt.status(), "the EOA's borrow reverted");
    delegate(&gw, &agent, &devnet_json, (eoa, "repay"), &eoa_key, false).await;

    // A fan-out cannot price each delegator's whole debt, and repays only for the delegator.
    for (params, code) in [
        (
            json!({"asset": "USDC", "amount": "max"}),
            "PRICE_UNAVAILABLE",
        ),
        (
            json!({"asset": "USDC", "amount": "5", "onBehalfOf": agent.address}),
            "INVALID_PARAMS",
        ),
    ] {
        let (_, refused) = post(
            format!("{}/api/v1/agent/execute-intent", gw.url),
            json!({"agentApiKey": agent.key, "action": "repay", "chainId": 84532, "params": params}),
        )
        .await;
        assert_eq!(refused["code"], json!(code), "{refused}");
    }

    // 5 USDC of the debt repaid from the delegator's own USDC, through its delegation, once.
    let owed = devnet.balance(usdc_debt, eoa).await;
    let cash = devnet.balance(devnet.usdc(), eoa).await;
    let (status, submitted) = post(
        format!("{}/api/v1/agent/execute-intent", gw.url),
        json!({"agentApiKey": agent.key, "action": "repay", "chainId": 84532,
               "idempotencyKey": "fan-repay-1", "params": {"asset": "USDC", "amount": "5"}}),
    )
    .await;
    assert_eq!(status, 200, "{submitted}");
    let id = submitted["intentId"]
        .as_str()
        .unwrap_or_else(|| panic!("{submitted}"));
    let done = wait_ended(&gw.url, &agent.key, id).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["results"].as_array().map(Vec::len), Some(1), "{done}");
    assert_eq!(done["results"][0]["success"], json!(true), "{done}");
    let left = devnet.balance(usdc_debt, eoa).await;
    assert!(
        left + usdc(5) >= owed && left + usdc(5) < owed + usdc(1) / U256::from(1000u64),
        "5 USDC repaid: {owed} then {left}"
    );
    assert_eq!(cash - devnet.balance(devnet.usdc(), eoa).await, usdc(5));
}
