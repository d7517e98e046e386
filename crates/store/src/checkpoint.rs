//! SQLite WAL checkpoints beside the writer.

use std::time::Duration;

use sqlx::sqlite::{SqliteConnection, SqlitePool};

/// How often [`checkpoint_wal`] runs. A checkpoint writes the pages changed since the last one to
/// their places in the database file and syncs it, and a commit whose WAL sync meets that sync waits
/// for it: the fewer pages a checkpoint has, the shorter the wait. Measured at 3400 submits/s: every
/// 100 ms, checkpoints of up to 24 ms (a few thousand pages, many of them random: idempotency keys)
/// and batches stalled as long; every 10 ms, checkpoints of 3-10 ms. An idle checkpoint (nothing new
/// in the WAL) writes and syncs nothing.
pub(crate) const CHECKPOINT_EVERY: Duration = Duration::from_millis(10);

/// Copies the SQLite WAL back into the database file every [`CHECKPOINT_EVERY`], on a read
/// connection, without waiting for readers or the writer (`PASSIVE`): the writer's commits then only
/// append to the WAL and sync it. Left to SQLite's automatic checkpoint, the commit that crosses
/// 1000 pages copies and syncs them all (measured: commits of 15-35 ms every few batches under
/// load). Ends when the pool closes or the store is dropped (its writer gone).
pub(crate) async fn checkpoint_wal(
    pool: SqlitePool,
    writer: std::sync::Weak<tokio::sync::Mutex<Option<SqliteConnection>>>,
) {
    loop {
        if pool
            .close_event()
            .do_until(tokio::time::sleep(CHECKPOINT_EVERY))
            .await
            .is_err()
            || writer.strong_count() == 0
        {
            return;
        }
        let started = std::time::Instant::now();
        match sqlx::query_as::<_, (i64, i64, i64)>("PRAGMA wal_checkpoint(PASSIVE)")
            .fetch_one(&pool)
            .await
        {
            Ok((_, wal, copied)) => tracing::debug!(
                wal,
                copied,
                ms = started.elapsed().as_secs_f64() * 1e3,
                "WAL checkpoint"
            ),
            Err(e) => {
                if pool.is_closed() {
                    return;
                }
                tracing::warn!(error = %e, "WAL checkpoint failed");
            }
        }
    }
}
