//! The test harness: a real server on port 0 (SQLite or a fresh PostgreSQL schema), a real SMTP
//! sink (aiosmtpd, from the venv scripts/test installs), a manual clock, and an HTTP client.
#![allow(clippy::expect_used)] // Test helpers fail with a message saying what did not happen.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

pub use actiongate_testkit::SmtpSink;

use actiongate_core::Gateway;
use actiongate_core::clock::ManualClock;
use actiongate_core::execution::Provider;
use actiongate_core::store::Store;
use actiongate_server::{Application, Config, Deps, Overrides};
use serde_json::{Value, json};

#[derive(Debug, Clone, Copy)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// Generates a SQLite and a PostgreSQL test from one async fn taking a `Backend`.
#[macro_export]
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[tokio::test]
            async fn sqlite() {
                super::$name($crate::helpers::Backend::Sqlite).await
            }
            #[tokio::test]
            async fn postgres() {
                super::$name($crate::helpers::Backend::Postgres).await
            }
        }
    )*};
}

pub struct TestApp {
    pub addr: SocketAddr,
    pub client: reqwest::Client,
    pub clock: Arc<ManualClock>,
    pub smtp: SmtpSink,
    pub verify_api: actiongate_testkit::worldid::VerifyApi,
    pub gateway: Arc<Gateway>,
    pub database_url: String,
    /// Where `GET /metrics` is served when `metrics-listen` gives it a listener of its own.
    pub metrics_addr: Option<SocketAddr>,
    _dir: tempfile::TempDir,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    server: Option<tokio::task::JoinHandle<()>>,
}

#[derive(Default)]
pub struct Options {
    /// Stand-ins for venues the build does not have yet.
    pub providers: Vec<Arc<dyn Provider>>,
    pub config_toml: String,
    /// Share a database with another app (a second gateway process), instead of a fresh one.
    pub database_url: Option<String>,
    /// The master key of another app (processes of one deployment share it), instead of a new one.
    pub master_key_file: Option<std::path::PathBuf>,
}

/// The instant every test clock starts at.
pub const START: time::OffsetDateTime = time::macros::datetime!(2026-11-22 12:00:00 UTC);

pub async fn spawn_app(backend: Backend) -> TestApp {
    spawn_app_with(backend, Options::default()).await
}

pub async fn spawn_app_with(backend: Backend, options: Options) -> TestApp {
    let dir = tempfile::tempdir().expect("tempdir");
    let smtp = SmtpSink::start(dir.path());
    let verify_api = actiongate_testkit::worldid::VerifyApi::start().await;
    let database_url = match (options.database_url, backend) {
        (Some(url), _) => url,
        (None, Backend::Sqlite) => format!("sqlite://{}", dir.path().join("gateway.db").display()),
        (None, Backend::Postgres) => actiongate_testkit::fresh_postgres_url()
            .await
            .expect("a fresh PostgreSQL schema (scripts/test starts PostgreSQL)"),
    };
    let limits = match options.config_toml.contains("[limits]") {
        true => "",
        false => actiongate_testkit::NO_LIMITS,
    };
    let config_toml = format!(
        "{}\n{limits}\n[personhood]\nverify-url = \"{}\"\nrp-id = \"rp_test\"\n",
        options.config_toml, verify_api.url
    );
    let file = toml::from_str(&config_toml).expect("test config");
    let config = Config::resolve(
        Overrides {
            dev: true,
            listen: Some(SocketAddr::from(([127, 0, 0, 1], 0))),
            data_dir: Some(dir.path().join("data")),
            database_url: Some(database_url.clone()),
            smtp_url: Some(smtp.url()),
            master_key_file: options.master_key_file,
            ..Overrides::default()
        },
        file,
    )
    .expect("config");
    let clock = Arc::new(ManualClock::new(START));
    let deps = Deps {
        clock: Some(clock.clone()),
        mailer: None,
        providers: options.providers,
        verifier: None,
        send_hooks: Default::default(),
    };
    let app = Application::build(&config, deps).await.expect("build");
    let addr = app.local_addr();
    let metrics_addr = app.metrics_addr();
    let gateway = app.gateway().clone();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        let _ = app
            .run(async {
                let _ = rx.await;
            })
            .await;
    });
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .expect("client");
    TestApp {
        addr,
        client,
        clock,
        smtp,
        verify_api,
        gateway,
        database_url,
        metrics_addr,
        _dir: dir,
        shutdown: Some(tx),
        server: Some(server),
    }
}

/// A response, read whole.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub body: Value,
    pub text: String,
}

impl Reply {
    /// Asserts the error envelope with this status and code.
    #[track_caller]
    pub fn assert_error(&self, status: u16, code: &str) {
        assert_eq!(self.status, status, "status of {}", self.text);
        assert_eq!(self.body["success"], json!(false), "{}", self.text);
        assert_eq!(self.body["code"], json!(code), "{}", self.text);
        assert!(self.body["error"].is_string(), "{}", self.text);
        assert!(
            self.body["message"].as_str().is_some_and(|m| !m.is_empty()),
            "{}",
            self.text
        );
        let keys: Vec<&String> = self
            .body
            .as_object()
            .map(|o| o.keys().collect())
            .unwrap_or_default();
        assert_eq!(
            keys.len(),
            4,
            "error envelope has exactly success, error, code, message: {}",
            self.text
        );
    }

    #[track_caller]
    pub fn assert_ok(&self) -> &Value {
        assert_eq!(self.status, 200, "{}", self.text);
        assert_eq!(self.body["success"], json!(true), "{}", self.text);
        &self.body["data"]
    }
}

/// An onboarded owner.
pub struct Owner {
    pub account_id: String,
    pub session: String,
    pub agent_key: String,
    pub agent_id: String,
    pub agent_address: String,
}

impl TestApp {
    pub fn store(&self) -> &Arc<dyn Store> {
        self.gateway.store()
    }

    /// Adds credits to the owner's account beside the gateway (a test grant at [`START`]).
    pub async fn grant(&self, owner: &Owner, credits: i64) {
        self.store()
            .grant_credits(
                &owner.account_id,
                credits,
                "grant",
                "test grant",
                actiongate_core::clock::to_millis(START),
            )
            .await
            .expect("grant credits");
    }

    /// How many rows a table of the gateway's database holds (read beside the gateway).
    pub async fn count_rows(&self, table: &str) -> i64 {
        use sqlx::Connection;
        // A table name of the tests' own, not input: audited.
        let count = sqlx::AssertSqlSafe(format!("SELECT COUNT(*) FROM {table}"));
        if self.database_url.starts_with("sqlite") {
            let mut conn = sqlx::SqliteConnection::connect(&self.database_url)
                .await
                .expect("the database opens");
            sqlx::query_scalar(count)
                .fetch_one(&mut conn)
                .await
                .expect("count")
        } else {
            let mut conn = sqlx::PgConnection::connect(&self.database_url)
                .await
                .expect("the database opens");
            sqlx::query_scalar(count)
                .fetch_one(&mut conn)
                .await
                .expect("count")
        }
    }

    /// A GET as an agent (`x-agent-api-key`).
    pub async fn get_agent(&self, path: &str, agent_key: &str) -> Reply {
        self.send(
            self.client
                .get(self.url(path))
                .header("x-agent-api-key", agent_key),
        )
        .await
    }

    /// The master key this app's process uses (the dev key it made in its data directory).
    pub fn master_key_file(&self) -> std::path::PathBuf {
        self._dir.path().join("data").join("master.key")
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    pub async fn send(&self, req: reqwest::RequestBuilder) -> Reply {
        let resp = req.send().await.expect("request failed");
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let text = resp.text().await.unwrap_or_default();
        let body = serde_json::from_str(&text).unwrap_or(Value::Null);
        Reply {
            status,
            headers,
            body,
            text,
        }
    }

    pub async fn get(&self, path: &str) -> Reply {
        self.send(self.client.get(self.url(path))).await
    }

    pub async fn post(&self, path: &str, body: Value) -> Reply {
        self.send(self.client.post(self.url(path)).json(&body))
            .await
    }

    pub async fn get_as(&self, path: &str, bearer: &str) -> Reply {
        self.send(self.client.get(self.url(path)).bearer_auth(bearer))
            .await
    }

    pub async fn post_as(&self, path: &str, bearer: &str, body: Option<Value>) -> Reply {
        let mut req = self.client.post(self.url(path)).bearer_auth(bearer);
        if let Some(b) = body {
            req = req.json(&b);
        }
        self.send(req).await
    }

    pub async fn put_as(&self, path: &str, bearer: &str, body: Value) -> Reply {
        self.send(
            self.client
                .put(self.url(path))
                .bearer_auth(bearer)
                .json(&body),
        )
        .await
    }

    /// A POST to `/mcp` without a session id (a message that opens a session), with `bearer`.
    pub async fn mcp_open(&self, bearer: Option<&str>, body: &Value) -> Reply {
        let mut req = self
            .client
            .post(self.url("/mcp"))
            .header("accept", "application/json, text/event-stream")
            .json(body);
        if let Some(b) = bearer {
            req = req.bearer_auth(b);
        }
        self.send(req).await
    }

    /// Starts onboarding and reads the code from the real mail.
    pub async fn request_code(&self, email: &str) -> String {
        let before = self.smtp.messages_to(email).len();
        self.post("/api/v1/onboarding/email/start", json!({ "email": email }))
            .await
            .assert_ok();
        self.smtp.code_for(email, before + 1).await
    }

    /// Onboards a new owner end to end.
    pub async fn onboard(&self, email: &str) -> Owner {
        let code = self.request_code(email).await;
        let reply = self
            .post(
                "/api/v1/onboarding/email/complete",
                json!({ "email": email, "code": code, "acceptTerms": true }),
            )
            .await;
        let data = reply.assert_ok();
        let s = |v: &Value| {
            v.as_str()
                .unwrap_or_else(|| panic!("not a string: {v}"))
                .to_owned()
        };
        Owner {
            account_id: s(&data["account"]["accountId"]),
            session: s(&data["session"]["token"]),
            agent_key: s(&data["bootstrap"]["agentApiKey"]),
            agent_id: s(&data["bootstrap"]["agentId"]),
            agent_address: s(&data["bootstrap"]["agentAddress"]),
        }
    }

    /// Stops the server (graceful) and waits for it.
    pub async fn stop(mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(server) = self.server.take() {
            let _ = server.await;
        }
    }
}

impl Drop for TestApp {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}

/// An MCP `initialize` request from a client called `client_name`.
/// A fixed body's ETag (strong); then a GET of `path` naming it answers 304, empty, with the same
/// tag and `Vary: accept-encoding`. Answers the tag.
pub async fn assert_revalidates(app: &TestApp, path: &str, first: &Reply) -> String {
    let Some(etag) = first
        .headers
        .get("etag")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
    else {
        panic!("no ETag on GET {path}")
    };
    assert!(
        etag.starts_with('"') && etag.ends_with('"'),
        "strong ETag {etag}"
    );
    let again = app
        .send(app.client.get(app.url(path)).header("if-none-match", &etag))
        .await;
    assert_eq!(again.status, 304, "GET {path} If-None-Match {etag}");
    assert!(again.text.is_empty());
    assert_eq!(
        again.headers.get("etag").and_then(|v| v.to_str().ok()),
        Some(etag.as_str())
    );
    assert_eq!(
        again.headers.get("vary").and_then(|v| v.to_str().ok()),
        Some("accept-encoding")
    );
    etag
}

/// `gz` decoded (the test client is built without gzip support: bytes arrive as sent).
pub fn gunzip(gz: &[u8]) -> String {
    use std::io::Read;
    let mut out = String::new();
    flate2::read::GzDecoder::new(gz)
        .read_to_string(&mut out)
        .unwrap_or_else(|e| panic!("not gzip: {e}"));
    out
}

pub fn mcp_initialize(client_name: &str) -> Value {
    serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": client_name, "version": "1"}}})
}
