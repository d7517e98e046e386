//! The real `actiongate` binary: start-up contract, configuration sources, migrations, shutdown,
//! several processes on one PostgreSQL, and secrets kept out of the logs.
#![allow(clippy::panic, clippy::expect_used)] // Tests fail by panicking, saying what failed.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_actiongate");

struct Server {
    child: Child,
    addr: String,
    stderr: std::sync::mpsc::Receiver<String>,
}

/// Starts `actiongate server` with these args and env, and waits for its listening line.
fn start(args: &[&str], env: &[(&str, &str)], cwd: &Path) -> Server {
    let mut cmd = Command::new(BIN);
    cmd.arg("server")
        .args(args)
        .current_dir(cwd)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("spawn: {e}"));
    let stdout = child.stdout.take().unwrap_or_else(|| panic!("no stdout"));
    let mut stderr = child.stderr.take().unwrap_or_else(|| panic!("no stderr"));
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut all = String::new();
        let _ = stderr.read_to_string(&mut all);
        let _ = tx.send(all);
    });
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .unwrap_or_else(|e| panic!("read stdout: {e}"));
    let addr = line
        .trim()
        .strip_prefix("actiongate listening on http://")
        .unwrap_or_else(|| {
            let err = rx.recv_timeout(Duration::from_secs(5)).unwrap_or_default();
            panic!("unexpected first line {line:?}; stderr: {err}")
        })
        .to_owned();
    Server {
        child,
        addr,
        stderr: rx,
    }
}

impl Server {
    fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    /// SIGTERM, then the exit status and everything the server logged.
    fn terminate(mut self) -> (std::process::ExitStatus, String) {
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let deadline = Instant::now() + Duration::from_secs(15);
        let status = loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                break status;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("the server did not stop within 15 s of SIGTERM");
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let logs = self
            .stderr
            .recv_timeout(Duration::from_secs(5))
            .unwrap_or_default();
        (status, logs)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn get(url: &str) -> (u16, Value) {
    let resp = reqwest::get(url)
        .await
        .unwrap_or_else(|e| panic!("GET {url}: {e}"));
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

async fn post(url: &str, body: Value) -> (u16, Value) {
    let resp = reqwest::Client::new()
        .post(url)
        .json(&body)
        .send()
        .await
        .unwrap_or_else(|e| panic!("POST {url}: {e}"));
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

/// Waits for the first mail to `email` in an `.eml` outbox and reads its code.
async fn outbox_code(outbox: &Path, email: &str) -> String {
    let dirs = [outbox.to_path_buf()];
    actiongate_testkit::wait_for_code(|| actiongate_testkit::messages_in(&dirs, email), email, 1)
        .await
}

#[tokio::test]
async fn dev_server_starts_with_embedded_defaults_and_stops_on_sigterm() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = start(&["--dev", "--listen", "127.0.0.1:0"], &[], dir.path());
    let (status, body) = get(&server.url("/healthz")).await;
    assert_eq!((status, body["data"]["status"].clone()), (200, json!("ok")));
    let (status, _) = get(&server.url("/readyz")).await;
    assert_eq!(status, 200);

    let data = dir.path().join(".actiongate");
    assert!(
        data.join("actiongate.db").exists(),
        "SQLite at <data-dir>/actiongate.db"
    );
    assert!(data.join("outbox").is_dir(), "dev outbox");
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(data.join("master.key"))
            .map(|m| m.permissions())
            .expect("file metadata"),
    );
    assert_eq!(mode & 0o777, 0o600, "master key must be 0600");

    // Mail goes to the outbox as one RFC 5322 file per message.
    let (status, _) = post(
        &server.url("/api/v1/onboarding/email/start"),
        json!({"email": "dev@example.com"}),
    )
    .await;
    assert_eq!(status, 200);
    let code = outbox_code(&data.join("outbox"), "dev@example.com").await;
    assert_eq!(code.len(), 6);

    let (status, logs) = server.terminate();
    assert!(status.success(), "exit status {status:?}; logs: {logs}");
    assert!(logs.contains("shutdown signal received"), "{logs}");

    // A restart keeps everything: the same master key opens the same database.
    let server = start(&["--dev", "--listen", "127.0.0.1:0"], &[], dir.path());
    let (status, body) = post(
        &server.url("/api/v1/onboarding/email/complete"),
        json!({"email": "dev@example.com", "code": code, "acceptTerms": true}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let _ = server.terminate();
}

#[tokio::test]
async fn sigterm_lets_an_in_flight_request_finish() {
    let dir = tempfile::tempdir().expect("tempdir");
    // The SMTP server holds each message for 2 s: the onboarding request is in flight that long.
    let smtp = actiongate_testkit::SmtpSink::start_with_delay(dir.path(), 2.0);
    let smtp_url = smtp.url();
    let server = start(
        &["--dev", "--listen", "127.0.0.1:0", "--smtp-url", &smtp_url],
        &[],
        dir.path(),
    );
    let url = server.url("/api/v1/onboarding/email/start");
    let in_flight =
        tokio::spawn(async move { post(&url, json!({"email": "late@example.com"})).await });
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert!(
        !in_flight.is_finished(),
        "the request should still be waiting for SMTP"
    );
    let (status, logs) = tokio::task::spawn_blocking(move || server.terminate())
        .await
        .expect("spawn blocking");
    assert!(status.success(), "{logs}");
    let (code, body) = in_flight.await.expect("a task panicked");
    assert_eq!(
        code, 200,
        "the in-flight request was answered before exit: {body}"
    );
    assert_eq!(
        smtp.messages_to("late@example.com").len(),
        1,
        "and its mail was delivered"
    );
}

#[tokio::test]
async fn configuration_comes_from_toml_env_and_flags_in_that_order() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("from-toml");
    let config = dir.path().join("gateway.toml");
    std::fs::write(
        &config,
        format!(
            "dev = true\nlisten = \"127.0.0.1:1\"\ndata-dir = \"{}\"\n",
            data.display()
        ),
    )
    .expect("write");
    let config = config.display().to_string();
    // The env var beats the file's listen address (port 1 would fail to bind).
    let server = start(
        &["--config", &config],
        &[("ACTIONGATE_LISTEN", "127.0.0.1:0")],
        dir.path(),
    );
    assert!(
        data.join("actiongate.db").exists(),
        "data-dir from the TOML file"
    );
    let _ = server.terminate();

    // A flag beats the env var.
    let flag_dir = dir.path().join("from-flag");
    let flag_dir_s = flag_dir.display().to_string();
    let server = start(
        &["--config", &config, "--data-dir", &flag_dir_s],
        &[
            ("ACTIONGATE_LISTEN", "127.0.0.1:0"),
            ("ACTIONGATE_DATA_DIR", "/nonexistent/never"),
        ],
        dir.path(),
    );
    assert!(flag_dir.join("actiongate.db").exists());
    let _ = server.terminate();

    // A typo in the file is an error that names it.
    std::fs::write(dir.path().join("bad.toml"), "lisen = \"x\"\n").expect("write");
    let out = Command::new(BIN)
        .args(["server", "--config", "bad.toml"])
        .current_dir(dir.path())
        .output()
        .expect("output");
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("lisen"));
}

#[tokio::test]
async fn without_dev_a_master_key_is_required() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = Command::new(BIN)
        .args(["server", "--listen", "127.0.0.1:0"])
        .current_dir(dir.path())
        .output()
        .expect("output");
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no master key") && err.contains("actiongate master-key"),
        "{err}"
    );

    let key = dir.path().join("mk");
    let out = Command::new(BIN)
        .args(["master-key", "--out"])
        .arg(&key)
        .output()
        .expect("output");
    assert!(out.status.success());
    assert!(
        !String::from_utf8_lossy(&out.stdout)
            .contains(&std::fs::read_to_string(&key).unwrap_or_default())
    );
    // It never overwrites a key.
    let again = Command::new(BIN)
        .args(["master-key", "--out"])
        .arg(&key)
        .output()
        .expect("output");
    assert_eq!(again.status.code(), Some(1));

    let key_s = key.display().to_string();
    let server = start(
        &["--listen", "127.0.0.1:0", "--master-key-file", &key_s],
        &[],
        dir.path(),
    );
    let (status, _) = get(&server.url("/readyz")).await;
    assert_eq!(status, 200);
    let _ = server.terminate();
}

#[tokio::test]
async fn two_processes_share_one_postgres_database() {
    let url = actiongate_testkit::fresh_postgres_url()
        .await
        .expect("fresh postgres url");
    let dir = tempfile::tempdir().expect("tempdir");
    let out = Command::new(BIN)
        .args(["migrate", "--database-url", &url])
        .output()
        .expect("output");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let key = dir.path().join("master.key");
    let out = Command::new(BIN)
        .args(["master-key", "--out"])
        .arg(&key)
        .output()
        .expect("output");
    assert!(out.status.success());
    let key_s = key.display().to_string();
    let outbox_dir = dir.path().join("a");
    let a_dir = outbox_dir.display().to_string();
    let b_dir = dir.path().join("b").display().to_string();
    let common = [
        "--listen",
        "127.0.0.1:0",
        "--database-url",
        &url,
        "--master-key-file",
        &key_s,
    ];
    let a = start(
        &[&common[..], &["--data-dir", &a_dir]].concat(),
        &[],
        dir.path(),
    );
    let b = start(
        &[&common[..], &["--data-dir", &b_dir]].concat(),
        &[],
        dir.path(),
    );

    // Start on A, complete on B, use the key on both.
    post(
        &a.url("/api/v1/onboarding/email/start"),
        json!({"email": "pg@example.com"}),
    )
    .await;
    let code = outbox_code(&outbox_dir.join("outbox"), "pg@example.com").await;
    let (status, body) = post(
        &b.url("/api/v1/onboarding/email/complete"),
        json!({"email": "pg@example.com", "code": code, "acceptTerms": true}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let key = body["data"]["bootstrap"]["agentApiKey"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    for server in [&a, &b] {
        let (status, _) =
            get(&server.url(&format!("/api/v1/agent/actions?agentApiKey={key}"))).await;
        assert_eq!(status, 200);
    }

    // An operator grant shows in the balance on both processes.
    let account = body["data"]["account"]["accountId"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    let out = Command::new(BIN)
        .args([
            "admin",
            "grant-credits",
            "--database-url",
            &url,
            "--account-id",
            &account,
            "--credits",
            "250",
            "--reason",
            "pilot",
        ])
        .output()
        .expect("output");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for server in [&a, &b] {
        let resp = reqwest::Client::new()
            .get(server.url("/api/v1/agent/credits/balance"))
            .header("x-agent-api-key", &key)
            .send()
            .await
            .expect("send");
        let v: Value = resp.json().await.unwrap_or(Value::Null);
        assert_eq!(v["data"]["balance"], json!(250));
    }
    let refused = Command::new(BIN)
        .args([
            "admin",
            "grant-credits",
            "--database-url",
            &url,
            "--account-id",
            "nobody",
            "--credits",
            "5",
            "--reason",
            "x",
        ])
        .output()
        .expect("output");
    assert_eq!(refused.status.code(), Some(1));
    let zero = Command::new(BIN)
        .args([
            "admin",
            "grant-credits",
            "--database-url",
            &url,
            "--account-id",
            &account,
            "--credits",
            "0",
            "--reason",
            "x",
        ])
        .output()
        .expect("output");
    assert_eq!(
        zero.status.code(),
        Some(1),
        "a non-positive amount is a usage error"
    );
    let _ = a.terminate();
    let _ = b.terminate();
}

#[tokio::test]
async fn secrets_never_reach_the_logs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = start(
        &["--dev", "--listen", "127.0.0.1:0"],
        &[("ACTIONGATE_LOG", "debug")],
        dir.path(),
    );
    let outbox = dir.path().join(".actiongate/outbox");
    post(
        &server.url("/api/v1/onboarding/email/start"),
        json!({"email": "quiet@example.com"}),
    )
    .await;
    let code = outbox_code(&outbox, "quiet@example.com").await;
    // A wrong code first, so that the failure path is logged too.
    post(
        &server.url("/api/v1/onboarding/email/complete"),
        json!({"email": "quiet@example.com", "code": "x", "acceptTerms": true}),
    )
    .await;
    let (_, body) = post(
        &server.url("/api/v1/onboarding/email/complete"),
        json!({"email": "quiet@example.com", "code": code, "acceptTerms": true}),
    )
    .await;
    let key = body["data"]["bootstrap"]["agentApiKey"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    let session = body["data"]["session"]["token"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    assert!(key.starts_with("agent-") && session.starts_with("owner-"));
    get(&server.url(&format!("/api/v1/agent/actions?agentApiKey={key}"))).await;
    get(&server.url("/api/v1/agent/actions?agentApiKey=agent-wrong-key-value")).await;
    let client = reqwest::Client::new();
    let _ = client
        .get(server.url("/api/v1/agents"))
        .bearer_auth(&session)
        .send()
        .await;
    let _ = client
        .get(server.url("/api/v1/agents"))
        .bearer_auth(&key)
        .send()
        .await;

    let master =
        std::fs::read_to_string(dir.path().join(".actiongate/master.key")).unwrap_or_default();
    let (_, logs) = server.terminate();
    assert!(
        logs.contains("/api/v1/agent/actions"),
        "the requests were logged: {logs}"
    );
    for (what, secret) in [
        ("agent key", key.as_str()),
        ("session", session.as_str()),
        ("e-mail code", code.as_str()),
        ("master key", master.trim()),
        ("wrong key", "agent-wrong-key-value"),
    ] {
        assert!(!secret.is_empty());
        assert!(!logs.contains(secret), "the {what} appears in the logs");
    }
}

/// `--help` names every subcommand with an example.
#[test]
fn help_lists_the_commands() {
    let out = Command::new(BIN).arg("--help").output().expect("output");
    let text = String::from_utf8_lossy(&out.stdout);
    for cmd in ["server", "migrate", "master-key", "admin"] {
        assert!(text.contains(cmd), "{text}");
    }
    let out = Command::new(BIN)
        .args(["server", "--help"])
        .output()
        .expect("output");
    let text = String::from_utf8_lossy(&out.stdout);
    for flag in [
        "--listen",
        "--data-dir",
        "--database-url",
        "--smtp-url",
        "--dev",
        "--config",
        "ACTIONGATE_LISTEN",
    ] {
        assert!(text.contains(flag), "{flag} missing: {text}");
    }
}
