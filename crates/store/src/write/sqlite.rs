//! SQLite: one multi-row statement per table.

use actiongate_core::states::{ApprovalState, ExecutionState, IntentStatus};
use actiongate_core::store::StoreError;
use sqlx::sqlite::SqliteConnection;

use crate::error::err;
use crate::new_id;
use crate::write::{BatchRows, BatchWriter};

/// SQLite: one multi-row statement per table (its connection is in-process: a statement costs a
/// hop to the connection's thread, not a network round trip).
impl BatchWriter for SqliteConnection {
    async fn write_rows(&mut self, rows: &BatchRows<'_>) -> Result<(), StoreError> {
        let conn = self;
        for chunk in rows.reads.chunks(500) {
            let mut q = sqlx::QueryBuilder::new(
                "WITH v (intent_id, seq, state, tx_hash, error_code, error_message, data, now) AS (",
            );
            q.push_values(chunk, |mut b, (intent_id, seq, f, now)| {
                b.push_bind(*intent_id)
                    .push("CAST(")
                    .push_bind_unseparated(i64::from(*seq))
                    .push_unseparated(" AS INTEGER)")
                    .push_bind(f.state().as_str())
                    .push_bind(&f.tx_hash)
                    .push_bind(&f.error_code)
                    .push_bind(&f.error_message)
                    .push_bind(&f.data)
                    .push_bind(*now);
            });
            q.push(
                ") UPDATE intent_executions SET state = v.state, tx_hash = v.tx_hash, error_code = v.error_code,
                     error_message = v.error_message, data = v.data, started_at = COALESCE(intent_executions.started_at, v.now),
                     finished_at = v.now
                 FROM v WHERE intent_executions.intent_id = v.intent_id AND intent_executions.seq = v.seq
                   AND intent_executions.state IN ('pending', 'started')",
            );
            q.build().execute(&mut *conn).await.map_err(err)?;
        }
        let mut by_status: std::collections::BTreeMap<&str, Vec<&str>> =
            std::collections::BTreeMap::new();
        for (id, status) in &rows.finished {
            by_status.entry(status.as_str()).or_default().push(*id);
        }
        for (status, ended) in by_status {
            let mut q = sqlx::QueryBuilder::new("UPDATE intents SET status = ");
            q.push_bind(status)
                .push(", finished_at = ")
                .push_bind(rows.finished_at);
            q.push(", lease_owner = NULL, lease_until = NULL WHERE id IN (");
            let mut list = q.separated(", ");
            for id in ended {
                list.push_bind(id);
            }
            q.push(")");
            q.build().execute(&mut *conn).await.map_err(err)?;
        }
        let accepted = &rows.accepted;
        if !accepted.intents.is_empty() {
            let mut q = sqlx::QueryBuilder::new(
                "INSERT INTO intents (id, agent_id, account_id, action, lane, params, chain_id, amount_micros,
                     price_per_execution, reserved_credits, free_request, status, total, lease_owner, lease_until, created_at,
                     approval_state, approval_requested_at, approval_expires_at) ",
            );
            let mut chain_ids = Vec::with_capacity(accepted.intents.len());
            for i in &accepted.intents {
                chain_ids.push(i64::try_from(i.draft.chain_id).map_err(err)?);
            }
            q.push_values(
                accepted.intents.iter().zip(chain_ids),
                |mut b, (i, chain_id)| {
                    let d = i.draft;
                    b.push_bind(&d.id)
                        .push_bind(&d.agent_id)
                        .push_bind(&d.account_id)
                        .push_bind(&d.action)
                        .push_bind(d.lane.as_str())
                        .push_bind(d.params.as_str())
                        .push_bind(chain_id)
                        .push_bind(d.amount_micros)
                        .push_bind(d.price_per_execution)
                        .push_bind(i.reserved_credits)
                        .push_bind(i.free_request)
                        .push_bind(IntentStatus::Queued.as_str())
                        .push_bind(i64::from(i.total))
                        .push_bind(d.lease.as_ref().map(|(o, _)| o.as_str()))
                        .push_bind(d.lease.as_ref().map(|(_, u)| *u))
                        .push_bind(d.now)
                        .push_bind(
                            d.approval_expires_at
                                .map(|_| ApprovalState::Pending.as_str()),
                        )
                        .push_bind(d.approval_expires_at.map(|_| d.now))
                        .push_bind(d.approval_expires_at);
                },
            );
            q.build().execute(&mut *conn).await.map_err(err)?;
            let mut q = sqlx::QueryBuilder::new(
                "INSERT INTO idempotency_keys (agent_id, key, request_hash, intent_id, created_at) ",
            );
            q.push_values(&accepted.intents, |mut b, i| {
                let d = i.draft;
                b.push_bind(&d.agent_id)
                    .push_bind(&d.idempotency_key)
                    .push_bind(d.request_hash.to_vec())
                    .push_bind(&d.id)
                    .push_bind(d.now);
            });
            q.build().execute(&mut *conn).await.map_err(err)?;
        }
        // At most 7 binds an execution: keep a statement well under every parameter limit.
        let mut chain_ids = Vec::with_capacity(accepted.executions.len());
        for e in &accepted.executions {
            chain_ids.push(i64::try_from(e.chain_id).map_err(err)?);
        }
        let executions: Vec<_> = accepted.executions.iter().zip(chain_ids).collect();
        for chunk in executions.chunks(2000) {
            let mut q = sqlx::QueryBuilder::new(
                "INSERT INTO intent_executions (intent_id, seq, execution_key, user_did, wallet_address, chain_id, state) ",
            );
            q.push_values(chunk, |mut b, (e, chain_id)| {
                b.push_bind(e.intent_id)
                    .push_bind(i64::from(e.seq))
                    .push_bind(&e.execution_key)
                    .push_bind(&e.user.user_did)
                    .push_bind(&e.user.wallet_address)
                    .push_bind(*chain_id)
                    .push_bind(ExecutionState::Pending.as_str());
            });
            q.build().execute(&mut *conn).await.map_err(err)?;
        }
        for (agent, day, amount) in &accepted.usage {
            sqlx::query(
                "INSERT INTO agent_daily_usage (agent_id, day, used_micros) VALUES ($1, $2, $3)
                 ON CONFLICT (agent_id, day) DO UPDATE SET used_micros = agent_daily_usage.used_micros + excluded.used_micros",
            )
            .bind(agent)
            .bind(*day)
            .bind(*amount)
            .execute(&mut *conn)
            .await
            .map_err(err)?;
        }
        for (id, account) in &rows.credits {
            sqlx::query(
                "UPDATE credit_accounts SET balance = $2, reserved = $3, free_day = $4, free_used = $5
                 WHERE account_id = $1",
            )
            .bind(*id)
            .bind(account.balance)
            .bind(account.reserved)
            .bind(account.free_day)
            .bind(i64::from(account.free_used))
                .execute(&mut *conn)
                .await
                .map_err(err)?;
        }
        if !rows.ledger.is_empty() {
            let mut q = sqlx::QueryBuilder::new(
                "INSERT INTO credit_ledger (id, account_id, agent_id, kind, reason, intent_id,
                     balance_before, balance_after, reserved_before, reserved_after, created_at,
                     invoice_id) ",
            );
            q.push_values(&rows.ledger, |mut b, r| {
                b.push_bind(new_id())
                    .push_bind(r.account_id)
                    .push_bind(r.agent_id)
                    .push_bind(r.kind.as_str())
                    .push_bind(&r.reason)
                    .push_bind(r.intent_id)
                    .push_bind(r.before.balance)
                    .push_bind(r.after.balance)
                    .push_bind(r.before.reserved)
                    .push_bind(r.after.reserved)
                    .push_bind(r.at)
                    .push_bind(r.invoice_id);
            });
            q.build().execute(&mut *conn).await.map_err(err)?;
        }
        // Seven variables an event: chunks stay under SQLite's 32766.
        for chunk in rows.events.chunks(4000) {
            let mut q = sqlx::QueryBuilder::new(
                "INSERT INTO audit_events (account_id, at, kind, actor, subject, code, data) ",
            );
            q.push_values(chunk, |mut b, e| {
                b.push_bind(e.account_id.as_deref())
                    .push_bind(e.at)
                    .push_bind(&e.kind)
                    .push_bind(&e.actor)
                    .push_bind(&e.subject)
                    .push_bind(e.code.as_deref())
                    .push_bind(&e.data);
            });
            q.build().execute(&mut *conn).await.map_err(err)?;
        }
        Ok(())
    }
}
