//! The [`Store`] port on SQLite (the embedded default, WAL) and PostgreSQL (several gateway
//! processes on one database), chosen by URL scheme. Each backend has its own migrations folder;
//! the SQL of the queries is shared (both accept `$n` placeholders), and both backends pass the same
//! contract tests in `tests/contract.rs`.

use std::str::FromStr;
use std::time::Duration;

use actiongate_core::store::{Operations, PruneCutoffs, Store, StoreError, StoreErrorKind};
use async_trait::async_trait;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions, PgSslMode};

use sqlx::sqlite::{
    SqliteConnectOptions, SqliteConnection, SqliteJournalMode, SqlitePool, SqlitePoolOptions,
    SqliteSynchronous,
};
use sqlx::{Postgres, Sqlite};

use batch::{BATCH_STATEMENT_CACHE, Job, run_batcher};
use checkpoint::checkpoint_wal;
use error::{closed, err};

static SQLITE_MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/sqlite");
static POSTGRES_MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/postgres");

#[derive(Clone)]
enum Backend {
    /// SQLite has one writer: every write of the process, the batcher's included, runs on one
    /// connection taken in turn (a fair queue in the process, instead of SQLite's busy handler, and
    /// no pool round trips); reads use the pool.
    Sqlite {
        read: SqlitePool,
        writer: std::sync::Arc<tokio::sync::Mutex<Option<SqliteConnection>>>,
    },
    Postgres(PgPool),
}

/// Runs the same body against whichever pool is configured. The body is compiled once per backend,
/// so query builders and rows keep their concrete types.
macro_rules! on_pool {
    ($self:expr, $pool:ident => $body:expr) => {
        match &$self.backend {
            Backend::Sqlite { read: $pool, .. } => $body,
            Backend::Postgres($pool) => $body,
        }
    };
}

/// As [`on_pool`], for statements that write.
macro_rules! on_writer {
    ($self:expr, $pool:ident => $body:expr) => {
        match &$self.backend {
            Backend::Sqlite { writer, .. } => {
                let mut turn = writer.lock().await;
                let $pool: &mut SqliteConnection = turn.as_mut().ok_or_else(closed)?;
                $body
            }
            Backend::Postgres($pool) => $body,
        }
    };
}

/// Splits `items` into runs whose lengths are powers of two, largest first and at most `max` (a
/// power of two): a multi-row statement then takes one of a few shapes (1, 2, 4, ... `max` rows),
/// so that its prepared statements stay few and cached however many rows a batch has.
pub(crate) fn shaped_chunks<T>(items: &[T], max: usize) -> impl Iterator<Item = &[T]> {
    let mut rest = items;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let n = (1usize << rest.len().ilog2()).min(max.max(1));
        let (run, after) = rest.split_at(n);
        rest = after;
        Some(run)
    })
}

// The modules come after the macros they use (macros are in scope from where they are defined).
#[macro_use]
mod rows;
#[macro_use]
mod write;
#[macro_use]
mod webhooks;
#[macro_use]
mod audit;
#[macro_use]
mod batch;
mod checkpoint;
mod credits;
mod delegations;
mod error;
mod identity;
mod intents;
mod mcp_sessions;
mod nonces;
mod payments;
mod personhood;
pub mod testing;

/// How each backend opens a transaction that will write, and the few statements whose text differs;
/// implemented by what [`on_writer`] hands its body.
trait Dialect<'c>: Sized {
    type Db: sqlx::Database;
    /// SQLite takes the write lock at once (`BEGIN IMMEDIATE`), so that a transaction that reads
    /// first never fails to upgrade; PostgreSQL locks rows as it goes.
    async fn begin_write(self) -> Result<sqlx::Transaction<'c, Self::Db>, StoreError>;
    /// Leases up to `$4` of the oldest runnable intents.
    fn claim_many_sql(&self) -> &'static str;
    /// Taken first by a chaining step's write, so that processes chain one after another (SQLite's
    /// one writer does that already).
    fn chain_lock_sql(&self) -> Option<&'static str>;
    /// Up to `$2` pending webhook deliveries due by `$1` (PostgreSQL: skipping those another process
    /// is claiming).
    fn claim_deliveries_sql(&self) -> &'static str;
}

macro_rules! claim_deliveries_sql {
    ($lock:literal) => {
        concat!(
            "SELECT id FROM webhook_deliveries WHERE state = 'pending' AND next_at <= $1 ",
            "ORDER BY next_at, id LIMIT $2",
            $lock
        )
    };
}

macro_rules! claim_many_sql {
    ($lock:literal) => {
        concat!(
            "UPDATE intents SET lease_owner = $1, lease_until = $2 WHERE id IN (",
            "SELECT id FROM intents WHERE status = 'queued' AND (lease_until IS NULL OR lease_until < $3) ",
            "AND (approval_state IS NULL OR approval_state <> 'pending') ",
            "ORDER BY created_at, id LIMIT $4", $lock, ") RETURNING ", intent_columns!()
        )
    };
}

impl<'c> Dialect<'c> for &'c mut SqliteConnection {
    type Db = Sqlite;
    async fn begin_write(self) -> Result<sqlx::Transaction<'c, Sqlite>, StoreError> {
        sqlx::Connection::begin_with(self, "BEGIN IMMEDIATE")
            .await
            .map_err(err)
    }
    fn claim_many_sql(&self) -> &'static str {
        claim_many_sql!("")
    }
    fn chain_lock_sql(&self) -> Option<&'static str> {
        None
    }
    fn claim_deliveries_sql(&self) -> &'static str {
        claim_deliveries_sql!("")
    }
}

impl<'c> Dialect<'c> for &'c PgPool {
    type Db = Postgres;
    async fn begin_write(self) -> Result<sqlx::Transaction<'c, Postgres>, StoreError> {
        self.begin().await.map_err(err)
    }
    fn claim_many_sql(&self) -> &'static str {
        claim_many_sql!(" FOR UPDATE SKIP LOCKED")
    }
    fn chain_lock_sql(&self) -> Option<&'static str> {
        // One key for the whole step: a transaction-scoped advisory lock, let go at commit.
        Some("SELECT pg_advisory_xact_lock(7402180527)")
    }
    fn claim_deliveries_sql(&self) -> &'static str {
        claim_deliveries_sql!(" FOR UPDATE SKIP LOCKED")
    }
}

/// PostgreSQL connect options from a URL, TLS included (rustls, the web PKI roots, or the URL's
/// `sslrootcert`). The URL's `sslmode` (or `PGSSLMODE`) decides when it names one: `disable` is the
/// only way to a plain connection to a remote server. Without one: `verify-full` (encrypted, the
/// certificate checked and naming the host), except for a loopback address or a Unix socket,
/// where `prefer` (TLS when the server offers it; nobody else reads a local socket).
pub fn postgres_options(url: &str) -> Result<PgConnectOptions, StoreError> {
    let options = PgConnectOptions::from_str(url).map_err(err)?;
    let named = url.split_once('?').is_some_and(|(_, query)| {
        query
            .split('&')
            .any(|kv| kv.starts_with("sslmode=") || kv.starts_with("ssl-mode="))
    }) || std::env::var_os("PGSSLMODE").is_some();
    if named {
        return Ok(options);
    }
    let host = options.get_host();
    let local = host.starts_with('/')
        || host == "localhost"
        || host
            .trim_matches(|c| c == '[' || c == ']')
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    Ok(options.ssl_mode(if local {
        PgSslMode::Prefer
    } else {
        PgSslMode::VerifyFull
    }))
}

fn new_id() -> String {
    uuid::Uuid::now_v7().to_string()
}

/// A SQL store.
pub struct SqlStore {
    backend: Backend,
    /// Where intent drafts go to be accepted, and ended reads to be recorded, in batches (one
    /// commit for all that wait).
    batcher: tokio::sync::mpsc::Sender<Job>,
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
            Err(StoreError::new(
                StoreErrorKind::Other,
                "database URL must start with sqlite:// or postgres://",
            ))
        }
    }
}

impl SqlStore {
    /// Gives the batcher a job and waits for its answer.
    async fn batch<T>(
        &self,
        job: impl FnOnce(tokio::sync::oneshot::Sender<Result<T, StoreError>>) -> Job,
    ) -> Result<T, StoreError> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        if self.batcher.send(job(reply)).await.is_ok()
            && let Ok(outcome) = answer.await
        {
            return outcome;
        }
        Err(StoreError::new(
            StoreErrorKind::Unavailable,
            "the store's batcher stopped",
        ))
    }

    /// Connects to `url` (`sqlite://path` or `postgres://…`, its TLS by [`postgres_options`]).
    /// SQLite files are created when missing and run in WAL mode with full synchronous commits.
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        let backend = match BackendKind::of_url(url)? {
            BackendKind::Sqlite => {
                let options = SqliteConnectOptions::from_str(url)
                    .map_err(err)?
                    .create_if_missing(true)
                    .journal_mode(SqliteJournalMode::Wal)
                    .synchronous(SqliteSynchronous::Full)
                    .foreign_keys(true)
                    .busy_timeout(Duration::from_secs(10))
                    // Statement journals and sorts in memory: spilled to files, each is a file created
                    // and deleted in /var/tmp (tens a second under load), metadata the file system
                    // journals beside the WAL's syncs.
                    .pragma("temp_store", "memory");
                // The writer runs every batch, whose statements take a text per batch size: keep them
                // prepared (SQLite's default cache of 100 would prepare most of them again).
                let mut writer = sqlx::ConnectOptions::connect(
                    &options
                        .clone()
                        .statement_cache_capacity(BATCH_STATEMENT_CACHE),
                )
                .await
                .map_err(err)?;
                // Checkpoints run beside the writer ([`checkpoint_wal`]), not inside its commits; this
                // one is only the bound should they fall behind (64 MiB of WAL at 4 KiB pages).
                sqlx::query("PRAGMA wal_autocheckpoint = 16384")
                    .execute(&mut writer)
                    .await
                    .map_err(err)?;
                let read = SqlitePoolOptions::new()
                    .max_connections(8)
                    .test_before_acquire(false)
                    .connect_with(options)
                    .await
                    .map_err(err)?;
                let writer = std::sync::Arc::new(tokio::sync::Mutex::new(Some(writer)));
                tokio::spawn(checkpoint_wal(
                    read.clone(),
                    std::sync::Arc::downgrade(&writer),
                ));
                Backend::Sqlite { read, writer }
            }
            BackendKind::Postgres => {
                let options = postgres_options(url)?;
                let pool = PgPoolOptions::new()
                    .max_connections(16)
                    .acquire_timeout(Duration::from_secs(10))
                    .connect_with(options)
                    .await
                    .map_err(err)?;
                Backend::Postgres(pool)
            }
        };
        let (tx, rx) = tokio::sync::mpsc::channel(4096);
        // The batcher runs on a thread of its own: every statement of a batch is a wait for the
        // database, and on the request runtime each of its wake-ups would queue behind the request
        // handlers (many statements a batch, all of them on the path of every waiting submit).
        let batcher_backend = backend.clone();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(err)?;
        std::thread::Builder::new()
            .name("actiongate-batcher".into())
            .spawn(move || runtime.block_on(run_batcher(batcher_backend, rx)))
            .map_err(err)?;
        Ok(Self {
            backend,
            batcher: tx,
        })
    }

    pub fn kind(&self) -> BackendKind {
        match self.backend {
            Backend::Sqlite { .. } => BackendKind::Sqlite,
            Backend::Postgres(_) => BackendKind::Postgres,
        }
    }

    /// Applies the backend's migrations. Safe to run from several processes at once (PostgreSQL
    /// takes an advisory lock; SQLite has one writer).
    pub async fn migrate(&self) -> Result<(), StoreError> {
        match &self.backend {
            Backend::Sqlite { writer, .. } => {
                let mut turn = writer.lock().await;
                SQLITE_MIGRATIONS
                    .run(turn.as_mut().ok_or_else(closed)?)
                    .await
                    .map_err(err)
            }
            Backend::Postgres(pool) => POSTGRES_MIGRATIONS.run(pool).await.map_err(err),
        }
    }

    /// Whether an account with this id exists (for operator commands).
    pub async fn get_account_exists(&self, account_id: &str) -> Result<bool, StoreError> {
        let n: i64 = on_pool!(self, pool => sqlx::query_scalar("SELECT COUNT(*) FROM accounts WHERE id = $1")
            .bind(account_id)
            .fetch_one(pool)
            .await
            .map_err(err)?);
        Ok(n == 1)
    }

    /// Closes the pool, waiting for connections in use to be returned.
    pub async fn close(&self) {
        if let Backend::Sqlite { writer, .. } = &self.backend {
            let taken = writer.lock().await.take();
            if let Some(conn) = taken {
                let _ = sqlx::Connection::close(conn).await;
            }
        }
        on_pool!(self, pool => pool.close().await)
    }
}

#[async_trait]
impl Store for SqlStore {
    async fn ping(&self) -> Result<(), StoreError> {
        on_pool!(self, pool => sqlx::query("SELECT 1").execute(pool).await.map(|_| ()).map_err(err))
    }

    async fn operations(&self) -> Result<Operations, StoreError> {
        let (queued, oldest): (i64, Option<i64>) = on_pool!(self, pool => sqlx::query_as(
            "SELECT COUNT(*), MIN(created_at) FROM intents WHERE status = 'queued'")
            .fetch_one(pool)
            .await
            .map_err(err))?;
        let unmined: Vec<(i64, i64)> = on_pool!(self, pool => sqlx::query_as(
            "SELECT chain_id, COUNT(*) FROM chain_txs WHERE state = 'signed' GROUP BY chain_id")
            .fetch_all(pool)
            .await
            .map_err(err))?;
        Ok(Operations {
            queued: u64::try_from(queued).unwrap_or(0),
            oldest_queued_at: oldest,
            unmined: unmined
                .into_iter()
                .map(|(c, n)| (u64::try_from(c).unwrap_or(0), u64::try_from(n).unwrap_or(0)))
                .collect(),
        })
    }

    async fn prune(&self, c: &PruneCutoffs) -> Result<u64, StoreError> {
        // Each statement on its own: a large delete does not hold the writer for all of them.
        let statements: [(&str, i64); 8] = [
            (
                "DELETE FROM email_challenges WHERE expires_at < $1",
                c.expired_before,
            ),
            (
                "DELETE FROM owner_sessions WHERE expires_at < $1",
                c.expired_before,
            ),
            (
                "DELETE FROM wallet_link_challenges WHERE expires_at < $1",
                c.expired_before,
            ),
            (
                "DELETE FROM email_check_budget WHERE window_start < $1",
                c.budget_window_before,
            ),
            (
                "DELETE FROM idempotency_keys WHERE created_at < $1",
                c.retained_before,
            ),
            (
                "DELETE FROM personhood_challenges WHERE expires_at < $1",
                c.retained_before,
            ),
            (
                "DELETE FROM invoice_tags WHERE open_until < $1",
                c.expired_before,
            ),
            (
                "DELETE FROM invoices WHERE paid_at IS NULL AND expires_at < $1",
                c.retained_before,
            ),
        ];
        let mut gone = 0;
        for (sql, before) in statements {
            gone += on_writer!(self, pool => sqlx::query(sql)
                .bind(before)
                .execute(pool)
                .await
                .map(|r| r.rows_affected())
                .map_err(err))?;
        }
        Ok(gone)
    }
}

#[cfg(test)]
mod shaped_tests {
    use super::shaped_chunks;

    #[test]
    fn runs_are_powers_of_two_largest_first_capped() {
        let lens = |n: usize, max: usize| {
            let items: Vec<usize> = (0..n).collect();
            let runs: Vec<&[usize]> = shaped_chunks(&items, max).collect();
            // Every item once, in order.
            assert_eq!(runs.concat(), items);
            runs.iter().map(|r| r.len()).collect::<Vec<_>>()
        };
        assert_eq!(lens(0, 64), Vec::<usize>::new());
        assert_eq!(lens(1, 64), vec![1]);
        assert_eq!(lens(37, 64), vec![32, 4, 1]);
        assert_eq!(lens(64, 64), vec![64]);
        assert_eq!(lens(200, 64), vec![64, 64, 64, 8]);
    }
}
