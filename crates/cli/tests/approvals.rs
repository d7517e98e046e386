//! The owner's side through the CLI on the devnet (issue 27): a transfer above the policy's
//! approvalAboveUsd waits (REST answers 202, nothing moves onchain) until `actiongate approvals
//! approve` lets it run, once; `approvals reject` ends another with APPROVAL_REJECTED and nothing
//! sent; `audit verify` finds the chain intact and `audit export` streams every kind of decision.
#![allow(clippy::panic, clippy::expect_used)] // Tests fail by panicking, saying what failed.

mod common;

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use common::{Gateway, fund_usdc, rpc};

const RECIPIENT: &str = "0x00000000000000000000000000000000000a11ce";

async fn usdc_of(devnet: &actiongate_testkit::devnet::DevnetProcess, who: &str) -> u128 {
    let usdc = devnet.spec["tokens"]["USDC"]["address"]
        .as_str()
        .expect("the devnet's USDC");
    let data = format!(
        "0x70a08231{:0>64}",
        who.trim_start_matches("0x").to_ascii_lowercase()
    );
    let out = rpc(
        &devnet.url,
        "eth_call",
        json!([{"to": usdc, "data": data}, "latest"]),
    )
    .await;
    u128::from_str_radix(out.as_str().unwrap_or("0x0").trim_start_matches("0x"), 16).unwrap_or(0)
}

async fn direct_transfer(g: &Gateway, key: &str, amount: &str, idem: &str) -> (u16, Value) {
    let r = reqwest::Client::new()
        .post(format!("{}/api/v1/agent/execute", g.url))
        .json(&json!({
            "agentApiKey": key,
            "action": "transfer",
            "chainId": 84532,
            "params": {"token": "USDC", "to": RECIPIENT, "amount": amount},
            "idempotencyKey": idem,
        }))
        .send()
        .await
        .expect("the gateway answers");
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

async fn intent(g: &Gateway, key: &str, id: &str) -> Value {
    reqwest::Client::new()
        .get(format!(
            "{}/api/v1/agent/execute-intent/status?intentId={id}",
            g.url
        ))
        .header("x-agent-api-key", key)
        .send()
        .await
        .expect("the gateway answers")
        .json()
        .await
        .unwrap_or(Value::Null)
}

async fn ended(g: &Gateway, key: &str, id: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let v = intent(g, key, id).await;
        if matches!(v["status"].as_str(), Some("completed" | "failed")) {
            return v;
        }
        assert!(Instant::now() < deadline, "intent {id} did not end: {v}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approvals_and_the_audit_trail_through_the_cli() {
    let devnet = actiongate_testkit::devnet::DevnetProcess::start();
    let g = Gateway::start_with_config(&devnet.toml());
    let (key, address) = g
        .devnet_agent("owner-side@example.com", &["transfer"], &devnet.url)
        .await;
    fund_usdc(&devnet, &address, 100).await;
    let stored: Value = serde_json::from_str(
        &std::fs::read_to_string(g.home.path().join("credentials.json")).unwrap_or_default(),
    )
    .unwrap_or(Value::Null);
    let (agent_id, session) = (
        stored["agentId"].as_str().unwrap_or_default().to_owned(),
        stored["ownerSession"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
    );
    let r = reqwest::Client::new()
        .put(format!("{}/api/v1/agents/{agent_id}/policy", g.url))
        .bearer_auth(&session)
        .json(&json!({"allowedActions": ["transfer"], "dailyLimitUsd": 100000, "approvalAboveUsd": 5}))
        .send()
        .await
        .expect("the gateway answers");
    assert_eq!(r.status().as_u16(), 200);

    // Below the threshold: runs at once.
    let (status, body) = direct_transfer(&g, &key, "2", "small").await;
    assert_eq!(
        (status, body["data"]["status"].clone()),
        (200, json!("confirmed")),
        "{body}"
    );
    assert_eq!(usdc_of(&devnet, RECIPIENT).await, 2_000_000);

    // Above it: 202, the intent waits, nothing moves.
    let (status, body) = direct_transfer(&g, &key, "10", "big").await;
    assert_eq!(status, 202, "{body}");
    assert_eq!(body["data"]["approval"]["state"], "pending", "{body}");
    let id = body["data"]["intentId"]
        .as_str()
        .expect("intent id")
        .to_owned();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(usdc_of(&devnet, RECIPIENT).await, 2_000_000, "nothing sent");

    // The CLI lists it, shows what approving would send, then approves it: it runs once.
    let (code, list) = g.json(&["approvals", "list"], &[]);
    assert_eq!(code, 0, "{list}");
    assert_eq!(
        list["data"]["approvals"][0]["intentId"],
        json!(id),
        "{list}"
    );
    assert_eq!(list["data"]["approvals"][0]["amountUsd"], json!(10.0));
    let (code, dry) = g.json(&["approvals", "approve", &id], &[]);
    assert_eq!((code, dry["code"].clone()), (0, json!("DRY_RUN")), "{dry}");
    assert_eq!(
        dry["data"]["path"],
        json!(format!("/api/v1/approvals/{id}/approve"))
    );
    let (code, approved) = g.json(&["approvals", "approve", &id, "--confirm-writes"], &[]);
    assert_eq!(code, 0, "{approved}");
    assert_eq!(approved["data"]["approval"]["state"], "approved");
    let done = ended(&g, &key, &id).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert!(done["results"][0]["txHash"].as_str().is_some(), "{done}");
    let (code, again) = g.json(&["approvals", "approve", &id, "--confirm-writes"], &[]);
    assert_eq!(
        (code, again["data"]["approval"]["state"].clone()),
        (0, json!("approved"))
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(usdc_of(&devnet, RECIPIENT).await, 12_000_000, "sent once");
    // A retry of the direct execution answers what it became, sends nothing more.
    let (status, body) = direct_transfer(&g, &key, "10", "big").await;
    assert_eq!(
        (status, body["data"]["status"].clone()),
        (200, json!("confirmed")),
        "{body}"
    );

    // Another, rejected from the CLI: failed with the code, nothing sent.
    let (status, body) = direct_transfer(&g, &key, "20", "bigger").await;
    assert_eq!(status, 202, "{body}");
    let rejected_id = body["data"]["intentId"]
        .as_str()
        .expect("intent id")
        .to_owned();
    let (code, r) = g.json(
        &[
            "approvals",
            "reject",
            &rejected_id,
            "--reason",
            "too much",
            "--confirm-writes",
        ],
        &[],
    );
    assert_eq!(
        (code, r["data"]["approval"]["state"].clone()),
        (0, json!("rejected")),
        "{r}"
    );
    let failed = ended(&g, &key, &rejected_id).await;
    assert_eq!(
        failed["results"][0]["code"], "APPROVAL_REJECTED",
        "{failed}"
    );
    let (code, r) = g.json(
        &["approvals", "approve", &rejected_id, "--confirm-writes"],
        &[],
    );
    assert_eq!(
        (code, r["code"].clone()),
        (2, json!("APPROVAL_NOT_PENDING")),
        "{r}"
    );
    assert_eq!(
        usdc_of(&devnet, RECIPIENT).await,
        12_000_000,
        "nothing more sent"
    );

    // The audit trail: intact, and every kind of decision made here is in it.
    let want = [
        "agent.created",
        "owner.login",
        "policy.changed",
        "credits.grant",
        "intent.accepted",
        "approval.requested",
        "approval.approved",
        "approval.rejected",
        "intent.completed",
        "intent.failed",
        "credits.reserve",
        "credits.capture",
        "credits.release",
    ];
    let deadline = Instant::now() + Duration::from_secs(10);
    let csv = g.home.path().join("audit.csv");
    let text = loop {
        let (code, r) = g.json(
            &[
                "audit",
                "export",
                "--format",
                "csv",
                "--output",
                csv.to_str().unwrap_or(""),
            ],
            &[],
        );
        assert_eq!(code, 0, "{r}");
        let text = std::fs::read_to_string(&csv).unwrap_or_default();
        if want.iter().all(|k| text.contains(&format!(",{k},"))) {
            break text;
        }
        assert!(Instant::now() < deadline, "missing kinds in {text}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(text.starts_with("seq,at,kind,actor,subject,code,data,prevHash,hash\n"));
    assert!(
        text.contains(",APPROVAL_REJECTED,") || text.contains("too much"),
        "{text}"
    );
    let (code, v) = g.json(&["audit", "verify"], &[]);
    assert_eq!((code, v["data"]["ok"].clone()), (0, json!(true)), "{v}");
    // To stdout: the JSON lines themselves, nothing else.
    let out = g.cli(&["audit", "export"], &[]);
    assert!(out.status.success());
    let lines: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert_eq!(lines.len() + 1, text.lines().count(), "the same entries");
    assert_eq!(lines[0]["seq"], json!(1));
}
