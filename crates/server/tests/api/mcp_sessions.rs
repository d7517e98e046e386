//! MCP sessions cannot be used against the gateway: a message that opens one is at most 16 KiB (its
//! `initialize` is stored) and new sessions are limited per address; a session opened with a
//! bearer is resumed (GET) or ended (DELETE) only with that bearer. The requests of one session are
//! answered independently, each with its own id, and a session ended through another process stops
//! being served by this one.

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
    let id = handshake(&app, &alice.agent_key).await;
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

/// Opens a session on `app` with `bearer` and completes the handshake; answers its id.
async fn handshake(app: &TestApp, bearer: &str) -> String {
    let opened = open(app, Some(bearer), &initialize("parallel")).await;
    assert_eq!(opened.status, 200, "{}", opened.text);
    let id = opened
        .headers
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_else(|| panic!("no session id: {:?}", opened.headers))
        .to_owned();
    let notified = in_session(
        app,
        &id,
        bearer,
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .await;
    assert_eq!(notified.status, 202, "{}", notified.text);
    id
}

/// One message of session `id` on `app`.
async fn in_session(app: &TestApp, id: &str, bearer: &str, body: Value) -> Reply {
    app.send(
        app.client
            .post(app.url("/mcp"))
            .header("mcp-session-id", id)
            .header("mcp-protocol-version", "2025-06-18")
            .header("accept", "application/json, text/event-stream")
            .bearer_auth(bearer)
            .json(&body),
    )
    .await
}

/// An agent's parallel requests on one session: each is answered on its own with its own id and
/// its own answer (the catalog, the tool list, the agent's balance, a refusal, an unknown tool's
/// JSON-RPC error), none waits for the others to be answered in order.
async fn parallel_requests_of_one_session_are_answered_each_with_its_id(backend: Backend) {
    let app = std::sync::Arc::new(spawn_app_with(backend, Options::default()).await);
    let owner = app.onboard("parallel@example.com").await;
    let session = handshake(&app, &owner.agent_key).await;
    let call = |name: &str, args: Value| json!({"method": "tools/call", "params": {"name": name, "arguments": args}});
    let kinds = [
        json!({"method": "tools/list"}),
        call("getActionsCatalog", json!({})),
        call("getCreditsBalance", json!({})),
        call("getIntentStatus", json!({"intentId": "no-such-intent"})),
        call("noSuchTool", json!({})),
    ];
    let mut tasks = tokio::task::JoinSet::new();
    for n in 0..60 {
        let mut body = kinds[n % kinds.len()].clone();
        body["jsonrpc"] = json!("2.0");
        // String and number ids alike.
        body["id"] = if n % 2 == 0 {
            json!(format!("req-{n}"))
        } else {
            json!(1000 + n)
        };
        let (app, session, key) = (app.clone(), session.clone(), owner.agent_key.clone());
        tasks.spawn(async move {
            (
                n,
                body.clone(),
                in_session(&app, &session, &key, body).await,
            )
        });
    }
    let mut replies = Vec::new();
    while let Some(joined) = tasks.join_next().await {
        replies.push(joined.expect("a request task panicked"));
    }
    assert_eq!(replies.len(), 60);
    for (n, request, reply) in replies {
        assert_eq!(reply.status, 200, "{n}: {}", reply.text);
        let body = crate::mcp::rpc_body(&reply.text);
        assert_eq!(body["id"], request["id"], "{n}: {body}");
        match n % kinds.len() {
            0 => assert_eq!(
                body["result"]["tools"].as_array().map(Vec::len),
                Some(24),
                "{n}"
            ),
            1 => {
                let result = &body["result"];
                assert_eq!(
                    result["structuredContent"]["source"], "action_catalog",
                    "{n}"
                );
                assert_eq!(result["isError"], false, "{n}");
                let text = result["content"][0]["text"].as_str().unwrap_or_default();
                let parsed: Value = serde_json::from_str(text).unwrap_or(Value::Null);
                assert_eq!(
                    parsed, result["structuredContent"],
                    "{n}: the text is the same JSON"
                );
            }
            2 => assert_eq!(
                body["result"]["structuredContent"]["success"], true,
                "{n}: {body}"
            ),
            3 => {
                assert_eq!(body["result"]["isError"], true, "{n}: {body}");
                assert_eq!(
                    body["result"]["structuredContent"]["code"], "NOT_FOUND",
                    "{n}: {body}"
                );
            }
            _ => assert!(
                body["error"]["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("noSuchTool")),
                "{n}: {body}"
            ),
        }
    }
}

on_both_backends!(
    oversized_or_repeated_session_starts_keep_nothing,
    a_session_is_resumed_and_ended_only_by_its_bearer,
    parallel_requests_of_one_session_are_answered_each_with_its_id,
);

/// Two gateway processes on one database: a session opened and in use on one, ended (DELETE)
/// through the other, is no longer served by the first (it answers 404, as for any unknown
/// session) once it has asked the database again, which it does at least every 2 seconds.
#[tokio::test]
async fn a_session_ended_through_another_process_is_not_served_here() {
    let a = spawn_app_with(Backend::Postgres, Options::default()).await;
    let b = spawn_app_with(
        Backend::Postgres,
        Options {
            database_url: Some(a.database_url.clone()),
            master_key_file: Some(a.master_key_file()),
            ..Options::default()
        },
    )
    .await;
    let owner = a.onboard("ended-elsewhere@example.com").await;
    let key = owner.agent_key.clone();
    let session = handshake(&a, &key).await;
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    assert_eq!(
        in_session(&a, &session, &key, list.clone()).await.status,
        200
    );
    let ended = b
        .send(
            b.client
                .delete(b.url("/mcp"))
                .header("mcp-session-id", &session)
                .header("mcp-protocol-version", "2025-06-18")
                .bearer_auth(&key),
        )
        .await;
    assert!((200..300).contains(&ended.status), "{}", ended.text);
    let mut statuses = Vec::new();
    for _ in 0..50 {
        let status = in_session(&a, &session, &key, list.clone()).await.status;
        statuses.push(status);
        if status == 404 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    assert_eq!(statuses.last(), Some(&404), "{statuses:?}");
    assert!(
        statuses.iter().all(|s| *s == 200 || *s == 404),
        "{statuses:?}"
    );
    // And it stays ended.
    assert_eq!(in_session(&a, &session, &key, list).await.status, 404);
}
