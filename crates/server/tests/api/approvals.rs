//! Approvals (issue 27): a write priced above the policy's approvalAboveUsd waits for its owner with
//! its reservation held and nothing sent; approved it runs once, rejected or expired it ends failed
//! with its code and the reservation given back; only the owner's session decides.

use std::sync::Arc;
use std::time::{Duration, Instant};

use actiongate_testkit::standin::StandInVenue;
use serde_json::{Value, json};

use crate::helpers::{Backend, Options, Owner, START, TestApp, spawn_app_with};
use crate::intents::{chain_config, delegate, swap, wait_terminal};
use crate::on_both_backends;

const SUBMIT: &str = "/api/v1/agent/execute-intent";
const DIRECT: &str = "/api/v1/agent/execute";
const APPROVALS: &str = "/api/v1/approvals";

async fn app(backend: Backend) -> (TestApp, Arc<StandInVenue>) {
    let venue = StandInVenue::new();
    let app = spawn_app_with(
        backend,
        Options {
            providers: vec![venue.clone()],
            config_toml: chain_config("[approvals]\nttl-seconds = 2"),
            ..Options::default()
        },
    )
    .await;
    (app, venue)
}

async fn policy(app: &TestApp, owner: &Owner, approval_above: Value) {
    let r = app
        .put_as(
            &format!("/api/v1/agents/{}/policy", owner.agent_id),
            &owner.session,
            json!({"allowedActions": ["transfer", "swap"], "dailyLimitUsd": 1000, "approvalAboveUsd": approval_above}),
        )
        .await;
    assert_eq!(
        r.assert_ok()["approvalAboveUsd"],
        approval_above,
        "{}",
        r.text
    );
}

fn transfer(key: &str, amount: &str, idem: &str) -> Value {
    json!({
        "agentApiKey": key,
        "action": "transfer",
        "params": {"token": "USDC", "to": "0x000000000000000000000000000000000000dEaD", "amount": amount},
        "idempotencyKey": idem,
    })
}

/// A submit's answer (SPEC's shape, no envelope).
#[track_caller]
fn accepted(r: &crate::helpers::Reply) -> Value {
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.body["success"], json!(true), "{}", r.text);
    r.body.clone()
}

/// (balance, reserved) credits and today's daily-limit usage in micro-dollars.
async fn reserved(app: &TestApp, owner: &Owner) -> (i64, i64, i64) {
    let s = app.store();
    let c = s
        .credit_account(&owner.account_id)
        .await
        .expect("credits")
        .expect("a credit account");
    let day = START.unix_timestamp().div_euclid(86_400);
    let usage = s.daily_usage(&owner.agent_id, day).await.expect("usage");
    (c.balance, c.reserved, usage)
}

async fn status(app: &TestApp, key: &str, id: &str) -> Value {
    let r = app
        .get_agent(
            &format!("/api/v1/agent/execute-intent/status?intentId={id}"),
            key,
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    r.body
}

async fn an_intent_above_the_threshold_waits_and_runs_once_approved(backend: Backend) {
    let (app, venue) = app(backend).await;
    let owner = app.onboard("approver@example.com").await;
    policy(&app, &owner, json!(50.0)).await;
    app.grant(&owner, 100).await;
    // One delegated user: a fan-out of one, its amount counted once.
    delegate(&app, &owner, 1).await;

    // At the threshold: runs as accepted, no approval.
    let r = app
        .post(SUBMIT, swap(&owner.agent_key, "50", Some("at")))
        .await;
    let at = accepted(&r)["intentId"].as_str().expect("id").to_owned();
    assert!(r.body.get("approval").is_none(), "{}", r.text);
    assert_eq!(
        wait_terminal(&app, &owner.agent_key, &at).await["status"],
        "completed"
    );
    assert_eq!(venue.effects().len(), 1);

    // Above it: queued with a pending approval, reserved, nothing sent.
    let mails_before = app.smtp.messages_to("approver@example.com").len();
    let r = app
        .post(SUBMIT, swap(&owner.agent_key, "75", Some("above")))
        .await;
    let body = accepted(&r);
    let id = body["intentId"].as_str().expect("id").to_owned();
    assert_eq!(body["status"], "queued");
    assert_eq!(body["approval"]["state"], "pending", "{}", r.text);
    assert_eq!(body["approval"]["requestedAt"], "2026-11-22T12:00:00.000Z");
    assert_eq!(body["approval"]["expiresAt"], "2026-11-22T12:00:02.000Z");
    assert_eq!(reserved(&app, &owner).await, (80, 10, 125_000_000));
    tokio::time::sleep(Duration::from_millis(600)).await;
    let s = status(&app, &owner.agent_key, &id).await;
    assert_eq!(s["status"], "queued");
    assert_eq!(s["approval"]["state"], "pending");
    assert_eq!(
        venue.effects().len(),
        1,
        "nothing runs before the owner approves"
    );

    // The owner is told by mail, with the intent and how to answer.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mail = loop {
        let mails = app.smtp.messages_to("approver@example.com");
        if mails.len() > mails_before {
            break mails[mails.len() - 1].clone();
        }
        assert!(Instant::now() < deadline, "no approval mail");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(mail.contains(&id) && mail.contains("swap"), "{mail}");

    // The queue shows it; an agent key is not an owner session.
    let list = app.get_as(APPROVALS, &owner.session).await;
    let items = list.assert_ok()["approvals"]
        .as_array()
        .expect("list")
        .clone();
    assert_eq!(items.len(), 1, "{}", list.text);
    assert_eq!(items[0]["intentId"], json!(id));
    assert_eq!(items[0]["amountUsd"], json!(75.0));
    assert_eq!(items[0]["action"], "swap");
    let approve = format!("{APPROVALS}/{id}/approve");
    app.post_as(&approve, &owner.agent_key, None)
        .await
        .assert_error(401, "UNAUTHORIZED");
    app.post(&approve, json!({}))
        .await
        .assert_error(401, "UNAUTHORIZED");
    // Another owner cannot see or decide it.
    let other = app.onboard("stranger@example.com").await;
    app.post_as(&approve, &other.session, None)
        .await
        .assert_error(404, "NOT_FOUND");
    let theirs = app.get_as(APPROVALS, &other.session).await;
    assert_eq!(theirs.assert_ok()["approvals"], json!([]));
    assert_eq!(venue.effects().len(), 1);

    // Approved: runs once; approving again answers the same approval.
    let r = app.post_as(&approve, &owner.session, None).await;
    assert_eq!(r.assert_ok()["approval"]["state"], "approved", "{}", r.text);
    let ended = wait_terminal(&app, &owner.agent_key, &id).await;
    assert_eq!(ended["status"], "completed", "{ended}");
    assert_eq!(ended["approval"]["state"], "approved");
    let again = app.post_as(&approve, &owner.session, None).await;
    assert_eq!(again.assert_ok()["approval"]["state"], "approved");
    assert_eq!(venue.effects().len(), 2, "executed once");
    assert_eq!(reserved(&app, &owner).await, (80, 0, 125_000_000));
    // A rejection after the approval changes nothing.
    app.post_as(
        &format!("{APPROVALS}/{id}/reject"),
        &owner.session,
        Some(json!({})),
    )
    .await
    .assert_error(409, "APPROVAL_NOT_PENDING");
    let approved = app
        .get_as(&format!("{APPROVALS}?state=approved"), &owner.session)
        .await;
    assert_eq!(approved.assert_ok()["approvals"][0]["status"], "completed");
    app.get_as(&format!("{APPROVALS}?state=maybe"), &owner.session)
        .await
        .assert_error(400, "INVALID_REQUEST");
}

async fn rejected_and_expired_intents_end_failed_and_give_their_reservation_back(backend: Backend) {
    let (app, venue) = app(backend).await;
    let owner = app.onboard("rejecter@example.com").await;
    policy(&app, &owner, json!(10.0)).await;
    app.grant(&owner, 100).await;
    delegate(&app, &owner, 1).await;

    let id = accepted(
        &app.post(SUBMIT, swap(&owner.agent_key, "40", Some("r1")))
            .await,
    )["intentId"]
        .as_str()
        .expect("id")
        .to_owned();
    assert_eq!(reserved(&app, &owner).await, (90, 10, 40_000_000));
    let reject = format!("{APPROVALS}/{id}/reject");
    let long = "x".repeat(501);
    app.post_as(&reject, &owner.session, Some(json!({"reason": long})))
        .await
        .assert_error(400, "INVALID_REQUEST");
    let r = app
        .post_as(
            &reject,
            &owner.session,
            Some(json!({"reason": "not this week"})),
        )
        .await;
    let item = r.assert_ok();
    assert_eq!(item["approval"]["state"], "rejected", "{}", r.text);
    assert_eq!(item["approval"]["reason"], "not this week");
    assert_eq!(item["status"], "failed");
    let s = status(&app, &owner.agent_key, &id).await;
    assert_eq!(s["status"], "failed");
    assert_eq!(s["results"][0]["code"], "APPROVAL_REJECTED", "{s}");
    assert!(
        s["results"][0]["message"]
            .as_str()
            .unwrap_or("")
            .contains("not this week")
    );
    assert_eq!(reserved(&app, &owner).await, (100, 0, 0), "released");
    // Rejecting again answers the same; approving now is refused.
    assert_eq!(
        app.post_as(&reject, &owner.session, None).await.assert_ok()["approval"]["state"],
        "rejected"
    );
    app.post_as(&format!("{APPROVALS}/{id}/approve"), &owner.session, None)
        .await
        .assert_error(409, "APPROVAL_NOT_PENDING");

    // A direct execution above the threshold answers 202 with the intent id, and expires.
    let r = app
        .post(DIRECT, transfer(&owner.agent_key, "30", "d1"))
        .await;
    assert_eq!(r.status, 202, "{}", r.text);
    let data = r.body["data"].clone();
    assert_eq!(data["status"], "pending");
    assert_eq!(data["approval"]["state"], "pending");
    assert!(data["txHash"].is_null());
    let direct = data["intentId"].as_str().expect("id").to_owned();
    // A retry with the same key answers the same waiting intent.
    let again = app
        .post(DIRECT, transfer(&owner.agent_key, "30", "d1"))
        .await;
    assert_eq!(again.status, 202);
    assert_eq!(again.body["data"]["intentId"], json!(direct));
    assert_eq!(reserved(&app, &owner).await, (90, 10, 30_000_000));
    // A status read may wait for the end (waitSeconds, at most 30). Nothing ends within a second
    // here (the clock stands still): answered as it stands once the second has passed.
    let status_of = |wait: u32| {
        format!("/api/v1/agent/execute-intent/status?intentId={direct}&waitSeconds={wait}")
    };
    let waited = app.get_agent(&status_of(1), &owner.agent_key).await;
    assert_eq!(waited.status, 200, "{}", waited.text);
    assert_eq!(waited.body["status"], "queued", "{}", waited.text);
    assert_eq!(waited.body["approval"]["state"], "pending");
    app.get_agent(&status_of(31), &owner.agent_key)
        .await
        .assert_error(400, "INVALID_REQUEST");
    // A long poll begun before the approval expires answers the end: one request, no polling.
    let long_poll = status_of(20);
    let (ended, ()) = tokio::join!(app.get_agent(&long_poll, &owner.agent_key), async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        app.clock.advance(time::Duration::seconds(3));
    });
    assert_eq!(ended.status, 200, "{}", ended.text);
    let ended = ended.body;
    assert_eq!(ended["status"], "failed");
    assert_eq!(ended["approval"]["state"], "expired");
    assert_eq!(ended["results"][0]["code"], "APPROVAL_EXPIRED", "{ended}");
    assert_eq!(reserved(&app, &owner).await, (100, 0, 0), "released");
    app.post_as(
        &format!("{APPROVALS}/{direct}/approve"),
        &owner.session,
        None,
    )
    .await
    .assert_error(409, "APPROVAL_NOT_PENDING");
    let expired = app
        .get_as(&format!("{APPROVALS}?state=expired"), &owner.session)
        .await;
    assert_eq!(
        expired.assert_ok()["approvals"][0]["intentId"],
        json!(direct)
    );
    // A retry of the expired direct execution answers its refusal, sends nothing.
    let replay = app
        .post(DIRECT, transfer(&owner.agent_key, "30", "d1"))
        .await;
    replay.assert_error(409, "APPROVAL_EXPIRED");

    // Without a threshold nothing waits.
    policy(&app, &owner, Value::Null).await;
    let r = app
        .post(DIRECT, transfer(&owner.agent_key, "30", "d2"))
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.body["data"]["status"], "confirmed");
    assert_eq!(venue.effects().len(), 1, "only the un-gated one was sent");
}

/// A long poll is one request of the agent key's rate, however often it looks while it waits:
/// 1 a second with a burst of 4 here, and a wait of 5 s looks about 11 times (every 500 ms); the
/// key's budget is whole again after it. A status read's looks would have spent the budget and
/// answered `RATE_LIMITED` partway through the wait.
async fn a_long_poll_is_one_request_of_the_keys_rate(backend: Backend) {
    let venue = StandInVenue::new();
    let app = spawn_app_with(
        backend,
        Options {
            providers: vec![venue.clone()],
            config_toml: chain_config(
                "[approvals]\nttl-seconds = 600\n[limits]\nrequests-per-second = 1\nburst = 4",
            ),
            ..Options::default()
        },
    )
    .await;
    let owner = app.onboard("poll@example.com").await;
    policy(&app, &owner, json!(10.0)).await;
    let r = app
        .post(DIRECT, transfer(&owner.agent_key, "30", "poll"))
        .await;
    assert_eq!(r.status, 202, "{}", r.text);
    let id = r.body["data"]["intentId"].as_str().expect("id").to_owned();
    let status = format!("/api/v1/agent/execute-intent/status?intentId={id}");
    let started = Instant::now();
    let waited = app
        .get_agent(&format!("{status}&waitSeconds=5"), &owner.agent_key)
        .await;
    assert_eq!(waited.status, 200, "{}", waited.text);
    assert_eq!(waited.body["status"], "queued", "{}", waited.text);
    assert!(
        started.elapsed() >= Duration::from_secs(5),
        "waited the whole time"
    );
    for read in 0..4 {
        let r = app.get_agent(&status, &owner.agent_key).await;
        assert_eq!(r.status, 200, "read {read} after the wait: {}", r.text);
    }
    // And the rate holds: a burst beyond it is refused.
    let mut refused = false;
    for _ in 0..10 {
        let r = app.get_agent(&status, &owner.agent_key).await;
        if r.status == 429 {
            r.assert_error(429, "RATE_LIMITED");
            refused = true;
            break;
        }
    }
    assert!(refused, "the key's rate is 1 a second");
    assert!(venue.effects().is_empty(), "nothing ran while it waited");
}

on_both_backends!(
    an_intent_above_the_threshold_waits_and_runs_once_approved,
    a_long_poll_is_one_request_of_the_keys_rate,
    rejected_and_expired_intents_end_failed_and_give_their_reservation_back,
);
