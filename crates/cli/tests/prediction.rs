//! Prediction orders through the three surfaces on the devnet (issue 26): the CLI (`run --direct`),
//! REST and MCP (the official Python SDK) place the same held order alike, list the same orders,
//! cancel alike, and refuse alike with the same codes (a FOK that finds nothing, an order this
//! agent does not have, a filled one).
#![allow(clippy::panic, clippy::expect_used)] // Tests fail by panicking, saying what failed.

mod common;

use serde_json::{Value, json};

use common::Gateway;

async fn rpc(url: &str, method: &str, params: Value) -> Value {
    let v: Value = reqwest::Client::new()
        .post(url)
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))
        .send()
        .await
        .expect("anvil answers")
        .json()
        .await
        .unwrap_or(Value::Null);
    assert!(v.get("error").is_none(), "{method}: {v}");
    v["result"].clone()
}

/// One action on all three surfaces, as each answers it: (CLI exit code and JSON, REST status and
/// body, the MCP tool result). `flags` are the CLI's `--param k=v` pairs of `params`.
async fn everywhere(
    g: &Gateway,
    key: &str,
    action: &str,
    params: Value,
    flags: &[&str],
    idempotency: &str,
) -> ((i32, Value), (u16, Value), Value) {
    let cli_key = format!("{idempotency}-cli");
    let mut args = vec![
        "run",
        action,
        "--direct",
        "--chain-id",
        "84532",
        "--idempotency-key",
        &cli_key,
        "--confirm-writes",
    ];
    for f in flags {
        args.extend(["--param", f]);
    }
    let cli = g.json(&args, &[]);
    let r = reqwest::Client::new()
        .post(format!("{}/api/v1/agent/execute", g.url))
        .json(
            &json!({"agentApiKey": key, "action": action, "chainId": 84532,
                      "idempotencyKey": format!("{idempotency}-rest"), "params": params}),
        )
        .send()
        .await
        .expect("the gateway answers");
    let rest = (r.status().as_u16(), r.json().await.unwrap_or(Value::Null));
    let via_mcp = g.mcp(
        key,
        "walletExecute",
        json!({"action": action, "chainId": 84532, "params": params,
               "idempotencyKey": format!("{idempotency}-mcp")}),
    );
    (cli, rest, via_mcp)
}

/// The orders through each surface's read (`get-prediction-orders`).
/// Each read under its own idempotency key (`tag`), so that it is a new reading.
async fn orders_everywhere(g: &Gateway, key: &str, tag: &str) -> [Value; 3] {
    let cli_key = format!("orders-{tag}-cli");
    let (code, cli) = g.json(
        &[
            "run",
            "get-prediction-orders",
            "--chain-id",
            "84532",
            "--idempotency-key",
            &cli_key,
            "--wait",
        ],
        &[],
    );
    assert_eq!(code, 0, "{cli}");
    let r = reqwest::Client::new()
        .post(format!("{}/api/v1/agent/execute-intent", g.url))
        .json(
            &json!({"agentApiKey": key, "action": "get-prediction-orders", "chainId": 84532,
                      "idempotencyKey": format!("orders-{tag}-rest"), "params": {}}),
        )
        .send()
        .await
        .expect("the gateway answers");
    let submitted: Value = r.json().await.unwrap_or(Value::Null);
    let id = submitted["intentId"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let mut rest = Value::Null;
    for _ in 0..100 {
        rest = reqwest::Client::new()
            .get(format!(
                "{}/api/v1/agent/execute-intent/status?intentId={id}",
                g.url
            ))
            .header("x-agent-api-key", key)
            .send()
            .await
            .expect("the gateway answers")
            .json()
            .await
            .unwrap_or(Value::Null);
        if rest["status"] != "queued" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let via_mcp = g.mcp(
        key,
        "agentRun",
        json!({"action": "get-prediction-orders", "params": {}, "chainId": 84532,
               "idempotencyKey": format!("orders-{tag}-mcp")}),
    );
    [
        cli["data"]["results"][0]["data"]["orders"].clone(),
        rest["results"][0]["data"]["orders"].clone(),
        via_mcp["structuredContent"]["results"][0]["data"]["orders"].clone(),
    ]
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
    let (funder, _) = devnet.account(0);
    let usdc = devnet.spec["tokens"]["USDC"]["address"]
        .as_str()
        .or_else(|| devnet.spec["tokens"]["USDC"].as_str())
        .expect("the devnet's USDC")
        .to_owned();
    let transfer = format!(
        "0xa9059cbb{:0>64}{:064x}",
        address.trim_start_matches("0x").to_ascii_lowercase(),
        100_000_000u64
    );
    let hash = rpc(
        &devnet.url,
        "eth_sendTransaction",
        json!([{"from": funder, "to": usdc, "data": transfer}]),
    )
    .await;
    for _ in 0..50 {
        if !rpc(&devnet.url, "eth_getTransactionReceipt", json!([hash]))
            .await
            .is_null()
        {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
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
    let ((code, cli), (status, rest), via_mcp) =
        everywhere(&g, &key, "place-prediction-order", gtc, &gtc_flags, "gtc").await;
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
    let ((code, cli), (status, rest), via_mcp) =
        everywhere(&g, &key, "place-prediction-order", fok, &fok_flags, "fok").await;
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
    let ((code, cli), (status, rest), via_mcp) = everywhere(
        &g,
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
    assert_eq!(via_mcp["structuredContent"]["message"], rest["message"]);

    // Each surface cancels one order, and the listing says so everywhere.
    for (n, id) in ids.iter().enumerate() {
        let flag = format!("orderId={id}");
        let ((code, cli), (status, rest), via_mcp) = everywhere(
            &g,
            &key,
            "cancel-prediction-order",
            json!({ "orderId": id }),
            &[flag.as_str()],
            &format!("cancel-{n}"),
        )
        .await;
        // The first surface cancels it; the other two answer the same cancelled order.
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
