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
