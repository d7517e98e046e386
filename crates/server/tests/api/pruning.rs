//! Tables that would only grow are pruned: expired e-mail codes and owner sessions, e-mail check
//! budgets past their day, idempotency keys past their retention; intents stay.

use serde_json::json;

use crate::helpers::{Backend, spawn_app};
use crate::on_both_backends;

async fn what_has_outlived_its_use_is_pruned(backend: Backend) {
    let app = spawn_app(backend).await;
    let owner = app.onboard("kept@example.com").await;
    // A live code with a wrong check against it, and an intent under an explicit key.
    app.request_code("pending@example.com").await;
    app.post(
        "/api/v1/onboarding/email/complete",
        json!({"email": "pending@example.com", "code": "not-it", "acceptTerms": true}),
    )
    .await
    .assert_error(401, "INVALID_CODE");
    let submitted = app
        .post(
            "/api/v1/agent/execute-intent",
            json!({"agentApiKey": owner.agent_key, "action": "get-fx-supported-assets", "params": {},
                   "idempotencyKey": "kept-1"}),
        )
        .await;
    assert_eq!(submitted.status, 200, "{}", submitted.text);
    let tables = [
        "email_challenges",
        "email_check_budget",
        "owner_sessions",
        "idempotency_keys",
    ];
    for t in tables {
        assert!(app.count_rows(t).await > 0, "{t} holds the live rows");
    }
    // Nothing live is pruned.
    assert_eq!(app.gateway.prune().await.ok(), Some(0));
    // Eight days on, every one of them has outlived its use; the intent is still there.
    app.clock.advance(time::Duration::days(8));
    assert!(app.gateway.prune().await.is_ok_and(|n| n >= 4));
    for t in tables {
        assert_eq!(app.count_rows(t).await, 0, "{t} was pruned");
    }
    assert_eq!(app.count_rows("intents").await, 1);
}

on_both_backends!(what_has_outlived_its_use_is_pruned);
