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

/// Writes audit events inside the open transaction `$tx`: an event that names only its agent gets
/// the agent's account.
macro_rules! insert_events {
    ($tx:ident, $events:expr) => {{
        for e in $events {
            let e: &actiongate_core::store::AuditEvent = e;
            sqlx::query(
                "INSERT INTO audit_events (account_id, at, kind, actor, subject, code, data)
                 VALUES (COALESCE($1, (SELECT account_id FROM agents WHERE id = $2)), $3, $4, $5, $6, $7, $8)",
            )
            .bind(e.account_id.as_deref())
            .bind(e.agent_id.as_deref())
            .bind(e.at)
            .bind(&e.kind)
            .bind(&e.actor)
            .bind(&e.subject)
            .bind(e.code.as_deref())
            .bind(&e.data)
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
        on_writer!(self, pool => {
            let sql = pool.audit_events_sql();
            let mut tx = pool.begin_write().await?;
            let rows = sqlx::query(sql)
                .bind(i64::from(limit))
                .fetch_all(&mut *tx)
                .await
                .map_err(err)?;
            if rows.is_empty() {
                return Ok(Vec::new());
            }
            let mut ids = Vec::with_capacity(rows.len());
            // Accounts in order, so that two chaining processes lock heads in one order.
            let mut by_account: BTreeMap<String, Vec<AuditEvent>> = BTreeMap::new();
            for row in &rows {
                ids.push(row.try_get::<i64, _>("id").map_err(err)?);
                let account_id: String = row.try_get("account_id").map_err(err)?;
                by_account.entry(account_id.clone()).or_default().push(AuditEvent {
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
            let mut added = Vec::with_capacity(rows.len());
            for (account_id, events) in &by_account {
                sqlx::query(
                    "INSERT INTO audit_heads (account_id, seq, hash) VALUES ($1, 0, $2)
                     ON CONFLICT (account_id) DO NOTHING",
                )
                .bind(account_id)
                .bind(actiongate_core::audit::GENESIS.to_vec())
                .execute(&mut *tx)
                .await
                .map_err(err)?;
                let head = sqlx::query(
                    "UPDATE audit_heads SET seq = seq WHERE account_id = $1 RETURNING seq, hash",
                )
                .bind(account_id)
                .fetch_one(&mut *tx)
                .await
                .map_err(err)?;
                let head = (
                    head.try_get::<i64, _>("seq").map_err(err)?,
                    hash_of(head.try_get("hash").map_err(err)?)?,
                );
                let (entries, (seq, hash)) = linker.extend(account_id, head, events);
                for e in &entries {
                    let r = &e.entry;
                    sqlx::query(
                        "INSERT INTO audit_entries (account_id, seq, at, kind, actor, subject, code, data, prev_hash, hash)
                         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
                    )
                    .bind(&r.account_id)
                    .bind(r.seq)
                    .bind(r.at)
                    .bind(&r.kind)
                    .bind(&r.actor)
                    .bind(&r.subject)
                    .bind(r.code.as_deref())
                    .bind(&r.data)
                    .bind(e.prev_hash.to_vec())
                    .bind(e.hash.to_vec())
                    .execute(&mut *tx)
                    .await
                    .map_err(err)?;
                    insert_deliveries!(tx, linker, e);
                }
                sqlx::query("UPDATE audit_heads SET seq = $2, hash = $3 WHERE account_id = $1")
                    .bind(account_id)
                    .bind(seq)
                    .bind(hash.to_vec())
                    .execute(&mut *tx)
                    .await
                    .map_err(err)?;
                added.extend(entries);
            }
            let mut q = sqlx::QueryBuilder::new("DELETE FROM audit_events WHERE id IN (");
            let mut list = q.separated(", ");
            for id in &ids {
                list.push_bind(*id);
            }
            q.push(")");
            q.build().execute(&mut *tx).await.map_err(err)?;
            tx.commit().await.map_err(err)?;
            Ok(added)
        })
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
