//! Webhooks and the event stream (issue 27): each event is posted signed (checked here with an
//! HMAC written independently of the gateway's), retried while the receiver is down and received
//! once by id when it is back, delivered after a restart by another process of the same database,
//! and streamed over SSE; a URL on a private address is refused.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use actiongate_testkit::standin::StandInVenue;
use axum::extract::State;
use axum::http::HeaderMap;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::helpers::{Backend, Options, Owner, TestApp, spawn_app_with};
use crate::intents::{chain_config, ready_to_fan_out, swap, wait_terminal};
use crate::on_both_backends;

const HOOKS: &str = "/api/v1/webhooks";

/// HMAC-SHA-256 (RFC 2104) over SHA-256, written here so that the check does not reuse the
/// gateway's code.
fn hmac_sha256(key: &[u8], message: &[u8]) -> String {
    let mut block = [0u8; 64];
    if key.len() > 64 {
        block[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    let pad = |b: u8| block.iter().map(|k| k ^ b).collect::<Vec<u8>>();
    let inner = Sha256::new()
        .chain_update(pad(0x36))
        .chain_update(message)
        .finalize();
    let outer = Sha256::new()
        .chain_update(pad(0x5c))
        .chain_update(inner)
        .finalize();
    outer.iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether `header` (`t=…,v1=…`) signs `body` under `secret`.
pub(crate) fn signed(secret: &str, header: &str, body: &str) -> bool {
    let parts: HashMap<&str, &str> = header
        .split(',')
        .filter_map(|p| p.split_once('='))
        .collect();
    let (Some(t), Some(v1)) = (parts.get("t"), parts.get("v1")) else {
        return false;
    };
    hmac_sha256(secret.as_bytes(), format!("{t}.{body}").as_bytes()) == *v1
}

pub(crate) type Received = Arc<Mutex<Vec<(String, String)>>>;

/// A receiver on `port`: records each post's signature header and body, answers 200.
pub(crate) async fn receiver(port: u16) -> Received {
    let got: Received = Arc::default();
    async fn hook(State(got): State<Received>, headers: HeaderMap, body: String) -> &'static str {
        let sig = headers
            .get("actiongate-signature")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned();
        if let Ok(mut g) = got.lock() {
            g.push((sig, body));
        }
        "ok"
    }
    let app = axum::Router::new()
        .route("/hook", axum::routing::post(hook))
        .with_state(got.clone());
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .expect("the receiver's port is free again");
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    got
}

/// The owner's event stream, open.
async fn open_stream(app: &TestApp, owner: &Owner) -> reqwest::Response {
    let sse = app
        .client
        .get(app.url("/api/v1/events"))
        .bearer_auth(&owner.session)
        .send()
        .await
        .expect("the stream opens");
    assert_eq!(sse.status().as_u16(), 200);
    sse
}

/// A port nothing listens on (yet).
pub(crate) fn closed_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    l.local_addr().expect("an address").port()
}

async fn app(
    backend: Backend,
    database_url: Option<String>,
    key: Option<std::path::PathBuf>,
) -> TestApp {
    spawn_app_with(
        backend,
        Options {
            providers: vec![StandInVenue::new()],
            config_toml: chain_config("[webhooks]\nallow-private = true\ncredits-low-below = 95"),
            database_url,
            master_key_file: key,
        },
    )
    .await
}

async fn register(app: &TestApp, owner: &Owner, port: u16, events: Value) -> (String, String) {
    let r = app
        .post_as(
            HOOKS,
            &owner.session,
            Some(json!({"url": format!("http://127.0.0.1:{port}/hook"), "events": events})),
        )
        .await;
    let data = r.assert_ok();
    (
        data["webhook"]["id"].as_str().expect("id").to_owned(),
        data["secret"].as_str().expect("secret").to_owned(),
    )
}

/// The distinct events received so far, by id, once `want` have arrived (and none twice).
async fn received(got: &Received, secret: &str, want: usize) -> HashMap<String, Value> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let posts = got.lock().map(|g| g.clone()).unwrap_or_default();
        let mut by_id = HashMap::new();
        for (sig, body) in &posts {
            assert!(signed(secret, sig, body), "bad signature {sig} on {body}");
            let v: Value = serde_json::from_str(body).expect("JSON");
            let id = v["id"].as_str().unwrap_or("").to_owned();
            assert!(
                by_id.insert(id, v).is_none(),
                "an event received twice: {body}"
            );
        }
        if by_id.len() >= want {
            return by_id;
        }
        assert!(
            Instant::now() < deadline,
            "{} of {want} events: {posts:?}",
            by_id.len()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn events_are_signed_retried_and_received_once(backend: Backend) {
    let app = app(backend, None, None).await;
    let owner = app.onboard("hooks@example.com").await;
    let port = closed_port();
    let (id, secret) = register(
        &app,
        &owner,
        port,
        json!([
            "intent.completed",
            "intent.failed",
            "approval.requested",
            "credits.low"
        ]),
    )
    .await;
    let list = app.get_as(HOOKS, &owner.session).await;
    assert_eq!(list.assert_ok()["webhooks"][0]["id"], json!(id));
    assert!(!list.text.contains(&secret), "the secret is shown once");
    ready_to_fan_out(
        &app,
        &owner,
        json!({"allowedActions": ["swap"], "dailyLimitUsd": 1000, "approvalAboveUsd": 50}),
    )
    .await;

    // The event stream, open before the events.
    let mut sse = open_stream(&app, &owner).await;

    // Completed (its reservation takes the balance from 100 to 90: credits.low), then an approval
    // asked for and rejected (intent.failed).
    let r = app
        .post(
            "/api/v1/agent/execute-intent",
            swap(&owner.agent_key, "5", Some("w1")),
        )
        .await;
    let done = r.body["intentId"].as_str().expect("accepted").to_owned();
    wait_terminal(&app, &owner.agent_key, &done).await;
    let r = app
        .post(
            "/api/v1/agent/execute-intent",
            swap(&owner.agent_key, "60", Some("w2")),
        )
        .await;
    let waiting = r.body["intentId"].as_str().expect("accepted").to_owned();
    app.post_as(
        &format!("/api/v1/approvals/{waiting}/reject"),
        &owner.session,
        None,
    )
    .await
    .assert_ok();

    // The stream carries them as they happen.
    let mut text = String::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !(text.contains("event: intent.completed") && text.contains("event: intent.failed")) {
        assert!(Instant::now() < deadline, "the stream said: {text}");
        if let Ok(Ok(Some(chunk))) = tokio::time::timeout(Duration::from_secs(1), sse.chunk()).await
        {
            text.push_str(&String::from_utf8_lossy(&chunk));
        }
    }
    assert!(text.contains(&done) && text.contains(&waiting), "{text}");
    drop(sse);

    // Nothing listens: each delivery is tried, fails, and waits for its retry.
    let deliveries = format!("{HOOKS}/{id}/deliveries");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let r = app.get_as(&deliveries, &owner.session).await;
        let list = r.assert_ok()["deliveries"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if list.len() == 4 && list.iter().all(|d| d["attempts"].as_u64() >= Some(1)) {
            assert!(
                list.iter()
                    .all(|d| d["state"] == "pending" && d["lastError"].is_string()),
                "{}",
                r.text
            );
            break;
        }
        assert!(Instant::now() < deadline, "{}", r.text);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // The receiver is up; the retries come due: every event arrives, signed, once.
    let got = receiver(port).await;
    app.clock.advance(time::Duration::seconds(11));
    let events = received(&got, &secret, 4).await;
    let types: Vec<&str> = {
        let mut t: Vec<&str> = events.values().filter_map(|v| v["type"].as_str()).collect();
        t.sort_unstable();
        t
    };
    assert_eq!(
        types,
        [
            "approval.requested",
            "credits.low",
            "intent.completed",
            "intent.failed"
        ]
    );
    let completed = events
        .values()
        .find(|v| v["type"] == "intent.completed")
        .expect("completed");
    assert_eq!(completed["subject"], json!(done));
    // Later retries find nothing more to send.
    app.clock.advance(time::Duration::hours(2));
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(received(&got, &secret, 4).await.len(), 4);
    let r = app.get_as(&deliveries, &owner.session).await;
    let list = r.assert_ok()["deliveries"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        list.iter().all(|d| d["state"] == "delivered"
            && d["lastStatus"] == json!(200)
            && d["attempts"].as_u64() >= Some(2)),
        "{}",
        r.text
    );

    // A rotated secret signs what comes next; the old one does not.
    let rotated = app
        .post_as(&format!("{HOOKS}/{id}/rotate-secret"), &owner.session, None)
        .await;
    let new_secret = rotated.assert_ok()["secret"]
        .as_str()
        .expect("secret")
        .to_owned();
    assert_ne!(new_secret, secret);
    got.lock().map(|mut g| g.clear()).unwrap_or(());
    let r = app
        .post(
            "/api/v1/agent/execute-intent",
            swap(&owner.agent_key, "5", Some("w3")),
        )
        .await;
    wait_terminal(
        &app,
        &owner.agent_key,
        r.body["intentId"].as_str().expect("accepted"),
    )
    .await;
    let after = received(&got, &new_secret, 1).await;
    assert!(after.values().all(|v| v["type"] == "intent.completed"));
    // Another owner cannot see or delete it; its owner can.
    let other = app.onboard("not-hooks@example.com").await;
    app.get_as(&deliveries, &other.session)
        .await
        .assert_error(404, "NOT_FOUND");
    app.send(
        app.client
            .delete(app.url(&format!("{HOOKS}/{id}")))
            .bearer_auth(&other.session),
    )
    .await
    .assert_error(404, "NOT_FOUND");
    app.send(
        app.client
            .delete(app.url(&format!("{HOOKS}/{id}")))
            .bearer_auth(&owner.session),
    )
    .await
    .assert_ok();
    assert_eq!(
        app.get_as(HOOKS, &owner.session).await.assert_ok()["webhooks"],
        json!([])
    );
}

async fn a_restart_between_the_event_and_its_delivery_delivers_it(backend: Backend) {
    // The database outlives the first process (its own directory goes with it).
    let keep = tempfile::tempdir().expect("tempdir");
    let url = match backend {
        Backend::Sqlite => format!("sqlite://{}", keep.path().join("gateway.db").display()),
        Backend::Postgres => actiongate_testkit::fresh_postgres_url()
            .await
            .expect("a fresh PostgreSQL schema"),
    };
    let first = app(backend, Some(url.clone()), None).await;
    let owner = first.onboard("restart-hooks@example.com").await;
    let port = closed_port();
    let (_, secret) = register(&first, &owner, port, json!(["intent.completed"])).await;
    ready_to_fan_out(
        &first,
        &owner,
        json!({"allowedActions": ["swap"], "dailyLimitUsd": 1000}),
    )
    .await;
    let r = first
        .post(
            "/api/v1/agent/execute-intent",
            swap(&owner.agent_key, "5", Some("r1")),
        )
        .await;
    let id = r.body["intentId"].as_str().expect("accepted").to_owned();
    wait_terminal(&first, &owner.agent_key, &id).await;
    // The event is in the outbox; the process goes away before anyone received it.
    let deadline = Instant::now() + Duration::from_secs(20);
    while first.count_rows("webhook_deliveries").await == 0 {
        assert!(Instant::now() < deadline, "no delivery written");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let key = first.master_key_file();
    let key_copy = keep.path().join("master.key");
    std::fs::copy(&key, &key_copy).expect("the master key");
    first.stop().await;

    let got = receiver(port).await;
    let second = app(backend, Some(url), Some(key_copy)).await;
    second.clock.advance(time::Duration::seconds(61));
    let events = received(&got, &secret, 1).await;
    let event = events.values().next().expect("an event");
    assert_eq!(
        (event["type"].clone(), event["subject"].clone()),
        (json!("intent.completed"), json!(id))
    );
}

async fn private_addresses_and_bad_input_are_refused(backend: Backend) {
    let app = spawn_app_with(backend, Options::default()).await;
    let owner = app.onboard("ssrf@example.com").await;
    for url in [
        "http://127.0.0.1:9/hook",
        "http://localhost:9/hook",
        "http://169.254.169.254/latest/meta-data",
        "http://10.0.0.7/hook",
        "http://[::1]:9/hook",
    ] {
        app.post_as(
            HOOKS,
            &owner.session,
            Some(json!({"url": url, "events": ["intent.completed"]})),
        )
        .await
        .assert_error(400, "WEBHOOK_URL_REFUSED");
    }
    for body in [
        json!({"url": "ftp://example.com/x", "events": ["intent.completed"]}),
        json!({"url": "not a url", "events": ["intent.completed"]}),
        json!({"url": "https://user:pw@example.com/x", "events": ["intent.completed"]}),
        json!({"url": "https://example.com/x", "events": ["intent.exploded"]}),
        json!({"url": "https://example.com/x", "events": []}),
    ] {
        app.post_as(HOOKS, &owner.session, Some(body))
            .await
            .assert_error(400, "INVALID_REQUEST");
    }
    app.post_as(
        HOOKS,
        &owner.agent_key,
        Some(json!({"url": "https://example.com/x", "events": ["intent.completed"]})),
    )
    .await
    .assert_error(401, "UNAUTHORIZED");
    assert_eq!(
        app.get_as(HOOKS, &owner.session).await.assert_ok()["webhooks"],
        json!([])
    );
    assert_eq!(app.count_rows("webhooks").await, 0);
}

/// An open event stream ends soon after its owner signs out: a signed-out session reads nothing
/// more.
async fn the_event_stream_ends_with_its_session(backend: Backend) {
    let app = spawn_app_with(backend, Options::default()).await;
    let owner = app.onboard("stream@example.com").await;
    let mut sse = open_stream(&app, &owner).await;
    app.send(
        app.client
            .delete(app.url("/api/v1/session"))
            .bearer_auth(&owner.session),
    )
    .await
    .assert_ok();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match tokio::time::timeout(Duration::from_secs(1), sse.chunk()).await {
            Ok(Ok(None)) | Ok(Err(_)) => break,
            Ok(Ok(Some(_))) | Err(_) => {
                assert!(Instant::now() < deadline, "the stream outlived its session");
            }
        }
    }
    app.get_as("/api/v1/events", &owner.session)
        .await
        .assert_error(401, "UNAUTHORIZED");
}

on_both_backends!(
    the_event_stream_ends_with_its_session,
    events_are_signed_retried_and_received_once,
    a_restart_between_the_event_and_its_delivery_delivers_it,
    private_addresses_and_bad_input_are_refused,
);
