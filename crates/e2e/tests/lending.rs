//! Lending on Aave v3 (the devnet deploys it from @aave/core-v3's artifacts): the markets read
//! against the pool's data provider, supplies from the agent's wallet (USDC, and native ETH through
//! the WrappedTokenGateway) checked by the aToken balances onchain, the position read against the
//! pool's `getUserAccountData` (a fixture borrower's debt and health factor too, and the debt grown a
//! year later), a build-tx supply signed and sent by viem, and a fan-out supply to an
//! EIP-7702 EOA and a HybridDeleGator through their delegations, once each.
#![allow(clippy::panic, clippy::expect_used)] // Tests fail by panicking, saying what failed.

mod common;

use alloy::primitives::{Address, U256};
use serde_json::{Value, json};
use sha3::{Digest, Keccak256};

use common::*;

alloy::sol! {
    #[sol(rpc)]
    interface IBorrowerPool {
        function supply(address asset, uint256 amount, address onBehalfOf, uint16 referralCode) external;
        function borrow(address asset, uint256 amount, uint256 interestRateMode, uint16 referralCode, address onBehalfOf) external;
    }
    #[sol(rpc)]
    interface IApprove {
        function approve(address spender, uint256 amount) external returns (bool);
    }
}

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
    IApprove::new(devnet.weth(), &wallet)
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
        .send()
        .await
        .expect("supply")
        .get_receipt()
        .await
        .expect("supplied");
    let receipt = aave_pool
        .borrow(devnet.usdc(), usdc(15_000), U256::from(2u64), 0, borrower)
        .send()
        .await
        .expect("borrow")
        .get_receipt()
        .await
        .expect("borrowed");
    assert!(receipt.status(), "the fixture's borrow reverted");
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

/// Creates an agent's `supply-lending` delegation for `delegator` and activates it, signed with
/// viem (`sign`, an EIP-7702 EOA) or the MetaMask kit (`sign-kit`, a HybridDeleGator through its
/// owner `key`).
async fn delegate(
    gw: &Gateway,
    agent: &Agent,
    devnet_json: &str,
    delegator: Address,
    key: &str,
    kit: bool,
) {
    let (status, created) = post(
        format!("{}/api/v1/agent/delegation/create", gw.url),
        json!({"agentApiKey": agent.key, "delegator": delegator, "chainId": 84532, "action": "supply-lending"}),
    )
    .await;
    assert_eq!(status, 200, "{created}");
    let mut delegation = created["data"]["delegation"].clone();
    let signed = if kit {
        node(
            &["sign-kit", devnet_json, key, &delegator.to_string()],
            Some(&delegation.to_string()),
        )
    } else {
        node(
            &["sign", key],
            Some(&created["data"]["typedData"].to_string()),
        )
    };
    delegation["signature"] = signed["signature"].clone();
    let (status, body) = post(
        format!("{}/api/v1/agent/delegation/activate", gw.url),
        json!({"agentApiKey": agent.key, "delegation": delegation, "chainId": 84532}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
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
    let (eoa, eoa_key) = devnet.account(4);
    let up = node(&["upgrade", &devnet_json, &eoa_key], None);
    assert!(
        up["code"]
            .as_str()
            .is_some_and(|c| c.starts_with("0xef0100")),
        "{up}"
    );
    devnet.fund(eoa, U256::ZERO, usdc(100)).await;
    let eoa_usdc = devnet.balance(devnet.usdc(), eoa).await;
    let hybrid: Address = devnet.spec["smartAccounts"][0]["address"]
        .as_str()
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("no smart account"));
    let owner = devnet.spec["smartAccounts"][0]["ownerIndex"]
        .as_u64()
        .unwrap_or(7) as usize;
    let (_, owner_key) = devnet.account(owner);
    delegate(&gw, &agent, &devnet_json, eoa, &eoa_key, false).await;
    delegate(&gw, &agent, &devnet_json, hybrid, &owner_key, true).await;

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
