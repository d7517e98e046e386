//! ERC-7710 delegations to agents.

use actiongate_core::states::DelegationStatus;
use actiongate_core::store::{AuditEvent, DelegationRecord, DelegationStore, StoreError};
use async_trait::async_trait;
use sqlx::sqlite::SqliteConnection;

use crate::error::{closed, err};
use crate::{Backend, Dialect, SqlStore};

macro_rules! delegation_columns {
    () => {
        "hash, agent_id, delegator, chain_id, status, created_at, expires_at, body"
    };
}

/// Delegators one grant lookup asks for (three variables more).
const DELEGATOR_CHUNK: usize = 128;

#[async_trait]
impl DelegationStore for SqlStore {
    async fn put_delegation(
        &self,
        d: &DelegationRecord,
        event: &AuditEvent,
    ) -> Result<(), StoreError> {
        let chain = i64::try_from(d.chain_id).map_err(err)?;
        on_writer!(self, pool => {
            let mut tx = pool.begin_write().await?;
            let stored = sqlx::query(
                "INSERT INTO delegations (hash, agent_id, delegator, chain_id, status, created_at, expires_at, body, updated_at)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $6)
                 ON CONFLICT (hash) DO UPDATE SET status = excluded.status, expires_at = excluded.expires_at,
                     body = COALESCE(excluded.body, delegations.body), updated_at = excluded.updated_at
                 WHERE delegations.status <> 'revoked' AND delegations.agent_id = excluded.agent_id",
            )
            .bind(&d.hash)
            .bind(&d.agent_id)
            .bind(&d.delegator)
            .bind(chain)
            .bind(d.status.as_str())
            .bind(d.created_at)
            .bind(d.expires_at)
            .bind(&d.body)
            .execute(&mut *tx)
            .await
            .map_err(err)?
            .rows_affected();
            if stored > 0 {
                insert_events!(tx, [event]);
            }
            tx.commit().await.map_err(err)
        })
    }

    async fn get_delegation(&self, hash: &str) -> Result<Option<DelegationRecord>, StoreError> {
        let row: Option<DelegationRow> = on_pool!(self, pool => sqlx::query_as(concat!("SELECT ", delegation_columns!(), " FROM delegations WHERE hash = $1"))
            .bind(hash)
            .fetch_optional(pool)
            .await
            .map_err(err)?);
        row.map(delegation_record).transpose()
    }

    async fn list_delegations(
        &self,
        agent_id: &str,
        chain_id: Option<u64>,
        delegator: Option<&str>,
    ) -> Result<Vec<DelegationRecord>, StoreError> {
        let chain = chain_id.map(i64::try_from).transpose().map_err(err)?;
        let rows: Vec<DelegationRow> = on_pool!(self, pool => sqlx::query_as(concat!(
            "SELECT ", delegation_columns!(), " FROM delegations WHERE agent_id = $1 AND ($2 IS NULL OR chain_id = $2)
               AND ($3 IS NULL OR lower(delegator) = lower($3)) ORDER BY created_at DESC, hash"
        ))
        .bind(agent_id)
        .bind(chain)
        .bind(delegator)
        .fetch_all(pool)
        .await
        .map_err(err)?);
        rows.into_iter().map(delegation_record).collect()
    }

    async fn active_delegations_of(
        &self,
        agent_id: &str,
        chain_id: u64,
        delegators: &[String],
        now: i64,
    ) -> Result<Vec<Option<DelegationRecord>>, StoreError> {
        let chain = i64::try_from(chain_id).map_err(err)?;
        // Each delegator's newest usable delegation: the first of its rows, newest first.
        let mut newest: std::collections::HashMap<String, DelegationRecord> =
            std::collections::HashMap::new();
        for chunk in crate::shaped_chunks(delegators, DELEGATOR_CHUNK) {
            let list: Vec<String> = (0..chunk.len())
                .map(|i| format!("lower(${})", i + 4))
                .collect();
            let sql = format!(
                concat!(
                    "SELECT ",
                    delegation_columns!(),
                    " ",
                    usable_delegations!(),
                    " AND lower(delegator) IN ({})
                   ORDER BY created_at DESC, hash"
                ),
                list.join(", ")
            );
            let rows: Vec<DelegationRow> = on_pool!(self, pool => {
                // Built from this file's constant fragments and numbered placeholders only.
                let mut q = sqlx::query_as(sqlx::AssertSqlSafe(sql.as_str())).bind(agent_id).bind(chain).bind(now);
                for d in chunk {
                    q = q.bind(d);
                }
                q.fetch_all(pool).await.map_err(err)?
            });
            for row in rows {
                let record = delegation_record(row)?;
                newest
                    .entry(record.delegator.to_ascii_lowercase())
                    .or_insert(record);
            }
        }
        Ok(delegators
            .iter()
            .map(|d| newest.get(&d.to_ascii_lowercase()).cloned())
            .collect())
    }

    async fn active_delegations(
        &self,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<DelegationRecord>, StoreError> {
        let rows: Vec<DelegationRow> = on_pool!(self, pool => sqlx::query_as(concat!(
            "SELECT ", delegation_columns!(), " FROM delegations WHERE status = 'active' AND ($1 IS NULL OR hash > $1)
               ORDER BY hash LIMIT $2"
        ))
        .bind(after)
        .bind(i64::from(limit))
        .fetch_all(pool)
        .await
        .map_err(err)?);
        rows.into_iter().map(delegation_record).collect()
    }

    async fn set_delegation_status(
        &self,
        hash: &str,
        status: DelegationStatus,
        now: i64,
        event: &AuditEvent,
    ) -> Result<bool, StoreError> {
        update_with_event!(
            self,
            sqlx::query(
                "UPDATE delegations SET status = $2, updated_at = $3 WHERE hash = $1 AND status <> $2",
            )
            .bind(hash)
            .bind(status.as_str())
            .bind(now),
            event
        )
    }

    async fn count_active_delegations(
        &self,
        agent_id: &str,
        chain_id: u64,
        now: i64,
    ) -> Result<u64, StoreError> {
        let chain = i64::try_from(chain_id).map_err(err)?;
        let n: i64 = on_pool!(self, pool => sqlx::query_scalar(concat!("SELECT COUNT(DISTINCT lower(delegator)) ", usable_delegations!()))
        .bind(agent_id)
        .bind(chain)
        .bind(now)
        .fetch_one(pool)
        .await
        .map_err(err)?);
        u64::try_from(n).map_err(err)
    }
}

/// A delegation row as stored (`delegation_columns!`).
#[derive(sqlx::FromRow)]
pub(crate) struct DelegationRow {
    hash: String,
    agent_id: String,
    delegator: String,
    chain_id: i64,
    status: String,
    created_at: i64,
    expires_at: Option<i64>,
    body: Option<String>,
}

pub(crate) fn delegation_record(row: DelegationRow) -> Result<DelegationRecord, StoreError> {
    let DelegationRow {
        hash,
        agent_id,
        delegator,
        chain_id,
        status,
        created_at,
        expires_at,
        body,
    } = row;
    Ok(DelegationRecord {
        hash,
        agent_id,
        delegator,
        chain_id: u64::try_from(chain_id).map_err(err)?,
        status: status.parse().map_err(err)?,
        created_at,
        expires_at,
        body,
    })
}
