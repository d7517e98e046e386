//! Test support shared by the test suites: a real SMTP server (aiosmtpd, from the Python venv that
//! `scripts/test` installs) and fresh databases. Nothing here fakes a component; it starts the real one
//! or fails with the command that installs it.
#![allow(clippy::panic, clippy::expect_used)] // Test support fails by panicking, with a message.

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub mod devnet;
pub mod standin;
pub mod worldid;

pub use actiongate_store::testing::fresh_postgres_url;

/// `[limits]` for tests that send many requests with one key or start many onboardings from one
/// address: high enough never to refuse them. The tests of the limits themselves leave it out.
pub const NO_LIMITS: &str = "[limits]\nonboarding-per-minute = 1000000\nmcp-initialize-per-minute = 1000000\ncredit-challenges-per-minute = 1000000\nrequests-per-second = 1000000\nburst = 1000000\n";

/// The repository root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The Python of the test venv (`ACTIONGATE_TEST_PYTHON`, else `<repo>/.venv/bin/python`).
pub fn python() -> PathBuf {
    if let Ok(p) = std::env::var("ACTIONGATE_TEST_PYTHON") {
        return PathBuf::from(p);
    }
    let venv = repo_root().join(".venv/bin/python");
    assert!(
        venv.exists(),
        "the SMTP sink needs the test venv: run ./scripts/test (it installs aiosmtpd into .venv)"
    );
    venv
}

/// A port nobody listens on right now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("no free port")
}

/// A real SMTP server writing every message it receives into a maildir (`tests/smtp_sink.py`).
pub struct SmtpSink {
    child: Child,
    pub port: u16,
    maildir: PathBuf,
}

impl SmtpSink {
    pub fn start(dir: &Path) -> Self {
        Self::start_with_delay(dir, 0.0)
    }

    /// A sink that holds each message `delay` seconds before accepting it.
    pub fn start_with_delay(dir: &Path, delay: f64) -> Self {
        Self::spawn(dir, &["--delay".to_owned(), delay.to_string()])
    }

    /// A sink that speaks TLS with this certificate and key: `mode` `starttls` (it refuses mail
    /// until the client has issued STARTTLS) or `implicit` (TLS from the first byte).
    pub fn start_tls(dir: &Path, mode: &str, cert: &Path, key: &Path) -> Self {
        let path = |p: &Path| p.display().to_string();
        Self::spawn(
            dir,
            &[
                "--tls".to_owned(),
                mode.to_owned(),
                "--cert".to_owned(),
                path(cert),
                "--key".to_owned(),
                path(key),
            ],
        )
    }

    fn spawn(dir: &Path, args: &[String]) -> Self {
        let maildir = dir.join("maildir");
        // The free port can be taken by another test between our probe and the sink's bind: retry.
        for _ in 0..5 {
            let port = free_port();
            let mut child = Command::new(python())
                .arg(repo_root().join("tests/smtp_sink.py"))
                .args(["--port", &port.to_string()])
                .args(args)
                .arg("--maildir")
                .arg(&maildir)
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .expect("cannot start the SMTP sink");
            let stdout = child.stdout.take().unwrap_or_else(|| panic!("no stdout"));
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            if line.trim() == "ready" {
                return Self {
                    child,
                    port,
                    maildir,
                };
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!("the SMTP sink did not start (5 tries)");
    }

    /// The maildir the sink writes to.
    pub fn maildir(&self) -> &Path {
        &self.maildir
    }

    /// `smtp://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("smtp://127.0.0.1:{}", self.port)
    }

    /// Every received message addressed to `to`, oldest first.
    pub fn messages_to(&self, to: &str) -> Vec<String> {
        messages_in(&[self.maildir.join("new"), self.maildir.join("cur")], to)
    }

    /// Waits for the `n`th message to `to` and reads the 6-digit code in it.
    pub async fn code_for(&self, to: &str, n: usize) -> String {
        wait_for_code(|| self.messages_to(to), to, n).await
    }
}

impl Drop for SmtpSink {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Messages in these directories (maildir folders or an `.eml` outbox) addressed to `to`, oldest first.
pub fn messages_in(dirs: &[PathBuf], to: &str) -> Vec<String> {
    let to = to.to_ascii_lowercase();
    let mut found: Vec<(std::time::SystemTime, String)> = Vec::new();
    for dir in dirs {
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(text) = std::fs::read_to_string(entry.path()) else {
                continue;
            };
            let addressed = text.lines().any(|l| {
                let l = l.to_ascii_lowercase();
                l.starts_with("to:") && l.contains(&to)
            });
            if addressed {
                let when = entry
                    .metadata()
                    .and_then(|m| m.modified())
                    .unwrap_or(std::time::UNIX_EPOCH);
                found.push((when, text));
            }
        }
    }
    found.sort_by_key(|(t, _)| *t);
    found.into_iter().map(|(_, t)| t).collect()
}

/// Waits up to 10 s for the `n`th message and answers the code in it.
pub async fn wait_for_code(read: impl Fn() -> Vec<String>, to: &str, n: usize) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(text) = read().get(n - 1) {
            return extract_code(text).unwrap_or_else(|| panic!("no code in mail: {text}"));
        }
        assert!(Instant::now() < deadline, "no mail #{n} to {to} arrived");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The 6-digit code of a sign-in mail.
pub fn extract_code(text: &str) -> Option<String> {
    let idx = text.find("sign-in code is ")?;
    let code: String = text[idx + 16..].chars().take(6).collect();
    (code.len() == 6 && code.chars().all(|c| c.is_ascii_digit())).then_some(code)
}
