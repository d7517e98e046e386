//! Buying credits with x402 on the devnet (SPEC's four steps): the 402 challenge, a real stablecoin
//! transfer on anvil, the retry with the receipt; a payment not yet mined answers the same challenge
//! with Retry-After; every way a transaction can fail to pay has its own code and adds no credit; a
//! hash pays one invoice, once, also when 20 retries race.
#![allow(clippy::panic, clippy::expect_used)] // Tests fail by panicking, saying what failed.

mod common;

use std::time::Duration;

use alloy::primitives::{Address, B256, U256};
use serde_json::{Value, json};

use common::*;

/// The base units a challenge asks for: its `amount`, a decimal string with up to 6 decimals. It is
/// the package price plus a tag below 0.01, so that each open invoice's amount is its own.
fn challenge_units(challenge: &Value, price: u64) -> U256 {
    let text = challenge["amount"]
        .as_str()
        .unwrap_or_else(|| panic!("{challenge}"));
    let (whole, frac) = text.split_once('.').unwrap_or((text, ""));
    let units: u64 = format!("{whole}{frac:0<6}")
        .parse()
        .expect("a decimal amount");
    assert!(
        units > price && units < price + 10_000,
        "{text} is the price {price} plus a tag below 0.01"
    );
    U256::from(units)
}

struct Buyer<'a> {
    gw: &'a Gateway,
    agent: &'a Agent,
}

impl Buyer<'_> {
    /// A purchase request on the agent route (`None` receipt: the first call).
    async fn buy(
        &self,
        sku: &str,
        payer: Address,
        paid: Option<(&str, B256)>,
    ) -> (u16, Value, Option<String>) {
        let mut req = reqwest::Client::new()
            .post(format!(
                "{}/api/v1/agent/credits/buy-with-x402",
                self.gw.url
            ))
            .header("x-agent-api-key", &self.agent.key)
            .json(&json!({"sku": sku, "userAddress": payer}));
        if let Some((invoice, hash)) = paid {
            req = req
                .header("X-Invoice-Id", invoice)
                .header("X-Payment-Receipt", hash.to_string());
        }
        let resp = req.send().await.expect("send");
        let status = resp.status().as_u16();
        let retry = resp
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        (status, resp.json().await.unwrap_or(Value::Null), retry)
    }

    async fn challenge(&self, sku: &str, payer: Address) -> (String, Value) {
        let (status, body, _) = self.buy(sku, payer, None).await;
        assert_eq!(status, 402, "{body}");
        (
            body["x402Challenge"]["invoiceId"]
                .as_str()
                .unwrap_or_else(|| panic!("{body}"))
                .to_owned(),
            body["x402Challenge"].clone(),
        )
    }
}

#[tokio::test]
async fn credits_are_bought_with_a_real_stablecoin_transfer() {
    let devnet = Devnet::start();
    let database_url = format!("sqlite://{}", devnet.dir.path().join("gw.db").display());
    let config = devnet.gateway_config("x402", &database_url);
    // Short-lived invoices, so that expiry is tested without waiting long.
    let text = std::fs::read_to_string(&config)
        .unwrap_or_default()
        .replace("[x402]\n", "[x402]\ninvoice-ttl-seconds = 4\n");
    std::fs::write(&config, text).expect("write");
    let gw = start_gateway(&config, false);
    let usdc_addr = devnet.usdc();
    let recipient = devnet.address(&["x402", "recipient"]);

    // The metadata: SPEC's packages, the recipient, the stablecoin, the network.
    let meta: Value = reqwest::get(format!("{}/api/v1/credits/x402-metadata", gw.url))
        .await
        .expect("get")
        .json()
        .await
        .unwrap_or(Value::Null);
    let data = &meta["data"];
    let packages: Vec<(Value, Value, Value)> = data["packages"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|p| (p["sku"].clone(), p["credits"].clone(), p["price"].clone()))
        .collect();
    assert_eq!(
        packages,
        vec![
            (json!("credits_100"), json!(100), json!("2.00")),
            (json!("credits_1000"), json!(1000), json!("18.00")),
            (json!("credits_10000"), json!(10000), json!("160.00")),
        ]
    );
    assert_eq!(data["recipient"], json!(recipient.to_string()));
    assert_eq!(
        (
            data["currency"]["address"].clone(),
            data["currency"]["decimals"].clone(),
            data["chainId"].clone()
        ),
        (json!(usdc_addr.to_string()), json!(6), json!(84532))
    );

    // --- the open route: 402, a real transfer, the retry; the payer's wallet is not linked, so the
    // credits are held for it.
    let payer = devnet.account(7).0;
    let (status, challenge) = {
        let r = reqwest::Client::new()
            .post(format!("{}/api/v1/credits/buy-with-x402", gw.url))
            .json(&json!({"sku": "credits_100", "userAddress": payer}))
            .send()
            .await
            .expect("send");
        (
            r.status().as_u16(),
            r.json::<Value>().await.unwrap_or(Value::Null),
        )
    };
    assert_eq!(status, 402, "{challenge}");
    let c = &challenge["x402Challenge"];
    assert_eq!(
        (
            c["recipient"].clone(),
            c["currency"].clone(),
            c["network"].clone()
        ),
        (json!(recipient.to_string()), json!("USDC"), json!("devnet"))
    );
    let invoice = c["invoiceId"].as_str().unwrap_or_default().to_owned();
    let hash = devnet
        .transfer(7, usdc_addr, recipient, challenge_units(c, 2_000_000), None)
        .await;
    let r = reqwest::Client::new()
        .post(format!("{}/api/v1/credits/buy-with-x402", gw.url))
        .header("X-Payment-Receipt", hash.to_string())
        .header("X-Invoice-Id", &invoice)
        .json(&json!({"sku": "credits_100", "userAddress": payer}))
        .send()
        .await
        .expect("send");
    assert_eq!(r.status().as_u16(), 200);
    let done: Value = r.json().await.unwrap_or(Value::Null);
    assert_eq!(
        (
            done["success"].clone(),
            done["credits"].clone(),
            done["balance"].clone()
        ),
        (json!(true), json!(100), json!(100)),
        "{done}"
    );
    assert!(
        done["message"].as_str().is_some_and(|m| m.contains("held")),
        "{done}"
    );

    // --- the agent route: the credits go to the agent's account; any wallet may pay.
    let agent = onboard(&gw, &database_url, "buyer@example.com", &[]).await;
    let granted = credits(&gw, &agent).await;

    // --- linking the paying wallet (EIP-4361, signed by alloy's signer) moves what it holds.
    let link = |body: Value, path: &'static str| {
        let (url, session) = (gw.url.clone(), agent.session.clone());
        async move {
            let r = reqwest::Client::new()
                .post(format!("{url}{path}"))
                .bearer_auth(session)
                .json(&body)
                .send()
                .await
                .expect("send");
            (
                r.status().as_u16(),
                r.json::<Value>().await.unwrap_or(Value::Null),
            )
        }
    };
    let sign = |i: usize, message: String| {
        let key = devnet.account(i).1;
        async move {
            let signer: alloy::signers::local::PrivateKeySigner = key.parse().expect("parse");
            let sig = alloy::signers::Signer::sign_message(&signer, message.as_bytes())
                .await
                .expect("sign message");
            format!("0x{}", hex::encode(sig.as_bytes()))
        }
    };
    let (_, begun) = link(json!({"address": payer}), "/api/v1/wallets/link/begin").await;
    let message = begun["data"]["message"]
        .as_str()
        .unwrap_or_else(|| panic!("{begun}"))
        .to_owned();
    assert!(
        message.contains(&payer.to_string()) && message.contains("Nonce: "),
        "{message}"
    );
    let (status, refused) = link(
        json!({"message": message, "signature": sign(8, message.clone()).await}),
        "/api/v1/wallets/link",
    )
    .await;
    assert_eq!(
        (status, refused["code"].clone()),
        (400, json!("WALLET_SIGNATURE_INVALID")),
        "another wallet's signature: {refused}"
    );
    let (status, reused) = link(
        json!({"message": message, "signature": sign(7, message.clone()).await}),
        "/api/v1/wallets/link",
    )
    .await;
    assert_eq!(
        (status, reused["code"].clone()),
        (409, json!("WALLET_LINK_INVALID")),
        "a message is used once: {reused}"
    );
    let (_, begun) = link(json!({"address": payer}), "/api/v1/wallets/link/begin").await;
    let message = begun["data"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let (status, linked) = link(
        json!({"message": message, "signature": sign(7, message.clone()).await}),
        "/api/v1/wallets/link",
    )
    .await;
    assert_eq!(
        (status, linked["data"]["creditsMoved"].clone()),
        (200, json!(100)),
        "{linked}"
    );
    assert_eq!(
        credits(&gw, &agent).await,
        granted + 100,
        "the held credits joined the account"
    );
    let start = credits(&gw, &agent).await;
    let buyer = Buyer {
        gw: &gw,
        agent: &agent,
    };
    let (invoice, challenge) = buyer.challenge("credits_1000", payer).await;
    let amount = challenge_units(&challenge, 18_000_000);
    // Not mined yet: the same challenge again, with Retry-After; nothing lost.
    rpc(&devnet, "evm_setAutomine", json!([false])).await;
    let wallet = devnet.wallet(7);
    let pending = IERC20::new(usdc_addr, &wallet)
        .transfer(recipient, amount)
        .gas(100_000)
        .send()
        .await
        .expect("send");
    let hash = *pending.tx_hash();
    let (status, again, retry) = buyer
        .buy("credits_1000", payer, Some((&invoice, hash)))
        .await;
    assert_eq!(
        (
            status,
            again["x402Challenge"]["invoiceId"].clone(),
            retry.as_deref()
        ),
        (402, json!(invoice), Some("2")),
        "{again}"
    );
    rpc(&devnet, "evm_mine", json!([])).await;
    rpc(&devnet, "evm_setAutomine", json!([true])).await;
    // Mined: 20 racing retries credit once.
    let races: Vec<_> = (0..20)
        .map(|_| {
            let (url, key, invoice) = (gw.url.clone(), agent.key.clone(), invoice.clone());
            tokio::spawn(async move {
                let r = reqwest::Client::new()
                    .post(format!("{url}/api/v1/agent/credits/buy-with-x402"))
                    .header("x-agent-api-key", key)
                    .header("X-Invoice-Id", invoice)
                    .header("X-Payment-Receipt", hash.to_string())
                    .json(&json!({"sku": "credits_1000", "userAddress": payer}))
                    .send()
                    .await
                    .expect("send");
                (
                    r.status().as_u16(),
                    r.json::<Value>().await.unwrap_or(Value::Null),
                )
            })
        })
        .collect();
    for race in races {
        let (status, body) = race.await.expect("a task panicked");
        assert_eq!(
            (status, body["credits"].clone(), body["balance"].clone()),
            (200, json!(1000), json!(start + 1000)),
            "{body}"
        );
    }
    assert_eq!(credits(&gw, &agent).await, start + 1000, "credited once");
    // The same hash cannot pay another invoice: another invoice asks another amount (and, were the
    // amount the same, the hash is recorded as used: the store's contract tests PAYMENT_ALREADY_USED).
    let (other, _) = buyer.challenge("credits_1000", payer).await;
    let (status, body, _) = buyer.buy("credits_1000", payer, Some((&other, hash))).await;
    assert_eq!(
        (status, body["code"].clone()),
        (422, json!("PAYMENT_AMOUNT_MISMATCH")),
        "{body}"
    );

    // --- every refusal has its own code and adds nothing.
    let balance = credits(&gw, &agent).await;
    let refused = |(status, body, _): (u16, Value, Option<String>), code: &str| {
        assert_eq!(
            (status, body["code"].as_str().unwrap_or_default()),
            (
                if code == "INVOICE_NOT_FOUND" {
                    404
                } else {
                    422
                },
                code
            ),
            "{body}"
        );
    };
    let someone = devnet.account(8).0;
    let weth = devnet.weth();
    IWETH::new(weth, &devnet.wallet(7))
        .deposit()
        .value(U256::from(10u64).pow(U256::from(18u64)))
        .send()
        .await
        .expect("send")
        .get_receipt()
        .await
        .expect("get receipt");
    let cases: Vec<(&str, B256)> = vec![
        (
            "PAYMENT_WRONG_TOKEN",
            devnet
                .transfer(7, weth, recipient, U256::from(2_000_000u64), None)
                .await,
        ),
        (
            "PAYMENT_WRONG_RECIPIENT",
            devnet
                .transfer(7, usdc_addr, someone, U256::from(2_000_000u64), None)
                .await,
        ),
        (
            "PAYMENT_AMOUNT_MISMATCH",
            devnet
                .transfer(7, usdc_addr, recipient, U256::from(1_999_999u64), None)
                .await,
        ),
        // More than any tagged amount of the package: a payment equals its invoice exactly.
        (
            "PAYMENT_AMOUNT_MISMATCH",
            devnet
                .transfer(7, usdc_addr, recipient, U256::from(2_010_000u64), None)
                .await,
        ),
        (
            "PAYMENT_WRONG_PAYER",
            devnet
                .transfer(8, usdc_addr, recipient, U256::from(2_000_000u64), None)
                .await,
        ),
        (
            "PAYMENT_REVERTED",
            devnet
                .transfer(
                    7,
                    usdc_addr,
                    recipient,
                    U256::from(10u64).pow(U256::from(30u64)),
                    Some(100_000),
                )
                .await,
        ),
    ];
    for (code, hash) in cases {
        let (invoice, _) = buyer.challenge("credits_100", payer).await;
        refused(
            buyer
                .buy("credits_100", payer, Some((&invoice, hash)))
                .await,
            code,
        );
    }
    let fresh = devnet
        .transfer(7, usdc_addr, recipient, U256::from(2_000_000u64), None)
        .await;
    refused(
        buyer
            .buy("credits_100", payer, Some(("inv_unknown", fresh)))
            .await,
        "INVOICE_NOT_FOUND",
    );
    let (invoice, _) = buyer.challenge("credits_100", payer).await;
    let (status, body, _) = buyer
        .buy("credits_1000", payer, Some((&invoice, fresh)))
        .await;
    assert_eq!(
        (status, body["code"].clone()),
        (422, json!("INVOICE_MISMATCH")),
        "{body}"
    );
    // An invoice that expired before it was paid (its 4 s TTL by the block's timestamp, which may
    // lag the gateway's clock by up to 2 s: anvil's start-up, in whole seconds).
    let (stale, stale_challenge) = buyer.challenge("credits_100", payer).await;
    tokio::time::sleep(Duration::from_secs(7)).await;
    let late = devnet
        .transfer(
            7,
            usdc_addr,
            recipient,
            challenge_units(&stale_challenge, 2_000_000),
            None,
        )
        .await;
    refused(
        buyer.buy("credits_100", payer, Some((&stale, late))).await,
        "INVOICE_EXPIRED",
    );
    assert_eq!(
        credits(&gw, &agent).await,
        balance,
        "no refusal added a credit"
    );
    // A payment made for one invoice never pays another: the amounts differ.
    let (first, first_challenge) = buyer.challenge("credits_100", payer).await;
    let for_first = devnet
        .transfer(
            7,
            usdc_addr,
            recipient,
            challenge_units(&first_challenge, 2_000_000),
            None,
        )
        .await;
    let (invoice, challenge) = buyer.challenge("credits_100", payer).await;
    assert_ne!(challenge["amount"], first_challenge["amount"]);
    let (status, body, _) = buyer
        .buy("credits_100", payer, Some((&invoice, for_first)))
        .await;
    assert_eq!(
        (status, body["code"].clone()),
        (422, json!("PAYMENT_AMOUNT_MISMATCH")),
        "{body}"
    );
    let (status, body, _) = buyer
        .buy("credits_100", payer, Some((&first, for_first)))
        .await;
    assert_eq!(status, 200, "{body}");
    let balance = balance + 100;
    // The agent route takes only the agent's own or linked wallets as payers.
    let stranger = devnet.account(9).0;
    let (status, body, _) = buyer.buy("credits_100", stranger, None).await;
    assert_eq!(
        (status, body["code"].clone()),
        (422, json!("PAYMENT_WRONG_PAYER")),
        "{body}"
    );
    assert_eq!(
        credits(&gw, &agent).await,
        balance,
        "no refusal added a credit"
    );
    // A payment made after its challenge pays it.
    let now_paid = devnet
        .transfer(
            7,
            usdc_addr,
            recipient,
            challenge_units(&challenge, 2_000_000),
            None,
        )
        .await;
    let (status, body, _) = buyer
        .buy("credits_100", payer, Some((&invoice, now_paid)))
        .await;
    assert_eq!(
        (status, body["balance"].clone()),
        (200, json!(balance + 100)),
        "{body}"
    );
}

/// The hijack of issue 21 played on the devnet (CONTRACT "Rate limits and abuse"): an attacker opens
/// invoices for a payer they watch, the victim pays its own invoice, the attacker races to redeem the
/// victim's transfer with theirs and is refused; the victim's retry gets exactly what it paid for.
/// And credits bought on the open route for an agent's execution wallet go to the agent's account.
#[tokio::test]
async fn a_payment_redeems_only_its_own_invoice() {
    let devnet = Devnet::start();
    let database_url = format!("sqlite://{}", devnet.dir.path().join("hijack.db").display());
    let gw = start_gateway(&devnet.gateway_config("hijack", &database_url), false);
    let (usdc_addr, recipient) = (devnet.usdc(), devnet.address(&["x402", "recipient"]));
    let open = |sku: &str, payer: Address, paid: Option<(&str, B256)>| {
        let mut req = reqwest::Client::new()
            .post(format!("{}/api/v1/credits/buy-with-x402", gw.url))
            .json(&json!({"sku": sku, "userAddress": payer}));
        if let Some((invoice, hash)) = paid {
            req = req
                .header("X-Invoice-Id", invoice)
                .header("X-Payment-Receipt", hash.to_string());
        }
        async move {
            let r = req.send().await.expect("send");
            (
                r.status().as_u16(),
                r.json::<Value>().await.unwrap_or(Value::Null),
            )
        }
    };
    let victim = devnet.account(6).0;
    // A transfer in a block the chain had already reached when its invoice was issued (here the chain
    // reorganised below it) was not sent for it: refused, though it was mined after the invoice.
    let fork = rpc(&devnet, "evm_snapshot", json!([])).await;
    rpc(&devnet, "anvil_mine", json!(["0x3"])).await;
    let (_, early) = open("credits_100", victim, None).await;
    rpc(&devnet, "evm_revert", json!([fork])).await;
    let reorged = devnet
        .transfer(
            6,
            usdc_addr,
            recipient,
            challenge_units(&early["x402Challenge"], 2_000_000),
            None,
        )
        .await;
    let early_id = early["x402Challenge"]["invoiceId"]
        .as_str()
        .unwrap_or_default();
    let (status, body) = open("credits_100", victim, Some((early_id, reorged))).await;
    assert_eq!(
        (status, body["code"].clone()),
        (422, json!("INVOICE_MISMATCH")),
        "{body}"
    );
    // The chain's clock 30 s behind the gateway's (a node's timestamps may lag it; anvil's lag by
    // its start-up): the chain orders a payment after its invoice, whatever the two clocks say.
    let wall = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("the clock is after 1970")
        .as_secs();
    rpc(&devnet, "evm_setTime", json!([format!("{:#x}", wall - 30)])).await;
    // The attacker opens a cheap and a same-price invoice for the victim's wallet.
    let (_, cheap) = open("credits_100", victim, None).await;
    let (_, same) = open("credits_1000", victim, None).await;
    // The victim opens its own and pays it.
    let (status, own) = open("credits_1000", victim, None).await;
    assert_eq!(status, 402, "{own}");
    let amounts: Vec<&Value> = [&cheap, &same, &own]
        .iter()
        .map(|c| &c["x402Challenge"]["amount"])
        .collect();
    assert!(
        amounts[0] != amounts[1] && amounts[1] != amounts[2] && amounts[0] != amounts[2],
        "every open invoice asks its own amount: {amounts:?}"
    );
    let paid = devnet
        .transfer(
            6,
            usdc_addr,
            recipient,
            challenge_units(&own["x402Challenge"], 18_000_000),
            None,
        )
        .await;
    let id = |c: &Value| {
        c["x402Challenge"]["invoiceId"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    // The attacker redeems the victim's transfer first, with each of their invoices: refused.
    for (sku, invoice) in [("credits_100", id(&cheap)), ("credits_1000", id(&same))] {
        let (status, body) = open(sku, victim, Some((&invoice, paid))).await;
        assert_eq!(
            (status, body["code"].clone()),
            (422, json!("PAYMENT_AMOUNT_MISMATCH")),
            "{body}"
        );
    }
    // The victim's own retry gets the 1,000 credits it paid for (held for its unlinked wallet).
    let (status, body) = open("credits_1000", victim, Some((&id(&own), paid))).await;
    assert_eq!(
        (status, body["credits"].clone(), body["balance"].clone()),
        (200, json!(1000), json!(1000)),
        "{body}"
    );

    // An agent's execution wallet pays an open invoice (by a direct transfer the agent makes): the
    // credits go to the agent's account, not held for a wallet nobody could link.
    let agent = onboard(
        &gw,
        &database_url,
        "wallet-buyer@example.com",
        &["transfer"],
    )
    .await;
    devnet
        .fund(
            agent.address,
            U256::from(10u64).pow(U256::from(17u64)),
            U256::from(10_000_000u64),
        )
        .await;
    let before = credits(&gw, &agent).await;
    let (status, challenge) = open("credits_100", agent.address, None).await;
    assert_eq!(status, 402, "{challenge}");
    let (status, sent) = execute_stating(
        &gw,
        &agent,
        "transfer",
        json!({"token": "USDC", "to": recipient, "amount": challenge["x402Challenge"]["amount"]}),
        "pay-invoice",
        2.0,
    )
    .await;
    assert_eq!(status, 200, "{sent}");
    let hash: B256 = sent["data"]["txHash"]
        .as_str()
        .and_then(|h| h.parse().ok())
        .unwrap_or_else(|| panic!("{sent}"));
    let (status, body) = open("credits_100", agent.address, Some((&id(&challenge), hash))).await;
    assert_eq!(status, 200, "{body}");
    assert!(
        body["message"]
            .as_str()
            .is_some_and(|m| !m.contains("held")),
        "{body}"
    );
    // The transfer's own charge is taken from the account too; the purchase adds 100.
    let after = credits(&gw, &agent).await;
    assert!(
        after > before && after - before <= 100,
        "{before} -> {after}"
    );
    assert_eq!(body["balance"], json!(after), "{body}");
}

/// The official x402 v2 client (`@x402/fetch` with `@x402/evm`'s exact EVM scheme) pays the gateway
/// with no custom code: an EIP-3009 authorization verified and settled by the gateway's settlement
/// wallet; a replayed authorization and one for another amount are refused.
#[tokio::test]
async fn the_official_x402_client_pays() {
    let devnet = Devnet::start();
    let database_url = format!("sqlite://{}", devnet.dir.path().join("std.db").display());
    let gw = start_gateway(&devnet.gateway_config("x402-std", &database_url), false);
    funded_settlement_wallet(&devnet, &gw).await;
    let recipient = devnet.address(&["x402", "recipient"]);
    let usdc_addr = devnet.usdc();
    let before = devnet.balance(usdc_addr, recipient).await;
    let (payer, key) = devnet.account(5);

    let out = std::process::Command::new("node")
        .arg(actiongate_testkit::repo_root().join("tests/e2e/x402_client.mjs"))
        .args([
            gw.url.as_str(),
            devnet.url.as_str(),
            "84532",
            key.as_str(),
            usdc_addr.to_string().as_str(),
        ])
        .output()
        .expect("output");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let result: Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("{e}: {stdout} / {}", String::from_utf8_lossy(&out.stderr)));

    let paid = &result["paid"];
    assert_eq!(
        (
            paid["status"].clone(),
            paid["body"]["credits"].clone(),
            paid["body"]["balance"].clone()
        ),
        (json!(200), json!(100), json!(100)),
        "{result}"
    );
    let response = &paid["response"];
    assert_eq!(
        (
            response["success"].clone(),
            response["network"].clone(),
            response["payer"].clone()
        ),
        (json!(true), json!("eip155:84532"), json!(payer.to_string())),
        "{result}"
    );
    let tx: B256 = response["transaction"]
        .as_str()
        .and_then(|h| h.parse().ok())
        .unwrap_or_else(|| panic!("{result}"));
    let receipt = alloy::providers::Provider::get_transaction_receipt(&devnet.provider, tx)
        .await
        .expect("get transaction receipt");
    assert!(
        receipt.is_some_and(|r| r.status()),
        "the settlement is mined"
    );
    assert_eq!(
        devnet.balance(usdc_addr, recipient).await - before,
        U256::from(2_000_000u64),
        "paid exactly once"
    );
    assert_eq!(
        (
            result["replay"]["status"].clone(),
            result["replay"]["body"]["code"].clone()
        ),
        (json!(409), json!("PAYMENT_ALREADY_USED")),
        "{result}"
    );
    assert_eq!(
        (
            result["otherAmount"]["status"].clone(),
            result["otherAmount"]["body"]["code"].clone()
        ),
        (json!(422), json!("PAYMENT_AUTHORIZATION_INVALID")),
        "{result}"
    );
}
