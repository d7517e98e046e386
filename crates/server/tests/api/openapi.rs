use crate::helpers::{Backend, spawn_app};

/// Every route the server answers is in the document, and the document's shape is reviewed
/// through a snapshot.
#[tokio::test]
async fn openapi_covers_every_route_and_is_snapshotted() {
    let app = spawn_app(Backend::Sqlite).await;
    let r = app.get("/api/v1/openapi.json").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["openapi"], "3.1.0");
    let paths = r.body["paths"].as_object().cloned().unwrap_or_default();
    let expected = [
        ("/healthz", "get"),
        ("/readyz", "get"),
        ("/api/v1/agent/actions/catalog", "get"),
        ("/api/v1/agent/actions", "get"),
        ("/api/v1/onboarding/email/start", "post"),
        ("/api/v1/onboarding/email/complete", "post"),
        ("/api/v1/session", "delete"),
        ("/api/v1/agents", "get"),
        ("/api/v1/agents", "post"),
        ("/api/v1/agents/{agentId}/rotate-key", "post"),
        ("/api/v1/agents/{agentId}/policy", "get"),
        ("/api/v1/agents/{agentId}/policy", "put"),
        ("/api/v1/agent/execute-intent", "post"),
        ("/api/v1/agent/execute-intent/status", "get"),
        ("/api/v1/agent/execute", "post"),
        ("/api/v1/agent/build-tx", "post"),
        ("/api/v1/agent/credits/balance", "get"),
        ("/api/v1/agent/credits/buy-with-x402", "post"),
        ("/api/v1/credits/x402-metadata", "get"),
        ("/api/v1/credits/buy-with-x402", "post"),
        ("/api/v1/wallets/link/begin", "post"),
        ("/api/v1/wallets/link", "post"),
        ("/api/v1/agent/preflight", "post"),
        ("/api/v1/agent/me", "get"),
        ("/api/v1/agent/delegation/create", "post"),
        ("/api/v1/agent/delegation/activate", "post"),
        ("/api/v1/agent/delegation/check", "get"),
        ("/api/v1/agent/delegation/verify", "get"),
        ("/api/v1/agent/delegation/inspect", "get"),
        ("/api/v1/agent/delegation/balance", "get"),
        ("/api/v1/agent/delegation/revoke", "post"),
        ("/api/v1/agent/delegation/redeem", "post"),
        ("/api/v1/agent/delegation/personhood/rp", "get"),
        ("/api/v1/agent/delegation/personhood/org/begin", "post"),
        ("/api/v1/agent/delegation/personhood/org/complete", "post"),
        ("/api/v1/agent/delegation/personhood/org/check", "get"),
        ("/api/v1/agent/delegation/personhood/begin", "post"),
        ("/api/v1/agent/delegation/personhood/complete", "post"),
        ("/api/v1/agent/delegation/personhood/deposit/begin", "post"),
        (
            "/api/v1/agent/delegation/personhood/deposit/complete",
            "post",
        ),
        (
            "/api/v1/agent/delegation/personhood/deposit/consume",
            "post",
        ),
        ("/mcp/tools", "get"),
        ("/mcp/tool/{name}", "post"),
    ];
    for (path, method) in expected {
        assert!(
            paths.get(path).and_then(|p| p.get(method)).is_some(),
            "{method} {path} missing from openapi.json"
        );
    }
    let documented: usize = paths
        .values()
        .map(|p| p.as_object().map_or(0, |o| o.len()))
        .sum();
    assert_eq!(
        documented,
        expected.len(),
        "a documented route the test does not know: update both"
    );
    insta::assert_json_snapshot!("openapi", r.body);

    // The docs page and its assets are served locally (no CDN).
    let page = app.get("/docs/").await;
    assert_eq!(page.status, 200);
    assert!(
        !page.text.contains("cdn.") && !page.text.contains("unpkg"),
        "docs page loads from a CDN"
    );
    let init = app.get("/docs/swagger-initializer.js").await;
    assert_eq!(init.status, 200);
    assert!(init.text.contains("/api/v1/openapi.json"));
}
