//! The audit trail (issue 27): every kind of decision becomes a hash-chained entry of its account,
//! the export streams it (JSON lines and CSV) page by page, and verification finds an entry edited
//! in the database.

use std::time::{Duration, Instant};

use actiongate_core::store::AuditEvent;
use actiongate_testkit::standin::StandInVenue;
use serde_json::{Value, json};

use crate::helpers::{Backend, Options, Owner, TestApp, spawn_app_with};
use crate::intents::{chain_config, ready_to_fan_out, swap, wait_terminal};
use crate::on_both_backends;

const EXPORT: &str = "/api/v1/audit";
const VERIFY: &str = "/api/v1/audit/verify";

async fn app(backend: Backend) -> TestApp {
    spawn_app_with(
        backend,
        Options {
            providers: vec![StandInVenue::new()],
            config_toml: chain_config(""),
            ..Options::default()
        },
    )
    .await
}

/// The export as JSON lines, once it holds at least `n` entries (the chaining step runs every
/// 200 ms).
async fn entries(app: &TestApp, owner: &Owner, n: usize) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let r = app.get_as(EXPORT, &owner.session).await;
        assert_eq!(r.status, 200, "{}", r.text);
        let lines: Vec<Value> = r
            .text
            .lines()
            .map(|l| serde_json::from_str(l).expect("a JSON line"))
            .collect();
        if lines.len() >= n {
            return lines;
        }
        assert!(
            Instant::now() < deadline,
            "{} of {n} entries: {}",
            lines.len(),
            r.text
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Runs SQL beside the gateway (what someone with the database but not the master key can do).
async fn tamper(app: &TestApp, sql: &str) {
    use sqlx::Connection;
    let sql = sqlx::AssertSqlSafe(sql.to_owned());
    if app.database_url.starts_with("sqlite") {
        let mut conn = sqlx::SqliteConnection::connect(&app.database_url)
            .await
            .expect("the database opens");
        sqlx::query(sql).execute(&mut conn).await.expect("tamper");
    } else {
        let mut conn = sqlx::PgConnection::connect(&app.database_url)
            .await
            .expect("the database opens");
        sqlx::query(sql).execute(&mut conn).await.expect("tamper");
    }
}

async fn every_decision_is_an_entry_and_an_edit_is_found(backend: Backend) {
    let app = app(backend).await;
    let owner = app.onboard("auditor@example.com").await;
    ready_to_fan_out(
        &app,
        &owner,
        json!({"allowedActions": ["swap", "get-fx-supported-assets"], "dailyLimitUsd": 100, "approvalAboveUsd": 50}),
    )
    .await;
    // Accepted and run; refused (over the daily limit); waiting for approval, then rejected.
    let ok = app
        .post(
            "/api/v1/agent/execute-intent",
            swap(&owner.agent_key, "5", Some("a1")),
        )
        .await;
    let id = ok.body["intentId"].as_str().expect("accepted").to_owned();
    wait_terminal(&app, &owner.agent_key, &id).await;
    let refused = app
        .post(
            "/api/v1/agent/execute-intent",
            swap(&owner.agent_key, "500", Some("a2")),
        )
        .await;
    assert_eq!(refused.status, 403, "{}", refused.text);
    let waits = app
        .post(
            "/api/v1/agent/execute-intent",
            swap(&owner.agent_key, "60", Some("a3")),
        )
        .await;
    let waiting = waits.body["intentId"]
        .as_str()
        .expect("accepted")
        .to_owned();
    app.post_as(
        &format!("/api/v1/approvals/{waiting}/reject"),
        &owner.session,
        None,
    )
    .await
    .assert_ok();
    app.post_as(
        "/api/v1/agents",
        &owner.session,
        Some(json!({"name": "second"})),
    )
    .await
    .assert_ok();
    app.post_as(
        &format!("/api/v1/agents/{}/rotate-key", owner.agent_id),
        &owner.session,
        None,
    )
    .await
    .assert_ok();

    let want = [
        "agent.created",
        "owner.login",
        "policy.changed",
        "credits.grant",
        "delegation.activated",
        "intent.accepted",
        "credits.reserve",
        "execution.ended",
        "intent.completed",
        "credits.capture",
        "intent.refused",
        "approval.requested",
        "approval.rejected",
        "intent.failed",
        "credits.release",
        "agent.key_rotated",
    ];
    let deadline = Instant::now() + Duration::from_secs(20);
    let all = loop {
        let all = entries(&app, &owner, 1).await;
        let kinds: Vec<&str> = all.iter().filter_map(|e| e["kind"].as_str()).collect();
        if want.iter().all(|k| kinds.contains(k))
            && kinds.iter().filter(|k| **k == "agent.created").count() == 2
        {
            break all;
        }
        assert!(Instant::now() < deadline, "missing kinds in {kinds:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    // One gapless chain from 1, each entry after the one before.
    for (i, e) in all.iter().enumerate() {
        assert_eq!(e["seq"], json!(i + 1), "{e}");
        if i > 0 {
            assert_eq!(e["prevHash"], all[i - 1]["hash"]);
        }
    }
    let refusal = all
        .iter()
        .find(|e| e["kind"] == "intent.refused")
        .expect("a refusal");
    assert_eq!(refusal["code"], "POLICY_DAILY_LIMIT");
    assert_eq!(refusal["actor"], json!(format!("agent:{}", owner.agent_id)));
    let rejected = all
        .iter()
        .find(|e| e["kind"] == "approval.rejected")
        .expect("a rejection");
    assert_eq!(
        (rejected["actor"].clone(), rejected["subject"].clone()),
        (json!("owner"), json!(waiting))
    );
    let policy = all
        .iter()
        .find(|e| e["kind"] == "policy.changed")
        .expect("a policy");
    assert_eq!(policy["data"]["approvalAboveUsd"], json!(50.0));
    // No secret is in the trail.
    let text = serde_json::to_string(&all).unwrap_or_default();
    assert!(!text.contains(&owner.agent_key) && !text.contains(&owner.session));
    // Another owner sees none of it; an agent key is not an owner.
    let other = app.onboard("other-auditor@example.com").await;
    let theirs = entries(&app, &other, 1).await;
    assert!(
        theirs.iter().all(|e| e["kind"] != "intent.accepted"),
        "{theirs:?}"
    );
    app.get_as(EXPORT, &owner.agent_key)
        .await
        .assert_error(401, "UNAUTHORIZED");

    let v = app.get_as(VERIFY, &owner.session).await;
    assert_eq!(v.assert_ok()["ok"], json!(true), "{}", v.text);
    assert_eq!(v.assert_ok()["entries"], json!(all.len()));

    // An entry edited in the database is found, at its seq.
    tamper(
        &app,
        &format!(
            "UPDATE audit_entries SET data = '{{\"approvalAboveUsd\":5000}}' WHERE account_id = '{}' AND seq = {}",
            owner.account_id, policy["seq"]
        ),
    )
    .await;
    let v = app.get_as(VERIFY, &owner.session).await;
    let verdict = v.assert_ok();
    assert_eq!(verdict["ok"], json!(false), "{}", v.text);
    assert_eq!(verdict["brokenAt"], policy["seq"], "{}", v.text);
    // A deleted entry is found too (the other owner's chain).
    tamper(
        &app,
        &format!(
            "DELETE FROM audit_entries WHERE account_id = '{}' AND seq = 1",
            other.account_id
        ),
    )
    .await;
    let v = app.get_as(VERIFY, &other.session).await;
    assert_eq!(v.assert_ok()["brokenAt"], json!(1), "{}", v.text);

    // Bad bounds and formats are refused.
    app.get_as(&format!("{EXPORT}?from=yesterday"), &owner.session)
        .await
        .assert_error(400, "INVALID_REQUEST");
    app.get_as(&format!("{EXPORT}?format=xml"), &owner.session)
        .await
        .assert_error(400, "INVALID_REQUEST");
}

async fn ten_thousand_entries_stream_in_both_formats(backend: Backend) {
    let app = app(backend).await;
    let owner = app.onboard("bulk@example.com").await;
    let events: Vec<AuditEvent> = (0..10_000)
        .map(|i| {
            AuditEvent::new(
                &owner.account_id,
                1_700_000_000_000 + i,
                "policy.changed",
                "owner",
                &owner.agent_id,
                json!({"n": i, "note": "a, \"quoted\" value"}),
            )
        })
        .collect();
    app.store().append_audit(&events).await.expect("append");
    let n = 10_002; // the account's creation and login first
    let deadline = Instant::now() + Duration::from_secs(60);
    while app.count_rows("audit_events").await > 0 {
        assert!(Instant::now() < deadline, "the events were not chained");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for (format, lines_wanted) in [("jsonl", n), ("csv", n + 1)] {
        let mut resp = app
            .client
            .get(app.url(&format!("{EXPORT}?format={format}")))
            .bearer_auth(&owner.session)
            .send()
            .await
            .expect("the export answers");
        assert_eq!(resp.status().as_u16(), 200);
        // Streamed: no length known up front, sent in many pieces.
        assert!(resp.headers().get("content-length").is_none(), "{format}");
        let mut chunks = 0;
        let mut body = Vec::new();
        while let Some(chunk) = resp.chunk().await.expect("a chunk") {
            chunks += 1;
            body.extend_from_slice(&chunk);
        }
        assert!(chunks > 10, "{format}: {chunks} chunks");
        let text = String::from_utf8(body).expect("UTF-8");
        assert_eq!(text.lines().count(), lines_wanted, "{format}");
        if format == "csv" {
            assert!(
                text.contains(r#""{""n"":0,""note"":""a, \""quoted\"" value""}""#),
                "{}",
                &text[..600]
            );
        } else {
            let last: Value =
                serde_json::from_str(text.lines().last().unwrap_or("")).expect("JSON");
            assert_eq!(last["seq"], json!(n));
        }
    }
    // A window of time reads only its part.
    let r = app
        .get_as(
            &format!("{EXPORT}?from=2023-11-14T22:13:20Z&to=2023-11-14T22:13:20.100Z"),
            &owner.session,
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.text.lines().count(), 100);
    let v = app.get_as(VERIFY, &owner.session).await;
    assert_eq!(v.assert_ok()["entries"], json!(n), "{}", v.text);
    assert_eq!(v.assert_ok()["ok"], json!(true));
}

on_both_backends!(
    every_decision_is_an_entry_and_an_edit_is_found,
    ten_thousand_entries_stream_in_both_formats,
);
