//! The owner's limits hold whatever the agent states (CONTRACT "Prices behind the limits"): on the
//! devnet, whose ETH/USD and USDC/USD prices are Chainlink `MockV3Aggregator` feeds compiled from
//! `@chainlink/contracts`, every write the agent wallet can run is priced by the gateway, with
//! `estimatedAmountUsd: 0` and its token given by symbol, by lower-case and by checksum address; a
//! feed's new answer prices the next write; a stale feed, an unpriceable token and an amount too
//! large to price are `PRICE_UNAVAILABLE`. Balances, nonces and credits are read back: a refusal
//! moves nothing and charges nothing.
#![allow(clippy::panic, clippy::expect_used)] // Tests fail by panicking, saying what failed.

mod common;

use alloy::primitives::{I256, U256};
use alloy::providers::Provider;
use serde_json::{Value, json};

use common::*;

async fn execute(
    gw: &Gateway,
    agent: &Agent,
    action: &str,
    params: Value,
    key: &str,
) -> (u16, Value) {
    execute_stating(gw, agent, action, params, key, 0.0).await
}

/// Executes a write the test expects to run: confirmed onchain.
async fn runs(gw: &Gateway, agent: &Agent, action: &str, params: Value, key: &str) {
    let (status, body) = execute(gw, agent, action, params, key).await;
    assert_eq!(
        (status, body["data"]["status"].clone()),
        (200, json!("confirmed")),
        "{action}: {body}"
    );
}

/// What a refusal must leave as it was: the agent wallet's ETH, USDC, WETH and vault shares, its
/// nonce, and its credits.
async fn footprint(
    devnet: &Devnet,
    gw: &Gateway,
    agent: &Agent,
) -> (U256, U256, U256, U256, u64, i64) {
    let vault = devnet.address(&["vaults", "usdc-vault"]);
    (
        devnet
            .provider
            .get_balance(agent.address)
            .await
            .expect("the devnet answers the balance"),
        devnet.balance(devnet.usdc(), agent.address).await,
        devnet.balance(devnet.weth(), agent.address).await,
        devnet.balance(vault, agent.address).await,
        devnet.nonce(agent.address).await,
        credits(gw, agent).await,
    )
}

/// The feed answers `answer` (8 decimals) from now on, and the gateway's cached round has expired.
async fn answer<P: Provider>(
    aggregator: &IMockV3Aggregator::IMockV3AggregatorInstance<P>,
    answer: i64,
) {
    aggregator
        .updateAnswer(I256::try_from(answer).expect("fits"))
        .send()
        .await
        .expect("updateAnswer is sent")
        .get_receipt()
        .await
        .expect("updateAnswer is mined");
    past_the_price_cache().await;
}

#[tokio::test]
async fn the_gateways_price_decides_every_write() {
    let devnet = Devnet::start();
    let db = devnet.dir.path().join("gw.db");
    let database_url = format!("sqlite://{}", db.display());
    let gw = start_gateway(&devnet.gateway_config("prices", &database_url), false);
    let writes = [
        "swap",
        "swap-v3",
        "transfer",
        "wrap-native",
        "unwrap-native",
        "deposit-earn-position",
        "withdraw-earn-position",
        "fx-swap",
    ];
    let agent = onboard(&gw, &database_url, "prices@example.com", &writes).await;
    devnet
        .fund(
            agent.address,
            U256::from(10u64).pow(U256::from(18u64)),
            usdc(10_000),
        )
        .await;
    let (usdc_addr, weth_addr) = (devnet.usdc(), devnet.weth());
    let (recipient, _) = devnet.account(5);

    // A per-action cap of 100 USD; each write below is worth 150 to 200 USD at the feeds' prices
    // (ETH 3000, USDC 1) while the agent states 0.
    set_policy(
        &gw,
        &agent,
        json!({"allowedActions": writes, "dailyLimitUsd": 100000, "maxAmountUsdPerAction": 100}),
    )
    .await;
    // Deposit something first so that a withdrawal has a position to be refused from.
    runs(
        &gw,
        &agent,
        "deposit-earn-position",
        json!({"providerId": "erc4626-vaults", "opportunityId": "usdc-vault", "amount": "90"}),
        "seed-deposit",
    )
    .await;
    let before = footprint(&devnet, &gw, &agent).await;

    let usdc_lower = format!("{usdc_addr:#x}");
    let usdc_checksum = usdc_addr.to_checksum(None);
    let weth_lower = format!("{weth_addr:#x}");
    let mut cases: Vec<(&str, Value)> = Vec::new();
    for token in ["USDC", "usdc", usdc_lower.as_str(), usdc_checksum.as_str()] {
        cases.push((
            "transfer",
            json!({"token": token, "to": recipient, "amount": "200"}),
        ));
        cases.push((
            "swap",
            json!({"tokenIn": token, "tokenOut": "WETH", "amountIn": "200"}),
        ));
        cases.push((
            "swap-v3",
            json!({"tokenIn": token, "tokenOut": "WETH", "amountIn": "200"}),
        ));
    }
    // 100 EURC at the EUR/USD feed's 1.08: 108 USD.
    let eurc = devnet.address(&["tokens", "EURC", "address"]);
    let (eurc_lower, eurc_checksum) = (format!("{eurc:#x}"), eurc.to_checksum(None));
    for token in ["EURC", "eurc", eurc_lower.as_str(), eurc_checksum.as_str()] {
        cases.push((
            "fx-swap",
            json!({"from": token, "to": "USDC", "amount": "100"}),
        ));
    }
    for token in ["WETH", "weth", weth_lower.as_str(), "ETH"] {
        cases.push((
            "swap",
            json!({"tokenIn": token, "tokenOut": "USDC", "amountIn": "0.05"}),
        ));
    }
    cases.push(("wrap-native", json!({"amount": "0.05"})));
    cases.push(("unwrap-native", json!({"amount": "0.05"})));
    cases.push((
        "deposit-earn-position",
        json!({"providerId": "erc4626-vaults", "opportunityId": "usdc-vault", "amount": "200"}),
    ));
    cases.push((
        "withdraw-earn-position",
        json!({"providerId": "erc4626-vaults", "opportunityId": "usdc-vault", "amount": "150"}),
    ));
    for (i, (action, params)) in cases.iter().enumerate() {
        let (status, body) =
            execute(&gw, &agent, action, params.clone(), &format!("cap-{i}")).await;
        assert_eq!(
            (status, body["code"].clone()),
            (403, json!("POLICY_AMOUNT_LIMIT")),
            "{action} {params}: {body}"
        );
    }
    assert_eq!(
        footprint(&devnet, &gw, &agent).await,
        before,
        "a refusal moved something"
    );

    // `max` is the wallet's whole position (90 USD of shares): under the cap, it runs.
    runs(
        &gw,
        &agent,
        "withdraw-earn-position",
        json!({"providerId": "erc4626-vaults", "opportunityId": "usdc-vault", "amount": "max"}),
        "max-1",
    )
    .await;

    // The daily limit sees the gateway's price too. 180 USD are used today (the 90 deposited and the
    // 90 withdrawn); of a 280 USD day, 60 more fit, then 60 more do not.
    set_policy(
        &gw,
        &agent,
        json!({"allowedActions": writes, "dailyLimitUsd": 280}),
    )
    .await;
    runs(
        &gw,
        &agent,
        "transfer",
        json!({"token": usdc_checksum, "to": recipient, "amount": "60"}),
        "day-1",
    )
    .await;
    let before = footprint(&devnet, &gw, &agent).await;
    let (status, body) = execute(
        &gw,
        &agent,
        "transfer",
        json!({"token": usdc_lower, "to": recipient, "amount": "60"}),
        "day-2",
    )
    .await;
    assert_eq!(
        (status, body["code"].clone()),
        (403, json!("POLICY_DAILY_LIMIT")),
        "{body}"
    );
    assert_eq!(footprint(&devnet, &gw, &agent).await, before);

    // A new answer of the ETH/USD feed prices the next write: at 1000 USD, 0.03 ETH (30 USD) fits
    // the day's 40 USD left; at 3000 (90 USD) it does not.
    let feed = devnet.address(&["priceFeeds", "WETH"]);
    let deployer = devnet.wallet(0);
    let aggregator = IMockV3Aggregator::new(feed, &deployer);
    let (status, body) = execute(
        &gw,
        &agent,
        "wrap-native",
        json!({"amount": "0.03"}),
        "wrap-3000",
    )
    .await;
    assert_eq!(
        (status, body["code"].clone()),
        (403, json!("POLICY_DAILY_LIMIT")),
        "{body}"
    );
    answer(&aggregator, 1000i64 * 100_000_000).await;
    runs(
        &gw,
        &agent,
        "wrap-native",
        json!({"amount": "0.03"}),
        "wrap-1000",
    )
    .await;

    // A feed whose last round is older than its max-age-seconds (3600 on the devnet) prices nothing.
    set_policy(
        &gw,
        &agent,
        json!({"allowedActions": writes, "dailyLimitUsd": 100000}),
    )
    .await;
    age_feed(&aggregator, 1000i64 * 100_000_000).await;
    past_the_price_cache().await;
    let before = footprint(&devnet, &gw, &agent).await;
    let unpriceable: Vec<(&str, Value)> = vec![
        // The stale feed: whatever is stated.
        ("wrap-native", json!({"amount": "0.001"})),
        (
            "swap",
            json!({"tokenIn": "WETH", "tokenOut": "USDC", "amountIn": "0.001"}),
        ),
        // A token with no feed and no price: the vault's own share token.
        (
            "transfer",
            json!({"token": format!("{:#x}", devnet.address(&["vaults", "usdc-vault"])), "to": recipient, "amount": "1"}),
        ),
        // An amount too large to price.
        (
            "transfer",
            json!({"token": "USDC", "to": recipient, "amount": format!("1{}", "0".repeat(40))}),
        ),
    ];
    for (i, (action, params)) in unpriceable.iter().enumerate() {
        let (status, body) = execute(&gw, &agent, action, params.clone(), &format!("np-{i}")).await;
        assert_eq!(
            (status, body["code"].clone()),
            (422, json!("PRICE_UNAVAILABLE")),
            "{action} {params}: {body}"
        );
        let stated = post(
            format!("{}/api/v1/agent/execute", gw.url),
            json!({"agentApiKey": agent.key, "action": action, "params": params, "chainId": 84532,
                   "idempotencyKey": format!("np-stated-{i}"), "estimatedAmountUsd": 5}),
        )
        .await;
        assert_eq!(stated.1["code"], json!("PRICE_UNAVAILABLE"), "{}", stated.1);
    }
    assert_eq!(
        footprint(&devnet, &gw, &agent).await,
        before,
        "a refusal moved or charged something"
    );

    // Preflight names the price and where it came from.
    let (status, report) = post(
        format!("{}/api/v1/agent/preflight?direct=true", gw.url),
        json!({"agentApiKey": agent.key, "action": "transfer", "chainId": 84532,
               "params": {"token": "USDC", "to": recipient, "amount": "2"}}),
    )
    .await;
    assert_eq!(status, 200, "{report}");
    let checks = report["data"]["checks"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let amount = checks
        .iter()
        .find(|c| c["name"] == "amountLimit")
        .cloned()
        .unwrap_or(Value::Null);
    let detail = amount["detail"].as_str().unwrap_or_default();
    assert_eq!(amount["ok"], json!(true), "{report}");
    assert!(
        detail.starts_with("2 USD") && detail.contains("1 USD per USDC from chainlink"),
        "{report}"
    );
}

#[tokio::test]
async fn market_reads_show_the_gateways_prices() {
    let devnet = Devnet::start();
    let db = devnet.dir.path().join("gw.db");
    let database_url = format!("sqlite://{}", db.display());
    let gw = start_gateway(&devnet.gateway_config("market", &database_url), false);
    let agent = onboard(
        &gw,
        &database_url,
        "market@example.com",
        &["get-token-price", "get-token-info"],
    )
    .await;
    let usdc_addr = devnet.usdc();
    let price = |token: &str| read_for(&gw, &agent, "get-token-price", json!({"token": token}));
    let data = |r: &Value| r["results"][0]["data"].clone();

    let r = price("usdc").await;
    let usdc = data(&r);
    assert_eq!(
        (
            usdc["token"].clone(),
            usdc["address"].clone(),
            usdc["decimals"].clone(),
            usdc["priceUsd"].clone(),
            usdc["source"].clone(),
            usdc["stale"].clone(),
            usdc["parseIssues"].clone(),
        ),
        (
            json!("USDC"),
            json!(usdc_addr.to_checksum(None)),
            json!(6),
            json!("1"),
            json!("chainlink"),
            json!(false),
            json!([])
        ),
        "{r}"
    );
    assert!(
        usdc["updatedAt"].as_str().is_some_and(|t| t.ends_with('Z')),
        "{r}"
    );
    // By address, in another case: the same token.
    let by_address = data(&price(&format!("{usdc_addr:#x}")).await);
    assert_eq!(by_address["priceUsd"], json!("1"), "{by_address}");

    // updateAnswer on the ETH/USD feed changes the next read (ETH is read as WETH).
    let feed = devnet.address(&["priceFeeds", "WETH"]);
    let deployer = devnet.wallet(0);
    let aggregator = IMockV3Aggregator::new(feed, &deployer);
    assert_eq!(data(&price("ETH").await)["priceUsd"], json!("3000"));
    answer(&aggregator, 251_234_567_890_i64).await;
    let weth = data(&price("WETH").await);
    assert_eq!(
        (weth["priceUsd"].clone(), weth["token"].clone()),
        (json!("2512.3456789"), json!("WETH")),
        "{weth}"
    );

    // A stale round is shown, marked stale, with the reason.
    age_feed(&aggregator, 2_000i64 * 100_000_000).await;
    past_the_price_cache().await;
    // (Another spelling of the token: the same request within a minute would be answered with the
    // earlier read's intent.)
    let stale = data(&price(&format!("{:#x}", devnet.weth())).await);
    assert_eq!(
        (stale["priceUsd"].clone(), stale["stale"].clone()),
        (json!("2000"), json!(true)),
        "{stale}"
    );
    assert!(
        stale["parseIssues"][0]
            .as_str()
            .is_some_and(|m| m.contains("stale")),
        "{stale}"
    );

    // A token nothing prices is refused, with the code a write would get.
    let vault = format!("{:#x}", devnet.address(&["vaults", "usdc-vault"]));
    let r = price(&vault).await;
    assert_eq!(r["results"][0]["code"], json!("PRICE_UNAVAILABLE"), "{r}");

    // Token info, read from the contract.
    let r = read_for(&gw, &agent, "get-token-info", json!({"token": "USDC"})).await;
    let info = data(&r);
    assert_eq!(
        (
            info["address"].clone(),
            info["decimals"].clone(),
            info["symbol"].clone()
        ),
        (json!(usdc_addr.to_checksum(None)), json!(6), json!("USDC")),
        "{r}"
    );
    assert!(info["name"].as_str().is_some_and(|n| !n.is_empty()), "{r}");
    assert!(
        info["totalSupply"]
            .as_str()
            .and_then(|t| t.split('.').next())
            .and_then(|t| t.parse::<u64>().ok())
            .is_some_and(|t| t >= 10_000_000),
        "the devnet minted over ten million USDC: {r}"
    );
}
