//! Kill a gateway process (SIGKILL) while it runs a fan-out of many executions, start another on the
//! same database: every execution ends exactly once and the intent completes. On SQLite and on
//! PostgreSQL.
#![allow(clippy::panic, clippy::expect_used)] // Tests fail by panicking, saying what failed.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use actiongate_core::store::DelegationRecord;
use actiongate_core::store::{CreditStore, DelegationStore};
use actiongate_store::SqlStore;
use actiongate_testkit::standin::read_log;
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_actiongate-venue-gateway");
const USERS: usize = 12;

fn start(config: &Path, log: &Path) -> (Child, String) {
    let mut child = Command::new(BIN)
        .arg("--config")
        .arg(config)
        .env("STANDIN_LOG", log)
        .env("STANDIN_DELAY_MS", "150")
        .env("ACTIONGATE_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn: {e}"));
    let stdout = child.stdout.take().unwrap_or_else(|| panic!("no stdout"));
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .expect("read line");
    let addr = line
        .trim()
        .strip_prefix("actiongate listening on ")
        .unwrap_or_else(|| panic!("{line:?}"))
        .to_owned();
    (child, addr)
}

async fn post(client: &reqwest::Client, url: String, body: Value, bearer: Option<&str>) -> Value {
    let mut req = client.post(url).json(&body);
    if let Some(b) = bearer {
        req = req.bearer_auth(b);
    }
    let resp = req.send().await.expect("send");
    resp.json().await.unwrap_or(Value::Null)
}

async fn takeover(database_url: String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let config = dir.path().join("gateway.toml");
    std::fs::write(
        &config,
        format!(
            r#"
            dev = true
            listen = "127.0.0.1:0"
            data-dir = "{}"
            database-url = "{database_url}"
            [intents]
            lease-seconds = 2
            # Two users at a time: the process is killed with executions running side by side.
            fanout-concurrency = 2
            [chains.8453]
            name = "base"
            rpc-url = "http://127.0.0.1:9/never-called-by-the-stand-in"
            [prices]
            USDC = 1.0
            {}"#,
            data.display(),
            actiongate_testkit::NO_LIMITS
        ),
    )
    .expect("write");
    let log = dir.path().join("venue.log");
    let client = reqwest::Client::new();

    let (mut a, addr) = start(&config, &log);
    // Onboard through the dev outbox.
    post(
        &client,
        format!("{addr}/api/v1/onboarding/email/start"),
        json!({"email": "crash@example.com"}),
        None,
    )
    .await;
    let outbox = [data.join("outbox")];
    let code = actiongate_testkit::wait_for_code(
        || actiongate_testkit::messages_in(&outbox, "crash@example.com"),
        "crash@example.com",
        1,
    )
    .await;
    let done = post(
        &client,
        format!("{addr}/api/v1/onboarding/email/complete"),
        json!({"email": "crash@example.com", "code": code, "acceptTerms": true}),
        None,
    )
    .await;
    let key = done["data"]["bootstrap"]["agentApiKey"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    let agent_id = done["data"]["bootstrap"]["agentId"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    let account_id = done["data"]["account"]["accountId"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    let session = done["data"]["session"]["token"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    let policy = client
        .put(format!("{addr}/api/v1/agents/{agent_id}/policy"))
        .bearer_auth(&session)
        .json(&json!({"allowedActions": ["swap"], "dailyLimitUsd": 1000}))
        .send()
        .await
        .expect("send");
    assert_eq!(policy.status().as_u16(), 200);

    // Users who delegated to the agent, and credits, written beside the gateway.
    let store = SqlStore::connect(&database_url).await.expect("connect");
    for i in 0..USERS {
        let hash = format!("0x{:064x}", i + 1);
        let event = actiongate_core::audit::delegation_event(
            &agent_id,
            &hash,
            actiongate_core::states::DelegationStatus::Active,
            "owner",
            0,
            serde_json::json!({}),
        );
        store
            .put_delegation(
                &DelegationRecord {
                    hash,
                    agent_id: agent_id.clone(),
                    delegator: format!("0x{:040x}", 0xfeed00 + i),
                    chain_id: 8453,
                    status: actiongate_core::states::DelegationStatus::Active,
                    created_at: i64::try_from(i).unwrap_or(0),
                    expires_at: None,
                    body: None,
                },
                &event,
            )
            .await
            .expect("put delegation");
    }
    store
        .grant_credits(&account_id, 1000, "grant", "test grant", 0)
        .await
        .expect("grant credits");

    let submitted = post(
        &client,
        format!("{addr}/api/v1/agent/execute-intent"),
        json!({"agentApiKey": key, "action": "swap", "idempotencyKey": "crash-1",
               "params": {"tokenIn": "USDC", "tokenOut": "WETH", "amountIn": "1"}}),
        None,
    )
    .await;
    let intent_id = submitted["intentId"]
        .as_str()
        .unwrap_or_else(|| panic!("{submitted}"))
        .to_owned();

    // Let a few executions happen, then kill the process without warning.
    let deadline = Instant::now() + Duration::from_secs(20);
    while read_log(&log).len() < 4 {
        assert!(
            Instant::now() < deadline,
            "the first gateway executed nothing"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    a.kill().expect("kill");
    let _ = a.wait();
    let at_kill = read_log(&log).len();
    assert!(
        at_kill < USERS,
        "killed too late to test a takeover ({at_kill} done)"
    );

    // A second process takes over once the lease ends.
    let (mut b, addr) = start(&config, &log);
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        let r = client
            .get(format!(
                "{addr}/api/v1/agent/execute-intent/status?intentId={intent_id}"
            ))
            .header("x-agent-api-key", &key)
            .send()
            .await
            .expect("send");
        let body: Value = r.json().await.unwrap_or(Value::Null);
        if body["status"] == "completed" || body["status"] == "failed" {
            break body;
        }
        assert!(
            Instant::now() < deadline,
            "the intent did not complete after the takeover: {body}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let _ = b.kill();
    let _ = b.wait();

    assert_eq!(status["status"], "completed", "{status}");
    assert_eq!(
        (status["total"].clone(), status["executed"].clone()),
        (json!(USERS), json!(USERS))
    );
    assert!(
        status["results"]
            .as_array()
            .is_some_and(|r| r.iter().all(|x| x["success"] == json!(true))),
        "{status}"
    );
    let effects = read_log(&log);
    let unique: BTreeSet<&String> = effects.iter().collect();
    assert_eq!(
        effects.len(),
        USERS,
        "every execution ran exactly once: {effects:?}"
    );
    assert_eq!(unique.len(), USERS);
    let expected: BTreeSet<String> = (0..USERS).map(|i| format!("{intent_id}:{i}")).collect();
    assert_eq!(
        unique.into_iter().cloned().collect::<BTreeSet<_>>(),
        expected
    );

    // Charged for exactly the executions that ran.
    let credits = store
        .credit_account(&account_id)
        .await
        .ok()
        .flatten()
        .map(|c| (c.balance, c.reserved));
    assert_eq!(credits, Some((1000 - 10 * USERS as i64, 0)));
    store.close().await;
}

#[tokio::test]
async fn sqlite_takeover_after_sigkill() {
    let dir = tempfile::tempdir().expect("tempdir");
    takeover(format!("sqlite://{}", dir.path().join("gw.db").display())).await;
}

#[tokio::test]
async fn postgres_takeover_after_sigkill() {
    takeover(
        actiongate_testkit::fresh_postgres_url()
            .await
            .expect("fresh postgres url"),
    )
    .await;
}
