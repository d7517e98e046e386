use serde_json::json;

use crate::helpers::{Backend, spawn_app};
use crate::on_both_backends;

async fn malformed_and_oversized_bodies_get_our_envelope(backend: Backend) {
    let app = spawn_app(backend).await;
    let url = app.url("/api/v1/onboarding/email/start");
    let r = app
        .send(
            app.client
                .post(&url)
                .header("content-type", "application/json")
                .body("{\"email\":"),
        )
        .await;
    r.assert_error(400, "INVALID_REQUEST");
    assert_eq!(r.body["error"], "INVALID_REQUEST");

    let r = app
        .send(
            app.client
                .post(&url)
                .header("content-type", "application/json")
                .body("[1,2]"),
        )
        .await;
    r.assert_error(400, "INVALID_REQUEST");

    let r = app
        .send(app.client.post(&url).body("{\"email\":\"a@example.com\"}"))
        .await;
    r.assert_error(415, "UNSUPPORTED_MEDIA_TYPE");
    assert!(
        app.smtp.messages_to("a@example.com").is_empty(),
        "a refused request sent mail"
    );

    let big = format!("{{\"email\":\"{}@example.com\"}}", "a".repeat(1024 * 1024));
    let r = app
        .send(
            app.client
                .post(&url)
                .header("content-type", "application/json")
                .body(big),
        )
        .await;
    r.assert_error(413, "PAYLOAD_TOO_LARGE");

    // Just under the limit is parsed (and refused for what it says, not for its size).
    let near = format!("{{\"email\":\"{}\"}}", "a".repeat(1024 * 1024 - 20));
    let r = app
        .send(
            app.client
                .post(&url)
                .header("content-type", "application/json")
                .body(near),
        )
        .await;
    r.assert_error(400, "INVALID_REQUEST");
}

async fn unknown_routes_and_methods(backend: Backend) {
    let app = spawn_app(backend).await;
    app.get("/api/v1/nothing-here")
        .await
        .assert_error(404, "NOT_FOUND");
    app.send(app.client.delete(app.url("/api/v1/agent/actions/catalog")))
        .await
        .assert_error(405, "METHOD_NOT_ALLOWED");
    app.post("/api/v1/agent/actions/catalog", json!({}))
        .await
        .assert_error(405, "METHOD_NOT_ALLOWED");
    let r = app
        .get("/api/v1/agent/actions?agentApiKey=a&agentApiKey=b")
        .await;
    assert_eq!(r.status, 400, "{}", r.text);
    app.get("/api/v1/agent/actions?bogus=1")
        .await
        .assert_error(400, "INVALID_REQUEST");
}

on_both_backends!(
    malformed_and_oversized_bodies_get_our_envelope,
    unknown_routes_and_methods
);
