//! Lending and earn through the three surfaces on the devnet (issue 24): the CLI (`run`,
//! `preflight`), REST and MCP (the official Python SDK) give the same answers and the same codes for
//! the same agent: supplies from each surface land in one position that all three read alike, a
//! borrow the policy's health factor refuses is refused by each with the same code and message,
//! and earn discovery answers the same opportunities.
#![allow(clippy::panic, clippy::expect_used)] // Tests fail by panicking, saying what failed.

mod common;

use serde_json::json;

use common::Gateway;

#[tokio::test]
async fn rest_mcp_and_the_cli_agree_on_lending_and_earn() {
    let devnet = actiongate_testkit::devnet::DevnetProcess::start();
    let g = Gateway::start_with_config(&devnet.toml());
    let (key, _) = g
        .devnet_agent(
            "lend-parity@example.com",
            &[
                "supply-lending",
                "borrow",
                "get-lending-position",
                "get-lending-markets",
                "get-earn-opportunities",
            ],
            &devnet.url,
        )
        .await;

    // A supply of 0.1 ETH from each surface, each confirmed.
    let ((code, cli), (status, rest), via_mcp) = g
        .execute_everywhere(
            &key,
            "supply-lending",
            json!({"asset": "ETH", "amount": "0.1"}),
            &["asset=ETH", "amount=0.1"],
            "s",
        )
        .await;
    assert_eq!(
        (code, cli["data"]["status"].clone()),
        (0, json!("confirmed")),
        "{cli}"
    );
    assert_eq!(
        (status, rest["data"]["status"].clone()),
        (200, json!("confirmed")),
        "{rest}"
    );
    assert_eq!(
        (
            via_mcp["isError"].clone(),
            via_mcp["structuredContent"]["data"]["status"].clone()
        ),
        (json!(false), json!("confirmed")),
        "{via_mcp}"
    );

    // The position: 0.3 WETH supplied, the same on all three.
    let [p_cli, p_rest, p_mcp] = g
        .read_everywhere(&key, "get-lending-position", json!({}), &[], "p")
        .await
        .map(|r| r["data"].clone());
    assert_eq!(p_rest["reserves"][0]["supplied"], json!("0.3"), "{p_rest}");
    assert_eq!(p_cli, p_rest);
    assert_eq!(p_mcp, p_rest);

    // A borrow the policy's health factor refuses (900 USD against 0.3 WETH's 747 USD weighted):
    // the same code and message everywhere, and preflight names the check.
    let ((code, cli), (status, rest), via_mcp) = g
        .execute_everywhere(
            &key,
            "borrow",
            json!({"asset": "USDC", "amount": "900"}),
            &["asset=USDC", "amount=900"],
            "b",
        )
        .await;
    assert_eq!(
        (code, cli["code"].clone()),
        (2, json!("POLICY_HEALTH_FACTOR")),
        "{cli}"
    );
    assert_eq!(
        (status, rest["code"].clone()),
        (403, json!("POLICY_HEALTH_FACTOR")),
        "{rest}"
    );
    assert_eq!(
        (
            via_mcp["isError"].clone(),
            via_mcp["structuredContent"]["code"].clone()
        ),
        (json!(true), json!("POLICY_HEALTH_FACTOR")),
        "{via_mcp}"
    );
    assert!(
        rest["message"]
            .as_str()
            .is_some_and(|m| m.contains("minimum of 1.5")),
        "{rest}"
    );
    assert_eq!(via_mcp["structuredContent"]["message"], rest["message"]);
    let (code, pre) = g.json(
        &[
            "preflight",
            "borrow",
            "--direct",
            "--chain-id",
            "84532",
            "--param",
            "asset=USDC",
            "--param",
            "amount=900",
        ],
        &[],
    );
    // A preflight that finds a refusal exits 2 with its code and message.
    assert_eq!(
        (code, pre["code"].clone(), pre["data"]["message"].clone()),
        (2, json!("POLICY_HEALTH_FACTOR"), rest["message"].clone()),
        "{pre}"
    );

    // Earn discovery: the same opportunities on all three.
    let [o_cli, o_rest, o_mcp] = g
        .read_everywhere(
            &key,
            "get-earn-opportunities",
            json!({"strategyType": "lending"}),
            &["strategyType=lending"],
            "o",
        )
        .await
        .map(|r| r["data"].clone());
    assert_eq!(o_rest["count"], json!(3), "{o_rest}");
    assert_eq!(o_cli, o_rest);
    assert_eq!(o_mcp, o_rest);
}
