//! Prediction markets on Gnosis Conditional Tokens with fixed-product market makers (the devnet
//! deploys them from the gnosis.pm packages' truffle builds), checked onchain: the markets listed
//! from the factory with the devnet's questions, a buy whose ERC-1155 balance equals the market
//! maker's quote and moves the prices, a sell back for collateral, the positions read, the oracle's
//! report, buys refused after it, and redemption paying the winning shares in USDC; and orders:
//! a FOK that finds nothing, a GTC held until another account's buy moves the market through its
//! price and then filled once, a GTC cancelled before it would have filled, a GTD that expires, each
//! unfilled one giving its daily-limit share back.
#![allow(clippy::panic, clippy::expect_used)] // Tests fail by panicking, saying what failed.

mod common;

use alloy::primitives::{Address, B256, U256};
use serde_json::{Value, json};

use common::*;

alloy::sol! {
    #[sol(rpc)]
    interface ICT {
        function getCollectionId(bytes32 parentCollectionId, bytes32 conditionId, uint256 indexSet) external view returns (bytes32);
        function getPositionId(address collateralToken, bytes32 collectionId) external pure returns (uint256);
        function balanceOf(address owner, uint256 id) external view returns (uint256);
        function reportPayouts(bytes32 questionId, uint256[] payouts) external;
    }
    #[sol(rpc)]
    interface IFPMM {
        function calcBuyAmount(uint256 investmentAmount, uint256 outcomeIndex) external view returns (uint256);
        function calcSellAmount(uint256 returnAmount, uint256 outcomeIndex) external view returns (uint256);
        function buy(uint256 investmentAmount, uint256 outcomeIndex, uint256 minOutcomeTokensToBuy) external;
        event FPMMBuy(address indexed buyer, uint256 investmentAmount, uint256 feeAmount, uint256 indexed outcomeIndex, uint256 outcomeTokensBought);
    }
}

fn decimal(v: &Value) -> f64 {
    v.as_str().and_then(|s| s.parse().ok()).unwrap_or(f64::NAN)
}

/// A devnet, a gateway on it, an agent allowed `actions` and funded with 1 ETH and 500 USDC, and the
/// devnet's first market (its market maker, condition, question and YES position).
struct Predicting {
    devnet: Devnet,
    gw: Gateway,
    agent: Agent,
    market: Address,
    question: B256,
    ct_at: Address,
    yes: U256,
}

async fn predicting(email: &str, actions: &[&str]) -> Predicting {
    let devnet = Devnet::start();
    let db = devnet.dir.path().join("gw.db");
    let database_url = format!("sqlite://{}", db.display());
    let gw = start_gateway(&devnet.gateway_config("main", &database_url), false);
    let agent = onboard(&gw, &database_url, email, actions).await;
    devnet
        .fund(
            agent.address,
            U256::from(10u64).pow(U256::from(18u64)),
            usdc(500),
        )
        .await;
    let first = devnet.spec["prediction"]["markets"][0].clone();
    let field = |name: &str| -> B256 {
        first[name]
            .as_str()
            .and_then(|c| c.parse().ok())
            .unwrap_or_else(|| panic!("the devnet's first market has a {name}"))
    };
    let (condition, question) = (field("conditionId"), field("questionId"));
    let market: Address = first["marketId"]
        .as_str()
        .and_then(|a| a.parse().ok())
        .expect("a market");
    let ct_at: Address = devnet.address(&["prediction", "conditionalTokens"]);
    let ct = ICT::new(ct_at, &devnet.provider);
    let collection = ct
        .getCollectionId(B256::ZERO, condition, U256::from(1u64))
        .call()
        .await
        .expect("collection");
    let yes = ct
        .getPositionId(devnet.usdc(), collection)
        .call()
        .await
        .expect("position");
    Predicting {
        devnet,
        gw,
        agent,
        market,
        question,
        ct_at,
        yes,
    }
}

/// A direct execution's refusal: (HTTP status, code, message).
async fn refusal(
    gw: &Gateway,
    agent: &Agent,
    action: &str,
    params: Value,
    key: &str,
) -> (u16, String, String) {
    let (status, body) = execute_stating(gw, agent, action, params, key, 0.0).await;
    let text = |f: &str| body[f].as_str().unwrap_or_default().to_owned();
    (status, text("code"), text("message"))
}

#[tokio::test]
async fn a_prediction_market_is_bought_sold_resolved_and_redeemed_onchain() {
    let Predicting {
        devnet,
        gw,
        agent,
        market,
        question,
        ct_at,
        yes,
    } = predicting(
        "predict@example.com",
        &[
            "get-prediction-markets",
            "get-prediction-positions",
            "buy-prediction-outcome",
            "sell-prediction-outcome",
            "redeem-prediction-positions",
        ],
    )
    .await;
    let spec = devnet.spec["prediction"].clone();
    let first = spec["markets"][0].clone();
    let ct = ICT::new(ct_at, &devnet.provider);
    let fpmm = IFPMM::new(market, &devnet.provider);

    // The factory's three markets with the devnet's questions, even odds, 10,000 USDC each.
    let listed = read_for(&gw, &agent, "get-prediction-markets", json!({})).await;
    let markets = listed["results"][0]["data"]["markets"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(markets.len(), 3, "{listed}");
    let m = &markets[0];
    assert_eq!(
        (
            m["marketId"].as_str().map(str::to_ascii_lowercase),
            m["question"].clone(),
            m["outcomes"].clone(),
            m["prices"].clone(),
            m["liquidityUsd"].clone(),
            m["volumeUsd"].clone(),
            m["open"].clone(),
            m["resolved"].clone(),
        ),
        (
            Some(market.to_string().to_ascii_lowercase()),
            first["question"].clone(),
            json!(["Yes", "No"]),
            json!(["0.5", "0.5"]),
            json!("10000"),
            json!("0"),
            json!(true),
            json!(false),
        ),
        "{listed}"
    );

    // A buy of YES for 100 USDC: the outcome tokens equal the market maker's quote, and YES dearer.
    let quote = fpmm
        .calcBuyAmount(usdc(100), U256::ZERO)
        .call()
        .await
        .expect("quote");
    let (status, body) = execute_stating(
        &gw,
        &agent,
        "buy-prediction-outcome",
        json!({"marketId": market, "outcomeIndex": 0, "amount": "100"}),
        "buy-1",
        0.0,
    )
    .await;
    assert_eq!(
        (status, body["data"]["status"].clone()),
        (200, json!("confirmed")),
        "{body}"
    );
    assert_eq!(
        ct.balanceOf(agent.address, yes)
            .call()
            .await
            .expect("balance"),
        quote
    );
    assert_eq!(
        devnet.balance(devnet.usdc(), agent.address).await,
        usdc(400)
    );
    let after = read_for(&gw, &agent, "get-prediction-markets", json!({"limit": 1})).await;
    let prices = after["results"][0]["data"]["markets"][0]["prices"].clone();
    let (p_yes, p_no) = (decimal(&prices[0]), decimal(&prices[1]));
    assert!(
        p_yes > 0.5 && p_no < 0.5 && (p_yes + p_no - 1.0).abs() < 1e-5,
        "{after}"
    );
    assert_eq!(
        after["results"][0]["data"]["markets"][0]["volumeUsd"],
        json!("100"),
        "{after}"
    );

    // Selling back for 30 USDC gives the market maker what it quoted for them.
    let sold = fpmm
        .calcSellAmount(usdc(30), U256::ZERO)
        .call()
        .await
        .expect("quote");
    let (status, body) = execute_stating(
        &gw,
        &agent,
        "sell-prediction-outcome",
        json!({"marketId": market, "outcomeIndex": 0, "returnAmount": "30"}),
        "sell-1",
        0.0,
    )
    .await;
    assert_eq!(
        (status, body["data"]["status"].clone()),
        (200, json!("confirmed")),
        "{body}"
    );
    let shares = ct
        .balanceOf(agent.address, yes)
        .call()
        .await
        .expect("balance");
    assert_eq!(shares, quote - sold);
    assert_eq!(
        devnet.balance(devnet.usdc(), agent.address).await,
        usdc(430)
    );
    let held = read_for(&gw, &agent, "get-prediction-positions", json!({})).await;
    let positions = held["results"][0]["data"]["positions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(positions.len(), 1, "{held}");
    assert_eq!(
        (
            positions[0]["outcomeIndex"].clone(),
            positions[0]["outcome"].clone(),
            positions[0]["redeemable"].clone()
        ),
        (json!(0), json!("Yes"), json!("0")),
        "{held}"
    );

    // The oracle reports YES: the market takes no new buy, and the shares redeem 1 USDC each.
    let oracle = spec["oracleIndex"].as_u64().unwrap_or(6) as usize;
    let receipt = ICT::new(ct_at, devnet.wallet(oracle))
        .reportPayouts(question, vec![U256::from(1u64), U256::ZERO])
        .send()
        .await
        .expect("report")
        .get_receipt()
        .await
        .expect("reported");
    assert!(receipt.status(), "reportPayouts reverted");
    let (status, code, message) = refusal(
        &gw,
        &agent,
        "buy-prediction-outcome",
        json!({"marketId": market, "outcomeIndex": 1, "amount": "10"}),
        "buy-2",
    )
    .await;
    assert_eq!(
        (status, code.as_str()),
        (422, "VENUE_NOT_READY"),
        "{message}"
    );
    assert!(message.contains("resolved"), "{message}");
    let (status, body) = execute_stating(
        &gw,
        &agent,
        "redeem-prediction-positions",
        json!({"marketId": market}),
        "redeem-1",
        0.0,
    )
    .await;
    assert_eq!(
        (status, body["data"]["status"].clone()),
        (200, json!("confirmed")),
        "{body}"
    );
    assert_eq!(
        devnet.balance(devnet.usdc(), agent.address).await,
        usdc(430) + shares
    );
    assert_eq!(
        ct.balanceOf(agent.address, yes)
            .call()
            .await
            .expect("balance"),
        U256::ZERO
    );
    let resolved = read_for(
        &gw,
        &agent,
        "get-prediction-markets",
        json!({"status": "resolved"}),
    )
    .await;
    let list = resolved["results"][0]["data"]["markets"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(list.len(), 1, "{resolved}");
    assert_eq!(list[0]["payouts"], json!(["1", "0"]), "{resolved}");
}

/// Devnet account 7 (funded here) buys NO of `market` for `amount` USDC straight from the market
/// maker, moving YES's price down.
async fn buy_no(devnet: &Devnet, market: Address, amount: u64) {
    let (other, _) = devnet.account(7);
    devnet
        .fund(
            other,
            U256::from(10u64).pow(U256::from(18u64)),
            usdc(amount),
        )
        .await;
    let whale = devnet.wallet(7);
    IERC20::new(devnet.usdc(), &whale)
        .approve(market, usdc(amount))
        .send()
        .await
        .expect("approve")
        .get_receipt()
        .await
        .expect("approved");
    let bought = IFPMM::new(market, &whale)
        .buy(usdc(amount), U256::from(1u64), U256::ZERO)
        .send()
        .await
        .expect("buy")
        .get_receipt()
        .await
        .expect("bought");
    assert!(bought.status(), "the other account's buy reverted");
}

/// The `FPMMBuy` events of `buyer` on `market`.
async fn buys_of(devnet: &Devnet, market: Address, buyer: Address) -> usize {
    let filter = alloy::rpc::types::Filter::new()
        .address(market)
        .event_signature(<IFPMM::FPMMBuy as alloy::sol_types::SolEvent>::SIGNATURE_HASH)
        .topic1(buyer.into_word())
        .from_block(0);
    alloy::providers::Provider::get_logs(&devnet.provider, &filter)
        .await
        .expect("logs")
        .len()
}

#[tokio::test]
async fn orders_fill_once_when_the_market_meets_them_and_unfilled_ones_give_back_their_share() {
    let actions = [
        "place-prediction-order",
        "cancel-prediction-order",
        "get-prediction-orders",
    ];
    let Predicting {
        devnet,
        gw,
        agent,
        market,
        ct_at,
        yes,
        ..
    } = predicting("orders@example.com", &actions).await;
    set_policy(
        &gw,
        &agent,
        json!({"allowedActions": actions, "dailyLimitUsd": 100}),
    )
    .await;
    let ct = ICT::new(ct_at, &devnet.provider);
    let order = |price: f64, size: &str, kind: &str| json!({"marketId": market, "outcomeIndex": 0, "side": "buy", "price": price, "size": size, "orderType": kind});

    // FOK at 0.40 while YES trades at 0.50: nothing fills, nothing is sent.
    let (status, body) = execute_stating(
        &gw,
        &agent,
        "place-prediction-order",
        order(0.4, "100", "FOK"),
        "fok-1",
        0.0,
    )
    .await;
    assert_eq!(
        (status, body["code"].clone()),
        (422, json!("ORDER_NOT_FILLED")),
        "{body}"
    );
    // GTC at 0.45 for 100 shares: held, open, nothing sent.
    let (status, body) = execute_stating(
        &gw,
        &agent,
        "place-prediction-order",
        order(0.45, "100", "GTC"),
        "gtc-1",
        0.0,
    )
    .await;
    assert_eq!(
        (
            status,
            body["data"]["status"].clone(),
            body["data"]["data"]["status"].clone()
        ),
        (200, json!("pending"), json!("open")),
        "{body}"
    );
    let gtc = body["data"]["data"]["orderId"]
        .as_str()
        .unwrap_or_else(|| panic!("{body}"))
        .to_owned();
    assert_eq!(
        body["data"]["intentId"].as_str(),
        Some(gtc.as_str()),
        "{body}"
    );
    // A second GTC at 0.44 that would fill after the move: cancelled first, and cancelled again.
    let (_, body) = execute_stating(
        &gw,
        &agent,
        "place-prediction-order",
        order(0.44, "50", "GTC"),
        "gtc-2",
        0.0,
    )
    .await;
    let cancelled = body["data"]["data"]["orderId"]
        .as_str()
        .unwrap_or_else(|| panic!("{body}"))
        .to_owned();
    for key in ["cancel-1", "cancel-2"] {
        let (status, body) = execute_stating(
            &gw,
            &agent,
            "cancel-prediction-order",
            json!({"orderId": cancelled}),
            key,
            0.0,
        )
        .await;
        assert_eq!(
            (
                status,
                body["data"]["data"]["status"].clone(),
                body["data"]["data"]["orderId"].clone()
            ),
            (200, json!("cancelled"), json!(cancelled)),
            "{key}: {body}"
        );
    }
    // A GTD at 0.20 that expires in 3 seconds without a fill.
    let expiration = now_secs() + 3;
    let mut gtd = order(0.2, "10", "GTD");
    gtd["expiration"] = json!(expiration);
    let (_, body) = execute_stating(&gw, &agent, "place-prediction-order", gtd, "gtd-1", 0.0).await;
    let gtd = body["data"]["data"]["orderId"]
        .as_str()
        .unwrap_or_else(|| panic!("{body}"))
        .to_owned();
    assert_eq!(
        devnet.balance(devnet.usdc(), agent.address).await,
        usdc(500)
    );
    // Still open a few looks later.
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    let listed = read_for(
        &gw,
        &agent,
        "get-prediction-orders",
        json!({"status": "open"}),
    )
    .await;
    let open: Vec<Value> = listed["results"][0]["data"]["orders"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(open.len(), 2, "{listed}");
    assert!(open.iter().all(|o| o["waiting"].is_string()), "{listed}");

    // Another account buys NO for 3,000 USDC: YES falls to about 0.37, through the GTC's 0.45.
    buy_no(&devnet, market, 3_000).await;

    // The watcher fills the GTC: 45 USDC for at least 100 YES, once.
    let ended = wait_intent(&gw, &agent, &gtc, 30).await;
    assert_eq!(ended["status"], json!("completed"), "{ended}");
    assert_eq!(
        devnet.balance(devnet.usdc(), agent.address).await,
        usdc(455)
    );
    let shares = ct
        .balanceOf(agent.address, yes)
        .call()
        .await
        .expect("balance");
    assert!(shares >= usdc(100), "{shares}");
    // The GTD expires unfilled.
    let expired = wait_intent(&gw, &agent, &gtd, 30).await;
    assert_eq!(
        (
            expired["status"].clone(),
            expired["results"][0]["code"].clone()
        ),
        (json!("failed"), json!("ORDER_EXPIRED")),
        "{expired}"
    );
    tokio::time::sleep(std::time::Duration::from_millis(2500)).await;
    assert_eq!(buys_of(&devnet, market, agent.address).await, 1);
    assert_eq!(
        devnet.balance(devnet.usdc(), agent.address).await,
        usdc(455)
    );
    let listed = read_for(&gw, &agent, "get-prediction-orders", json!({})).await;
    let orders: Vec<(String, String)> = listed["results"][0]["data"]["orders"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|o| {
            (
                o["orderType"].as_str().unwrap_or("").to_owned(),
                o["status"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    let pair = |a: &str, b: &str| (a.to_owned(), b.to_owned());
    assert_eq!(
        orders,
        [
            pair("GTD", "expired"),
            pair("GTC", "cancelled"),
            pair("GTC", "filled"),
            pair("FOK", "unfilled"),
        ],
        "{listed}"
    );
    // A filled order is not open any more; an order this agent does not have is not found.
    let (status, code, message) = refusal(
        &gw,
        &agent,
        "cancel-prediction-order",
        json!({"orderId": gtc}),
        "cancel-3",
    )
    .await;
    assert_eq!(
        (status, code.as_str()),
        (409, "ORDER_NOT_OPEN"),
        "{message}"
    );
    assert!(message.contains("filled"), "{message}");
    let (status, code, message) = refusal(
        &gw,
        &agent,
        "cancel-prediction-order",
        json!({"orderId": "0190f0a0-0000-7000-8000-000000000000"}),
        "cancel-4",
    )
    .await;
    assert_eq!((status, code.as_str()), (404, "NOT_FOUND"), "{message}");

    // A buy order for more than the wallet holds (500 USDC against 455) is refused before anything
    // is written: the venue is not ready, the balance named.
    let (status, body) = execute_stating(
        &gw,
        &agent,
        "place-prediction-order",
        order(0.5, "1000", "GTC"),
        "gtc-short",
        0.0,
    )
    .await;
    let reasons: Vec<Value> = body["detail"]["blockingReasons"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|r| r["code"].clone())
        .collect();
    assert_eq!(
        (status, body["code"].clone(), reasons),
        (422, json!("VENUE_NOT_READY"), vec![json!("BALANCE_SHORT")]),
        "{body}"
    );

    // The daily limit (100 USD) counts only the filled 45: the unfilled FOK (40), the cancelled GTC
    // (22) and the expired GTD (2) gave their shares back, so a 55 USD order fits exactly, and one
    // dollar more does not.
    let (status, body) = execute_stating(
        &gw,
        &agent,
        "place-prediction-order",
        order(0.05, "1100", "GTC"),
        "gtc-3",
        0.0,
    )
    .await;
    assert_eq!(
        (status, body["data"]["data"]["status"].clone()),
        (200, json!("open")),
        "{body}"
    );
    let (status, body) = execute_stating(
        &gw,
        &agent,
        "place-prediction-order",
        order(0.5, "2", "FOK"),
        "fok-2",
        0.0,
    )
    .await;
    assert_eq!(
        (status, body["code"].clone()),
        (403, json!("POLICY_DAILY_LIMIT")),
        "{body}"
    );
}

/// A held order fills once across a crash mid-fill and a second process (two gateways on one
/// PostgreSQL database): the first dies right after handing the fill to the node, the second takes
/// the order over when the lease runs out, finds the fill by its execution key, and sends nothing
/// again.
#[tokio::test]
async fn a_held_order_fills_once_across_a_crash_and_a_second_process() {
    let devnet = Devnet::start();
    let database_url = actiongate_testkit::fresh_postgres_url()
        .await
        .expect("fresh postgres url");
    let config = devnet.gateway_config("orders-crash", &database_url);
    let mut a = start_gateway(&config, true);
    let agent = onboard(
        &a,
        &database_url,
        "orders-crash@example.com",
        &["place-prediction-order"],
    )
    .await;
    devnet
        .fund(
            agent.address,
            U256::from(10u64).pow(U256::from(18u64)),
            usdc(500),
        )
        .await;
    let market: Address = devnet.spec["prediction"]["markets"][0]["marketId"]
        .as_str()
        .and_then(|a| a.parse().ok())
        .expect("a market");
    let (status, body) = execute_stating(
        &a,
        &agent,
        "place-prediction-order",
        json!({"marketId": market, "outcomeIndex": 0, "side": "buy", "price": 0.45, "size": "100"}),
        "gtc-crash",
        0.0,
    )
    .await;
    assert_eq!(
        (status, body["data"]["data"]["status"].clone()),
        (200, json!("open")),
        "{body}"
    );
    let id = body["data"]["data"]["orderId"]
        .as_str()
        .unwrap_or_else(|| panic!("{body}"))
        .to_owned();

    // The market moves through the price: the first process's watcher fills and dies at the send.
    buy_no(&devnet, market, 3_000).await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let exited = loop {
        if let Some(status) = a.process.0.try_wait().expect("wait") {
            break status;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the first gateway did not fill the order"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    assert!(
        !exited.success(),
        "the first gateway was to die at the send"
    );

    // The second process takes it over and ends it filled, with nothing sent twice.
    let b = start_gateway(&config, false);
    let ended = wait_intent(&b, &agent, &id, 40).await;
    assert_eq!(ended["status"], json!("completed"), "{ended}");
    tokio::time::sleep(std::time::Duration::from_millis(2500)).await;
    assert_eq!(buys_of(&devnet, market, agent.address).await, 1);
    assert_eq!(
        devnet.balance(devnet.usdc(), agent.address).await,
        usdc(455)
    );

    // FAK at 0.38 for 1,000 shares with YES near 0.374: the part that fills at 0.38 or better on
    // average is bought, the rest dropped; at 0.01 nothing fills.
    let (status, body) = execute_stating(
        &b,
        &agent,
        "place-prediction-order",
        json!({"marketId": market, "outcomeIndex": 0, "side": "buy", "price": 0.38, "size": "1000",
               "orderType": "FAK"}),
        "fak-1",
        0.0,
    )
    .await;
    assert_eq!(
        (
            status,
            body["data"]["status"].clone(),
            body["data"]["data"]["status"].clone()
        ),
        (200, json!("confirmed"), json!("filled")),
        "{body}"
    );
    let spent = usdc(455) - devnet.balance(devnet.usdc(), agent.address).await;
    let ct_at: Address = devnet.address(&["prediction", "conditionalTokens"]);
    let condition: B256 = devnet.spec["prediction"]["markets"][0]["conditionId"]
        .as_str()
        .and_then(|c| c.parse().ok())
        .expect("a condition");
    let ct = ICT::new(ct_at, &devnet.provider);
    let collection = ct
        .getCollectionId(B256::ZERO, condition, U256::from(1u64))
        .call()
        .await
        .expect("collection");
    let yes = ct
        .getPositionId(devnet.usdc(), collection)
        .call()
        .await
        .expect("position");
    let shares = ct
        .balanceOf(agent.address, yes)
        .call()
        .await
        .expect("balance");
    let first = body["data"]["data"]["fill"]["params"].clone();
    assert!(
        spent > U256::ZERO && spent < usdc(380),
        "a part of the 380 USDC: {spent} {body}"
    );
    // The part bought at 0.38 or better: its shares are worth at least what it cost at 0.38.
    let fak_shares = shares - first_fill_shares(&devnet, market, agent.address).await;
    assert!(
        fak_shares * U256::from(38u64) >= spent * U256::from(100u64),
        "{fak_shares} shares for {spent}: {first}"
    );
    let (status, body) = execute_stating(
        &b,
        &agent,
        "place-prediction-order",
        json!({"marketId": market, "outcomeIndex": 0, "side": "buy", "price": 0.01, "size": "1000",
               "orderType": "FAK"}),
        "fak-2",
        0.0,
    )
    .await;
    assert_eq!(
        (status, body["code"].clone()),
        (422, json!("ORDER_NOT_FILLED")),
        "{body}"
    );
    assert_eq!(buys_of(&devnet, market, agent.address).await, 2);
    drop(b);
}

/// The outcome tokens the first `FPMMBuy` of `buyer` on `market` bought.
async fn first_fill_shares(devnet: &Devnet, market: Address, buyer: Address) -> U256 {
    let filter = alloy::rpc::types::Filter::new()
        .address(market)
        .event_signature(<IFPMM::FPMMBuy as alloy::sol_types::SolEvent>::SIGNATURE_HASH)
        .topic1(buyer.into_word())
        .from_block(0);
    let logs = alloy::providers::Provider::get_logs(&devnet.provider, &filter)
        .await
        .expect("logs");
    let first = logs.first().expect("a first buy");
    <IFPMM::FPMMBuy as alloy::sol_types::SolEvent>::decode_log_data(first.data())
        .expect("an FPMMBuy")
        .outcomeTokensBought
}
