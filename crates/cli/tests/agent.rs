//! The agent CLI, the real binary against a real gateway (the same binary) with a real SMTP sink.
#![allow(clippy::panic, clippy::expect_used)] // Tests fail by panicking, saying what failed.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use common::{BIN, Gateway};

fn mode(path: &Path) -> u32 {
    std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(path)
            .map(|m| m.permissions())
            .expect("file metadata"),
    ) & 0o777
}

#[tokio::test]
async fn the_agent_journey_in_json() {
    let g = Gateway::start();
    let key = g.login("cli@example.com").await;
    assert!(key.starts_with("agent-"));
    assert_eq!(mode(&g.home.path().join("credentials.json")), 0o600);

    let (code, v) = g.json(&["actions", "catalog"], &[]);
    assert_eq!(
        (code, v["success"].clone(), v["data"]["source"].clone()),
        (0, json!(true), json!("action_catalog"))
    );
    let (code, v) = g.json(&["actions"], &[]);
    assert_eq!(code, 0);
    assert!(
        v["data"]["actions"]
            .as_array()
            .is_some_and(|a| a.iter().any(|x| x["action"] == "get-fx-supported-assets"))
    );
    let (code, v) = g.json(&["whoami"], &[]);
    assert_eq!(
        (code, v["data"]["keySource"].clone()),
        (0, json!("stored login"))
    );
    assert!(
        v["data"]["agentAddress"]
            .as_str()
            .is_some_and(|a| a.starts_with("0x"))
    );

    // run: an idempotency key is generated and given back; --wait reaches a terminal status.
    let (code, v) = g.json(
        &[
            "run",
            "get-earn-provider",
            "--param",
            "providerId=earn-router",
            "--wait",
        ],
        &[],
    );
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["data"]["status"], "completed");
    assert_eq!(v["data"]["results"][0]["data"]["providerId"], "earn-router");
    let idem = v["data"]["idempotencyKey"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    assert_eq!(idem.len(), 36);
    // Reusing the key is the same intent.
    let (_, again) = g.json(
        &[
            "run",
            "get-earn-provider",
            "--param",
            "providerId=earn-router",
            "--idempotency-key",
            &idem,
        ],
        &[],
    );
    assert_eq!(again["data"]["intentId"], v["data"]["intentId"]);
    let id = v["data"]["intentId"].as_str().unwrap_or("").to_owned();
    let (code, s) = g.json(&["intent-status", &id, "--wait"], &[]);
    assert_eq!((code, s["data"]["status"].clone()), (0, json!("completed")));

    let (code, b) = g.json(&["credits", "balance"], &[]);
    assert_eq!(
        (code, b["data"]["freeRequestsUsedToday"].clone()),
        (0, json!(1))
    );

    // Refusals: exit 2, the code, and a next step; never another key.
    let (code, r) = g.json(&["run", "launch-rocket"], &[]);
    assert_eq!(
        (code, r["success"].clone(), r["code"].clone()),
        (2, json!(false), json!("UNKNOWN_ACTION"))
    );
    let (code, r) = g.json(
        &[
            "run",
            "swap",
            "--param",
            "tokenIn=USDC",
            "--param",
            "tokenOut=WETH",
            "--param",
            "amountIn=1",
            "--confirm-writes",
        ],
        &[],
    );
    assert_eq!((code, r["code"].clone()), (2, json!("ACTION_NOT_ALLOWED")));
    assert!(
        r["data"]["nextStep"]
            .as_str()
            .is_some_and(|s| s.contains("owner"))
    );
    let (code, r) = g.json(&["preflight", "get-earn-provider"], &[]);
    assert_eq!((code, r["code"].clone()), (2, json!("INVALID_PARAMS")));
    let (code, r) = g.json(
        &[
            "preflight",
            "get-earn-provider",
            "--param",
            "providerId=earn-router",
        ],
        &[],
    );
    assert_eq!((code, r["data"]["ready"].clone()), (0, json!(true)), "{r}");
    assert_eq!(r["data"]["checks"].as_array().map(Vec::len), Some(11));

    // build-tx runs the checks of a submission (here: swap is not on the allowlist).
    let (code, r) = g.json(
        &[
            "build-tx",
            "swap",
            "--param",
            "tokenIn=USDC",
            "--param",
            "tokenOut=WETH",
            "--param",
            "amountIn=1",
        ],
        &[],
    );
    assert_eq!((code, r["code"].clone()), (2, json!("ACTION_NOT_ALLOWED")));
    // Delegation: status from the database; a write without --confirm-writes is only shown; create
    // on a chain without the framework's RPC is refused with its code.
    let (code, r) = g.json(
        &["delegation", "status", "--body", r#"{"chainId": 8453}"#],
        &[],
    );
    assert_eq!(
        (code, r["data"]["active"].clone()),
        (0, json!(false)),
        "{r}"
    );
    let (code, r) = g.json(
        &[
            "delegation",
            "redeem",
            "--body",
            r#"{"delegationHash": "0x01", "action": "swap", "params": {}, "idempotencyKey": "k"}"#,
        ],
        &[],
    );
    assert_eq!(
        (code, r["code"].clone(), r["data"]["path"].clone()),
        (
            0,
            json!("DRY_RUN"),
            json!("/api/v1/agent/delegation/redeem")
        ),
        "{r}"
    );
    let (code, r) = g.json(
        &[
            "delegation",
            "inspect",
            "--body",
            r#"{"delegationHash": "0x01"}"#,
        ],
        &[],
    );
    assert_eq!((code, r["code"].clone()), (2, json!("NOT_FOUND")), "{r}");
    // A venue that needs exchange credentials this deployment does not hold: answered, not ready.
    let (code, r) = g.json(&["venue", "readiness", "hyperliquid"], &[]);
    assert_eq!(
        (
            code,
            r["data"]["ready"].clone(),
            r["data"]["blockingReasons"][0]["code"].clone()
        ),
        (0, json!(false), json!("CREDENTIALS_MISSING")),
        "{r}"
    );
    // An unknown venue is a refusal (exit 2).
    let (code, r) = g.json(&["venue", "readiness", "no-such-venue"], &[]);
    assert_eq!((code, r["code"].clone()), (2, json!("NOT_FOUND")), "{r}");

    // A gateway that does not answer: exit 1.
    let (code, r) = g.json(
        &["--base-url", "http://127.0.0.1:9", "credits", "balance"],
        &[],
    );
    assert_eq!((code, r["code"].clone()), (1, json!("TRANSPORT")));

    // The key from the environment (hosted runtimes), and a mismatching address is caught.
    let (code, out) = g.json(&["logout"], &[]);
    assert_eq!(
        (
            code,
            out["data"]["removed"].clone(),
            out["data"]["sessionRevoked"].clone()
        ),
        (0, json!(true), json!(true))
    );
    let (code, r) = g.json(&["whoami"], &[]);
    assert_eq!((code, r["code"].clone()), (2, json!("UNAUTHORIZED")));
    let (code, r) = g.json(&["whoami"], &[("ACTIONGATE_API_KEY", &key)]);
    assert_eq!(
        (code, r["data"]["keySource"].clone()),
        (0, json!("ACTIONGATE_API_KEY"))
    );
    let (code, r) = g.json(
        &["whoami"],
        &[
            ("ACTIONGATE_API_KEY", &key),
            (
                "ACTIONGATE_AGENT_ADDRESS",
                "0x0000000000000000000000000000000000000001",
            ),
        ],
    );
    assert_eq!(
        (code, r["code"].clone()),
        (1, json!("AGENT_IDENTITY_MISMATCH"))
    );
}

#[tokio::test]
async fn writes_need_confirm_writes_and_the_key_is_never_printed() {
    let g = Gateway::start();
    let key = g.login("writer@example.com").await;
    let before = g.requests_to("/api/v1/agent/execute-intent");
    let swap = [
        "run",
        "swap",
        "--param",
        "tokenIn=USDC",
        "--param",
        "tokenOut=WETH",
        "--param",
        "amountIn=25",
    ];
    let (code, v) = g.json(&swap, &[]);
    assert_eq!((code, v["code"].clone()), (0, json!("DRY_RUN")), "{v}");
    assert_eq!(v["data"]["method"], "POST");
    assert_eq!(v["data"]["path"], "/api/v1/agent/execute-intent");
    assert_eq!(
        v["data"]["body"]["params"],
        json!({"tokenIn": "USDC", "tokenOut": "WETH", "amountIn": "25"})
    );
    assert_eq!(v["data"]["body"]["agentApiKey"], "agent-****");
    let delegation = r#"{"delegation": {"delegate": "0x01", "delegator": "0x02", "authority": "0x03", "caveats": [], "salt": "0x1"}}"#;
    let redeem =
        r#"{"delegationHash": "0x01", "action": "swap", "params": {}, "idempotencyKey": "k"}"#;
    for write in [
        vec!["credits", "buy", "credits_100"],
        vec!["delegation", "activate", "--body", delegation],
        vec!["delegation", "redeem", "--body", redeem],
        vec![
            "delegation",
            "revoke",
            "--body",
            r#"{"delegationHash": "0x01"}"#,
        ],
    ] {
        let (code, v) = g.json(&write, &[]);
        assert_eq!(
            (code, v["code"].clone()),
            (0, json!("DRY_RUN")),
            "{write:?}: {v}"
        );
    }
    // Give the gateway's request log a moment, then check nothing reached it.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(
        g.requests_to("/api/v1/agent/execute-intent"),
        before,
        "a dry run reached the gateway"
    );
    assert_eq!(g.requests_to("/api/v1/agent/delegation"), 0);
    // A body that is not the route's request is refused before anything is shown or sent.
    let (code, v) = g.json(&["delegation", "activate", "--body", "{}"], &[]);
    assert_eq!(
        (code, v["code"].clone()),
        (2, json!("INVALID_REQUEST")),
        "{v}"
    );
    let (code, v) = g.json(
        &["delegation", "status", "--body", r#"{"verify": true}"#],
        &[],
    );
    assert_eq!(
        (code, v["code"].clone()),
        (2, json!("INVALID_REQUEST")),
        "{v}"
    );
    assert_eq!(g.requests_to("/api/v1/agent/delegation"), 0);
    // With the flag it is sent (and refused by the policy here).
    let mut confirmed = swap.to_vec();
    confirmed.push("--confirm-writes");
    let (code, _) = g.json(&confirmed, &[]);
    assert_eq!(code, 2);
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(g.requests_to("/api/v1/agent/execute-intent"), before + 1);

    // Human output, errors (also a gateway that does not answer) and dry runs never show the key.
    for args in [
        vec!["whoami"],
        vec!["run", "swap", "--param", "amountIn=1"],
        vec!["credits", "balance"],
        vec!["run", "launch-rocket"],
        vec!["--base-url", "http://127.0.0.1:9", "actions"],
    ] {
        for json_mode in [false, true] {
            let mut all = args.clone();
            if json_mode {
                all.insert(0, "--json");
            }
            let out = g.cli(&all, &[]);
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(!text.contains(&key), "{args:?} printed the key");
        }
    }
}

#[tokio::test]
async fn an_unpriceable_write_is_refused_by_the_cli_as_by_rest() {
    // A chain with an RPC URL nothing answers (the refusal comes before any call) and an agent
    // allowed to transfer; DOGE has no price here.
    let g = Gateway::start_with_config(
        "[chains.84532]\nname = \"devnet\"\nrpc-url = \"http://127.0.0.1:9\"\n[policy.default]\nallowedActions = [\"transfer\"]\n",
    );
    g.login("doge@example.com").await;
    let (code, r) = g.json(
        &[
            "run",
            "transfer",
            "--chain-id",
            "84532",
            "--param",
            "token=DOGE",
            "--param",
            "to=0x000000000000000000000000000000000000dEaD",
            "--param",
            "amount=1",
            "--estimated-amount-usd",
            "1",
            "--confirm-writes",
        ],
        &[],
    );
    assert_eq!(
        (code, r["success"].clone(), r["code"].clone()),
        (2, json!(false), json!("PRICE_UNAVAILABLE")),
        "{r}"
    );
}

#[tokio::test]
async fn login_refuses_without_the_terms_and_asks_for_the_code() {
    let g = Gateway::start();
    // Interactive: the CLI sends the code, reads it from the terminal, asks for the terms (declined).
    let mut child = Command::new(BIN)
        .args(["login", "--email", "terms@example.com"])
        .env("ACTIONGATE_BASE_URL", &g.url)
        .env("ACTIONGATE_CONFIG_DIR", g.home.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let otp = g.smtp.code_for("terms@example.com", 1).await;
    if let Some(mut stdin) = child.stdin.take() {
        use std::io::Write;
        let _ = writeln!(stdin, "{otp}");
        let _ = writeln!(stdin, "n");
    }
    let out = child.wait_with_output().expect("wait with output");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("Code:") && err.contains("terms") && err.contains("TERMS_NOT_ACCEPTED"),
        "{err}"
    );
    assert!(
        !g.home.path().join("credentials.json").exists(),
        "nothing stored"
    );
    // The code was not consumed: accepting now works.
    let (code, v) = g.json(
        &[
            "login",
            "--email",
            "terms@example.com",
            "--code",
            &otp,
            "--accept-terms",
        ],
        &[],
    );
    assert_eq!(code, 0, "{v}");
}

// Multi-threaded: the stand-in verify API serves while a CLI process blocks this test's thread.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn personhood_commands_use_the_owner_session() {
    let verify = actiongate_testkit::worldid::VerifyApi::start().await;
    let g = Gateway::start_with_verifier(Some(&verify.url));
    // Without a login there is no owner session.
    let (code, r) = g.json(&["personhood", "org", "check", "--org-id", "acme"], &[]);
    assert_eq!((code, r["code"].clone()), (2, json!("UNAUTHORIZED")));
    g.login("person@example.com").await;
    let (code, r) = g.json(&["personhood", "org", "check", "--org-id", "acme"], &[]);
    assert_eq!(
        (code, r["data"]["personhood"]["status"].clone()),
        (0, json!("unverified"))
    );
    // A dry run of the agent-scoped write shows its route and body, the agent key masked.
    let (code, r) = g.json(&["personhood", "agent", "complete", "--proof", "{}"], &[]);
    assert_eq!((code, r["code"].clone()), (0, json!("DRY_RUN")), "{r}");
    assert_eq!(
        (
            r["data"]["path"].clone(),
            r["data"]["body"]["agentKey"].clone()
        ),
        (
            json!("/api/v1/agent/delegation/personhood/complete"),
            json!("agent-****")
        ),
        "{r}"
    );
    let (code, r) = g.json(&["personhood", "org", "begin", "--org-id", "acme"], &[]);
    assert_eq!(code, 0, "{r}");
    let proof = actiongate_testkit::worldid::proof_for(
        &r["data"]["proofRequest"],
        "0x00dd000000000000000000000000000000000000000000000000000000000004",
    )
    .to_string();
    let (code, r) = g.json(
        &[
            "personhood",
            "org",
            "complete",
            "--org-id",
            "acme",
            "--proof",
            &proof,
        ],
        &[],
    );
    assert_eq!((code, r["code"].clone()), (0, json!("DRY_RUN")), "{r}");
    assert_eq!(verify.calls(), 0, "a dry run sends nothing");
    let (code, r) = g.json(
        &[
            "personhood",
            "org",
            "complete",
            "--org-id",
            "acme",
            "--proof",
            &proof,
            "--confirm-writes",
        ],
        &[],
    );
    assert_eq!(
        (code, r["data"]["personhood"]["status"].clone()),
        (0, json!("locked")),
        "{r}"
    );
    let (code, r) = g.json(
        &[
            "personhood",
            "deposit",
            "begin",
            "--org-id",
            "acme",
            "--idempotency-key",
            "d1",
        ],
        &[],
    );
    assert_eq!(code, 0, "{r}");
    let proof = actiongate_testkit::worldid::proof_for(
        &r["data"]["proofRequest"],
        "0x00dd000000000000000000000000000000000000000000000000000000000004",
    )
    .to_string();
    let (code, r) = g.json(
        &[
            "personhood",
            "deposit",
            "complete",
            "--org-id",
            "acme",
            "--proof",
            &proof,
            "--confirm-writes",
        ],
        &[],
    );
    assert_eq!(code, 0, "{r}");
    let receipt = r["data"]["receiptId"].as_str().unwrap_or("").to_owned();
    let consume = [
        "personhood",
        "deposit",
        "consume",
        "--org-id",
        "acme",
        "--receipt-id",
        &receipt,
        "--confirm-writes",
    ];
    let (code, _) = g.json(&consume, &[]);
    assert_eq!(code, 0);
    let (code, r) = g.json(&consume, &[]);
    assert_eq!(
        (code, r["code"].clone()),
        (2, json!("PERSONHOOD_DEPOSIT_RECEIPT_ALREADY_USED"))
    );
}

#[test]
fn help_and_completions() {
    let help = Command::new(BIN).arg("--help").output().expect("output");
    assert!(help.status.success());
    insta::assert_snapshot!("help", String::from_utf8_lossy(&help.stdout));
    for cmd in [
        "run",
        "login",
        "preflight",
        "intent-status",
        "delegation",
        "credits",
        "actions",
        "personhood",
        "venue",
    ] {
        let out = Command::new(BIN)
            .args([cmd, "--help"])
            .output()
            .expect("output");
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(text.contains("Example"), "{cmd} --help has an example");
        insta::assert_snapshot!(format!("help_{cmd}"), text);
    }
    let out = Command::new(BIN)
        .args(["completions", "bash"])
        .output()
        .expect("output");
    assert!(out.status.success() && String::from_utf8_lossy(&out.stdout).contains("actiongate"));
    let bad = Command::new(BIN).args(["run"]).output().expect("output");
    assert_eq!(
        bad.status.code(),
        Some(1),
        "a usage error is a failure, not a refusal"
    );
}

/// `credits buy` pays a challenge from a local key on the devnet (a real USDC transfer) and retries
/// with the receipt; without a key it shows the challenge; the key never shows.
#[tokio::test]
async fn credits_buy_pays_from_a_local_key_on_the_devnet() {
    let devnet = actiongate_testkit::devnet::DevnetProcess::start();
    let g = Gateway::start_with_config(&devnet.toml());
    g.login("payer@example.com").await;
    let (code, v) = g.json(&["credits", "balance"], &[]);
    assert_eq!(code, 0, "{v}");
    let before = v["data"]["balance"].as_i64().unwrap_or_default();

    let (code, v) = g.json(&["credits", "buy", "credits_100", "--confirm-writes"], &[]);
    assert_eq!(
        (code, v["code"].clone()),
        (0, json!("PAYMENT_REQUIRED")),
        "{v}"
    );
    // The price, 2.00, plus the invoice's own tag below 0.01.
    assert!(
        v["data"]["x402Challenge"]["amount"]
            .as_str()
            .is_some_and(|a| a.starts_with("2.00") && a != "2.00"),
        "{v}"
    );

    let (_, key) = devnet.account(6);
    let key_file = g.home.path().join("payer.key");
    std::fs::write(&key_file, &key).expect("write");
    let args = [
        "credits",
        "buy",
        "credits_100",
        "--pay-key-file",
        key_file.to_str().unwrap_or_default(),
        "--rpc-url",
        devnet.url.as_str(),
        "--confirm-writes",
    ];
    let out = g.cli(&[&["--json"][..], &args[..]].concat(), &[]);
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(
        !stdout.contains(key.trim_start_matches("0x"))
            && !stderr.contains(key.trim_start_matches("0x")),
        "the key never shows"
    );
    let v: Value =
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout} / {stderr}"));
    assert_eq!(
        (
            out.status.code(),
            v["data"]["credits"].clone(),
            v["data"]["balance"].clone()
        ),
        (Some(0), json!(100), json!(before + 100)),
        "{v}"
    );
    let (_, v) = g.json(&["credits", "balance"], &[]);
    assert_eq!(v["data"]["balance"], json!(before + 100));

    // The standard x402 way: an EIP-3009 authorization signed locally, settled by the gateway's
    // settlement wallet (given gas here with anvil's setBalance).
    let meta: Value = reqwest::get(format!("{}/api/v1/credits/x402-metadata", g.url))
        .await
        .expect("get")
        .json()
        .await
        .unwrap_or(Value::Null);
    let settlement = meta["data"]["settlementAddress"]
        .as_str()
        .unwrap_or_else(|| panic!("{meta}"))
        .to_owned();
    let funded = reqwest::Client::new()
        .post(&devnet.url)
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "anvil_setBalance", "params": [settlement, "0xde0b6b3a7640000"]}))
        .send()
        .await
        .expect("send");
    assert!(funded.status().is_success());
    let (code, v) = g.json(
        &[
            "credits",
            "buy",
            "credits_1000",
            "--pay-key-file",
            key_file.to_str().unwrap_or_default(),
            "--x402",
            "--confirm-writes",
        ],
        &[],
    );
    assert_eq!(
        (
            code,
            v["data"]["credits"].clone(),
            v["data"]["balance"].clone()
        ),
        (0, json!(1000), json!(before + 1100)),
        "{v}"
    );
}
