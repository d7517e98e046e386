//! Prediction markets on Gnosis Conditional Tokens with fixed-product market makers (the devnet
//! deploys them from the gnosis.pm packages' truffle builds), checked onchain: the markets listed
//! from the factory with the devnet's questions, a buy whose ERC-1155 balance equals the market
//! maker's quote and moves the prices, a sell back for collateral, the positions read, the oracle's
//! report, buys refused after it, and redemption paying the winning shares in USDC.
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
    }
}

fn decimal(v: &Value) -> f64 {
    v.as_str().and_then(|s| s.parse().ok()).unwrap_or(f64::NAN)
}

#[tokio::test]
async fn a_prediction_market_is_bought_sold_resolved_and_redeemed_onchain() {
    let devnet = Devnet::start();
    let db = devnet.dir.path().join("gw.db");
    let database_url = format!("sqlite://{}", db.display());
    let gw = start_gateway(&devnet.gateway_config("main", &database_url), false);
    let agent = onboard(
        &gw,
        &database_url,
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
    devnet
        .fund(
            agent.address,
            U256::from(10u64).pow(U256::from(18u64)),
            usdc(500),
        )
        .await;
    let spec = devnet.spec["prediction"].clone();
    let ct_at: Address = devnet.address(&["prediction", "conditionalTokens"]);
    let first = spec["markets"][0].clone();
    let market: Address = first["marketId"]
        .as_str()
        .and_then(|a| a.parse().ok())
        .expect("a market");
    let condition: B256 = first["conditionId"]
        .as_str()
        .and_then(|c| c.parse().ok())
        .expect("a condition");
    let question: B256 = first["questionId"]
        .as_str()
        .and_then(|c| c.parse().ok())
        .expect("a question");
    let ct = ICT::new(ct_at, &devnet.provider);
    let fpmm = IFPMM::new(market, &devnet.provider);
    let yes = {
        let collection = ct
            .getCollectionId(B256::ZERO, condition, U256::from(1u64))
            .call()
            .await
            .expect("collection");
        ct.getPositionId(devnet.usdc(), collection)
            .call()
            .await
            .expect("position")
    };

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
    let (status, refused) = execute_stating(
        &gw,
        &agent,
        "buy-prediction-outcome",
        json!({"marketId": market, "outcomeIndex": 1, "amount": "10"}),
        "buy-2",
        0.0,
    )
    .await;
    assert_eq!(
        (status, refused["code"].clone()),
        (422, json!("VENUE_NOT_READY")),
        "{refused}"
    );
    assert!(
        refused["message"]
            .as_str()
            .is_some_and(|m| m.contains("resolved")),
        "{refused}"
    );
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
