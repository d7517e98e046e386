//! A devnet for tests: `scripts/devnet` (anvil with the fixture contracts from published artifacts) on
//! a free port, its devnet.json read back, stopped (with anvil) when dropped.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// A running devnet.
pub struct DevnetProcess {
    child: Child,
    pub dir: tempfile::TempDir,
    pub url: String,
    /// devnet.json: rpcUrl, chainId, contracts, tokens, vaults, x402, accounts.
    pub spec: serde_json::Value,
}

impl DevnetProcess {
    /// Starts it and waits for "devnet ready" (trying another port when the one picked was taken
    /// meanwhile). Panics (fails the test) when it cannot start.
    #[allow(clippy::panic)]
    pub fn start() -> Self {
        for _ in 0..3 {
            if let Some(devnet) = Self::try_start() {
                return devnet;
            }
        }
        panic!("scripts/devnet did not start (its stderr above says why)");
    }

    fn try_start() -> Option<Self> {
        let dir = tempfile::tempdir().ok()?;
        let port = crate::free_port();
        let mut child = Command::new(crate::repo_root().join("scripts/devnet"))
            .args(["--port", &port.to_string(), "--out"])
            .arg(dir.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .ok()?;
        let mut line = String::new();
        if let Some(stdout) = child.stdout.take() {
            let _ = BufReader::new(stdout).read_line(&mut line);
        }
        let mut me = Self {
            child,
            dir,
            url: String::new(),
            spec: serde_json::Value::Null,
        };
        if line.trim() != "devnet ready" {
            return None;
        }
        me.spec =
            serde_json::from_str(&std::fs::read_to_string(me.dir.path().join("devnet.json")).ok()?)
                .ok()?;
        me.url = me.spec["rpcUrl"].as_str().unwrap_or_default().to_owned();
        Some(me)
    }

    /// devnet.toml: a complete gateway config for the devnet.
    pub fn toml(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("devnet.toml")).unwrap_or_default()
    }

    /// Devnet account `i`: (address, private key).
    pub fn account(&self, i: usize) -> (String, String) {
        let a = &self.spec["accounts"][i];
        (
            a["address"].as_str().unwrap_or_default().to_owned(),
            a["privateKey"].as_str().unwrap_or_default().to_owned(),
        )
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for DevnetProcess {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .stderr(Stdio::null())
            .status();
        let _ = self.child.wait();
    }
}
