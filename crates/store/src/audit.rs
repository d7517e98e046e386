//! The audit trail: the `audit_events` outbox and the per-account chains (`audit_entries`,
//! `audit_heads`). The link hashes are the core's ([`ChainLinker`]); this module reads, locks and
//! writes.

use std::collections::BTreeMap;

use actiongate_core::store::{
    AuditEntry, AuditEvent, AuditRecord, AuditStore, ChainLinker, StoreError,
};
use async_trait::async_trait;
use sqlx::Row;
use sqlx::sqlite::SqliteConnection;

use crate::error::{closed, corrupt, err};
use crate::{Backend, Dialect, SqlStore};

/// Entries one INSERT writes at most (ten variables each: under SQLite's 32,766), in power-of-two
/// runs ([`crate::shaped_chunks`]: a few prepared shapes, not one per batch size).
const ENTRY_CHUNK: usize = 512;
/// Audit events one INSERT writes at most (eight variables each), in power-of-two runs.
pub(crate) const EVENT_CHUNK: usize = 512;

/// A query builder for `$sql` (ending in `IN (`) with each of `$items` bound in the list, closed.
macro_rules! in_list {
    ($sql:expr, $items:expr) => {{
        let mut q = sqlx::QueryBuilder::new($sql);
        let mut list = q.separated(", ");
        for item in $items {
            list.push_bind(item);
        }
        q.push(")");
        q
    }};
}

/// Writes audit events inside the open transaction `$tx`: an event that names only its agent gets
/// the agent's account. One statement for up to [`EVENT_CHUNK`] events (SQLite's connection thread
/// is handed each statement and its answer back: a statement an event cost two thread switches).
macro_rules! insert_events {
    ($tx:ident, $events:expr) => {{
        let events: Vec<&actiongate_core::store::AuditEvent> = $events.into_iter().collect();
        for chunk in crate::shaped_chunks(&events, crate::audit::EVENT_CHUNK) {
            let mut q = sqlx::QueryBuilder::new(
                "INSERT INTO audit_events (account_id, at, kind, actor, subject, code, data) ",
            );
            q.push_values(chunk, |mut row, e| {
                row.push("COALESCE(")
                    .push_bind_unseparated(e.account_id.as_deref())
                    .push_unseparated(", (SELECT account_id FROM agents WHERE id = ")
                    .push_bind_unseparated(e.agent_id.as_deref())
                    .push_unseparated("))")
                    .push_bind(e.at)
                    .push_bind(&e.kind)
                    .push_bind(&e.actor)
                    .push_bind(&e.subject)
                    .push_bind(e.code.as_deref())
                    .push_bind(&e.data);
            });
            q.build()
                .execute(&mut *$tx)
                .await
                .map_err(crate::error::err)?;
        }
    }};
}

/// Runs one UPDATE and, when it changed a row, writes `event` in the same transaction; answers
/// whether it changed one (a decision and its audit entry land together or not at all).
macro_rules! update_with_event {
    ($self:expr, $query:expr, $event:expr) => {
        on_writer!($self, pool => {
            let mut tx = pool.begin_write().await?;
            let changed = $query
                .execute(&mut *tx)
                .await
                .map_err(crate::error::err)?
                .rows_affected()
                > 0;
            if changed {
                insert_events!(tx, [$event]);
            }
            tx.commit().await.map_err(crate::error::err)?;
            Ok(changed)
        })
    };
}

fn hash_of(bytes: Vec<u8>) -> Result<[u8; 32], StoreError> {
    <[u8; 32]>::try_from(bytes.as_slice()).map_err(|_| corrupt("an audit hash is not 32 bytes"))
}

fn entry_from_row<R: Row>(row: &R) -> Result<AuditEntry, StoreError>
where
    for<'a> &'a str: sqlx::ColumnIndex<R>,
    String: for<'r> sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    Option<String>: for<'r> sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    i64: for<'r> sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    Vec<u8>: for<'r> sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
{
    Ok(AuditEntry {
        entry: AuditRecord {
            account_id: row.try_get("account_id").map_err(err)?,
            seq: row.try_get("seq").map_err(err)?,
            at: row.try_get("at").map_err(err)?,
            kind: row.try_get("kind").map_err(err)?,
            actor: row.try_get("actor").map_err(err)?,
            subject: row.try_get("subject").map_err(err)?,
            code: row.try_get("code").map_err(err)?,
            data: row.try_get("data").map_err(err)?,
        },
        prev_hash: hash_of(row.try_get("prev_hash").map_err(err)?)?,
        hash: hash_of(row.try_get("hash").map_err(err)?)?,
    })
}

#[async_trait]
impl AuditStore for SqlStore {
    async fn append_audit(&self, events: &[AuditEvent]) -> Result<(), StoreError> {
        if events.is_empty() {
            return Ok(());
        }
        on_writer!(self, pool => {
            let mut tx = pool.begin_write().await?;
            insert_events!(tx, events);
            tx.commit().await.map_err(err)
        })
    }

    async fn chain_audit(
        &self,
        linker: &dyn ChainLinker,
        limit: u32,
    ) -> Result<Vec<AuditEntry>, StoreError> {
        // The events and the heads are read and the entries hashed outside the writer; the write
        // then only inserts, and goes ahead only if nothing was chained meanwhile (every event it
        // takes still waits, every head is as read): SQLite's one writer is held for the inserts
        // alone. Another chaining step that got there first is met by reading again.
        for _ in 0..3 {
            let (ids, by_account) = self.waiting_events(limit).await?;
            if ids.is_empty() {
                return Ok(Vec::new());
            }
            let read = self.heads_of(by_account.keys()).await?;
            let mut added = Vec::with_capacity(ids.len());
            let mut heads = Vec::with_capacity(by_account.len());
            for (account_id, events) in &by_account {
                let head = read
                    .get(account_id)
                    .copied()
                    .unwrap_or((0, actiongate_core::audit::GENESIS));
                let (entries, head) = linker.extend(account_id, head, events);
                heads.push((account_id, head));
                added.extend(entries);
            }
            if self
                .write_chained(linker, &ids, &read, &heads, &added)
                .await?
            {
                return Ok(added);
            }
        }
        Ok(Vec::new())
    }

    async fn audit_page(
        &self,
        account_id: &str,
        after: i64,
        from: Option<i64>,
        to: Option<i64>,
        limit: u32,
    ) -> Result<Vec<AuditEntry>, StoreError> {
        on_pool!(self, pool => {
            let rows = sqlx::query(
                "SELECT account_id, seq, at, kind, actor, subject, code, data, prev_hash, hash
                 FROM audit_entries
                 WHERE account_id = $1 AND seq > $2
                   AND (CAST($3 AS BIGINT) IS NULL OR at >= $3)
                   AND (CAST($4 AS BIGINT) IS NULL OR at < $4)
                 ORDER BY seq LIMIT $5",
            )
            .bind(account_id)
            .bind(after)
            .bind(from)
            .bind(to)
            .bind(i64::from(limit))
            .fetch_all(pool)
            .await
            .map_err(err)?;
            rows.iter().map(entry_from_row).collect()
        })
    }

    async fn audit_head(&self, account_id: &str) -> Result<Option<(i64, [u8; 32])>, StoreError> {
        on_pool!(self, pool => {
            let row = sqlx::query("SELECT seq, hash FROM audit_heads WHERE account_id = $1")
                .bind(account_id)
                .fetch_optional(pool)
                .await
                .map_err(err)?;
            match row {
                None => Ok(None),
                Some(row) => Ok(Some((
                    row.try_get::<i64, _>("seq").map_err(err)?,
                    hash_of(row.try_get("hash").map_err(err)?)?,
                ))),
            }
        })
    }
}

/// The events waiting (by id: one chaining step's), grouped by account.
type Waiting = (Vec<i64>, BTreeMap<String, Vec<AuditEvent>>);

impl SqlStore {
    /// Up to `limit` of the oldest events waiting to be chained, read outside the writer.
    async fn waiting_events(&self, limit: u32) -> Result<Waiting, StoreError> {
        on_pool!(self, pool => {
            let rows = sqlx::query(
                "SELECT id, account_id, at, kind, actor, subject, code, data FROM audit_events ORDER BY id LIMIT $1",
            )
            .bind(i64::from(limit))
            .fetch_all(pool)
            .await
            .map_err(err)?;
            waiting_from(&rows)
        })
    }

    /// The chain heads of `accounts` (an account without one has no entry yet).
    async fn heads_of<'a>(
        &self,
        accounts: impl Iterator<Item = &'a String> + Clone + Send,
    ) -> Result<Heads, StoreError> {
        on_pool!(self, pool => {
            let mut q = in_list!(
                "SELECT account_id, seq, hash FROM audit_heads WHERE account_id IN (",
                accounts.clone()
            );
            let rows = q.build().fetch_all(pool).await.map_err(err)?;
            heads_from(&rows)
        })
    }

    /// Writes a chaining step: deletes its events, checks the heads it was computed from, inserts
    /// the entries and their webhook deliveries, moves the heads; all or nothing. False, writing
    /// nothing, when another step chained any of these accounts or events first.
    async fn write_chained(
        &self,
        linker: &dyn ChainLinker,
        ids: &[i64],
        read: &Heads,
        heads: &[(&String, (i64, [u8; 32]))],
        added: &[AuditEntry],
    ) -> Result<bool, StoreError> {
        on_writer!(self, pool => {
            let lock = pool.chain_lock_sql();
            let mut tx = pool.begin_write().await?;
            if let Some(lock) = lock {
                sqlx::query(lock).execute(&mut *tx).await.map_err(err)?;
            }
            let mut q = in_list!("DELETE FROM audit_events WHERE id IN (", ids.iter().copied());
            let taken = q.build().execute(&mut *tx).await.map_err(err)?.rows_affected();
            let mut q = in_list!(
                "SELECT account_id, seq, hash FROM audit_heads WHERE account_id IN (",
                heads.iter().map(|(account_id, _)| *account_id)
            );
            let now = heads_from(&q.build().fetch_all(&mut *tx).await.map_err(err)?)?;
            if usize::try_from(taken).ok() != Some(ids.len()) || &now != read {
                tx.rollback().await.map_err(err)?;
                return Ok(false);
            }
            // The entries and their webhook deliveries in a few multi-row statements.
            for chunk in crate::shaped_chunks(added, ENTRY_CHUNK) {
                let mut q = sqlx::QueryBuilder::new(
                    "INSERT INTO audit_entries (account_id, seq, at, kind, actor, subject, code, data, prev_hash, hash) ",
                );
                q.push_values(chunk, |mut b, e| {
                    let r = &e.entry;
                    b.push_bind(&r.account_id)
                        .push_bind(r.seq)
                        .push_bind(r.at)
                        .push_bind(&r.kind)
                        .push_bind(&r.actor)
                        .push_bind(&r.subject)
                        .push_bind(r.code.as_deref())
                        .push_bind(&r.data)
                        .push_bind(e.prev_hash.to_vec())
                        .push_bind(e.hash.to_vec());
                });
                q.build().execute(&mut *tx).await.map_err(err)?;
            }
            insert_deliveries!(tx, linker, heads.iter().map(|(a, _)| *a), added);
            let mut q = sqlx::QueryBuilder::new("INSERT INTO audit_heads (account_id, seq, hash) ");
            q.push_values(heads, |mut b, (account_id, (seq, hash))| {
                b.push_bind(*account_id).push_bind(*seq).push_bind(hash.to_vec());
            });
            q.push(" ON CONFLICT (account_id) DO UPDATE SET seq = excluded.seq, hash = excluded.hash");
            q.build().execute(&mut *tx).await.map_err(err)?;
            tx.commit().await.map_err(err)?;
            Ok(true)
        })
    }
}

fn waiting_from<R: Row>(rows: &[R]) -> Result<Waiting, StoreError>
where
    for<'a> &'a str: sqlx::ColumnIndex<R>,
    String: for<'r> sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    Option<String>: for<'r> sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    i64: for<'r> sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
{
    let mut ids = Vec::with_capacity(rows.len());
    let mut by_account: BTreeMap<String, Vec<AuditEvent>> = BTreeMap::new();
    for row in rows {
        ids.push(row.try_get::<i64, _>("id").map_err(err)?);
        let account_id: String = row.try_get("account_id").map_err(err)?;
        by_account
            .entry(account_id.clone())
            .or_default()
            .push(AuditEvent {
                account_id: Some(account_id),
                agent_id: None,
                at: row.try_get("at").map_err(err)?,
                kind: row.try_get("kind").map_err(err)?,
                actor: row.try_get("actor").map_err(err)?,
                subject: row.try_get("subject").map_err(err)?,
                code: row.try_get("code").map_err(err)?,
                data: row.try_get("data").map_err(err)?,
            });
    }
    Ok((ids, by_account))
}

/// Chain heads by account: (seq, hash) of the last entry.
type Heads = std::collections::HashMap<String, (i64, [u8; 32])>;

fn heads_from<R: Row>(rows: &[R]) -> Result<Heads, StoreError>
where
    for<'a> &'a str: sqlx::ColumnIndex<R>,
    String: for<'r> sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    i64: for<'r> sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    Vec<u8>: for<'r> sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
{
    rows.iter()
        .map(|row| {
            Ok((
                row.try_get("account_id").map_err(err)?,
                (
                    row.try_get::<i64, _>("seq").map_err(err)?,
                    hash_of(row.try_get("hash").map_err(err)?)?,
                ),
            ))
        })
        .collect()
}
