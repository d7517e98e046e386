//! Fresh databases for tests: a SQLite file in a temporary directory, or a new schema in the
//! PostgreSQL named by `ACTIONGATE_TEST_POSTGRES_URL` (default `postgres://root@127.0.0.1:5432/test`).
//! `scripts/test` makes sure that server runs; a test that cannot reach it fails, it does not skip.

use std::str::FromStr;

use actiongate_core::store::StoreError;
use sqlx::postgres::PgConnectOptions;
use sqlx::{ConnectOptions, Connection};

use crate::error::err;

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
        StoreError::new(actiongate_core::store::StoreErrorKind::Unavailable, format!("cannot reach the test PostgreSQL at {base} ({e}); run ./scripts/test, which starts it"))
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
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("{:x}_{}_{n}", nanos, std::process::id())
}
