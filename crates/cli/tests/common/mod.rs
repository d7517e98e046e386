//! The real gateway (the CLI's own binary, `actiongate server --dev`) with a real SMTP sink, and the
//! CLI run against it with a user's config dir of its own.
#![allow(dead_code)] // Each test binary uses its part.
#![allow(clippy::panic, clippy::expect_used)] // Test helpers fail saying what did not happen.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex};

use actiongate_testkit::SmtpSink;
use serde_json::{Value, json};

pub const BIN: &str = env!("CARGO_BIN_EXE_actiongate");

pub struct Gateway {
    pub url: String,
    pub home: tempfile::TempDir,
    child: Child,
    log: Arc<Mutex<String>>,
    pub smtp: SmtpSink,
    _dir: tempfile::TempDir,
}

impl Gateway {
    pub fn start() -> Self {
        Self::start_with_verifier(None)
    }

    pub fn start_with_verifier(verify_url: Option<&str>) -> Self {
        let personhood = verify_url
            .map(|u| format!("[personhood]\nverify-url = \"{u}\"\nrp-id = \"rp_cli\"\n"))
            .unwrap_or_default();
        Self::start_with_config(&personhood)
    }

    /// A gateway with this config file.
    pub fn start_with_config(text: &str) -> Self {
        Self::start_logging(text, "info")
    }

    /// A gateway with this config file, logging at `level` (`ACTIONGATE_LOG`).
    pub fn start_logging(text: &str, level: &str) -> Self {
        Self::start_logging_as(text, level, "text")
    }

    /// [`Gateway::start_logging`] with the log format (`ACTIONGATE_LOG_FORMAT`: `text` or `json`).
    pub fn start_logging_as(text: &str, level: &str, format: &str) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let smtp = SmtpSink::start(dir.path());
        let config = dir.path().join("gateway.toml");
        let limits = match text.contains("[limits]") {
            true => "",
            false => actiongate_testkit::NO_LIMITS,
        };
        std::fs::write(&config, format!("{text}\n{limits}")).expect("write");
        let config = config.display().to_string();
        let mut child = Command::new(BIN)
            .args([
                "server",
                "--dev",
                "--listen",
                "127.0.0.1:0",
                "--smtp-url",
                &smtp.url(),
                "--config",
                &config,
            ])
            .current_dir(dir.path())
            .env("ACTIONGATE_LOG", level)
            .env("ACTIONGATE_LOG_FORMAT", format)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        let log = Arc::new(Mutex::new(String::new()));
        let mut stderr = child.stderr.take().unwrap_or_else(|| panic!("no stderr"));
        let sink = log.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = stderr.read(&mut buf) {
                if n == 0 {
                    break;
                }
                if let Ok(mut l) = sink.lock() {
                    l.push_str(&String::from_utf8_lossy(&buf[..n]));
                }
            }
        });
        let mut line = String::new();
        let stdout = child.stdout.take().unwrap_or_else(|| panic!("no stdout"));
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("read line");
        let url = line
            .trim()
            .strip_prefix("actiongate listening on ")
            .unwrap_or_else(|| panic!("{line:?}"))
            .to_owned();
        let home = tempfile::tempdir().expect("tempdir");
        Self {
            child,
            url,
            log,
            smtp,
            home,
            _dir: dir,
        }
    }

    /// Runs the CLI with this gateway and this user's config dir.
    pub fn cli(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        let mut cmd = Command::new(BIN);
        cmd.args(args)
            .env("ACTIONGATE_BASE_URL", &self.url)
            .env("ACTIONGATE_CONFIG_DIR", self.home.path())
            .env_remove("ACTIONGATE_API_KEY")
            .env_remove("ACTIONGATE_AGENT_ADDRESS")
            .stdin(Stdio::null());
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.output().expect("output")
    }

    /// `--json` run: exit code and the one JSON document on stdout.
    pub fn json(&self, args: &[&str], env: &[(&str, &str)]) -> (i32, Value) {
        let mut all = vec!["--json"];
        all.extend_from_slice(args);
        let out = self.cli(&all, env);
        let stdout = String::from_utf8_lossy(&out.stdout).to_string();
        assert_eq!(
            stdout.lines().count(),
            1,
            "--json prints one line and nothing else: {stdout:?} / {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
        let keys: Vec<&String> = v
            .as_object()
            .map(|o| o.keys().collect())
            .unwrap_or_default();
        assert_eq!(keys, ["code", "data", "success"], "{v}");
        (out.status.code().unwrap_or(-1), v)
    }

    /// Everything the gateway has logged so far.
    pub fn log_text(&self) -> String {
        self.log.lock().map(|l| l.clone()).unwrap_or_default()
    }

    pub fn requests_to(&self, path: &str) -> usize {
        self.log
            .lock()
            .map(|l| l.matches(&format!("path={path}")).count())
            .unwrap_or(0)
    }

    pub async fn login(&self, email: &str) -> String {
        let (code, v) = self.json(&["login", "--email", email], &[]);
        assert_eq!((code, v["code"].clone()), (0, json!("CODE_SENT")), "{v}");
        let otp = self.smtp.code_for(email, 1).await;
        let (code, v) = self.json(
            &["login", "--email", email, "--code", &otp, "--accept-terms"],
            &[],
        );
        assert_eq!(code, 0, "{v}");
        assert_eq!(v["data"]["hasAgentKey"], json!(true));
        let stored: Value = serde_json::from_str(
            &std::fs::read_to_string(self.home.path().join("credentials.json")).unwrap_or_default(),
        )
        .unwrap_or(Value::Null);
        stored["agentApiKey"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// Logs in as a new owner whose agent may run `actions` (daily limit 100,000 USD) and whose
    /// execution wallet holds 1 ETH on the devnet at `rpc_url`: (the agent key, its wallet address).
    pub async fn devnet_agent(
        &self,
        email: &str,
        actions: &[&str],
        rpc_url: &str,
    ) -> (String, String) {
        let key = self.login(email).await;
        let stored: Value = serde_json::from_str(
            &std::fs::read_to_string(self.home.path().join("credentials.json")).unwrap_or_default(),
        )
        .unwrap_or(Value::Null);
        let text = |f: &str| stored[f].as_str().unwrap_or_default().to_owned();
        let (agent_id, session, address) =
            (text("agentId"), text("ownerSession"), text("agentAddress"));
        let r = reqwest::Client::new()
            .put(format!("{}/api/v1/agents/{agent_id}/policy", self.url))
            .bearer_auth(session)
            .json(&json!({"allowedActions": actions, "dailyLimitUsd": 100000}))
            .send()
            .await
            .expect("the gateway answers");
        assert_eq!(r.status().as_u16(), 200);
        rpc(
            rpc_url,
            "anvil_setBalance",
            json!([address, "0xde0b6b3a7640000"]),
        )
        .await;
        // 10,000 credits, granted as an operator does (`actiongate admin grant-credits` on the
        // gateway's own database), so the test is not bound by the free daily requests.
        let me: Value = reqwest::Client::new()
            .get(format!("{}/api/v1/agent/me", self.url))
            .header("x-agent-api-key", &key)
            .send()
            .await
            .expect("the gateway answers")
            .json()
            .await
            .unwrap_or(Value::Null);
        let account = me["data"]["accountId"].as_str().unwrap_or_default();
        let out = Command::new(BIN)
            .args(["admin", "grant-credits", "--dev", "--account-id", account])
            .args(["--credits", "10000", "--reason", "test grant"])
            .current_dir(self._dir.path())
            .output()
            .expect("the admin command runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        (key, address)
    }

    /// One direct execution (lane execute) on all three surfaces, as each answers it: (the CLI's
    /// exit code and JSON, REST's status and body, the MCP `walletExecute` tool result). `flags` are
    /// the CLI's `--param k=v` pairs of `params`; each surface takes its own idempotency key.
    pub async fn execute_everywhere(
        &self,
        key: &str,
        action: &str,
        params: Value,
        flags: &[&str],
        idempotency: &str,
    ) -> ((i32, Value), (u16, Value), Value) {
        let cli_key = format!("{idempotency}-cli");
        let mut args = vec![
            "run",
            action,
            "--direct",
            "--chain-id",
            "84532",
            "--idempotency-key",
            &cli_key,
            "--confirm-writes",
        ];
        for f in flags {
            args.extend(["--param", f]);
        }
        let cli = self.json(&args, &[]);
        let r = reqwest::Client::new()
            .post(format!("{}/api/v1/agent/execute", self.url))
            .json(
                &json!({"agentApiKey": key, "action": action, "chainId": 84532,
                          "idempotencyKey": format!("{idempotency}-rest"), "params": params}),
            )
            .send()
            .await
            .expect("the gateway answers");
        let rest = (r.status().as_u16(), r.json().await.unwrap_or(Value::Null));
        let via_mcp = self.mcp(
            key,
            "walletExecute",
            json!({"action": action, "chainId": 84532, "params": params,
                   "idempotencyKey": format!("{idempotency}-mcp")}),
        );
        (cli, rest, via_mcp)
    }

    /// One read for the agent on all three surfaces (CLI `run --wait`, REST execute-intent polled
    /// to its end, MCP `agentRun`), each a new reading under its own idempotency key (`tag`): each
    /// one's first result (`{success, data}` or `{success, code, error}`).
    pub async fn read_everywhere(
        &self,
        key: &str,
        action: &str,
        params: Value,
        flags: &[&str],
        tag: &str,
    ) -> [Value; 3] {
        let cli_key = format!("{action}-{tag}-cli");
        let mut args = vec![
            "run",
            action,
            "--chain-id",
            "84532",
            "--idempotency-key",
            &cli_key,
            "--wait",
        ];
        for f in flags {
            args.extend(["--param", f]);
        }
        let (_, cli) = self.json(&args, &[]);
        let r = reqwest::Client::new()
            .post(format!("{}/api/v1/agent/execute-intent", self.url))
            .json(
                &json!({"agentApiKey": key, "action": action, "chainId": 84532,
                          "idempotencyKey": format!("{action}-{tag}-rest"), "params": params}),
            )
            .send()
            .await
            .expect("the gateway answers");
        let submitted: Value = r.json().await.unwrap_or(Value::Null);
        let id = submitted["intentId"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let mut rest = Value::Null;
        for _ in 0..100 {
            rest = reqwest::Client::new()
                .get(format!(
                    "{}/api/v1/agent/execute-intent/status?intentId={id}",
                    self.url
                ))
                .header("x-agent-api-key", key)
                .send()
                .await
                .expect("the gateway answers")
                .json()
                .await
                .unwrap_or(Value::Null);
            if rest["status"] != "queued" {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        assert_ne!(
            rest["status"],
            json!("queued"),
            "the read {action} did not end: {rest}"
        );
        let via_mcp = self.mcp(
            key,
            "agentRun",
            json!({"action": action, "params": params, "chainId": 84532,
                   "idempotencyKey": format!("{action}-{tag}-mcp")}),
        );
        [
            cli["data"]["results"][0].clone(),
            rest["results"][0].clone(),
            via_mcp["structuredContent"]["results"][0].clone(),
        ]
    }

    /// One MCP tool call through the official Python SDK (`tests/e2e/mcp_call.py`) as the agent
    /// `key`: the tool result.
    pub fn mcp(&self, key: &str, tool: &str, args: Value) -> Value {
        let out = Command::new(actiongate_testkit::python())
            .arg(actiongate_testkit::repo_root().join("tests/e2e/mcp_call.py"))
            .args(["--url", &format!("{}/mcp", self.url), "--tool", tool])
            .args(["--args", &args.to_string()])
            .env("ACTIONGATE_KEY", key)
            .output()
            .expect("the MCP client runs");
        let stdout = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(
            out.status.success(),
            "{stdout} {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"))
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One JSON-RPC call to a node; its result (an error fails the test).
pub async fn rpc(url: &str, method: &str, params: Value) -> Value {
    let v: Value = reqwest::Client::new()
        .post(url)
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))
        .send()
        .await
        .expect("the node answers")
        .json()
        .await
        .unwrap_or(Value::Null);
    assert!(v.get("error").is_none(), "{method}: {v}");
    v["result"].clone()
}

/// Sends `units` USDC on the devnet's chain to `to` from its first account (unlocked in anvil),
/// and waits for it to be mined.
pub async fn fund_usdc(devnet: &actiongate_testkit::devnet::DevnetProcess, to: &str, units: u64) {
    let (funder, _) = devnet.account(0);
    let usdc = devnet.spec["tokens"]["USDC"]["address"]
        .as_str()
        .expect("the devnet's USDC")
        .to_owned();
    let transfer = format!(
        "0xa9059cbb{:0>64}{:064x}",
        to.trim_start_matches("0x").to_ascii_lowercase(),
        u128::from(units) * 1_000_000
    );
    let hash = rpc(
        &devnet.url,
        "eth_sendTransaction",
        json!([{"from": funder, "to": usdc, "data": transfer}]),
    )
    .await;
    for _ in 0..50 {
        if !rpc(&devnet.url, "eth_getTransactionReceipt", json!([hash]))
            .await
            .is_null()
        {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("the USDC funding {hash} was not mined");
}
