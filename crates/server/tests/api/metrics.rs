//! `GET /metrics`: the counters an operator scrapes move with what the gateway does, carry codes
//! and route templates but never a key or a session, and move to their own listener with
//! `metrics-listen`. The recorder is the process's, shared by the tests running beside this one:
//! each check is a value that grew by at least what this test did.

use serde_json::json;

use crate::helpers::{Backend, Options, TestApp, spawn_app_with};
use crate::on_both_backends;

/// The value of the series `name{labels}` (labels in any order, each `k="v"`), summed over series
/// that carry at least those labels; 0 when there is none.
fn value(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.rsplit_once(' '))
        .filter(|(series, _)| {
            let (metric, rest) = series.split_once('{').unwrap_or((series, ""));
            metric == name
                && labels
                    .iter()
                    .all(|(k, v)| rest.contains(&format!("{k}=\"{v}\"")))
        })
        .filter_map(|(_, v)| v.parse::<f64>().ok())
        .sum()
}

async fn scrape(app: &TestApp) -> String {
    let r = app.get("/metrics").await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert!(
        r.headers
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/plain")),
        "{:?}",
        r.headers
    );
    r.text
}

async fn counters_move_with_what_the_gateway_does(backend: Backend) {
    let app = spawn_app_with(
        backend,
        Options {
            config_toml:
                "[limits]\nonboarding-per-minute = 2\nrequests-per-second = 1000\nburst = 1000\n"
                    .into(),
            ..Options::default()
        },
    )
    .await;
    let owner = app.onboard("metrics@example.com").await;
    let before = scrape(&app).await;
    let submit =
        |action: &str| json!({"agentApiKey": owner.agent_key, "action": action, "params": {}});
    // One read accepted and run, one refusal with its code, one path no route has.
    let accepted = app
        .post(
            "/api/v1/agent/execute-intent",
            submit("get_fx_supported_assets"),
        )
        .await;
    assert_eq!(accepted.status, 200, "{}", accepted.text);
    let intent = accepted.body["intentId"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let refused = app
        .post("/api/v1/agent/execute-intent", submit("no-such-action"))
        .await;
    let code = refused.body["code"].as_str().unwrap_or_default().to_owned();
    assert!(
        !code.is_empty() && refused.status >= 400,
        "{}",
        refused.text
    );
    assert_eq!(app.get("/no/such/route").await.status, 404);
    // Two MCP tool calls through the mirror: the catalog, and a refusal.
    assert_eq!(
        app.post("/mcp/tool/getActionsCatalog", json!({}))
            .await
            .status,
        200
    );
    let status = app
        .send(
            app.client
                .post(app.url("/mcp/tool/getIntentStatus"))
                .bearer_auth(&owner.agent_key)
                .json(&json!({"intentId": "no-such-intent"})),
        )
        .await;
    assert_eq!(status.status, 404, "{}", status.text);
    // The onboarding limit (2 a minute from one address; onboard used one): a refusal counted.
    let mut limited = 0;
    for n in 0..3 {
        let r = app
            .post(
                "/api/v1/onboarding/email/start",
                json!({"email": format!("m{n}@example.com")}),
            )
            .await;
        limited += usize::from(r.status == 429);
    }
    assert!(limited >= 1);
    let ended = crate::intents::wait_terminal(&app, &owner.agent_key, &intent).await;
    assert_eq!(ended["status"], "completed", "{ended}");
    let after = scrape(&app).await;
    let grew = |name: &str, labels: &[(&str, &str)]| {
        value(&after, name, labels) - value(&before, name, labels)
    };
    let submit_route = [
        ("route", "/api/v1/agent/execute-intent"),
        ("method", "POST"),
    ];
    assert!(
        grew(
            "actiongate_http_requests_total",
            &[
                submit_route[0],
                submit_route[1],
                ("status", "200"),
                ("code", "-")
            ]
        ) >= 1.0,
        "{after}"
    );
    assert!(
        grew(
            "actiongate_http_requests_total",
            &[submit_route[0], ("code", &code)]
        ) >= 1.0,
        "{after}"
    );
    assert!(
        grew(
            "actiongate_http_requests_total",
            &[
                ("route", "unmatched"),
                ("status", "404"),
                ("code", "NOT_FOUND")
            ]
        ) >= 1.0,
        "{after}"
    );
    assert!(
        grew(
            "actiongate_http_request_duration_seconds_count",
            &submit_route
        ) >= 2.0,
        "{after}"
    );
    assert!(
        grew("actiongate_intents_accepted_total", &[]) >= 1.0,
        "{after}"
    );
    assert!(
        grew("actiongate_submit_batch_size_count", &[]) >= 1.0,
        "{after}"
    );
    assert!(
        grew("actiongate_submit_commit_seconds_count", &[]) >= 1.0,
        "{after}"
    );
    assert!(
        grew(
            "actiongate_executions_total",
            &[("outcome", "succeeded"), ("kind", "read")]
        ) >= 1.0,
        "{after}"
    );
    assert!(
        grew("actiongate_intents_ended_total", &[("status", "completed")]) >= 1.0,
        "{after}"
    );
    assert!(
        grew("actiongate_rate_limited_total", &[("limit", "onboarding")]) >= 1.0,
        "{after}"
    );
    // Read from the database at the scrape.
    assert!(
        after.contains("actiongate_intents{status=\"queued\"}"),
        "{after}"
    );
    assert!(after.contains("actiongate_runner_lag_seconds"), "{after}");
    // Never a secret, an address or an id in a label.
    for secret in [&owner.agent_key, &owner.session, &owner.account_id, &intent] {
        assert!(!after.contains(secret.as_str()), "{secret} in the metrics");
    }
    assert!(
        !after.contains("127.0.0.1"),
        "a client address in the metrics"
    );
}

on_both_backends!(counters_move_with_what_the_gateway_does);

/// With `metrics-listen` the metrics are served there and not on the main listener.
#[tokio::test]
async fn metrics_listen_moves_the_metrics_to_their_own_listener() {
    let app = spawn_app_with(
        Backend::Sqlite,
        Options {
            config_toml: "metrics-listen = \"127.0.0.1:0\"\n".into(),
            ..Options::default()
        },
    )
    .await;
    app.get("/metrics").await.assert_error(404, "NOT_FOUND");
    let at = app
        .metrics_addr
        .unwrap_or_else(|| panic!("no metrics listener"));
    let r = app
        .send(app.client.get(format!("http://{at}/metrics")))
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert!(
        r.text.contains("actiongate_intents{status=\"queued\"}"),
        "{}",
        r.text
    );
}
