//! Secrets never reach the logs, at any level: onboarding over REST (the CLI's login) and over MCP
//! (the official Python SDK), then calls with the key and the session, with the gateway logging at
//! `debug` and at `trace`, as text and as JSON; no agent key, owner session or e-mail code appears in
//! any line. In JSON every line is one object, and a request's lines carry its request id.
#![allow(clippy::panic, clippy::expect_used)] // Tests fail by panicking, saying what failed.

mod common;

use std::process::Command;

use serde_json::{Value, json};

use common::Gateway;

fn mcp(g: &Gateway, key: Option<&str>, tool: &str, args: Value) -> Value {
    let mut cmd = Command::new(actiongate_testkit::python());
    cmd.arg(actiongate_testkit::repo_root().join("tests/e2e/mcp_call.py"))
        .args(["--url", &format!("{}/mcp", g.url), "--tool", tool])
        .args(["--args", &args.to_string()]);
    match key {
        Some(k) => cmd.env("ACTIONGATE_KEY", k),
        None => cmd.env_remove("ACTIONGATE_KEY"),
    };
    let out = cmd.output().expect("the MCP client runs");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{stdout} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

async fn no_secret_in_the_logs_at(level: &str, format: &str) -> Gateway {
    let g = Gateway::start_logging_as("", level, format);
    // REST: the CLI signs in (start, the code from the mail, complete) and uses its key.
    let rest_key = g.login(&format!("rest-{level}@example.com")).await;
    let rest_code = g
        .smtp
        .code_for(&format!("rest-{level}@example.com"), 1)
        .await;
    let stored: Value = serde_json::from_str(
        &std::fs::read_to_string(g.home.path().join("credentials.json")).unwrap_or_default(),
    )
    .unwrap_or(Value::Null);
    let rest_session = stored["ownerSession"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let (code, _) = g.json(&["credits", "balance"], &[]);
    assert_eq!(code, 0);
    // MCP: onboarding through its two tools, then a call with the new key as the bearer.
    let email = format!("mcp-{level}@example.com");
    let started = mcp(&g, None, "startEmailOnboarding", json!({"email": email}));
    assert_eq!(started["isError"], json!(false), "{started}");
    let mcp_code = g.smtp.code_for(&email, 1).await;
    let done = mcp(
        &g,
        None,
        "completeEmailOnboarding",
        json!({"email": email, "code": mcp_code, "acceptTerms": true}),
    );
    let data = &done["structuredContent"]["data"];
    let mcp_key = data["bootstrap"]["agentApiKey"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let mcp_session = data["session"]["token"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let balance = mcp(&g, Some(&mcp_key), "getCreditsBalance", json!({}));
    assert_eq!(balance["isError"], json!(false), "{balance}");

    let log = g.log_text();
    assert!(
        log.lines().count() > 20,
        "the gateway logged at {level}: {log}"
    );
    for (what, secret) in [
        ("the REST agent key", rest_key.as_str()),
        ("the REST owner session", rest_session.as_str()),
        ("the REST e-mail code", rest_code.as_str()),
        ("the MCP agent key", mcp_key.as_str()),
        ("the MCP owner session", mcp_session.as_str()),
        ("the MCP e-mail code", mcp_code.as_str()),
    ] {
        assert!(secret.len() >= 6, "{what} was read: {secret:?}");
        let leaked: Vec<&str> = log.lines().filter(|l| shows(l, secret)).collect();
        assert!(leaked.is_empty(), "{what} in the {level} log: {leaked:?}");
    }
    g
}

/// Whether `line` shows `secret`: a six-digit e-mail code counts only as a number of its own (not as
/// the digits of a timing such as `ms=0.250461`); anything else anywhere.
fn shows(line: &str, secret: &str) -> bool {
    if !secret.bytes().all(|b| b.is_ascii_digit()) {
        return line.contains(secret);
    }
    line.match_indices(secret).any(|(at, _)| {
        let before = line[..at].chars().next_back();
        let after = line[at + secret.len()..].chars().next();
        !before.is_some_and(|c| c.is_ascii_digit() || c == '.')
            && !after.is_some_and(|c| c.is_ascii_digit())
    })
}

#[tokio::test]
async fn no_secret_in_debug_logs() {
    no_secret_in_the_logs_at("debug", "text").await;
}

#[tokio::test]
async fn no_secret_in_trace_logs() {
    no_secret_in_the_logs_at("trace", "text").await;
}

/// `--log-format json`: every line is one JSON object with its level and message, the lines of a
/// request carry the request span with its id (the `x-request-id` answered), and no secret leaks.
#[tokio::test]
async fn json_logs_are_objects_with_the_request_id() {
    let g = no_secret_in_the_logs_at("debug", "json").await;
    let answered = reqwest::get(format!("{}/healthz", g.url))
        .await
        .expect("healthz");
    let id = answered
        .headers()
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    assert!(!id.is_empty());
    // The request's response line is written when it ends.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !g.log_text().contains(&id) && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let log = g.log_text();
    let lines: Vec<Value> = log
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    assert!(lines.len() > 20);
    for line in &lines {
        assert!(
            line["level"].is_string() && line["fields"].is_object(),
            "{line}"
        );
    }
    let of_request: Vec<&Value> = lines
        .iter()
        .filter(|l| l["span"]["name"] == "request" && l["span"]["id"] == id.as_str())
        .collect();
    assert!(
        of_request.iter().any(|l| l["span"]["path"] == "/healthz"),
        "no line of request {id}: {log}"
    );
}
