//! Venue readiness through the three surfaces on the devnet: the CLI (`venue readiness`, `venue
//! list`), REST and MCP (the official Python SDK) answer the same data for the same agent and venue,
//! and MCP refuses a different key in its arguments.
#![allow(clippy::panic, clippy::expect_used)] // Tests fail by panicking, saying what failed.

mod common;

use serde_json::{Value, json};

use common::Gateway;

/// `data` without its read time (each surface read the chain at its own instant).
fn timeless(mut data: Value) -> Value {
    if let Some(o) = data.as_object_mut() {
        o.remove("checkedAt");
    }
    data
}

async fn rest(g: &Gateway, key: &str, path: &str, query: &[(&str, &str)]) -> Value {
    let r = reqwest::Client::new()
        .get(format!("{}{path}", g.url))
        .header("x-agent-api-key", key)
        .query(query)
        .send()
        .await
        .expect("the gateway answers");
    assert_eq!(r.status().as_u16(), 200);
    let body: Value = r.json().await.unwrap_or(Value::Null);
    body["data"].clone()
}

#[tokio::test]
async fn the_cli_rest_and_mcp_agree_on_a_venue() {
    let devnet = actiongate_testkit::devnet::DevnetProcess::start();
    let g = Gateway::start_with_config(&devnet.toml());
    let key = g.login("venue@example.com").await;

    let (code, cli) = g.json(
        &[
            "venue",
            "readiness",
            "uniswap-v2",
            "--chain",
            "84532",
            "--lane",
            "execute",
            "--token",
            "USDC",
            "--amount",
            "5",
        ],
        &[],
    );
    assert_eq!((code, cli["code"].clone()), (0, json!("OK")), "{cli}");
    let query = [
        ("venue", "uniswap-v2"),
        ("chainId", "84532"),
        ("lane", "execute"),
        ("token", "USDC"),
        ("amount", "5"),
    ];
    let via_rest = rest(&g, &key, "/api/v1/agent/venues/readiness", &query).await;
    let via_mcp = g.mcp(&key,
        "getVenueReadiness",
        json!({"venue": "uniswap-v2", "chainId": 84532, "lane": "execute", "token": "USDC", "amount": "5"}),
    );
    assert_eq!(via_mcp["isError"], json!(false), "{via_mcp}");
    let via_mcp = via_mcp["structuredContent"]["data"].clone();
    // A fresh agent wallet: no gas and no USDC.
    let codes: Vec<Value> = via_rest["blockingReasons"]
        .as_array()
        .map(|a| a.iter().map(|r| r["code"].clone()).collect())
        .unwrap_or_default();
    assert_eq!(
        codes,
        [json!("GAS_SHORT"), json!("BALANCE_SHORT")],
        "{via_rest}"
    );
    assert_eq!(timeless(cli["data"].clone()), timeless(via_rest.clone()));
    assert_eq!(timeless(via_mcp), timeless(via_rest));

    let (code, cli) = g.json(
        &["venue", "list", "--chain", "84532", "--lane", "execute"],
        &[],
    );
    assert_eq!(code, 0, "{cli}");
    let via_rest = rest(
        &g,
        &key,
        "/api/v1/agent/venues",
        &[("chainId", "84532"), ("lane", "execute")],
    )
    .await;
    assert_eq!(timeless(cli["data"].clone()), timeless(via_rest));

    // A key in the arguments that is not the connection's is refused.
    let refused = g.mcp(
        &key,
        "getVenueReadiness",
        json!({"venue": "uniswap-v2", "agentKey": "agent-not-this-one"}),
    );
    assert_eq!(
        (
            refused["isError"].clone(),
            refused["structuredContent"]["code"].clone()
        ),
        (json!(true), json!("AGENT_IDENTITY_MISMATCH")),
        "{refused}"
    );
}
