//! The MCP server, driven by the official MCP client SDKs (Python from the test venv, TypeScript from
//! tests/e2e/node_modules), and a parity check of REST and MCP.

use std::process::Command;

use serde_json::{Value, json};

use crate::helpers::{Backend, spawn_app};

fn run_python_client(app: &crate::helpers::TestApp, mode: &str, email: &str) -> Value {
    let out = Command::new(actiongate_testkit::python())
        .arg(actiongate_testkit::repo_root().join("tests/e2e/mcp_python.py"))
        .args(["--url", &app.url("/mcp"), "--email", email, "--mode", mode, "--maildir"])
        .arg(app.smtp.maildir())
        .output()
        .unwrap_or_else(|e| panic!("cannot run the Python MCP client: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "python client ({mode}) failed:\n{stdout}\n{stderr}");
    serde_json::from_str(stdout.lines().last().unwrap_or("")).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

#[tokio::test]
async fn official_python_sdk_in_default_and_legacy_modes() {
    let app = spawn_app(Backend::Sqlite).await;
    let app2 = std::sync::Arc::new(app);
    for (mode, email) in [("auto", "py-auto@example.com"), ("legacy", "py-legacy@example.com")] {
        let app = app2.clone();
        let summary = tokio::task::spawn_blocking(move || run_python_client(&app, mode, email))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(summary["ok"], json!(true), "{summary}");
        assert_eq!(summary["intent"], "completed");
        assert_eq!(summary["mismatch"], "AGENT_IDENTITY_MISMATCH");
    }
}

#[tokio::test]
async fn official_typescript_sdk() {
    let app = spawn_app(Backend::Postgres).await;
    let script = actiongate_testkit::repo_root().join("tests/e2e/mcp_ts.mjs");
    assert!(
        actiongate_testkit::repo_root().join("tests/e2e/node_modules/@modelcontextprotocol/sdk").exists(),
        "the TypeScript SDK is not installed: run ./scripts/test (npm ci in tests/e2e)"
    );
    let out = tokio::process::Command::new("node")
        .arg(&script)
        .args(["--url", &app.url("/mcp"), "--email", "ts@example.com", "--maildir"])
        .arg(app.smtp.maildir())
        .output()
        .await
        .unwrap_or_else(|e| panic!("cannot run node: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "TypeScript client failed:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let summary: Value = serde_json::from_str(stdout.lines().last().unwrap_or("")).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    assert_eq!(summary["ok"], json!(true), "{summary}");
    assert_eq!(summary["mismatch"], "AGENT_IDENTITY_MISMATCH");
}

/// The tools an agent sees are a public contract: a change shows in review.
#[test]
fn tools_list_is_snapshotted() {
    let tools = serde_json::to_value(actiongate_server::http::mcp_tools::tool_list()).unwrap_or(Value::Null);
    insta::assert_json_snapshot!("mcp_tools_list", tools);
}
