//! Venue readiness on the devnet (issue "Venue readiness"): for each EVM venue, a fresh agent wallet
//! without gas is GAS_SHORT and, funded, ready; a token it does not hold is BALANCE_SHORT; a signer
//! without allowance on build-tx gets APPROVAL_REQUIRED with the approval in the fix, which once
//! mined clears it; fan-out without a delegation is DELEGATION_MISSING; a stale feed is
//! PRICE_UNAVAILABLE; a paused token is VENUE_PAUSED; a write submitted while its venue is blocked is
//! refused with VENUE_NOT_READY and changes nothing onchain or in the ledger, and the retry of one
//! accepted before still answers its first result.
#![allow(clippy::panic, clippy::expect_used)] // Tests fail by panicking, saying what failed.

mod common;

use alloy::network::TransactionBuilder;
use alloy::primitives::{Address, Bytes, U256};
use alloy::providers::Provider;
use alloy::rpc::types::TransactionRequest;
use serde_json::{Value, json};

use common::*;

alloy::sol! {
    /// The devnet stablecoin's pauser functions (as Circle's FiatToken's).
    #[sol(rpc)]
    interface IPausable {
        function pause() external;
        function unpause() external;
    }
}

const EVM_VENUES: [&str; 4] = ["uniswap-v2", "uniswap-v3", "erc20", "erc4626-vaults"];

async fn readiness(gw: &Gateway, agent: &Agent, venue: &str, query: &[(&str, &str)]) -> Value {
    let mut q: Vec<(&str, &str)> = vec![("venue", venue), ("chainId", "84532")];
    q.extend_from_slice(query);
    let r = reqwest::Client::new()
        .get(format!("{}/api/v1/agent/venues/readiness", gw.url))
        .header("x-agent-api-key", &agent.key)
        .query(&q)
        .send()
        .await
        .expect("the gateway answers");
    assert_eq!(r.status().as_u16(), 200);
    let body: Value = r.json().await.unwrap_or(Value::Null);
    assert_eq!(body["success"], json!(true), "{body}");
    body["data"].clone()
}

fn codes(data: &Value) -> Vec<String> {
    data["blockingReasons"]
        .as_array()
        .unwrap_or_else(|| panic!("{data}"))
        .iter()
        .map(|r| r["code"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// What a refused submit may not change: the agent's nonce and balances, its credits.
async fn footprint(devnet: &Devnet, gw: &Gateway, agent: &Agent) -> (u64, U256, U256, i64) {
    (
        devnet.nonce(agent.address).await,
        devnet
            .provider
            .get_balance(agent.address)
            .await
            .expect("balance"),
        devnet.balance(devnet.usdc(), agent.address).await,
        credits(gw, agent).await,
    )
}

#[tokio::test]
async fn readiness_says_what_blocks_a_venue_and_a_blocked_write_changes_nothing() {
    let devnet = Devnet::start();
    let db = devnet.dir.path().join("gw.db");
    let database_url = format!("sqlite://{}", db.display());
    let gw = start_gateway(&devnet.gateway_config("venues", &database_url), false);
    let writes = [
        "swap",
        "swap-v3",
        "transfer",
        "wrap-native",
        "unwrap-native",
        "deposit-earn-position",
    ];
    let agent = onboard(&gw, &database_url, "venues@example.com", &writes).await;
    let (recipient, _) = devnet.account(5);
    // One USDC from the agent's wallet, always under the same idempotency key.
    let transfer = || {
        post(
            format!("{}/api/v1/agent/execute", gw.url),
            json!({"agentApiKey": agent.key, "action": "transfer", "chainId": 84532,
                   "params": {"token": "USDC", "to": recipient.to_string(), "amount": "1"},
                   "idempotencyKey": "blocked-1"}),
        )
    };

    // A fresh agent wallet holds no gas: every EVM venue is blocked on the agent's lanes.
    for venue in EVM_VENUES {
        for lane in ["execute", "executeIntent"] {
            let r = readiness(&gw, &agent, venue, &[("lane", lane)]).await;
            assert_eq!(r["ready"], json!(false), "{venue} {lane}: {r}");
            assert!(
                codes(&r).contains(&"GAS_SHORT".to_owned()),
                "{venue} {lane}: {r}"
            );
            let gas = r["blockingReasons"]
                .as_array()
                .and_then(|a| a.iter().find(|x| x["code"] == "GAS_SHORT"))
                .cloned()
                .unwrap_or_default();
            assert!(
                gas["fix"]["text"]
                    .as_str()
                    .is_some_and(|t| t.contains(&agent.address.to_string())),
                "the fix names the wallet to fund: {gas}"
            );
        }
    }

    // A write submitted now is refused before anything is written, reserved or sent.
    let before = footprint(&devnet, &gw, &agent).await;
    let (status, body) = transfer().await;
    assert_eq!(
        (status, body["code"].clone(), body["error"].clone()),
        (422, json!("VENUE_NOT_READY"), json!("INTENT_REJECTED")),
        "{body}"
    );
    assert_eq!(body["detail"]["venue"], json!("erc20"), "{body}");
    assert_eq!(
        body["detail"]["blockingReasons"][0]["code"],
        json!("GAS_SHORT"),
        "{body}"
    );
    let (status, body) = post(
        format!("{}/api/v1/agent/execute-intent", gw.url),
        json!({"agentApiKey": agent.key, "action": "swap", "chainId": 84532,
               "params": {"tokenIn": "USDC", "tokenOut": "WETH", "amountIn": "1"}}),
    )
    .await;
    assert_eq!(
        (status, body["code"].clone()),
        (422, json!("VENUE_NOT_READY")),
        "{body}"
    );
    // Preflight says the same in its venueReady check.
    let (status, body) = post(
        format!("{}/api/v1/agent/preflight?direct=true", gw.url),
        json!({"agentApiKey": agent.key, "action": "transfer", "chainId": 84532,
               "params": {"token": "USDC", "to": recipient.to_string(), "amount": "1"}}),
    )
    .await;
    let venue_ready = body["data"]["checks"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["name"] == "venueReady"))
        .cloned()
        .unwrap_or_else(|| panic!("{status} {body}"));
    assert_eq!(
        (venue_ready["ok"].clone(), venue_ready["code"].clone()),
        (json!(false), json!("VENUE_NOT_READY")),
        "{body}"
    );
    assert_eq!(
        footprint(&devnet, &gw, &agent).await,
        before,
        "nothing changed"
    );

    // Funded with gas: ready on the direct lane; a token it does not hold is BALANCE_SHORT.
    devnet
        .fund(
            agent.address,
            U256::from(10u64).pow(U256::from(18u64)),
            U256::ZERO,
        )
        .await;
    for venue in EVM_VENUES {
        let r = readiness(&gw, &agent, venue, &[("lane", "execute")]).await;
        assert_eq!(
            (r["ready"].clone(), codes(&r)),
            (json!(true), vec![]),
            "{venue}: {r}"
        );
    }
    let r = readiness(
        &gw,
        &agent,
        "erc20",
        &[("lane", "execute"), ("token", "USDC"), ("amount", "5")],
    )
    .await;
    assert_eq!(codes(&r), ["BALANCE_SHORT"], "{r}");
    // Unwrapping takes WETH, which the wallet does not hold: its ETH does not count.
    let (status, body) = post(
        format!("{}/api/v1/agent/execute", gw.url),
        json!({"agentApiKey": agent.key, "action": "unwrap-native", "chainId": 84532,
               "params": {"amount": "0.1"}, "idempotencyKey": "unwrap-1"}),
    )
    .await;
    assert_eq!(
        (status, body["detail"]["blockingReasons"][0]["code"].clone()),
        (422, json!("BALANCE_SHORT")),
        "{body}"
    );
    assert!(
        body["detail"]["blockingReasons"][0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("WETH")),
        "{body}"
    );
    devnet.fund(agent.address, U256::ZERO, usdc(10)).await;
    let r = readiness(
        &gw,
        &agent,
        "erc20",
        &[("lane", "execute"), ("token", "USDC"), ("amount", "5")],
    )
    .await;
    assert_eq!(r["ready"], json!(true), "{r}");
    // The same transfer now runs.
    let (status, body) = transfer().await;
    assert_eq!(
        (status, body["data"]["status"].clone()),
        (200, json!("confirmed")),
        "{body}"
    );
    let sent = body["data"]["txHash"].clone();

    // USDC paused by its issuer (as Circle's FiatToken can be): VENUE_PAUSED, and a new transfer is
    // refused; the retry of the accepted one still answers its first result.
    let deployer = devnet.wallet(0);
    let usdc_token = IPausable::new(devnet.usdc(), &deployer);
    usdc_token
        .pause()
        .send()
        .await
        .expect("pause is sent")
        .get_receipt()
        .await
        .expect("pause is mined");
    let r = readiness(
        &gw,
        &agent,
        "erc20",
        &[("lane", "execute"), ("token", "USDC"), ("amount", "1")],
    )
    .await;
    assert_eq!(codes(&r), ["VENUE_PAUSED"], "{r}");
    let (status, body) = post(
        format!("{}/api/v1/agent/execute", gw.url),
        json!({"agentApiKey": agent.key, "action": "transfer", "chainId": 84532,
               "params": {"token": "USDC", "to": recipient.to_string(), "amount": "1"},
               "idempotencyKey": "while-paused"}),
    )
    .await;
    assert_eq!(
        (status, body["detail"]["blockingReasons"][0]["code"].clone()),
        (422, json!("VENUE_PAUSED")),
        "{body}"
    );
    let (status, body) = transfer().await;
    assert_eq!(
        (status, body["data"]["txHash"].clone()),
        (200, sent),
        "{body}"
    );
    usdc_token
        .unpause()
        .send()
        .await
        .expect("unpause is sent")
        .get_receipt()
        .await
        .expect("unpause is mined");
    let r = readiness(
        &gw,
        &agent,
        "erc20",
        &[("lane", "execute"), ("token", "USDC"), ("amount", "1")],
    )
    .await;
    assert_eq!(r["ready"], json!(true), "{r}");

    // Fan-out without a delegation: DELEGATION_MISSING, with the route that starts one.
    let r = readiness(&gw, &agent, "uniswap-v2", &[("lane", "executeIntent")]).await;
    assert_eq!(codes(&r), ["DELEGATION_MISSING"], "{r}");
    assert_eq!(
        r["blockingReasons"][0]["fix"]["route"],
        json!("POST /api/v1/agent/delegation/create")
    );

    // build-tx for a user without allowance to the V2 router: the approval in the fix, and once
    // the user mines it, nothing blocks.
    let (user, _) = devnet.account(7);
    devnet.fund(user, U256::ZERO, usdc(100)).await;
    let query = [
        ("lane", "buildTx"),
        ("token", "USDC"),
        ("amount", "25"),
        ("walletAddress", &user.to_string()),
    ];
    let r = readiness(&gw, &agent, "uniswap-v2", &query).await;
    assert_eq!(codes(&r), ["APPROVAL_REQUIRED"], "{r}");
    let tx = r["blockingReasons"][0]["fix"]["transaction"].clone();
    let router = devnet.address(&["contracts", "UniswapV2Router02"]);
    let to: Address = tx["to"].as_str().unwrap_or_default().parse().expect("to");
    let data: Bytes = tx["data"]
        .as_str()
        .unwrap_or_default()
        .parse()
        .expect("data");
    assert_eq!(to, devnet.usdc(), "{tx}");
    assert_eq!(
        &data[..4],
        &[0x09, 0x5e, 0xa7, 0xb3],
        "approve(address,uint256): {tx}"
    );
    assert_eq!(Address::from_slice(&data[16..36]), router, "{tx}");
    assert_eq!(U256::from_be_slice(&data[36..68]), usdc(25), "{tx}");
    devnet
        .wallet(7)
        .send_transaction(TransactionRequest::default().with_to(to).with_input(data))
        .await
        .expect("the approval is sent")
        .get_receipt()
        .await
        .expect("the approval is mined");
    let r = readiness(&gw, &agent, "uniswap-v2", &query).await;
    assert_eq!(
        (r["ready"].clone(), codes(&r)),
        (json!(true), vec![]),
        "{r}"
    );

    // A stale ETH/USD feed: WETH cannot be priced, so its writes are blocked.
    let feed = devnet.address(&["priceFeeds", "WETH"]);
    let deployer = devnet.wallet(0);
    age_feed(
        &IMockV3Aggregator::new(feed, &deployer),
        3_000i64 * 100_000_000,
    )
    .await;
    past_the_price_cache().await;
    let r = readiness(
        &gw,
        &agent,
        "uniswap-v2",
        &[("lane", "execute"), ("token", "WETH")],
    )
    .await;
    assert_eq!(codes(&r), ["PRICE_UNAVAILABLE"], "{r}");

    // The list: the EVM venues ready on the direct lane, the ones without credentials or without
    // an implementation here say so.
    let r = reqwest::Client::new()
        .get(format!(
            "{}/api/v1/agent/venues?chainId=84532&lane=execute",
            gw.url
        ))
        .header("x-agent-api-key", &agent.key)
        .send()
        .await
        .expect("the gateway answers");
    let list: Value = r.json().await.unwrap_or(Value::Null);
    let venue = |id: &str| {
        list["data"]["venues"]
            .as_array()
            .and_then(|a| a.iter().find(|v| v["venue"] == id))
            .cloned()
            .unwrap_or_else(|| panic!("{id} in {list}"))
    };
    for id in EVM_VENUES {
        assert_eq!(venue(id)["ready"], json!(true), "{id}: {list}");
    }
    assert_eq!(
        codes(&venue("hyperliquid")),
        ["CREDENTIALS_MISSING"],
        "{list}"
    );
    assert_eq!(codes(&venue("polymarket")), ["VENUE_UNAVAILABLE"], "{list}");
    assert!(
        venue("uniswap-v2")["actions"]
            .as_array()
            .is_some_and(|a| a.contains(&json!("swap"))),
        "{list}"
    );
}
