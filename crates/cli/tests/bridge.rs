//! Bridges through the three surfaces on the devnet's two chains (issue 25): the CLI (`run`), REST
//! and MCP (the official Python SDK) give the same quote, the same ROUTE_NOT_SUPPORTED, bridge alike
//! from the agent's wallet, and read the same status of each deposit once the devnet's relayer has
//! filled it.
#![allow(clippy::panic, clippy::expect_used)] // Tests fail by panicking, saying what failed.

mod common;

use serde_json::{Value, json};

use common::Gateway;

const PEER: u64 = 11_155_420;

#[tokio::test]
async fn rest_mcp_and_the_cli_agree_on_bridges() {
    let devnet = actiongate_testkit::devnet::DevnetProcess::start();
    let g = Gateway::start_with_config(&devnet.toml());
    let (key, address) = g
        .devnet_agent(
            "bridge-parity@example.com",
            &["get-bridge-quote", "bridge-tokens", "check-bridge-status"],
            &devnet.url,
        )
        .await;
    common::fund_usdc(&devnet, &address, 100).await;

    // The same quote everywhere, and the same refusal of a route nobody serves.
    let quotes = g
        .read_everywhere(
            &key,
            "get-bridge-quote",
            json!({"token": "USDC", "amount": "20", "toChain": PEER}),
            &["token=USDC", "amount=20", "toChain=11155420"],
            "q",
        )
        .await;
    assert_eq!(
        quotes[1]["data"]["outputAmount"],
        json!("19.99"),
        "{}",
        quotes[1]
    );
    assert_eq!(quotes[0]["data"], quotes[1]["data"]);
    assert_eq!(quotes[2]["data"], quotes[1]["data"]);
    let refused = g
        .read_everywhere(
            &key,
            "get-bridge-quote",
            json!({"token": "USDC", "amount": "20", "toChain": 1}),
            &["token=USDC", "amount=20", "toChain=1"],
            "r",
        )
        .await;
    assert!(refused[1]["message"].is_string(), "{}", refused[1]);
    for r in &refused {
        assert_eq!(
            (r["success"].clone(), r["code"].clone()),
            (json!(false), json!("ROUTE_NOT_SUPPORTED")),
            "{r}"
        );
        assert_eq!(
            (&r["error"], &r["message"]),
            (&refused[1]["error"], &refused[1]["message"])
        );
    }

    // A bridge of 20 USDC from each surface, each confirmed with its deposit.
    let ((code, cli), (status, rest), via_mcp) = g
        .execute_everywhere(
            &key,
            "bridge-tokens",
            json!({"token": "USDC", "amount": "20", "toChainId": PEER}),
            &["token=USDC", "amount=20", "toChainId=11155420"],
            "bridge",
        )
        .await;
    assert_eq!(code, 0, "{cli}");
    assert_eq!(status, 200, "{rest}");
    assert_eq!(via_mcp["isError"], json!(false), "{via_mcp}");
    let deposits: Vec<Value> = [
        &cli["data"],
        &rest["data"],
        &via_mcp["structuredContent"]["data"],
    ]
    .iter()
    .map(|d| {
        assert_eq!(d["status"], json!("confirmed"), "{d}");
        assert_eq!(d["data"]["bridge"]["outputAmount"], json!("19.99"), "{d}");
        d["data"]["bridge"]["depositId"].clone()
    })
    .collect();
    let distinct: std::collections::HashSet<String> =
        deposits.iter().map(Value::to_string).collect();
    assert_eq!(distinct.len(), 3, "{deposits:?}");

    // Each deposit's status, once filled, reads the same on all three.
    for (n, id) in deposits.iter().enumerate() {
        let id = id.as_str().expect("a deposit id");
        let flag = format!("depositId={id}");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        let mut round = 0;
        let seen = loop {
            round += 1;
            let seen = g
                .read_everywhere(
                    &key,
                    "check-bridge-status",
                    json!({"fromChain": 84532, "depositId": id}),
                    &["fromChain=84532", flag.as_str()],
                    &format!("s{n}-{round}"),
                )
                .await;
            if seen.iter().all(|s| s["data"]["status"] == "DONE") {
                break seen;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "deposit {id} not filled: {seen:?}"
            );
            tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        };
        assert_eq!(
            (
                seen[1]["data"]["substatus"].clone(),
                seen[1]["data"]["receiving"]["amount"].clone()
            ),
            (json!("COMPLETED"), json!("19.99")),
            "{}",
            seen[1]
        );
        assert_eq!(seen[0]["data"], seen[1]["data"]);
        assert_eq!(seen[2]["data"], seen[1]["data"]);
    }
}
