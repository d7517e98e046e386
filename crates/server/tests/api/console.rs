//! The owner's web console in a real browser (issue 27): headless Chromium from Debian's package,
//! driven by playwright-core (tests/e2e/console.mjs), signs in with the code from the SMTP sink,
//! changes the policy, registers a webhook and reads its deliveries, approves a pending intent,
//! revokes a delegation, verifies and exports the audit trail, and signs out; the owner's REST
//! twins of the console's lists (intents, credits, delegations) answer what it showed. Screenshots go to `$CARGO_TARGET_DIR/console-screenshots` (the docs' pictures come from
//! there). Plain-HTTP checks beside it: the console refuses a cross-site form and a request without
//! its cookie.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use crate::helpers::{Backend, Options, spawn_app_with};
use crate::intents::{chain_config, ready_to_fan_out, swap};

/// Where the screenshots go: beside the build, so that CI keeps them as artifacts.
fn screenshots() -> std::path::PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| actiongate_testkit::repo_root().join("target"))
        .join("console-screenshots")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_in_chromium() {
    let venue = actiongate_testkit::standin::StandInVenue::new();
    let app = spawn_app_with(
        Backend::Sqlite,
        Options {
            providers: vec![venue.clone()],
            config_toml: chain_config("[webhooks]\nallow-private = true"),
            ..Options::default()
        },
    )
    .await;
    let hook_port = crate::webhooks::closed_port();
    let received = crate::webhooks::receiver(hook_port).await;
    let owner = app.onboard("console@example.com").await;
    ready_to_fan_out(
        &app,
        &owner,
        json!({"allowedActions": ["swap"], "dailyLimitUsd": 100, "approvalAboveUsd": 50}),
    )
    .await;
    let r = app
        .post(
            "/api/v1/agent/execute-intent",
            swap(&owner.agent_key, "60", Some("c1")),
        )
        .await;
    let intent = r.body["intentId"].as_str().expect("accepted").to_owned();
    assert_eq!(r.body["approval"]["state"], "pending", "{}", r.text);

    // The approval request is mailed to the owner too: the sign-in code is the message after it.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while app.smtp.messages_to("console@example.com").len() < 2 {
        assert!(std::time::Instant::now() < deadline, "no approval mail");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let before = app.smtp.messages_to("console@example.com").len();
    let mut child = Command::new("node")
        .arg(actiongate_testkit::repo_root().join("tests/e2e/console.mjs"))
        .args([
            &app.url(""),
            "console@example.com",
            &owner.agent_id,
            &intent,
        ])
        .arg(screenshots())
        .arg(format!("http://127.0.0.1:{hook_port}/hook"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("node runs the browser test");
    let mut stdin = Some(child.stdin.take().expect("stdin"));
    let stdout = child.stdout.take().expect("stdout");
    let mut last = String::new();
    // The browser asks for the code once it has asked the gateway to mail it.
    let mut lines = BufReader::new(stdout).lines();
    while let Some(Ok(line)) = tokio::task::block_in_place(|| lines.next()) {
        if line == "NEED code" {
            let code = app.smtp.code_for("console@example.com", before + 1).await;
            // Sent, and the pipe closed: the script asks once.
            let mut pipe = stdin.take().expect("the code is asked for once");
            writeln!(pipe, "{code}").expect("the code goes to the browser test");
        } else {
            last = line;
        }
    }
    let status = child.wait().expect("node ends");
    assert!(status.success(), "the browser test failed: {last}");
    let seen: Value = serde_json::from_str(&last).unwrap_or_else(|e| panic!("{e}: {last}"));
    assert_eq!(seen["ok"], json!(true), "{seen}");
    assert_eq!(seen["dailyLimit"], json!("500"));
    assert!(
        seen["verify"].as_str().unwrap_or("").contains("intact"),
        "{seen}"
    );
    assert_eq!(
        seen["csvHeader"],
        json!("seq,at,kind,actor,subject,code,data,prevHash,hash")
    );
    assert_eq!(seen["csvHasApproval"], json!(true));

    // What the browser did is what the gateway holds: the policy, the intent run once.
    let p = app
        .get_as(
            &format!("/api/v1/agents/{}/policy", owner.agent_id),
            &owner.session,
        )
        .await;
    let policy = p.assert_ok();
    assert_eq!(
        (
            policy["dailyLimitUsd"].clone(),
            policy["approvalAboveUsd"].clone()
        ),
        (json!(500.0), json!(25.0))
    );
    let done = crate::intents::wait_terminal(&app, &owner.agent_key, &intent).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(venue.effects().len(), 1);
    // The delegation revoked in the console is revoked: the next fan-out finds no user.
    let r = app
        .post(
            "/api/v1/agent/execute-intent",
            swap(&owner.agent_key, "5", Some("c2")),
        )
        .await;
    assert_eq!(
        (r.status, r.body["code"].clone()),
        (403, json!("DELEGATION_REQUIRED")),
        "{}",
        r.text
    );
    assert!(
        seen["balance"].as_str().unwrap_or("").contains("credits"),
        "{seen}"
    );
    for name in [
        "01-sign-in",
        "02-agents",
        "03-policy",
        "04-approvals",
        "05-approved",
        "06-audit",
        "07-activity",
        "08-credits",
        "09-delegations",
        "10-webhooks",
        "11-deliveries",
    ] {
        let png = screenshots().join(format!("{name}.png"));
        let bytes = std::fs::read(&png).unwrap_or_default();
        assert!(bytes.starts_with(b"\x89PNG"), "{} is a PNG", png.display());
    }

    // The webhook registered in the console got the approval's and the revocation's events,
    // signed with the secret the console showed once; the deliveries page showed them delivered.
    let secret = seen["secret"].as_str().unwrap_or("").to_owned();
    assert!(secret.starts_with("whsec_"), "{seen}");
    for kind in ["intent.completed", "delegation.revoked"] {
        assert!(
            seen["delivered"]
                .as_array()
                .is_some_and(|d| d.contains(&json!(kind))),
            "{kind} not shown delivered: {seen}"
        );
        let got = received.lock().map(|g| g.clone()).unwrap_or_default();
        assert!(
            got.iter().any(|(sig, body)| {
                serde_json::from_str::<Value>(body).is_ok_and(|b| b["type"] == kind)
                    && crate::webhooks::signed(&secret, sig, body)
            }),
            "{kind} not received signed: {got:?}"
        );
    }

    // The REST twins of the console's lists answer the same.
    let listed = app.get_as("/api/v1/intents", &owner.session).await;
    let listed = listed.assert_ok();
    let first = &listed["intents"][0];
    assert_eq!(
        (
            first["intentId"].as_str(),
            first["action"].clone(),
            first["lane"].clone(),
            first["status"].clone(),
            first["approval"]["state"].clone(),
            first["agentId"].as_str()
        ),
        (
            Some(intent.as_str()),
            json!("swap"),
            json!("executeIntent"),
            json!("completed"),
            json!("approved"),
            Some(owner.agent_id.as_str())
        ),
        "{listed}"
    );
    let credits = app.get_as("/api/v1/credits", &owner.session).await;
    let credits = credits.assert_ok();
    let balance = credits["balance"].as_i64().unwrap_or(-1);
    assert!(
        seen["balance"]
            .as_str()
            .unwrap_or("")
            .contains(&format!("Balance {balance} credits")),
        "{seen} {credits}"
    );
    assert!(
        credits["ledger"].as_array().is_some_and(|l| l
            .iter()
            .any(|e| e["kind"] == "capture" && e["intentId"] == intent.as_str())),
        "{credits}"
    );
    let delegations = app.get_as("/api/v1/delegations", &owner.session).await;
    let delegations = delegations.assert_ok();
    let hash = delegations["delegations"][0]["hash"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    assert_eq!(
        delegations["delegations"][0]["status"],
        json!("revoked"),
        "{delegations}"
    );
    let again = app
        .post_as(
            &format!("/api/v1/delegations/{hash}/revoke"),
            &owner.session,
            None,
        )
        .await;
    let again = again.assert_ok();
    assert_eq!(again["status"], json!("revoked"));
    let r = app
        .post_as(
            &format!("/api/v1/delegations/0x{}/revoke", "00".repeat(32)),
            &owner.session,
            None,
        )
        .await;
    assert_eq!(
        (r.status, r.body["code"].clone()),
        (404, json!("NOT_FOUND"))
    );
    for path in ["/api/v1/intents", "/api/v1/credits", "/api/v1/delegations"] {
        let r = app.get_as(path, &owner.agent_key).await;
        assert_eq!(r.status, 401, "an agent key is no owner session: {path}");
    }

    // Without the cookie a page is the sign-in form; a form from another site is refused.
    let r = app.get("/console/approvals").await;
    assert!(
        r.text.contains("Sign in") || r.status == 303,
        "{}",
        r.status
    );
    let cross = app
        .send(
            app.client
                .post(app.url(&format!("/console/approvals/{intent}/approve")))
                .header("origin", "https://evil.example")
                .header("cookie", format!("actiongate_console={}", owner.session)),
        )
        .await;
    assert_eq!(cross.status, 403);
    let signin = app
        .send(
            app.client
                .post(app.url("/console/sign-in"))
                .header("origin", "https://evil.example")
                .form(&[("email", "victim@example.com")]),
        )
        .await;
    assert_eq!(signin.status, 403);
    assert!(app.smtp.messages_to("victim@example.com").is_empty());
}
