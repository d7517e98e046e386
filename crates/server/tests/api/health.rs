use crate::helpers::{Backend, spawn_app};
use crate::on_both_backends;

async fn health_and_readiness(backend: Backend) {
    let app = spawn_app(backend).await;
    let r = app.get("/healthz").await;
    assert_eq!(r.assert_ok()["status"], "ok");
    let r = app.get("/readyz").await;
    assert_eq!(r.assert_ok()["status"], "ok");
    app.stop().await;
}

async fn every_response_carries_a_request_id(backend: Backend) {
    let app = spawn_app(backend).await;
    for path in [
        "/healthz",
        "/api/v1/agent/actions/catalog",
        "/no/such/route",
    ] {
        let r = app.get(path).await;
        let id = r
            .headers
            .get("x-request-id")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        assert_eq!(id.len(), 36, "{path}: x-request-id {id:?}");
    }
    // A caller's own id is kept, so that it can follow its request through our logs.
    let r = app
        .send(
            app.client
                .get(app.url("/healthz"))
                .header("x-request-id", "trace-me-123"),
        )
        .await;
    assert_eq!(
        r.headers.get("x-request-id").and_then(|v| v.to_str().ok()),
        Some("trace-me-123")
    );
}

on_both_backends!(health_and_readiness, every_response_carries_a_request_id);
