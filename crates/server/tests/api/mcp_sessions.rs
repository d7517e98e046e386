//! MCP sessions cannot be used against the gateway: a message that opens one is at most 16 KiB (its
//! `initialize` is stored) and new sessions are limited per address; a session opened with a
//! bearer is resumed (GET) or ended (DELETE) only with that bearer.

use serde_json::{Value, json};

use crate::helpers::{
    Backend, Options, Reply, TestApp, mcp_initialize as initialize, spawn_app_with,
};
use crate::on_both_backends;

async fn open(app: &TestApp, bearer: Option<&str>, body: &Value) -> Reply {
    app.mcp_open(bearer, body).await
}

async fn oversized_or_repeated_session_starts_keep_nothing(backend: Backend) {
    let app = spawn_app_with(
        backend,
        Options {
            config_toml: "[limits]\n".into(),
            ..Options::default()
        },
    )
    .await;
    let big = initialize(&"x".repeat(200 * 1024));
    let mut statuses = std::collections::BTreeMap::<u16, usize>::new();
    for _ in 0..400 {
        *statuses
            .entry(open(&app, None, &big).await.status)
            .or_default() += 1;
    }
    // The 60 of the minute (and the one a second the bucket refills while this runs) are read and
    // refused for their size, the rest for their rate: nothing else.
    let (too_big, too_many) = (statuses.remove(&413), statuses.remove(&429));
    assert!(statuses.is_empty(), "{statuses:?}");
    assert!(
        too_big.is_some_and(|n| (60..80).contains(&n))
            && too_big.zip(too_many).map(|(a, b)| a + b) == Some(400),
        "{too_big:?} {too_many:?}"
    );
    assert_eq!(
        app.count_rows("mcp_sessions").await,
        0,
        "no oversized session was kept"
    );
}

async fn a_session_is_resumed_and_ended_only_by_its_bearer(backend: Backend) {
    let app = spawn_app_with(backend, Options::default()).await;
    let alice = app.onboard("alice@example.com").await;
    let bob = app.onboard("bob@example.com").await;
    let opened = open(&app, Some(&alice.agent_key), &initialize("alice")).await;
    assert_eq!(opened.status, 200, "{}", opened.text);
    let id = opened
        .headers
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_else(|| panic!("no session id: {:?}", opened.headers))
        .to_owned();
    let with = |method: reqwest::Method, bearer: Option<&str>| {
        let mut req = app
            .client
            .request(method, app.url("/mcp"))
            .header("mcp-session-id", &id)
            .header("mcp-protocol-version", "2025-06-18")
            .header("accept", "application/json, text/event-stream");
        if let Some(b) = bearer {
            req = req.bearer_auth(b);
        }
        req
    };
    for (method, bearer) in [
        (reqwest::Method::GET, None),
        (reqwest::Method::GET, Some(bob.agent_key.as_str())),
        (reqwest::Method::DELETE, None),
        (reqwest::Method::DELETE, Some(bob.agent_key.as_str())),
    ] {
        let r = app.send(with(method.clone(), bearer)).await;
        assert_eq!(
            (r.status, r.body["error"]["data"]["code"].clone()),
            (401, json!("UNAUTHORIZED")),
            "{method} with {bearer:?}: {}",
            r.text
        );
    }
    // Its own bearer ends it.
    let ended = app
        .send(with(reqwest::Method::DELETE, Some(&alice.agent_key)))
        .await;
    assert!(
        (200..300).contains(&ended.status),
        "{} {}",
        ended.status,
        ended.text
    );
}

on_both_backends!(
    oversized_or_repeated_session_starts_keep_nothing,
    a_session_is_resumed_and_ended_only_by_its_bearer,
);
