//! Prediction orders through the three surfaces on the devnet (issue 26): the CLI (`run --direct`),
//! REST and MCP (the official Python SDK) place the same held order alike, list the same orders,
//! cancel alike, and refuse alike with the same codes (a FOK that finds nothing, an order this
//! agent does not have, a filled one).
#![allow(clippy::panic, clippy::expect_used)] // Tests fail by panicking, saying what failed.

mod common;

use serde_json::{Value, json};

use common::Gateway;

/// The orders through each surface's read (`get-prediction-orders`), once the three reads agree: the runner looks at
/// a held order every second (`filling` while it looks), so three reads one after another can
/// straddle a look; each attempt is a new read (its own idempotency key).
async fn orders_everywhere(g: &Gateway, key: &str, tag: &str) -> [Value; 3] {
    let mut last = [Value::Null, Value::Null, Value::Null];
    for attempt in 0..20 {
        last = g
            .read_everywhere(
                key,
                "get-prediction-orders",
                json!({}),
                &[],
                &format!("{tag}-{attempt}"),
            )
            .await
            .map(|r| r["data"]["orders"].clone());
        if last[0] == last[1] && last[1] == last[2] {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    last
}

#[tokio::test]
async fn rest_mcp_and_the_cli_agree_on_prediction_orders() {
    let devnet = actiongate_testkit::devnet::DevnetProcess::start();
    let g = Gateway::start_with_config(&devnet.toml());
    let (key, address) = g
        .devnet_agent(
            "orders-parity@example.com",
            &[
                "place-prediction-order",
                "cancel-prediction-order",
                "get-prediction-orders",
            ],
            &devnet.url,
        )
        .await;
    // 100 USDC from the devnet's first (unlocked) account.
    common::fund_usdc(&devnet, &address, 100).await;
    let market = devnet.spec["prediction"]["markets"][0]["marketId"]
        .as_str()
        .expect("a market")
        .to_owned();
    let market_flag = format!("marketId={market}");

    // A GTC buy at 0.30 (YES trades at 0.50): held and open on each surface.
    let gtc =
        json!({"marketId": market, "outcomeIndex": 0, "side": "buy", "price": 0.3, "size": "10"});
    let gtc_flags = [
        market_flag.as_str(),
        "outcomeIndex=0",
        "side=buy",
        "price=0.3",
        "size=10",
    ];
    let ((code, cli), (status, rest), via_mcp) = g
        .execute_everywhere(&key, "place-prediction-order", gtc, &gtc_flags, "gtc")
        .await;
    let open = |data: &Value| (data["status"].clone(), data["data"]["status"].clone());
    assert_eq!(code, 0, "{cli}");
    assert_eq!(status, 200, "{rest}");
    assert_eq!(via_mcp["isError"], json!(false), "{via_mcp}");
    for data in [
        &cli["data"],
        &rest["data"],
        &via_mcp["structuredContent"]["data"],
    ] {
        assert_eq!(open(data), (json!("pending"), json!("open")), "{data}");
    }
    let ids: Vec<String> = [
        &cli["data"],
        &rest["data"],
        &via_mcp["structuredContent"]["data"],
    ]
    .iter()
    .map(|d| d["data"]["orderId"].as_str().unwrap_or_default().to_owned())
    .collect();

    // The same three open orders, read alike on each surface.
    let [o_cli, o_rest, o_mcp] = orders_everywhere(&g, &key, "open").await;
    assert_eq!(o_rest.as_array().map(Vec::len), Some(3), "{o_rest}");
    assert!(
        o_rest
            .as_array()
            .into_iter()
            .flatten()
            .all(|o| o["status"] == "open" && o["price"] == "0.3" && o["size"] == "10"),
        "{o_rest}"
    );
    assert_eq!(o_cli, o_rest);
    assert_eq!(o_mcp, o_rest);

    // A FOK at 0.30 finds nothing: ORDER_NOT_FILLED on each (CLI exit 2, REST 422, MCP isError).
    let fok = json!({"marketId": market, "outcomeIndex": 0, "side": "buy", "price": 0.3, "size": "10", "orderType": "FOK"});
    let mut fok_flags = gtc_flags.to_vec();
    fok_flags.push("orderType=FOK");
    let ((code, cli), (status, rest), via_mcp) = g
        .execute_everywhere(&key, "place-prediction-order", fok, &fok_flags, "fok")
        .await;
    assert_eq!(
        (code, cli["code"].clone()),
        (2, json!("ORDER_NOT_FILLED")),
        "{cli}"
    );
    assert_eq!(
        (status, rest["code"].clone()),
        (422, json!("ORDER_NOT_FILLED")),
        "{rest}"
    );
    assert_eq!(
        (
            via_mcp["isError"].clone(),
            via_mcp["structuredContent"]["code"].clone()
        ),
        (json!(true), json!("ORDER_NOT_FILLED")),
        "{via_mcp}"
    );

    // An order this agent does not have: NOT_FOUND with one message everywhere.
    let unknown = "0190f0a0-0000-7000-8000-000000000000";
    let unknown_flag = format!("orderId={unknown}");
    let ((code, cli), (status, rest), via_mcp) = g
        .execute_everywhere(
            &key,
            "cancel-prediction-order",
            json!({ "orderId": unknown }),
            &[unknown_flag.as_str()],
            "unknown",
        )
        .await;
    assert_eq!(
        (code, cli["code"].clone()),
        (2, json!("NOT_FOUND")),
        "{cli}"
    );
    assert_eq!(
        (status, rest["code"].clone()),
        (404, json!("NOT_FOUND")),
        "{rest}"
    );
    assert_eq!(
        via_mcp["structuredContent"]["code"],
        json!("NOT_FOUND"),
        "{via_mcp}"
    );
    assert!(rest["message"].is_string(), "{rest}");
    assert_eq!(via_mcp["structuredContent"]["message"], rest["message"]);

    // Each surface cancels one order, and the listing says so everywhere.
    for (n, id) in ids.iter().enumerate() {
        let flag = format!("orderId={id}");
        let ((code, cli), (status, rest), via_mcp) = g
            .execute_everywhere(
                &key,
                "cancel-prediction-order",
                json!({ "orderId": id }),
                &[flag.as_str()],
                &format!("cancel-{n}"),
            )
            .await;
        // The first surface cancels it; the other two answer the same cancelled order.
        assert_eq!((code, status), (0, 200), "{cli} {rest}");
        assert_eq!(via_mcp["isError"], json!(false), "{via_mcp}");
        for data in [
            &cli["data"],
            &rest["data"],
            &via_mcp["structuredContent"]["data"],
        ] {
            assert_eq!(
                (
                    data["data"]["orderId"].clone(),
                    data["data"]["status"].clone()
                ),
                (json!(id), json!("cancelled")),
                "{code} {status} {data}"
            );
        }
    }
    let [o_cli, o_rest, o_mcp] = orders_everywhere(&g, &key, "ended").await;
    let statuses: Vec<Value> = o_rest
        .as_array()
        .into_iter()
        .flatten()
        .map(|o| o["status"].clone())
        .collect();
    assert_eq!(
        statuses,
        [
            json!("unfilled"),
            json!("unfilled"),
            json!("unfilled"),
            json!("cancelled"),
            json!("cancelled"),
            json!("cancelled")
        ],
        "{o_rest}"
    );
    assert_eq!(o_cli, o_rest);
    assert_eq!(o_mcp, o_rest);
}
