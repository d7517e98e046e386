//! Intents: the policy checks in order, the credit ledger, idempotency, concurrency, the runner.

use std::sync::Arc;
use std::time::{Duration, Instant};

use actiongate_core::store::DelegationRecord;
use serde_json::{Value, json};

use crate::helpers::{Backend, Options, Owner, Reply, START, TestApp, spawn_app, spawn_app_with};
use crate::on_both_backends;
use actiongate_testkit::standin::StandInVenue;

const SUBMIT: &str = "/api/v1/agent/execute-intent";
const DIRECT: &str = "/api/v1/agent/execute";

/// Chain 8453 with an RPC URL (the stand-in venue never calls it) and a USDC price.
pub(crate) fn chain_config(extra: &str) -> String {
    format!(
        r#"
        [chains.8453]
        name = "base"
        rpc-url = "http://127.0.0.1:9/never-called-by-the-stand-in"
        [chains.8453.tokens.USDC]
        address = "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913"
        decimals = 6
        [prices]
        USDC = 1.0
        {extra}
        "#
    )
}

async fn venue_app(backend: Backend, extra: &str) -> (TestApp, Arc<StandInVenue>) {
    let venue = StandInVenue::new();
    let app = spawn_app_with(
        backend,
        Options {
            providers: vec![venue.clone()],
            config_toml: chain_config(extra),
            ..Options::default()
        },
    )
    .await;
    (app, venue)
}

async fn allow(app: &TestApp, owner: &Owner, actions: &[&str], daily: f64) {
    app.put_as(
        &format!("/api/v1/agents/{}/policy", owner.agent_id),
        &owner.session,
        json!({ "allowedActions": actions, "dailyLimitUsd": daily }),
    )
    .await
    .assert_ok();
}

/// An owner ready to fan out a swap: `policy` set, 100 credits granted, one delegation.
pub(crate) async fn ready_to_fan_out(app: &TestApp, owner: &Owner, policy: Value) {
    app.put_as(
        &format!("/api/v1/agents/{}/policy", owner.agent_id),
        &owner.session,
        policy,
    )
    .await
    .assert_ok();
    app.grant(owner, 100).await;
    delegate(app, owner, 1).await;
}

pub(crate) async fn delegate(app: &TestApp, owner: &Owner, n: usize) -> Vec<String> {
    let mut users = Vec::new();
    for i in 0..n {
        let delegator = format!("0x{:040x}", 0xabc000 + i);
        let hash = format!("0x{:064x}", i + 1);
        let event = actiongate_core::audit::delegation_event(
            &owner.agent_id,
            &hash,
            actiongate_core::states::DelegationStatus::Active,
            "owner",
            0,
            json!({}),
        );
        app.store()
            .put_delegation(
                &DelegationRecord {
                    hash,
                    agent_id: owner.agent_id.clone(),
                    delegator: delegator.clone(),
                    chain_id: 8453,
                    status: actiongate_core::states::DelegationStatus::Active,
                    created_at: i64::try_from(i).unwrap_or(0),
                    expires_at: None,
                    body: None,
                },
                &event,
            )
            .await
            .expect("put delegation");
        users.push(delegator);
    }
    users
}

fn transfer(key: &str, amount: &str, idem: Option<&str>) -> Value {
    let mut body = json!({
        "agentApiKey": key,
        "action": "transfer",
        "params": {"token": "USDC", "to": "0x000000000000000000000000000000000000dEaD", "amount": amount},
    });
    if let Some(k) = idem {
        body["idempotencyKey"] = json!(k);
    }
    body
}

/// A fan-out write whose output stays with each delegator (no recipient param).
pub(crate) fn swap(key: &str, amount: &str, idem: Option<&str>) -> Value {
    let mut body = json!({
        "agentApiKey": key,
        "action": "swap",
        "params": {"tokenIn": "USDC", "tokenOut": "WETH", "amountIn": amount},
    });
    if let Some(k) = idem {
        body["idempotencyKey"] = json!(k);
    }
    body
}

fn read(key: &str, idem: Option<&str>) -> Value {
    let mut body = json!({"agentApiKey": key, "action": "get_fx_supported_assets", "params": {}});
    if let Some(k) = idem {
        body["idempotencyKey"] = json!(k);
    }
    body
}

pub(crate) async fn wait_terminal(app: &TestApp, key: &str, id: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let r = app
            .send(
                app.client
                    .get(app.url(&format!(
                        "/api/v1/agent/execute-intent/status?intentId={id}"
                    )))
                    .header("x-agent-api-key", key),
            )
            .await;
        assert_eq!(r.status, 200, "{}", r.text);
        let status = r.body["status"].as_str().unwrap_or("");
        if status == "completed" || status == "failed" {
            return r.body;
        }
        assert!(
            Instant::now() < deadline,
            "intent {id} did not end: {}",
            r.text
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// Everything a submission could have created or charged.
#[derive(Debug, PartialEq)]
struct Footprint {
    intents: u64,
    ledger: usize,
    credits: Option<(i64, i64, u32)>,
    usage: i64,
}

async fn footprint(app: &TestApp, owner: &Owner) -> Footprint {
    let s = app.store();
    let day = START.unix_timestamp().div_euclid(86_400);
    Footprint {
        intents: s.count_intents(&owner.agent_id).await.unwrap_or(u64::MAX),
        ledger: s
            .ledger(&owner.account_id)
            .await
            .map(|l| l.len())
            .unwrap_or(usize::MAX),
        credits: s
            .credit_account(&owner.account_id)
            .await
            .ok()
            .flatten()
            .map(|c| (c.balance, c.reserved, c.free_used)),
        usage: s.daily_usage(&owner.agent_id, day).await.unwrap_or(-1),
    }
}

#[track_caller]
fn assert_refused(r: &Reply, status: u16, code: &str) {
    r.assert_error(status, code);
    assert_eq!(r.body["error"], "INTENT_REJECTED", "{}", r.text);
}

async fn a_read_runs_end_to_end(backend: Backend) {
    let app = spawn_app(backend).await;
    let owner = app.onboard("reader@example.com").await;
    let r = app.post(SUBMIT, read(&owner.agent_key, None)).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let id = r.body["intentId"].as_str().unwrap_or("").to_owned();
    assert_eq!(
        r.body,
        json!({"success": true, "intentId": id, "status": "queued", "total": 0, "executed": 0, "results": []})
    );
    assert_eq!(id.len(), 36, "a UUID");

    let done = wait_terminal(&app, &owner.agent_key, &id).await;
    assert_eq!(done["status"], "completed");
    assert_eq!(
        (done["total"].clone(), done["executed"].clone()),
        (json!(1), json!(1))
    );
    let result = &done["results"][0];
    assert_eq!(result["success"], json!(true));
    assert_eq!(
        result["userDid"],
        json!(format!("did:pkh:eip155:8453:{}", owner.agent_address))
    );
    assert_eq!(result["walletAddress"], json!(owner.agent_address));
    assert_eq!(result["chainId"], json!(8453));
    // What the read answers: the chain's FX pairs, none configured on chain 8453 here (the devnet
    // suite reads configured ones).
    assert_eq!(
        result["data"],
        json!({"chainId": 8453, "assets": [], "pairs": []}),
        "{done}"
    );

    // A read's price is 1 credit; with an empty balance a free request covers it.
    let balance = app
        .send(
            app.client
                .get(app.url("/api/v1/agent/credits/balance"))
                .header("x-agent-api-key", &owner.agent_key),
        )
        .await;
    assert_eq!(
        balance.assert_ok(),
        &json!({"balance": 0, "reserved": 0, "freeRequestsUsedToday": 1, "freeRequestsPerDay": 20, "freeResetsAt": "2026-11-23T00:00:00.000Z"})
    );

    // A read that fails at the provider ends failed, and gives its free request back.
    let r = app.post(SUBMIT, json!({"agentApiKey": owner.agent_key, "action": "get-earn-provider", "params": {"providerId": "nope"}})).await;
    let failed = wait_terminal(
        &app,
        &owner.agent_key,
        r.body["intentId"].as_str().unwrap_or(""),
    )
    .await;
    assert_eq!(failed["status"], "failed");
    assert_eq!(failed["success"], json!(false));
    assert_eq!(failed["results"][0]["code"], "NOT_FOUND");
    assert_eq!(failed["results"][0]["error"], "NOT_FOUND");
    let balance = app
        .send(
            app.client
                .get(app.url("/api/v1/agent/credits/balance"))
                .header("x-agent-api-key", &owner.agent_key),
        )
        .await;
    assert_eq!(balance.body["data"]["freeRequestsUsedToday"], json!(1));

    // Only the submitting agent sees the intent.
    let other = app.onboard("other@example.com").await;
    let url = app.url(&format!(
        "/api/v1/agent/execute-intent/status?intentId={id}"
    ));
    app.send(
        app.client
            .get(&url)
            .header("x-agent-api-key", &other.agent_key),
    )
    .await
    .assert_error(404, "NOT_FOUND");
    app.send(app.client.get(&url))
        .await
        .assert_error(401, "UNAUTHORIZED");
    let by_query = app
        .get(&format!(
            "/api/v1/agent/execute-intent/status?intentId={id}&agentApiKey={}",
            owner.agent_key
        ))
        .await;
    assert_eq!(by_query.body["status"], "completed");
    app.send(app.client.get(app.url("/api/v1/agent/credits/balance")))
        .await
        .assert_error(401, "UNAUTHORIZED");
}

async fn every_refusal_has_its_code_and_creates_nothing(backend: Backend) {
    let (app, venue) = venue_app(backend, "[chains.84532]\nname = \"base-sepolia\"\n").await;
    let owner = app.onboard("refused@example.com").await;
    let key = owner.agent_key.clone();
    allow(
        &app,
        &owner,
        &[
            "transfer",
            "get-fx-supported-assets",
            "get-earn-provider",
            "get-governance-v2-overview",
        ],
        100.0,
    )
    .await;
    let before = footprint(&app, &owner).await;

    let mut far = transfer(&key, "20", Some("k1"));
    far["chainId"] = json!(84532);
    let mut unknown_chain = read(&key, Some("k1"));
    unknown_chain["chainId"] = json!(999);
    let mut stated_high = transfer(&key, "1", Some("k1"));
    stated_high["estimatedAmountUsd"] = json!(150);
    let cases: Vec<(Value, u16, &str)> = vec![
        (transfer("agent-nope", "1", Some("k1")), 401, "UNAUTHORIZED"),
        (
            json!({"agentApiKey": key, "action": "launch-rocket", "params": {}, "idempotencyKey": "k1"}),
            404,
            "UNKNOWN_ACTION",
        ),
        (
            json!({"agentApiKey": key, "action": "swap", "params": {}, "idempotencyKey": "k1"}),
            403,
            "ACTION_NOT_ALLOWED",
        ),
        (
            json!({"agentApiKey": key, "action": "get-governance-v2-overview", "params": {}, "idempotencyKey": "k1"}),
            422,
            "ACTION_DISABLED",
        ),
        (
            json!({"agentApiKey": key, "action": "get-earn-provider", "params": {}, "idempotencyKey": "k1"}),
            400,
            "INVALID_PARAMS",
        ),
        (
            json!({"agentApiKey": key, "action": "transfer", "params": {"token": "USDC", "to": "0x1", "amount": "1"}, "idempotencyKey": "k1"}),
            400,
            "INVALID_PARAMS",
        ),
        (
            json!({"agentApiKey": key, "action": "transfer", "params": [], "idempotencyKey": "k1"}),
            400,
            "INVALID_PARAMS",
        ),
        (unknown_chain, 400, "UNKNOWN_CHAIN"),
        (far, 422, "CHAIN_NOT_CONFIGURED"),
        (
            transfer(&key, "60000", Some("k1")),
            403,
            "POLICY_AMOUNT_LIMIT",
        ),
        (stated_high, 403, "POLICY_DAILY_LIMIT"),
        (transfer(&key, "20", Some("k1")), 403, "DELEGATION_REQUIRED"),
        (
            json!({"agentApiKey": key, "action": "transfer"}),
            400,
            "INVALID_REQUEST",
        ),
    ];
    // Idempotency keys are 1 to 255 printable ASCII characters: a NUL byte never reaches a database.
    let mut cases = cases;
    for bad in [
        "",
        "nul\u{0}byte",
        "caf\u{e9}",
        "tab\tkey",
        "k".repeat(256).as_str(),
    ] {
        cases.push((transfer(&key, "1", Some(bad)), 400, "INVALID_REQUEST"));
    }
    // The gateway prices the token by symbol or address, in any case, whatever is stated; what it
    // cannot price is refused.
    const USDC: &str = "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913";
    for token in [USDC.to_owned(), USDC.to_lowercase(), "usdc".to_owned()] {
        let mut body = transfer(&key, "60000", Some("k1"));
        body["params"]["token"] = json!(token);
        body["estimatedAmountUsd"] = json!(0);
        cases.push((body, 403, "POLICY_AMOUNT_LIMIT"));
    }
    for (token, amount) in [
        ("DOGE", "1"),
        ("USDC", "1000000000000000000000000000000000000000"),
    ] {
        let mut body = transfer(&key, amount, Some("k1"));
        body["params"]["token"] = json!(token);
        body["estimatedAmountUsd"] = json!(5);
        cases.push((body, 422, "PRICE_UNAVAILABLE"));
    }
    let mut nan = transfer(&key, "1", Some("k1"));
    nan["estimatedAmountUsd"] = json!(1e13);
    cases.push((nan, 400, "INVALID_REQUEST"));
    for (body, status, code) in cases {
        let r = app.post(SUBMIT, body.clone()).await;
        assert_refused(&r, status, code);
        assert_eq!(footprint(&app, &owner).await, before, "{code} left a trace");
    }
    // The message names the offending field.
    let r = app
        .post(
            SUBMIT,
            json!({"agentApiKey": key, "action": "get-earn-provider", "params": {}}),
        )
        .await;
    assert!(
        r.body["message"]
            .as_str()
            .unwrap_or("")
            .contains("providerId"),
        "{}",
        r.text
    );
    let r = app.post(SUBMIT, json!({"agentApiKey": key, "action": "transfer", "params": {"token": "USDC", "to": "0x1", "amount": "1"}})).await;
    assert!(
        r.body["message"]
            .as_str()
            .unwrap_or("")
            .contains("params.to"),
        "{}",
        r.text
    );
    // Malformed JSON is refused in the envelope too.
    let r = app
        .send(
            app.client
                .post(app.url(SUBMIT))
                .header("content-type", "application/json")
                .body("{"),
        )
        .await;
    assert_refused(&r, 400, "INVALID_REQUEST");

    // Under-stating does not pass a limit: the gateway's price decides.
    let mut cheap = transfer(&key, "500", Some("k1"));
    cheap["estimatedAmountUsd"] = json!(1);
    assert_refused(&app.post(SUBMIT, cheap).await, 403, "POLICY_DAILY_LIMIT");

    // The per-action cap of the policy.
    app.put_as(
        &format!("/api/v1/agents/{}/policy", owner.agent_id),
        &owner.session,
        json!({"allowedActions": ["transfer", "get-fx-supported-assets"], "dailyLimitUsd": 100, "maxAmountUsdPerAction": 5}),
    )
    .await
    .assert_ok();
    assert_refused(
        &app.post(SUBMIT, transfer(&key, "6", Some("k1"))).await,
        403,
        "POLICY_AMOUNT_LIMIT",
    );

    // Credits: a write costs 10. Free requests cover it while they last (with an empty balance)...
    let users = delegate(&app, &owner, 1).await;
    assert_eq!(footprint(&app, &owner).await, before);
    app.put_as(
        &format!("/api/v1/agents/{}/policy", owner.agent_id),
        &owner.session,
        json!({"allowedActions": ["transfer", "swap", "get-fx-supported-assets"], "dailyLimitUsd": 1000}),
    )
    .await
    .assert_ok();
    // A fan-out runs under each delegator's delegation: a `to` naming anyone else is refused
    // before anything is written (the delegator itself, in any case, is accepted below).
    let r = app.post(SUBMIT, transfer(&key, "1", Some("k1"))).await;
    assert_refused(&r, 400, "INVALID_PARAMS");
    assert!(
        r.body["message"]
            .as_str()
            .is_some_and(|m| m.contains("params.to") && m.contains(&users[0])),
        "{}",
        r.text
    );
    assert_eq!(footprint(&app, &owner).await, before);
    // No idempotency record was written by any refusal: k1 is still free to use.
    let ok = app.post(SUBMIT, swap(&key, "1", Some("k1"))).await;
    assert_eq!(ok.status, 200, "{}", ok.text);
    wait_terminal(&app, &key, ok.body["intentId"].as_str().unwrap_or("")).await;
    assert_eq!(venue.effects().len(), 1);
    let mut to_self = transfer(&key, "1", Some("k2"));
    to_self["params"]["to"] = json!(format!("0x{}", users[0][2..].to_uppercase()));
    let ok = app.post(SUBMIT, to_self).await;
    assert_eq!(ok.status, 200, "{}", ok.text);
    wait_terminal(&app, &key, ok.body["intentId"].as_str().unwrap_or("")).await;
    assert_eq!(venue.effects().len(), 2);

    // ...and a reused key with another request is a conflict that creates nothing.
    let before = footprint(&app, &owner).await;
    assert_refused(
        &app.post(SUBMIT, swap(&key, "2", Some("k1"))).await,
        409,
        "IDEMPOTENCY_KEY_REUSED",
    );
    assert_eq!(footprint(&app, &owner).await, before);
}

async fn free_allowance_resets_at_utc_midnight(backend: Backend) {
    let (app, _venue) = venue_app(backend, "").await;
    let owner = app.onboard("free@example.com").await;
    for i in 0..20 {
        let r = app
            .post(SUBMIT, read(&owner.agent_key, Some(&format!("free-{i}"))))
            .await;
        assert_eq!(r.status, 200, "read {i}: {}", r.text);
    }
    let before = footprint(&app, &owner).await;
    assert_eq!(before.credits, Some((0, 0, 20)));
    assert_refused(
        &app.post(SUBMIT, read(&owner.agent_key, Some("free-20")))
            .await,
        402,
        "DAILY_FREE_LIMIT_EXCEEDED",
    );
    assert_eq!(footprint(&app, &owner).await, before);

    // A paid balance above zero but short of the price: INSUFFICIENT_CREDITS.
    allow(&app, &owner, &["swap", "get-fx-supported-assets"], 1000.0).await;
    delegate(&app, &owner, 1).await;
    app.grant(&owner, 5).await;
    let r = app
        .post(SUBMIT, swap(&owner.agent_key, "1", Some("t1")))
        .await;
    assert_refused(&r, 402, "INSUFFICIENT_CREDITS");
    // A read (1 credit) is paid from the balance, without a free request.
    let r = app.post(SUBMIT, read(&owner.agent_key, Some("paid"))).await;
    assert_eq!(r.status, 200, "{}", r.text);

    // The allowance comes back at 00:00 UTC, not before.
    app.clock
        .set(time::macros::datetime!(2026-11-22 23:59:59 UTC));
    let r = app
        .post(SUBMIT, swap(&owner.agent_key, "1", Some("t2")))
        .await;
    assert_refused(&r, 402, "INSUFFICIENT_CREDITS");
    app.clock
        .set(time::macros::datetime!(2026-11-23 00:00:00 UTC));
    let r = app
        .post(SUBMIT, swap(&owner.agent_key, "1", Some("t3")))
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let balance = app
        .send(
            app.client
                .get(app.url("/api/v1/agent/credits/balance"))
                .header("x-agent-api-key", &owner.agent_key),
        )
        .await;
    assert_eq!(
        balance.body["data"]["freeRequestsUsedToday"],
        json!(1),
        "{}",
        balance.text
    );
    assert_eq!(
        balance.body["data"]["freeResetsAt"],
        "2026-11-24T00:00:00.000Z"
    );
}

/// The core resolves each user's delegation when its execution starts: one revoked since the intent
/// was accepted is skipped, and one the venue reports disabled is recorded revoked.
async fn fan_out_runs_each_user_under_the_delegation_live_at_execution(backend: Backend) {
    // One user at a time, so that a revocation can land between two users' executions.
    let (app, venue) = venue_app(backend, "[intents]\nfanout-concurrency = 1").await;
    let owner = app.onboard("grant@example.com").await;
    allow(&app, &owner, &["swap"], 1000.0).await;
    let users = delegate(&app, &owner, 3).await;
    let hash = |i: usize| format!("0x{:064x}", i + 1);
    venue
        .disabled
        .lock()
        .map(|mut d| d.insert(users[2].clone()))
        .unwrap_or(false);
    // The first user's execution takes long enough for the revocation below to land before the
    // second user's starts.
    venue
        .delay
        .lock()
        .map(|mut d| *d = Duration::from_millis(400))
        .unwrap_or(());
    app.grant(&owner, 100).await;

    let r = app
        .post(SUBMIT, swap(&owner.agent_key, "10", Some("grant-1")))
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let revoked = app
        .store()
        .set_delegation_status(
            &hash(1),
            actiongate_core::states::DelegationStatus::Revoked,
            actiongate_core::clock::to_millis(START),
            &actiongate_core::audit::delegation_event(
                &owner.agent_id,
                &hash(1),
                actiongate_core::states::DelegationStatus::Revoked,
                "owner",
                0,
                json!({}),
            ),
        )
        .await;
    assert!(matches!(revoked, Ok(true)), "{revoked:?}");
    let id = r.body["intentId"].as_str().unwrap_or("").to_owned();
    let done = wait_terminal(&app, &owner.agent_key, &id).await;
    let results = done["results"].as_array().cloned().unwrap_or_default();
    let codes: Vec<Value> = results.iter().map(|r| r["code"].clone()).collect();
    assert_eq!(
        codes,
        [
            Value::Null,
            json!("DELEGATION_REVOKED"),
            json!("DELEGATION_REVOKED")
        ],
        "{results:?}"
    );
    assert!(
        results[1]["message"]
            .as_str()
            .is_some_and(|m| m.contains("no active delegation")),
        "{results:?}"
    );
    assert_eq!(venue.effects().len(), 1, "only the first user's swap ran");
    for (i, expected) in [(0, "active"), (1, "revoked"), (2, "revoked")] {
        let status = app
            .store()
            .get_delegation(&hash(i))
            .await
            .ok()
            .flatten()
            .map(|d| d.status.to_string());
        assert_eq!(status.as_deref(), Some(expected), "user {i}");
    }
    // One success captured; the two skipped users' reservations released.
    let credits = footprint(&app, &owner).await.credits;
    assert_eq!(
        credits.map(|(balance, reserved, _)| (balance, reserved)),
        Some((90, 0))
    );
}

async fn fan_out_runs_users_side_by_side_each_once(backend: Backend) {
    let (app, venue) = venue_app(backend, "[intents]\nfanout-concurrency = 3").await;
    let owner = app.onboard("side@example.com").await;
    allow(&app, &owner, &["swap"], 1000.0).await;
    let users = delegate(&app, &owner, 7).await;
    venue
        .delay
        .lock()
        .map(|mut d| *d = Duration::from_millis(150))
        .unwrap_or(());
    app.grant(&owner, 100).await;

    let r = app
        .post(SUBMIT, swap(&owner.agent_key, "1", Some("side-1")))
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let id = r.body["intentId"].as_str().unwrap_or("").to_owned();
    let done = wait_terminal(&app, &owner.agent_key, &id).await;
    assert_eq!(done["status"], "completed", "{done}");
    let results = done["results"].as_array().cloned().unwrap_or_default();
    // Listed in the users' order, each succeeded, whatever order they ended in.
    let wallets: Vec<Value> = results.iter().map(|r| r["walletAddress"].clone()).collect();
    assert_eq!(wallets, users.iter().map(|u| json!(u)).collect::<Vec<_>>());
    assert!(
        results.iter().all(|r| r["success"] == json!(true)),
        "{results:?}"
    );
    // Each user's execution ran once, and three ran at a time: never more than configured.
    let mut effects = venue.effects();
    effects.sort();
    effects.dedup();
    assert_eq!((effects.len(), venue.effects().len()), (7, 7));
    assert_eq!(venue.most_in_flight(), 3);
    let credits = footprint(&app, &owner).await.credits;
    assert_eq!(
        credits.map(|(balance, reserved, _)| (balance, reserved)),
        Some((30, 0))
    );
}

async fn fan_out_reserves_then_captures_successes_and_releases_the_rest(backend: Backend) {
    let (app, venue) = venue_app(backend, "").await;
    let owner = app.onboard("fan@example.com").await;
    allow(&app, &owner, &["swap"], 1000.0).await;
    let users = delegate(&app, &owner, 3).await;
    venue
        .refuse
        .lock()
        .map(|mut r| r.insert(users[1].clone()))
        .unwrap_or(false);
    app.grant(&owner, 100).await;

    let r = app
        .post(SUBMIT, swap(&owner.agent_key, "10", Some("fan-1")))
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let id = r.body["intentId"].as_str().unwrap_or("").to_owned();
    let done = wait_terminal(&app, &owner.agent_key, &id).await;
    assert_eq!(done["status"], "completed");
    assert_eq!(
        (done["total"].clone(), done["executed"].clone()),
        (json!(3), json!(3))
    );
    let results = done["results"].as_array().cloned().unwrap_or_default();
    for (result, user) in results.iter().zip(&users) {
        assert_eq!(result["walletAddress"], json!(user));
        assert_eq!(
            result["userDid"],
            json!(format!("did:pkh:eip155:8453:{user}"))
        );
    }
    assert_eq!(results[0]["success"], json!(true));
    assert!(results[0]["txHash"].as_str().is_some_and(|h| h.len() == 66));
    assert_eq!(results[1]["success"], json!(false));
    assert_eq!(results[1]["code"], "EXECUTION_REVERTED");
    assert_eq!(results[1]["error"], "INTENT_REJECTED");
    assert!(results[1].get("txHash").is_none());

    // 3 x 10 reserved; 2 x 10 captured; 10 released.
    let credits = footprint(&app, &owner).await.credits;
    assert_eq!(
        credits.map(|(balance, reserved, _)| (balance, reserved)),
        Some((80, 0))
    );
    let ledger = app
        .store()
        .ledger(&owner.account_id)
        .await
        .unwrap_or_default();
    let kinds: Vec<&str> = ledger.iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(kinds, ["grant", "reserve", "capture", "release"]);
    assert_ledger_adds_up(&ledger, 80);
    assert!(
        ledger[1..]
            .iter()
            .all(|e| e.intent_id.as_deref() == Some(id.as_str()))
    );
    // The daily usage counts the amount once for each of the 3 users addressed.
    assert_eq!(footprint(&app, &owner).await.usage, 30_000_000);
}

fn assert_ledger_adds_up(ledger: &[actiongate_core::store::LedgerEntry], final_balance: i64) {
    let mut balance = 0;
    let mut reserved = 0;
    for e in ledger {
        assert_eq!(
            (e.balance_before, e.reserved_before),
            (balance, reserved),
            "ledger chain broken at {e:?}"
        );
        assert!(e.balance_after >= 0 && e.reserved_after >= 0, "{e:?}");
        balance = e.balance_after;
        reserved = e.reserved_after;
    }
    assert_eq!(balance, final_balance);
}

async fn idempotency_explicit_and_derived(backend: Backend) {
    let app = spawn_app(backend).await;
    let owner = app.onboard("idem@example.com").await;
    let first = app.post(SUBMIT, read(&owner.agent_key, Some("same"))).await;
    let again = app.post(SUBMIT, read(&owner.agent_key, Some("same"))).await;
    assert_eq!(first.status, 200);
    assert_eq!(
        again.body, first.body,
        "the same key and request answer the first response"
    );
    // Key order in params does not make a different request.
    let mut reordered = json!({"agentApiKey": owner.agent_key, "action": "get-earn-provider", "params": {"providerId": "earn-router"}, "idempotencyKey": "p"});
    let a = app.post(SUBMIT, reordered.clone()).await;
    reordered["action"] = json!("get_earn_provider");
    let b = app.post(SUBMIT, reordered).await;
    assert_eq!(
        a.body["intentId"], b.body["intentId"],
        "an alias is the same request"
    );

    // Without a key: an accidental double submit is one intent, a repeat a minute later is new.
    let d1 = app.post(SUBMIT, read(&owner.agent_key, None)).await;
    app.clock.advance(time::Duration::seconds(59));
    let d2 = app.post(SUBMIT, read(&owner.agent_key, None)).await;
    assert_eq!(d1.body["intentId"], d2.body["intentId"]);
    app.clock.advance(time::Duration::seconds(2));
    let d3 = app.post(SUBMIT, read(&owner.agent_key, None)).await;
    assert_eq!(d3.status, 200);
    assert_ne!(d1.body["intentId"], d3.body["intentId"]);
    assert_eq!(
        app.store()
            .count_intents(&owner.agent_id)
            .await
            .unwrap_or(0),
        4,
        "same, p, d1, d3"
    );
    // An explicit key is kept (at least 24 h).
    app.clock.advance(time::Duration::hours(25));
    let late = app.post(SUBMIT, read(&owner.agent_key, Some("same"))).await;
    assert_eq!(late.body["intentId"], first.body["intentId"]);
    // Keys are per agent.
    let other = app.onboard("idem2@example.com").await;
    let theirs = app.post(SUBMIT, read(&other.agent_key, Some("same"))).await;
    assert_ne!(theirs.body["intentId"], first.body["intentId"]);

    // The policy no longer allows the action: a retry of the accepted request still answers its
    // first response; a new key is refused; the old key with another request is 409.
    allow(&app, &owner, &["get-earn-provider"], 100.0).await;
    let retried = app.post(SUBMIT, read(&owner.agent_key, Some("same"))).await;
    assert_eq!(
        (retried.status, retried.body["intentId"].clone()),
        (200, first.body["intentId"].clone()),
        "{}",
        retried.text
    );
    let fresh = app
        .post(SUBMIT, read(&owner.agent_key, Some("fresh")))
        .await;
    assert_eq!(
        (fresh.status, fresh.body["code"].clone()),
        (403, json!("ACTION_NOT_ALLOWED"))
    );
    let mut changed = read(&owner.agent_key, Some("same"));
    changed["chainId"] = json!(84532);
    let reused = app.post(SUBMIT, changed).await;
    assert_eq!(
        (reused.status, reused.body["code"].clone()),
        (409, json!("IDEMPOTENCY_KEY_REUSED"))
    );
}

async fn concurrent_submits_with_one_key_make_one_intent(backend: Backend) {
    let app = spawn_app(backend).await;
    let owner = app.onboard("race@example.com").await;
    let app = Arc::new(app);
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..100 {
        let app = app.clone();
        let key = owner.agent_key.clone();
        tasks.spawn(async move { app.post(SUBMIT, read(&key, Some("one"))).await });
    }
    let mut ids = std::collections::BTreeSet::new();
    while let Some(r) = tasks.join_next().await {
        let r = r.expect("a task panicked");
        assert_eq!(r.status, 200, "{}", r.text);
        ids.insert(r.body["intentId"].as_str().unwrap_or("").to_owned());
    }
    assert_eq!(ids.len(), 1);
    assert_eq!(
        app.store()
            .count_intents(&owner.agent_id)
            .await
            .unwrap_or(0),
        1
    );
    assert_eq!(
        footprint(&app, &owner).await.credits,
        Some((0, 0, 1)),
        "charged once"
    );
}

async fn concurrent_submits_never_overspend(backend: Backend) {
    let (app, _venue) = venue_app(backend, "[credits]\nfree-per-day = 0\n").await;
    let owner = app.onboard("spender@example.com").await;
    app.grant(&owner, 50).await;
    let app = Arc::new(app);
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..200 {
        let app = app.clone();
        let key = owner.agent_key.clone();
        tasks.spawn(async move {
            app.post(SUBMIT, read(&key, Some(&format!("spend-{i}"))))
                .await
        });
    }
    let (mut accepted, mut refused) = (Vec::new(), 0);
    while let Some(r) = tasks.join_next().await {
        let r = r.expect("a task panicked");
        match r.status {
            200 => accepted.push(r.body["intentId"].as_str().unwrap_or("").to_owned()),
            _ => {
                assert_refused(&r, 402, "DAILY_FREE_LIMIT_EXCEEDED");
                refused += 1;
            }
        }
    }
    assert_eq!((accepted.len(), refused), (50, 150));
    for id in &accepted {
        wait_terminal(&app, &owner.agent_key, id).await;
    }
    let ledger = app
        .store()
        .ledger(&owner.account_id)
        .await
        .unwrap_or_default();
    assert_ledger_adds_up(&ledger, 0);
    assert_eq!(
        ledger
            .iter()
            .filter(|e| e.kind.as_str() == "reserve")
            .count(),
        50
    );
    assert_eq!(
        ledger
            .iter()
            .filter(|e| e.kind.as_str() == "capture")
            .count(),
        50
    );
    assert_eq!(footprint(&app, &owner).await.credits, Some((0, 0, 0)));
}

async fn the_daily_limit_holds_under_concurrency(backend: Backend) {
    let (app, venue) = venue_app(backend, "").await;
    let owner = app.onboard("limit@example.com").await;
    allow(&app, &owner, &["swap"], 250.0).await;
    delegate(&app, &owner, 1).await;
    app.grant(&owner, 10_000).await;
    let app = Arc::new(app);
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..100 {
        let app = app.clone();
        let key = owner.agent_key.clone();
        tasks.spawn(async move {
            app.post(SUBMIT, swap(&key, "10", Some(&format!("lim-{i}"))))
                .await
        });
    }
    let mut accepted = Vec::new();
    while let Some(r) = tasks.join_next().await {
        let r = r.expect("a task panicked");
        if r.status == 200 {
            accepted.push(r.body["intentId"].as_str().unwrap_or("").to_owned());
        } else {
            assert_refused(&r, 403, "POLICY_DAILY_LIMIT");
        }
    }
    assert_eq!(accepted.len(), 25, "250 USD / 10 USD");
    assert_eq!(footprint(&app, &owner).await.usage, 250_000_000);
    for id in &accepted {
        wait_terminal(&app, &owner.agent_key, id).await;
    }
    assert_eq!(venue.effects().len(), 25);
}

async fn direct_execution_needs_a_key_and_never_runs_twice(backend: Backend) {
    let (app, venue) = venue_app(backend, "").await;
    let owner = app.onboard("direct@example.com").await;
    allow(
        &app,
        &owner,
        &["transfer", "get-fx-supported-assets"],
        1000.0,
    )
    .await;
    app.grant(&owner, 100).await;
    assert_refused(
        &app.post(DIRECT, transfer(&owner.agent_key, "5", None))
            .await,
        400,
        "WALLET_IDEMPOTENCY_KEY_REQUIRED",
    );
    // Reads are not offered through the wallet lane.
    assert_refused(
        &app.post(DIRECT, read(&owner.agent_key, Some("r"))).await,
        422,
        "ACTION_DISABLED",
    );

    let first = app
        .post(DIRECT, transfer(&owner.agent_key, "5", Some("pay-1")))
        .await;
    let data = first.assert_ok().clone();
    assert_eq!(data["status"], "confirmed");
    assert_eq!(data["chainId"], json!(8453));
    assert_eq!(data["walletAddress"], json!(owner.agent_address));
    assert!(
        data["txHash"]
            .as_str()
            .is_some_and(|h| h.starts_with("0x") && h.len() == 66)
    );
    // No delegation needed: the agent's own wallet.
    let again = app
        .post(DIRECT, transfer(&owner.agent_key, "5", Some("pay-1")))
        .await;
    assert_eq!(again.body, first.body);
    assert_eq!(venue.effects().len(), 1, "a retry sends nothing");
    assert_eq!(footprint(&app, &owner).await.credits, Some((90, 0, 0)));

    // A refusal by the venue before anything was sent is answered as the refusal it is.
    venue
        .refuse
        .lock()
        .map(|mut r| r.insert(owner.agent_address.clone()))
        .unwrap_or(false);
    let refused = app
        .post(DIRECT, transfer(&owner.agent_key, "5", Some("pay-2")))
        .await;
    assert_refused(&refused, 422, "EXECUTION_REVERTED");
    assert_eq!(
        footprint(&app, &owner).await.credits,
        Some((90, 0, 0)),
        "a failed execution is not charged"
    );
}

/// A gateway process answers a submit from the agent and policy it read last (no read per submit);
/// another process changing them must still take effect at once there: a rotated key is refused, a
/// withdrawn action refused, a newly allowed one accepted, and a refusal creates nothing.
async fn a_cached_agent_never_outlives_its_key_or_policy(backend: Backend) {
    // Processes sharing a database share the master key.
    let keys = tempfile::tempdir().expect("tempdir");
    let key_file = keys.path().join("master.key");
    std::fs::write(&key_file, "11".repeat(32)).expect("write");
    let config_toml = format!("master-key-file = \"{}\"\n", key_file.display());
    let a = spawn_app_with(
        backend,
        Options {
            config_toml: config_toml.clone(),
            ..Options::default()
        },
    )
    .await;
    let b = spawn_app_with(
        backend,
        Options {
            database_url: Some(a.database_url.clone()),
            config_toml,
            ..Options::default()
        },
    )
    .await;
    let owner = a.onboard("cached@example.com").await;
    a.grant(&owner, 100).await;
    allow(&a, &owner, &["get-fx-supported-assets"], 10.0).await;
    let fx = |key: &str, idem: &str| json!({"agentApiKey": key, "action": "get-fx-supported-assets", "params": {}, "idempotencyKey": idem});
    assert_eq!(a.post(SUBMIT, fx(&owner.agent_key, "c1")).await.status, 200);
    let count = || async {
        a.store()
            .count_intents(&owner.agent_id)
            .await
            .expect("count intents")
    };
    assert_eq!(count().await, 1);

    // The owner withdraws the read and allows another one, through the other process.
    allow(&b, &owner, &["get-earn-provider"], 10.0).await;
    let refused = a.post(SUBMIT, fx(&owner.agent_key, "c2")).await;
    assert_eq!(
        (refused.status, refused.body["code"].clone()),
        (403, json!("ACTION_NOT_ALLOWED")),
        "{}",
        refused.text
    );
    let r = a.post(SUBMIT, json!({"agentApiKey": owner.agent_key, "action": "get-earn-provider", "params": {"providerId": "aave"}, "idempotencyKey": "c3"})).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(count().await, 2);

    // The owner rotates the key through the other process: the old key stops at once here too.
    let rotated = b
        .post_as(
            &format!("/api/v1/agents/{}/rotate-key", owner.agent_id),
            &owner.session,
            None,
        )
        .await;
    let new_key = rotated.assert_ok()["bootstrap"]["agentApiKey"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    let old = a.post(SUBMIT, json!({"agentApiKey": owner.agent_key, "action": "get-earn-provider", "params": {"providerId": "aave"}, "idempotencyKey": "c4"})).await;
    old.assert_error(401, "UNAUTHORIZED");
    // Not even a replay of an accepted request answers the old key.
    let replay = a.post(SUBMIT, json!({"agentApiKey": owner.agent_key, "action": "get-earn-provider", "params": {"providerId": "aave"}, "idempotencyKey": "c3"})).await;
    replay.assert_error(401, "UNAUTHORIZED");
    assert_eq!(count().await, 2);
    let fresh = a.post(SUBMIT, json!({"agentApiKey": new_key, "action": "get-earn-provider", "params": {"providerId": "aave"}, "idempotencyKey": "c4"})).await;
    assert_eq!(fresh.status, 200, "{}", fresh.text);
    assert_eq!(count().await, 3);
    b.stop().await;
    a.stop().await;
}

/// Holds the batcher's next write: SQLite's write lock (`BEGIN IMMEDIATE`), or on PostgreSQL the
/// account's credit row, which every accepting transaction locks.
enum WriteHold {
    Sqlite(sqlx::SqliteConnection),
    Postgres(sqlx::PgConnection),
}

impl WriteHold {
    async fn take(app: &TestApp, account_id: &str) -> Self {
        use sqlx::Connection;
        if app.database_url.starts_with("sqlite:") {
            let mut conn = sqlx::SqliteConnection::connect(&app.database_url)
                .await
                .expect("connect");
            sqlx::query("BEGIN IMMEDIATE")
                .execute(&mut conn)
                .await
                .expect("execute");
            Self::Sqlite(conn)
        } else {
            let mut conn = sqlx::PgConnection::connect(&app.database_url)
                .await
                .expect("connect");
            sqlx::query("BEGIN")
                .execute(&mut conn)
                .await
                .expect("execute");
            sqlx::query("SELECT 1 FROM credit_accounts WHERE account_id = $1 FOR UPDATE")
                .bind(account_id)
                .execute(&mut conn)
                .await
                .expect("execute");
            Self::Postgres(conn)
        }
    }

    async fn release(self) {
        match self {
            Self::Sqlite(mut conn) => sqlx::query("ROLLBACK").execute(&mut conn).await.map(drop),
            Self::Postgres(mut conn) => sqlx::query("ROLLBACK").execute(&mut conn).await.map(drop),
        }
        .expect("rollback");
    }
}

/// A read accepted while its caller went away (a client that disconnects mid-request drops the
/// request's future) still runs at once: it is not left for its lease to run out (the test clock
/// never moves, so a lease never would).
async fn a_read_accepted_after_its_caller_left_still_runs(backend: Backend) {
    let app = spawn_app(backend).await;
    let owner = app.onboard("leaver@example.com").await;
    let body = read(&owner.agent_key, Some("left-early"));
    let request: actiongate_api_types::intents::ExecuteIntentRequest =
        serde_json::from_value(body.clone()).expect("from value");
    // The caller's submit waits in the batcher behind the held write, and is dropped there.
    let hold = WriteHold::take(&app, &owner.account_id).await;
    let gateway = app.gateway.clone();
    let caller = tokio::spawn(async move {
        gateway
            .intents()
            .submit(&request, actiongate_core::catalog::Lane::ExecuteIntent)
            .await
            .map(drop)
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !caller.is_finished(),
        "the submit should be waiting for the held write"
    );
    caller.abort();
    assert!(caller.await.is_err_and(|e| e.is_cancelled()));
    hold.release().await;

    // The same request again is answered with the intent the dropped one created, which ends.
    let r = app.post(SUBMIT, body).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(
        app.store()
            .count_intents(&owner.agent_id)
            .await
            .expect("count intents"),
        1
    );
    let id = r.body["intentId"].as_str().unwrap_or("").to_owned();
    let done = wait_terminal(&app, &owner.agent_key, &id).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["results"][0]["success"], json!(true), "{done}");
}

/// REST and MCP refuse alike (CONTRACT "Surfaces agree"): a write the gateway cannot price is
/// PRICE_UNAVAILABLE through both, with the same body, and nothing is written or charged.
async fn an_unpriceable_write_is_refused_alike_through_rest_and_mcp(backend: Backend) {
    let (app, _venue) = venue_app(backend, "").await;
    let owner = app.onboard("alike@example.com").await;
    allow(&app, &owner, &["transfer"], 1000.0).await;
    let before = footprint(&app, &owner).await;
    let args = json!({"action": "transfer", "estimatedAmountUsd": 1, "idempotencyKey": "doge-1",
        "params": {"token": "DOGE", "to": "0x000000000000000000000000000000000000dEaD", "amount": "1"}});
    let mut body = args.clone();
    body["agentApiKey"] = json!(owner.agent_key);
    let rest = app.post(SUBMIT, body).await;
    assert_refused(&rest, 422, "PRICE_UNAVAILABLE");
    let mcp = app
        .send(
            app.client
                .post(app.url("/mcp/tool/executeIntent"))
                .bearer_auth(&owner.agent_key)
                .json(&args),
        )
        .await;
    assert_eq!(
        (mcp.status, mcp.body["isError"].clone()),
        (422, json!(true)),
        "{}",
        mcp.text
    );
    assert_eq!(mcp.body["structuredContent"], rest.body);
    assert_eq!(footprint(&app, &owner).await, before);
}

/// Submit, build-tx and preflight run one ordered sequence of checks: preflight reports every
/// verdict in CONTRACT order, and submit and build-tx answer the first refusal of it.
async fn preflight_reports_the_checks_submit_and_build_tx_stop_at(backend: Backend) {
    let (app, _venue) = venue_app(backend, "").await;
    let owner = app.onboard("preflight@example.com").await;
    allow(&app, &owner, &["transfer"], 100.0).await;
    // Bad params, an unknown chain, and an amount above transfer's maxAmountUsd (50000).
    let params = json!({"token": "USDC", "to": "0x1", "amount": "60000"});
    let body = json!({"agentApiKey": owner.agent_key, "action": "transfer", "params": params,
        "chainId": 999, "idempotencyKey": "p1"});
    let report = app.post("/api/v1/agent/preflight", body.clone()).await;
    let report = report.assert_ok();
    let verdicts: Vec<(String, Value, Value)> = report["checks"]
        .as_array()
        .map(|checks| {
            let row = |c: &Value| {
                (
                    c["name"].as_str().unwrap_or("").to_owned(),
                    c["ok"].clone(),
                    c["code"].clone(),
                )
            };
            checks.iter().map(row).take(7).collect()
        })
        .unwrap_or_default();
    let ok = |name: &str| (name.to_owned(), json!(true), Value::Null);
    let no = |name: &str, code: &str| (name.to_owned(), json!(false), json!(code));
    assert_eq!(
        verdicts,
        [
            ok("keyValid"),
            ok("actionKnown"),
            ok("allowed"),
            ok("enabled"),
            no("params", "INVALID_PARAMS"),
            no("chain", "UNKNOWN_CHAIN"),
            // The gateway prices a write on its chain, with its params: not these.
            no("amountLimit", "PRICE_UNAVAILABLE"),
        ],
        "{report}"
    );
    assert_eq!(report["ready"], json!(false));
    // On a known chain with valid params the gateway's price decides, and preflight names it.
    let amount_check = |report: &Value| {
        report["checks"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["name"] == "amountLimit").cloned())
            .unwrap_or(Value::Null)
    };
    let priced = |amount: &str| {
        json!({"agentApiKey": owner.agent_key, "action": "transfer", "estimatedAmountUsd": 0,
            "params": {"token": "usdc", "to": "0x000000000000000000000000000000000000dEaD", "amount": amount}})
    };
    let over = app.post("/api/v1/agent/preflight", priced("60000")).await;
    let over = amount_check(over.assert_ok());
    assert_eq!(over["code"], json!("POLICY_AMOUNT_LIMIT"), "{over}");
    let fine = app.post("/api/v1/agent/preflight", priced("2")).await;
    let fine = amount_check(fine.assert_ok());
    assert_eq!(
        (fine["ok"].clone(), fine["detail"].clone()),
        (
            json!(true),
            json!("2 USD (the gateway's price: 1 USD per USDC from config)")
        ),
        "{fine}"
    );
    app.post(SUBMIT, body.clone())
        .await
        .assert_error(400, "INVALID_PARAMS");
    let build = json!({"agentApiKey": owner.agent_key, "action": "transfer", "params": params,
        "chainId": 999, "walletAddress": "0x000000000000000000000000000000000000dEaD"});
    app.post("/api/v1/agent/build-tx", build)
        .await
        .assert_error(400, "INVALID_PARAMS");
    // Preflight wrote nothing.
    assert_eq!(
        app.store()
            .count_intents(&owner.agent_id)
            .await
            .unwrap_or(99),
        0
    );
}

on_both_backends!(
    a_read_runs_end_to_end,
    preflight_reports_the_checks_submit_and_build_tx_stop_at,
    an_unpriceable_write_is_refused_alike_through_rest_and_mcp,
    every_refusal_has_its_code_and_creates_nothing,
    free_allowance_resets_at_utc_midnight,
    fan_out_reserves_then_captures_successes_and_releases_the_rest,
    fan_out_runs_users_side_by_side_each_once,
    fan_out_runs_each_user_under_the_delegation_live_at_execution,
    idempotency_explicit_and_derived,
    concurrent_submits_with_one_key_make_one_intent,
    concurrent_submits_never_overspend,
    the_daily_limit_holds_under_concurrency,
    direct_execution_needs_a_key_and_never_runs_twice,
    a_cached_agent_never_outlives_its_key_or_policy,
    a_read_accepted_after_its_caller_left_still_runs,
);
