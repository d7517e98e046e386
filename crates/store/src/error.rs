//! Storage failures with their kind ([`StoreErrorKind`]): sqlx's errors and the stored values the
//! code cannot read, classified once here, so that the batcher can try a busy batch again and the
//! core can answer "try again" for a database that is busy or away.

use actiongate_core::store::{StoreError, StoreErrorKind};

pub(crate) fn closed() -> StoreError {
    StoreError::new(StoreErrorKind::Unavailable, "the store is closed")
}

pub(crate) fn corrupt(message: &str) -> StoreError {
    StoreError::new(StoreErrorKind::Corrupt, message)
}

/// A [`StoreError`] of its cause, with the kind the batcher and the core act on.
pub(crate) fn err(e: impl Into<Failure>) -> StoreError {
    e.into().0
}

/// A cause of a [`StoreError`], classified ([`err`]).
pub(crate) struct Failure(StoreError);

impl From<sqlx::Error> for Failure {
    fn from(e: sqlx::Error) -> Self {
        use StoreErrorKind::{Busy, Corrupt, Other, Unavailable};
        let kind = match &e {
            sqlx::Error::Database(db) => {
                if let Some(pg) = db.try_downcast_ref::<sqlx::postgres::PgDatabaseError>() {
                    match pg.code() {
                        // serialization_failure, deadlock_detected, lock_not_available
                        "40001" | "40P01" | "55P03" => Busy,
                        // too_many_connections, admin_shutdown, crash_shutdown, cannot_connect_now
                        "53300" | "57P01" | "57P02" | "57P03" => Unavailable,
                        _ => Other,
                    }
                } else {
                    // SQLite: the primary result code is the low byte (SQLITE_BUSY 5, SQLITE_LOCKED 6).
                    let code = db.code().and_then(|c| c.parse::<i64>().ok());
                    match code.map(|c| c & 0xff) {
                        Some(5 | 6) => Busy,
                        _ => Other,
                    }
                }
            }
            sqlx::Error::Io(_)
            | sqlx::Error::Tls(_)
            | sqlx::Error::Protocol(_)
            | sqlx::Error::PoolTimedOut
            | sqlx::Error::PoolClosed
            | sqlx::Error::WorkerCrashed => Unavailable,
            sqlx::Error::ColumnDecode { .. }
            | sqlx::Error::Decode(_)
            | sqlx::Error::ColumnNotFound(_)
            | sqlx::Error::TypeNotFound { .. } => Corrupt,
            _ => Other,
        };
        Failure(StoreError::from_source(kind, e))
    }
}

/// Stored values the code cannot read.
macro_rules! corrupt_from {
    ($($t:ty),+) => {
        $(impl From<$t> for Failure {
            fn from(e: $t) -> Self {
                Failure(StoreError::from_source(StoreErrorKind::Corrupt, e))
            }
        })+
    };
}

corrupt_from!(
    std::num::TryFromIntError,
    serde_json::Error,
    actiongate_core::states::UnknownState
);

impl From<actiongate_core::ledger::LedgerError> for Failure {
    fn from(e: actiongate_core::ledger::LedgerError) -> Self {
        Failure(StoreError::from_source(StoreErrorKind::Other, e))
    }
}

impl From<std::io::Error> for Failure {
    fn from(e: std::io::Error) -> Self {
        Failure(StoreError::from_source(StoreErrorKind::Other, e))
    }
}

impl From<sqlx::migrate::MigrateError> for Failure {
    fn from(e: sqlx::migrate::MigrateError) -> Self {
        Failure(StoreError::from_source(StoreErrorKind::Other, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sqlx::{Connection, Executor};

    #[tokio::test]
    async fn a_locked_sqlite_database_is_busy() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let url = format!("sqlite://{}?mode=rwc", dir.path().join("busy.db").display());
        let mut holder = sqlx::SqliteConnection::connect(&url)
            .await
            .expect("connect");
        holder
            .execute("CREATE TABLE t (x INTEGER)")
            .await
            .expect("create");
        holder.execute("BEGIN IMMEDIATE").await.expect("begin");
        let options: sqlx::sqlite::SqliteConnectOptions = url.parse().expect("url");
        let options = options.busy_timeout(std::time::Duration::ZERO);
        let mut other = sqlx::ConnectOptions::connect(&options)
            .await
            .expect("connect");
        let e = other
            .execute("BEGIN IMMEDIATE")
            .await
            .expect_err("the write lock is held");
        let e = err(e);
        assert_eq!(e.kind(), StoreErrorKind::Busy, "{e}");
        assert!(e.is_retryable());
    }

    #[tokio::test]
    async fn a_postgres_lock_not_available_is_busy_and_bad_sql_is_not() {
        let url = crate::testing::fresh_postgres_url()
            .await
            .expect("test PostgreSQL");
        let mut holder = sqlx::PgConnection::connect(&url).await.expect("connect");
        holder
            .execute("CREATE TABLE t (x INT)")
            .await
            .expect("create");
        holder
            .execute("BEGIN; LOCK TABLE t IN ACCESS EXCLUSIVE MODE")
            .await
            .expect("lock");
        let mut other = sqlx::PgConnection::connect(&url).await.expect("connect");
        let mut tx = other.begin().await.expect("begin");
        let e = tx
            .execute("LOCK TABLE t IN ACCESS EXCLUSIVE MODE NOWAIT")
            .await;
        let e = err(e.expect_err("the table is locked"));
        assert_eq!(e.kind(), StoreErrorKind::Busy, "{e}");
        tx.rollback().await.expect("rollback");
        let e = err(other.execute("SELEC 1").await.expect_err("not SQL"));
        assert_eq!(e.kind(), StoreErrorKind::Other, "{e}");
        assert!(!e.is_retryable());
    }

    #[test]
    fn unreadable_values_are_corrupt_and_keep_their_source() {
        let e = err(u32::try_from(-1i64).expect_err("out of range"));
        assert_eq!(e.kind(), StoreErrorKind::Corrupt);
        assert!(std::error::Error::source(&e).is_some());
        let e = err("done"
            .parse::<actiongate_core::states::IntentStatus>()
            .expect_err("unknown"));
        assert_eq!(e.kind(), StoreErrorKind::Corrupt);
        assert_eq!(closed().kind(), StoreErrorKind::Unavailable);
    }
}
