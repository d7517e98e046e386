//! The [`Store`] port on SQLite (the embedded default, WAL) and PostgreSQL (several gateway
//! processes on one database), chosen by URL scheme. Each backend has its own migrations folder;
//! the SQL of the queries is shared (both accept `$n` placeholders), and both backends pass the same
//! contract tests in `tests/contract.rs`.

use std::str::FromStr;
use std::time::Duration;

use actiongate_core::crypto::SecretHash;
use actiongate_core::store::{
    AgentRecord, EmailChallenge, NewAgent, Onboarding, OnboardingOutcome, PolicyRecord, SessionRecord, Store,
    StoreError,
};
use async_trait::async_trait;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous};
use sqlx::Row;

static SQLITE_MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/sqlite");
static POSTGRES_MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/postgres");

enum Backend {
    Sqlite(SqlitePool),
    Postgres(PgPool),
}

/// Runs the same body against whichever pool is configured. The body is compiled once per backend,
/// so query builders and rows keep their concrete types.
macro_rules! on_pool {
    ($self:expr, $pool:ident => $body:expr) => {
        match &$self.backend {
            Backend::Sqlite($pool) => $body,
            Backend::Postgres($pool) => $body,
        }
    };
}

/// Inserts an agent and its policy inside the open transaction `$tx`.
macro_rules! insert_agent_with_policy {
    ($tx:ident, $agent:expr, $policy:expr, $allowed:expr) => {{
        let (a, p) = ($agent, $policy);
        sqlx::query(
            "INSERT INTO agents (id, account_id, name, key_hash, wallet_address, wallet_sealed, created_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(&a.record.id)
        .bind(&a.record.account_id)
        .bind(&a.record.name)
        .bind(a.key_hash.0.to_vec())
        .bind(&a.record.wallet_address)
        .bind(&a.wallet_sealed)
        .bind(a.record.created_at)
        .execute(&mut *$tx)
        .await
        .map_err(err)?;
        sqlx::query(
            "INSERT INTO agent_policies (agent_id, allowed_actions, daily_limit_micros, max_per_action_micros, updated_at)
             VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(&p.agent_id)
        .bind($allowed)
        .bind(p.daily_limit_micros)
        .bind(p.max_per_action_micros)
        .bind(p.updated_at)
        .execute(&mut *$tx)
        .await
        .map_err(err)?;
    }};
}

/// A SQL store.
pub struct SqlStore {
    backend: Backend,
}

fn err(e: impl std::fmt::Display) -> StoreError {
    StoreError(e.to_string())
}

/// Which backend a URL names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendKind {
    Sqlite,
    Postgres,
}

impl BackendKind {
    pub fn of_url(url: &str) -> Result<Self, StoreError> {
        if url.starts_with("sqlite:") {
            Ok(Self::Sqlite)
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Ok(Self::Postgres)
        } else {
            Err(StoreError("database URL must start with sqlite:// or postgres://".into()))
        }
    }
}

impl SqlStore {
    /// Connects to `url` (`sqlite://path` or `postgres://…`). SQLite files are created when missing
    /// and run in WAL mode with full synchronous commits.
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        let backend = match BackendKind::of_url(url)? {
            BackendKind::Sqlite => {
                let options = SqliteConnectOptions::from_str(url)
                    .map_err(err)?
                    .create_if_missing(true)
                    .journal_mode(SqliteJournalMode::Wal)
                    .synchronous(SqliteSynchronous::Full)
                    .foreign_keys(true)
                    .busy_timeout(Duration::from_secs(10));
                let pool = SqlitePoolOptions::new()
                    .max_connections(8)
                    .connect_with(options)
                    .await
                    .map_err(err)?;
                Backend::Sqlite(pool)
            }
            BackendKind::Postgres => {
                let options = PgConnectOptions::from_str(url).map_err(err)?;
                let pool = PgPoolOptions::new()
                    .max_connections(16)
                    .acquire_timeout(Duration::from_secs(10))
                    .connect_with(options)
                    .await
                    .map_err(err)?;
                Backend::Postgres(pool)
            }
        };
        Ok(Self { backend })
    }

    pub fn kind(&self) -> BackendKind {
        match self.backend {
            Backend::Sqlite(_) => BackendKind::Sqlite,
            Backend::Postgres(_) => BackendKind::Postgres,
        }
    }

    /// Applies the backend's migrations. Safe to run from several processes at once (PostgreSQL
    /// takes an advisory lock; SQLite has one writer).
    pub async fn migrate(&self) -> Result<(), StoreError> {
        match &self.backend {
            Backend::Sqlite(pool) => SQLITE_MIGRATIONS.run(pool).await.map_err(err),
            Backend::Postgres(pool) => POSTGRES_MIGRATIONS.run(pool).await.map_err(err),
        }
    }

    /// Closes the pool, waiting for connections in use to be returned.
    pub async fn close(&self) {
        on_pool!(self, pool => pool.close().await)
    }
}

fn agent_from_row<R: Row>(row: &R) -> Result<AgentRecord, StoreError>
where
    for<'a> &'a str: sqlx::ColumnIndex<R>,
    String: for<'r> sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    Option<String>: for<'r> sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    i64: for<'r> sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    Option<i64>: for<'r> sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
{
    Ok(AgentRecord {
        id: row.try_get("id").map_err(err)?,
        account_id: row.try_get("account_id").map_err(err)?,
        name: row.try_get("name").map_err(err)?,
        wallet_address: row.try_get("wallet_address").map_err(err)?,
        created_at: row.try_get("created_at").map_err(err)?,
        key_rotated_at: row.try_get("key_rotated_at").map_err(err)?,
    })
}

fn hash_from(bytes: Vec<u8>) -> Result<SecretHash, StoreError> {
    let arr: [u8; 32] = bytes.try_into().map_err(|_| StoreError("stored hash is not 32 bytes".into()))?;
    Ok(SecretHash(arr))
}

macro_rules! select_agents {
    ($where:literal) => {
        concat!("SELECT id, account_id, name, wallet_address, created_at, key_rotated_at FROM agents ", $where)
    };
}

#[async_trait]
impl Store for SqlStore {
    async fn ping(&self) -> Result<(), StoreError> {
        on_pool!(self, pool => sqlx::query("SELECT 1").execute(pool).await.map(|_| ()).map_err(err))
    }

    async fn put_email_challenge(&self, c: &EmailChallenge) -> Result<(), StoreError> {
        let attempts = i32::try_from(c.attempts).map_err(err)?;
        on_pool!(self, pool => sqlx::query(
            "INSERT INTO email_challenges (email, code_hash, expires_at, attempts) VALUES ($1, $2, $3, $4)
             ON CONFLICT (email) DO UPDATE SET code_hash = excluded.code_hash,
                 expires_at = excluded.expires_at, attempts = excluded.attempts",
        )
        .bind(&c.email)
        .bind(c.code_hash.0.to_vec())
        .bind(c.expires_at)
        .bind(attempts)
        .execute(pool)
        .await
        .map(|_| ())
        .map_err(err))
    }

    async fn get_email_challenge(&self, email: &str) -> Result<Option<EmailChallenge>, StoreError> {
        let row: Option<(String, Vec<u8>, i64, i32)> = on_pool!(self, pool => sqlx::query_as(
            "SELECT email, code_hash, expires_at, attempts FROM email_challenges WHERE email = $1",
        )
        .bind(email)
        .fetch_optional(pool)
        .await
        .map_err(err)?);
        row.map(|(email, hash, expires_at, attempts)| {
            Ok(EmailChallenge {
                email,
                code_hash: hash_from(hash)?,
                expires_at,
                attempts: u32::try_from(attempts).map_err(err)?,
            })
        })
        .transpose()
    }

    async fn count_failed_attempt(&self, email: &str) -> Result<u32, StoreError> {
        let attempts: Option<i32> = on_pool!(self, pool => sqlx::query_scalar(
            "UPDATE email_challenges SET attempts = attempts + 1 WHERE email = $1 RETURNING attempts",
        )
        .bind(email)
        .fetch_optional(pool)
        .await
        .map_err(err)?);
        // A challenge replaced or consumed meanwhile: count the try as the last one allowed.
        Ok(attempts.map_or(u32::MAX, |a| u32::try_from(a).unwrap_or(u32::MAX)))
    }

    async fn complete_onboarding(&self, o: &Onboarding) -> Result<OnboardingOutcome, StoreError> {
        let allowed = serde_json::to_string(&o.first_policy.allowed_actions).map_err(err)?;
        on_pool!(self, pool => {
            let mut tx = pool.begin().await.map_err(err)?;
            // The write comes first, so that SQLite takes its write lock before any read.
            let consumed = sqlx::query(
                "DELETE FROM email_challenges WHERE email = $1 AND code_hash = $2 AND expires_at > $3",
            )
            .bind(&o.email)
            .bind(o.code_hash.0.to_vec())
            .bind(o.now)
            .execute(&mut *tx)
            .await
            .map_err(err)?
            .rows_affected();
            if consumed != 1 {
                tx.rollback().await.map_err(err)?;
                return Ok(OnboardingOutcome::ChallengeGone);
            }
            let inserted = sqlx::query(
                "INSERT INTO accounts (id, email, created_at) VALUES ($1, $2, $3) ON CONFLICT (email) DO NOTHING",
            )
            .bind(&o.new_account_id)
            .bind(&o.email)
            .bind(o.now)
            .execute(&mut *tx)
            .await
            .map_err(err)?
            .rows_affected();
            let outcome = if inserted == 1 {
                insert_agent_with_policy!(tx, &o.first_agent, &o.first_policy, &allowed);
                OnboardingOutcome::Created { account_id: o.new_account_id.clone() }
            } else {
                let id: String = sqlx::query_scalar("SELECT id FROM accounts WHERE email = $1")
                    .bind(&o.email)
                    .fetch_one(&mut *tx)
                    .await
                    .map_err(err)?;
                OnboardingOutcome::SignedIn { account_id: id }
            };
            let account_id = match &outcome {
                OnboardingOutcome::Created { account_id } | OnboardingOutcome::SignedIn { account_id } => account_id.clone(),
                OnboardingOutcome::ChallengeGone => String::new(),
            };
            sqlx::query(
                "INSERT INTO owner_sessions (token_hash, account_id, created_at, expires_at) VALUES ($1, $2, $3, $4)",
            )
            .bind(o.session_hash.0.to_vec())
            .bind(&account_id)
            .bind(o.now)
            .bind(o.session_expires_at)
            .execute(&mut *tx)
            .await
            .map_err(err)?;
            tx.commit().await.map_err(err)?;
            Ok(outcome)
        })
    }

    async fn find_session(&self, token_hash: &SecretHash, now: i64) -> Result<Option<SessionRecord>, StoreError> {
        let row: Option<(String, i64)> = on_pool!(self, pool => sqlx::query_as(
            "SELECT account_id, expires_at FROM owner_sessions WHERE token_hash = $1 AND expires_at > $2",
        )
        .bind(token_hash.0.to_vec())
        .bind(now)
        .fetch_optional(pool)
        .await
        .map_err(err)?);
        Ok(row.map(|(account_id, expires_at)| SessionRecord { account_id, expires_at }))
    }

    async fn find_agent_by_key(&self, key_hash: &SecretHash) -> Result<Option<AgentRecord>, StoreError> {
        let sql = select_agents!("WHERE key_hash = $1");
        on_pool!(self, pool => {
            let row = sqlx::query(sql).bind(key_hash.0.to_vec()).fetch_optional(pool).await.map_err(err)?;
            row.as_ref().map(agent_from_row).transpose()
        })
    }

    async fn get_agent(&self, agent_id: &str) -> Result<Option<AgentRecord>, StoreError> {
        let sql = select_agents!("WHERE id = $1");
        on_pool!(self, pool => {
            let row = sqlx::query(sql).bind(agent_id).fetch_optional(pool).await.map_err(err)?;
            row.as_ref().map(agent_from_row).transpose()
        })
    }

    async fn list_agents(&self, account_id: &str) -> Result<Vec<AgentRecord>, StoreError> {
        let sql = select_agents!("WHERE account_id = $1 ORDER BY created_at, id");
        on_pool!(self, pool => {
            let rows = sqlx::query(sql).bind(account_id).fetch_all(pool).await.map_err(err)?;
            rows.iter().map(agent_from_row).collect()
        })
    }

    async fn create_agent(&self, a: &NewAgent, p: &PolicyRecord) -> Result<(), StoreError> {
        let allowed = serde_json::to_string(&p.allowed_actions).map_err(err)?;
        on_pool!(self, pool => {
            let mut tx = pool.begin().await.map_err(err)?;
            insert_agent_with_policy!(tx, a, p, &allowed);
            tx.commit().await.map_err(err)
        })
    }

    async fn rotate_agent_key(&self, agent_id: &str, key_hash: &SecretHash, now: i64) -> Result<bool, StoreError> {
        on_pool!(self, pool => sqlx::query("UPDATE agents SET key_hash = $1, key_rotated_at = $2 WHERE id = $3")
            .bind(key_hash.0.to_vec())
            .bind(now)
            .bind(agent_id)
            .execute(pool)
            .await
            .map(|r| r.rows_affected() == 1)
            .map_err(err))
    }

    async fn agent_wallet_sealed(&self, agent_id: &str) -> Result<Option<Vec<u8>>, StoreError> {
        on_pool!(self, pool => sqlx::query_scalar("SELECT wallet_sealed FROM agents WHERE id = $1")
            .bind(agent_id)
            .fetch_optional(pool)
            .await
            .map_err(err))
    }

    async fn get_policy(&self, agent_id: &str) -> Result<Option<PolicyRecord>, StoreError> {
        let row: Option<(String, String, i64, Option<i64>, i64)> = on_pool!(self, pool => sqlx::query_as(
            "SELECT agent_id, allowed_actions, daily_limit_micros, max_per_action_micros, updated_at
             FROM agent_policies WHERE agent_id = $1",
        )
        .bind(agent_id)
        .fetch_optional(pool)
        .await
        .map_err(err)?);
        row.map(|(agent_id, allowed, daily, per_action, updated_at)| {
            Ok(PolicyRecord {
                agent_id,
                allowed_actions: serde_json::from_str(&allowed).map_err(err)?,
                daily_limit_micros: daily,
                max_per_action_micros: per_action,
                updated_at,
            })
        })
        .transpose()
    }

    async fn put_policy(&self, p: &PolicyRecord) -> Result<(), StoreError> {
        let allowed = serde_json::to_string(&p.allowed_actions).map_err(err)?;
        on_pool!(self, pool => sqlx::query(
            "INSERT INTO agent_policies (agent_id, allowed_actions, daily_limit_micros, max_per_action_micros, updated_at)
             VALUES ($1, $2, $3, $4, $5)
             ON CONFLICT (agent_id) DO UPDATE SET allowed_actions = excluded.allowed_actions,
                 daily_limit_micros = excluded.daily_limit_micros,
                 max_per_action_micros = excluded.max_per_action_micros,
                 updated_at = excluded.updated_at",
        )
        .bind(&p.agent_id)
        .bind(&allowed)
        .bind(p.daily_limit_micros)
        .bind(p.max_per_action_micros)
        .bind(p.updated_at)
        .execute(pool)
        .await
        .map(|_| ())
        .map_err(err))
    }
}

pub mod testing {
    //! Fresh databases for tests: a SQLite file in a temporary directory, or a new schema in the
    //! PostgreSQL named by `ACTIONGATE_TEST_POSTGRES_URL` (default `postgres://root@127.0.0.1:5432/test`).
    //! `scripts/test` makes sure that server runs; a test that cannot reach it fails, it does not skip.

    use std::str::FromStr;

    use sqlx::postgres::PgConnectOptions;
    use sqlx::{ConnectOptions, Connection};

    use super::{StoreError, err};

    /// The PostgreSQL server the tests use.
    pub fn postgres_base_url() -> String {
        std::env::var("ACTIONGATE_TEST_POSTGRES_URL")
            .unwrap_or_else(|_| "postgres://root@127.0.0.1:5432/test".to_owned())
    }

    /// Creates an empty schema and answers a URL whose connections use it.
    pub async fn fresh_postgres_url() -> Result<String, StoreError> {
        let base = postgres_base_url();
        let schema = format!("t_{}", uuid_like());
        let mut conn = PgConnectOptions::from_str(&base).map_err(err)?.connect().await.map_err(|e| {
            StoreError(format!("cannot reach the test PostgreSQL at {base} ({e}); run ./scripts/test, which starts it"))
        })?;
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {schema}")))
            .execute(&mut conn)
            .await
            .map_err(err)?;
        conn.close().await.map_err(err)?;
        let sep = if base.contains('?') { '&' } else { '?' };
        Ok(format!("{base}{sep}options=-c%20search_path%3D{schema}"))
    }

    fn uuid_like() -> String {
        use std::time::{SystemTime, UNIX_EPOCH};
        static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
        let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        format!("{:x}_{}_{n}", nanos, std::process::id())
    }
}
