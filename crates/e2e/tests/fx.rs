//! FX on the devnet (CONTRACT "Prices behind the limits"; issue "The owner's limits hold"): a
//! EURC-like EIP-3009 stablecoin, Chainlink `MockV3Aggregator` feeds for EUR/USD and USDC/USD, and a
//! USDC/EURC Uniswap V3 pool (fee 0.01 %) deployed from the published artifacts. The supported assets
//! come from the configured pairs; a quote shows the oracle's amount beside the pool's; a swap is
//! bounded by the oracle rate and reverts, moving nothing, when the pool strays beyond the slippage;
//! the market overview shows prices, a feed's 24-hour change and the pool; a token with no feed is
//! priced by the pool's time-weighted average, and that price holds the owner's limits.
#![allow(clippy::panic, clippy::expect_used)] // Tests fail by panicking, saying what failed.

mod common;

use std::time::{SystemTime, UNIX_EPOCH};

use alloy::primitives::{Address, I256, U256};
use serde_json::{Value, json};

use common::*;

fn eurc(devnet: &Devnet) -> Address {
    devnet.address(&["tokens", "EURC", "address"])
}

/// Gives the agent's wallet 1 ETH, 10 USDC and 1,000 EURC; the EURC address.
async fn fund_agent(devnet: &Devnet, agent: &Agent) -> Address {
    devnet
        .fund(
            agent.address,
            U256::from(10u64).pow(U256::from(18u64)),
            usdc(10),
        )
        .await;
    let eurc = eurc(devnet);
    devnet
        .transfer(0, eurc, agent.address, usdc(1_000), None)
        .await;
    eurc
}

fn data(r: &Value) -> Value {
    r["results"][0]["data"].clone()
}

fn decimal(v: &Value) -> f64 {
    v.as_str()
        .and_then(|s| s.parse::<f64>().ok())
        .unwrap_or_else(|| panic!("{v} is not a decimal string"))
}

async fn mined<T>(
    pending: Result<alloy::providers::PendingTransactionBuilder<alloy::network::Ethereum>, T>,
) where
    T: std::fmt::Debug,
{
    pending
        .expect("the feed update is sent")
        .get_receipt()
        .await
        .expect("the feed update is mined");
}

#[tokio::test]
async fn fx_quotes_and_swaps_hold_to_the_oracle_rate() {
    let devnet = Devnet::start();
    let db = devnet.dir.path().join("gw.db");
    let database_url = format!("sqlite://{}", db.display());
    let gw = start_gateway(&devnet.gateway_config("fx", &database_url), false);
    let actions = [
        "get-fx-supported-assets",
        "get-fx-quote",
        "fx-swap",
        "get-chain-market-overview",
    ];
    let agent = onboard(&gw, &database_url, "fx@example.com", &actions).await;
    let eurc = fund_agent(&devnet, &agent).await;
    let pool = devnet.address(&["fx", "EURC/USDC"]);

    // The supported assets are the configured pair's tokens, with their pegs.
    let assets = data(&read_for(&gw, &agent, "get-fx-supported-assets", json!({})).await);
    let symbols: Vec<(Value, Value)> = assets["assets"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|x| (x["symbol"].clone(), x["peg"].clone()))
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(
        symbols,
        vec![(json!("EURC"), json!("EUR")), (json!("USDC"), json!("USD"))],
        "{assets}"
    );
    assert_eq!(
        assets["pairs"],
        json!([{"pair": "EURC/USDC", "base": "EURC", "quote": "USDC", "pool": pool.to_checksum(None)}]),
        "{assets}"
    );

    // A quote: the oracle's 108 USDC for 100 EURC (EUR/USD 1.08, USDC/USD 1) beside the pool's,
    // which pays its 0.01 % fee and a little price impact.
    let r = read_for(
        &gw,
        &agent,
        "get-fx-quote",
        json!({"from": "EURC", "to": "usdc", "amount": "100"}),
    )
    .await;
    let q = data(&r);
    assert_eq!(
        (
            q["oracle"]["amountOut"].clone(),
            q["oracle"]["rate"].clone(),
            q["pool"]["fee"].clone(),
            q["stale"].clone()
        ),
        (json!("108"), json!("1.08"), json!(100), json!(false)),
        "{r}"
    );
    let pool_out = decimal(&q["pool"]["amountOut"]);
    assert!((107.9..108.0).contains(&pool_out), "{r}");
    let bps = q["differenceBps"].as_i64().unwrap_or(-1);
    assert!((0..=10).contains(&bps), "{r}");

    // The swap is priced by the gateway: 100 EURC are 108 USD, over a 100 USD per-action cap.
    set_policy(
        &gw,
        &agent,
        json!({"allowedActions": actions, "dailyLimitUsd": 100000, "maxAmountUsdPerAction": 100}),
    )
    .await;
    let (status, body) = execute_stating(
        &gw,
        &agent,
        "fx-swap",
        json!({"from": "EURC", "to": "USDC", "amount": "100"}),
        "cap",
        0.0,
    )
    .await;
    assert_eq!(
        (status, body["code"].clone()),
        (403, json!("POLICY_AMOUNT_LIMIT")),
        "{body}"
    );
    set_policy(
        &gw,
        &agent,
        json!({"allowedActions": actions, "dailyLimitUsd": 100000}),
    )
    .await;

    // Within the slippage of the oracle rate, it runs: at least 107.46 USDC (108 less 50 bps).
    let (usdc_before, eurc_before) = (
        devnet.balance(devnet.usdc(), agent.address).await,
        devnet.balance(eurc, agent.address).await,
    );
    let (status, body) = execute_stating(
        &gw,
        &agent,
        "fx-swap",
        json!({"from": "EURC", "to": "USDC", "amount": "100"}),
        "swap-1",
        0.0,
    )
    .await;
    assert_eq!(
        (status, body["data"]["status"].clone()),
        (200, json!("confirmed")),
        "{body}"
    );
    let got = devnet.balance(devnet.usdc(), agent.address).await - usdc_before;
    assert!(
        got >= U256::from(107_460_000u64) && got <= U256::from(108_000_000u64),
        "received {got}: {body}"
    );
    assert_eq!(
        eurc_before - devnet.balance(eurc, agent.address).await,
        usdc(100)
    );

    // EUR/USD moves to 1.20 while the pool stays at 1.08: the oracle asks at least 119.40 USDC, the
    // pool pays ~108, the swap reverts in simulation and nothing is sent.
    let deployer = devnet.wallet(0);
    let feed = IMockV3Aggregator::new(devnet.address(&["priceFeeds", "EURC"]), &deployer);
    mined(
        feed.updateAnswer(I256::try_from(120_000_000i64).expect("fits"))
            .send()
            .await,
    )
    .await;
    past_the_price_cache().await;
    let before = (
        devnet.balance(devnet.usdc(), agent.address).await,
        devnet.balance(eurc, agent.address).await,
        devnet.nonce(agent.address).await,
    );
    let (status, body) = execute_stating(
        &gw,
        &agent,
        "fx-swap",
        json!({"from": "EURC", "to": "USDC", "amount": "100"}),
        "swap-2",
        0.0,
    )
    .await;
    assert_eq!(body["code"], json!("EXECUTION_REVERTED"), "{status} {body}");
    let after = (
        devnet.balance(devnet.usdc(), agent.address).await,
        devnet.balance(eurc, agent.address).await,
        devnet.nonce(agent.address).await,
    );
    assert_eq!(after, before, "a refused swap moved something");
    // The quote says how far the pool is from the oracle now.
    let r = read_for(
        &gw,
        &agent,
        "get-fx-quote",
        json!({"from": "EURC", "to": "USDC", "amount": "50"}),
    )
    .await;
    let bps = data(&r)["differenceBps"].as_i64().unwrap_or(0);
    assert!((900..1100).contains(&bps), "{r}");

    // The overview. The feed's history is rewritten in order: round 1 at 1.00 three days ago,
    // round 2 at 1.04 a day and a half ago, round 3 at 1.08 now. The change over 24 hours is from
    // the last round at least a day old (round 2): +3.84 %.
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    for (round, answer, age) in [
        (1u64, 100_000_000i64, 3 * 86_400),
        (2, 104_000_000, 129_600),
    ] {
        let at = U256::from(now - age);
        mined(
            feed.updateRoundData(
                alloy::primitives::Uint::<80, 2>::from(round),
                I256::try_from(answer).expect("fits"),
                at,
                at,
            )
            .send()
            .await,
        )
        .await;
    }
    mined(
        feed.updateAnswer(I256::try_from(108_000_000i64).expect("fits"))
            .send()
            .await,
    )
    .await;
    past_the_price_cache().await;
    let r = read_for(&gw, &agent, "get-chain-market-overview", json!({})).await;
    let o = data(&r);
    let token = |s: &str| {
        o["tokens"]
            .as_array()
            .and_then(|t| t.iter().find(|x| x["symbol"] == s).cloned())
            .unwrap_or_else(|| panic!("no {s}: {r}"))
    };
    let e = token("EURC");
    assert_eq!(
        (
            e["priceUsd"].clone(),
            e["source"].clone(),
            e["change24hPct"].clone(),
            e["stale"].clone()
        ),
        (
            json!("1.08"),
            json!("chainlink"),
            json!("3.84"),
            json!(false)
        ),
        "{r}"
    );
    assert_eq!(
        token("USDC")["change24hPct"],
        Value::Null,
        "one round is no history: {r}"
    );
    assert_eq!(token("WETH")["priceUsd"], json!("3000"), "{r}");
    let p = &o["pools"][0];
    assert_eq!(
        (p["pool"].clone(), p["fee"].clone(), p["role"].clone()),
        (json!(pool.to_checksum(None)), json!(100), json!("fx")),
        "{r}"
    );
    let spot = decimal(&p["price"]);
    let expected = if p["token0"] == "USDC" {
        1.0 / 1.08
    } else {
        1.08
    };
    assert!((spot - expected).abs() < 0.01, "{r}");
    assert!(p["liquidity"].as_str().is_some_and(|l| l != "0"), "{r}");
}

/// Drops a `[section]` and its keys from a TOML text.
fn without_section(toml: &str, header: &str) -> String {
    let mut skipping = false;
    let mut out = String::new();
    for line in toml.lines() {
        if line.starts_with('[') {
            skipping = line == header;
        }
        if !skipping {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

#[tokio::test]
async fn a_pools_time_weighted_price_prices_a_token_with_no_feed() {
    let devnet = Devnet::start();
    let db = devnet.dir.path().join("gw.db");
    let database_url = format!("sqlite://{}", db.display());
    // EURC keeps its price pool (USDC/EURC, a 60 s window) but loses its feed; and the EURC/USDC
    // FX pair is misconfigured with the USDC/WETH pool.
    let fx_pool = devnet.address(&["fx", "EURC/USDC"]).to_checksum(None);
    let weth_pool = devnet
        .address(&["contracts", "UniswapV3Pool_USDC_WETH_3000"])
        .to_checksum(None);
    let config = devnet.gateway_config_edited("twap", &database_url, "", |t| {
        without_section(&t, "[chains.84532.price-feeds.EURC]").replace(
            &format!("\"EURC/USDC\" = \"{fx_pool}\""),
            &format!("\"EURC/USDC\" = \"{weth_pool}\""),
        )
    });
    let gw = start_gateway(&config, false);
    let actions = ["get-token-price", "transfer", "get-fx-quote"];
    let agent = onboard(&gw, &database_url, "twap@example.com", &actions).await;
    let eurc = fund_agent(&devnet, &agent).await;
    // The pool's history reaches back its window once 60 s have passed on the chain.
    rpc(&devnet, "evm_increaseTime", json!([120])).await;
    rpc(&devnet, "evm_mine", json!([])).await;

    let r = read_for(&gw, &agent, "get-token-price", json!({"token": "EURC"})).await;
    let p = data(&r);
    assert_eq!(
        (p["source"].clone(), p["stale"].clone()),
        (json!("uniswap-v3-twap"), json!(false)),
        "{r}"
    );
    let price = decimal(&p["priceUsd"]);
    assert!((1.079..1.081).contains(&price), "{r}");

    // An FX pair whose configured pool trades other tokens is refused, not quoted from elsewhere.
    let r = read_for(
        &gw,
        &agent,
        "get-fx-quote",
        json!({"from": "EURC", "to": "USDC", "amount": "1"}),
    )
    .await;
    assert_eq!(
        r["results"][0]["code"],
        json!("CHAIN_NOT_CONFIGURED"),
        "{r}"
    );

    // That price holds the owner's cap: 100 EURC (~108 USD) is over 100, 90 (~97.2) is not.
    set_policy(
        &gw,
        &agent,
        json!({"allowedActions": actions, "dailyLimitUsd": 100000, "maxAmountUsdPerAction": 100}),
    )
    .await;
    let (recipient, _) = devnet.account(5);
    let before = devnet.balance(eurc, agent.address).await;
    let (status, body) = execute_stating(
        &gw,
        &agent,
        "transfer",
        json!({"token": "EURC", "to": recipient, "amount": "100"}),
        "t-100",
        0.0,
    )
    .await;
    assert_eq!(
        (status, body["code"].clone()),
        (403, json!("POLICY_AMOUNT_LIMIT")),
        "{body}"
    );
    assert_eq!(devnet.balance(eurc, agent.address).await, before);
    let (status, body) = execute_stating(
        &gw,
        &agent,
        "transfer",
        json!({"token": format!("{eurc:#x}"), "to": recipient, "amount": "90"}),
        "t-90",
        0.0,
    )
    .await;
    assert_eq!(
        (status, body["data"]["status"].clone()),
        (200, json!("confirmed")),
        "{body}"
    );
    assert_eq!(before - devnet.balance(eurc, agent.address).await, usdc(90));
}
