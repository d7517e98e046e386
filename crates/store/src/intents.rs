//! Intents and their executions: acceptance through the batcher, leases, outcomes, settlement.

use actiongate_core::acceptance;
use actiongate_core::acceptance::{AgentNow, Snapshot};
use actiongate_core::ledger::CreditLedger;
use actiongate_core::states::ExecutionState;
use actiongate_core::states::{ApprovalState, IntentStatus, LegState};
use actiongate_core::store::{
    AcceptOutcome, ApprovalEnd, AuditEvent, CreditAccount, ExecutionEnd, ExecutionFinish,
    ExecutionRecord, IdempotencyRecord, IntentDraft, IntentRecord, IntentStore, OpenLeg, OrderEnd,
    StoreError,
};
use async_trait::async_trait;
use sqlx::Row;
use sqlx::sqlite::SqliteConnection;

use crate::batch::{Job, Settle, for_update};

/// Executions one multi-row statement starts or ends (eight variables each at most).
const SEQ_CHUNK: usize = 256;
use crate::error::{closed, corrupt, err};
use crate::rows::{CreditRow, credit_from, hash_from, intent_from_row, policy_from_row};
use crate::write::{BatchRows, BatchWriter};
use crate::{Backend, Dialect, SqlStore};

#[async_trait]
impl IntentStore for SqlStore {
    async fn find_idempotency(
        &self,
        agent_id: &str,
        key: &str,
    ) -> Result<Option<IdempotencyRecord>, StoreError> {
        let row: Option<(Vec<u8>, String, i64)> = on_pool!(self, pool => sqlx::query_as(
            "SELECT request_hash, intent_id, created_at FROM idempotency_keys WHERE agent_id = $1 AND key = $2",
        )
        .bind(agent_id)
        .bind(key)
        .fetch_optional(pool)
        .await
        .map_err(err)?);
        row.map(|(hash, intent_id, created_at)| {
            Ok(IdempotencyRecord {
                request_hash: hash_from(hash)?.0,
                intent_id,
                created_at,
            })
        })
        .transpose()
    }

    async fn accept_intent(&self, d: &IntentDraft) -> Result<AcceptOutcome, StoreError> {
        self.batch(|reply| Job::Accept(Box::new(d.clone()), reply))
            .await
    }

    async fn get_intent(&self, intent_id: &str) -> Result<Option<IntentRecord>, StoreError> {
        on_pool!(self, pool => {
            let row = sqlx::query(concat!("SELECT ", intent_columns!(), " FROM intents WHERE id = $1"))
                .bind(intent_id)
                .fetch_optional(pool)
                .await
                .map_err(err)?;
            row.as_ref().map(intent_from_row).transpose()
        })
    }

    async fn list_executions_of(
        &self,
        intent_ids: &[String],
    ) -> Result<Vec<ExecutionRecord>, StoreError> {
        if intent_ids.is_empty() {
            return Ok(Vec::new());
        }
        let rows: Vec<(
            String,
            i32,
            String,
            String,
            String,
            i64,
            String,
            Option<String>,
            Option<String>,
            Option<String>,
            Option<String>,
        )> = on_pool!(self, pool => {
            let mut q = sqlx::QueryBuilder::new(
                "SELECT intent_id, seq, execution_key, user_did, wallet_address, chain_id, state, tx_hash, error_code, error_message, data
                 FROM intent_executions WHERE intent_id IN (",
            );
            let mut list = q.separated(", ");
            for id in intent_ids {
                list.push_bind(id);
            }
            q.push(") ORDER BY intent_id, seq");
            q.build_query_as().fetch_all(pool).await.map_err(err)?
        });
        rows.into_iter()
            .map(
                |(intent_id, seq, key, did, wallet, chain, state, tx_hash, code, message, data)| {
                    Ok(ExecutionRecord {
                        intent_id,
                        seq: u32::try_from(seq).map_err(err)?,
                        execution_key: key,
                        user_did: did,
                        wallet_address: wallet,
                        chain_id: u64::try_from(chain).map_err(err)?,
                        state: state.parse().map_err(err)?,
                        tx_hash,
                        error_code: code,
                        error_message: message,
                        data,
                    })
                },
            )
            .collect()
    }

    async fn list_executions(&self, intent_id: &str) -> Result<Vec<ExecutionRecord>, StoreError> {
        self.list_executions_of(&[intent_id.to_owned()]).await
    }

    async fn count_intents(&self, agent_id: &str) -> Result<u64, StoreError> {
        let n: i64 = on_pool!(self, pool => sqlx::query_scalar("SELECT COUNT(*) FROM intents WHERE agent_id = $1")
            .bind(agent_id)
            .fetch_one(pool)
            .await
            .map_err(err)?);
        u64::try_from(n).map_err(err)
    }

    async fn claim_intents(
        &self,
        owner: &str,
        now: i64,
        lease_until: i64,
        limit: u32,
    ) -> Result<Vec<IntentRecord>, StoreError> {
        on_writer!(self, pool => {
            let rows = sqlx::query(pool.claim_many_sql())
                .bind(owner)
                .bind(lease_until)
                .bind(now)
                .bind(i64::from(limit))
                .fetch_all(pool)
                .await
                .map_err(err)?;
            rows.iter().map(intent_from_row).collect()
        })
    }

    async fn finish_reads(
        &self,
        owner: &str,
        intents: &[String],
        done: &[(String, u32, ExecutionFinish)],
        now: i64,
    ) -> Result<(), StoreError> {
        if intents.is_empty() {
            return Ok(());
        }
        let settle = Settle {
            owner: owner.to_owned(),
            intents: intents.to_vec(),
            done: done.to_vec(),
            now,
        };
        self.batch(|reply| Job::Settle(settle, reply)).await
    }

    async fn release_lease(&self, intent_id: &str, owner: &str) -> Result<(), StoreError> {
        on_writer!(self, pool => sqlx::query(
            "UPDATE intents SET lease_owner = NULL, lease_until = NULL WHERE id = $1 AND lease_owner = $2 AND status = 'queued'",
        )
        .bind(intent_id)
        .bind(owner)
        .execute(pool)
        .await
        .map(|_| ())
        .map_err(err))
    }

    async fn renew_lease(
        &self,
        intent_id: &str,
        owner: &str,
        lease_until: i64,
    ) -> Result<bool, StoreError> {
        on_writer!(self, pool => sqlx::query(
            "UPDATE intents SET lease_until = $3 WHERE id = $1 AND lease_owner = $2 AND status = 'queued'",
        )
        .bind(intent_id)
        .bind(owner)
        .bind(lease_until)
        .execute(pool)
        .await
        .map(|r| r.rows_affected() == 1)
        .map_err(err))
    }

    async fn start_executions(
        &self,
        intent_id: &str,
        seqs: &[u32],
        owner: &str,
        now: i64,
    ) -> Result<Vec<bool>, StoreError> {
        let list: Vec<i32> = seqs
            .iter()
            .map(|s| i32::try_from(*s).map_err(err))
            .collect::<Result<_, _>>()?;
        on_writer!(self, pool => {
            let mut tx = pool.begin_write().await?;
            // One UPDATE for a run of executions (a statement each was a round trip to SQLite's
            // thread each).
            let mut started = std::collections::HashSet::new();
            for chunk in crate::shaped_chunks(&list, SEQ_CHUNK) {
                let mut q = sqlx::QueryBuilder::new("UPDATE intent_executions SET state = 'started', started_at = ");
                q.push_bind(now).push(" WHERE intent_id = ").push_bind(intent_id)
                    .push(" AND state = 'pending' AND EXISTS (SELECT 1 FROM intents WHERE id = ").push_bind(intent_id)
                    .push(" AND lease_owner = ").push_bind(owner)
                    .push(" AND status = 'queued' AND lease_until > ").push_bind(now)
                    .push(") AND seq IN (");
                let mut each = q.separated(", ");
                for seq in chunk {
                    each.push_bind(*seq);
                }
                q.push(") RETURNING seq");
                started.extend(q.build_query_scalar::<i32>().fetch_all(&mut *tx).await.map_err(err)?);
            }
            tx.commit().await.map_err(err)?;
            // A seq named twice started once: its first mention.
            Ok(list.iter().map(|seq| started.remove(seq)).collect())
        })
    }

    async fn finish_executions(
        &self,
        intent_id: &str,
        owner: &str,
        ends: &[ExecutionEnd],
    ) -> Result<Vec<bool>, StoreError> {
        let seqs: Vec<i32> = ends
            .iter()
            .map(|e| i32::try_from(e.seq).map_err(err))
            .collect::<Result<_, _>>()?;
        // A seq named twice ends once: its first mention.
        let mut named = std::collections::HashSet::new();
        let first: Vec<bool> = seqs.iter().map(|s| named.insert(*s)).collect();
        let once: Vec<(i32, &ExecutionEnd)> = seqs
            .iter()
            .zip(ends)
            .zip(&first)
            .filter(|(_, f)| **f)
            .map(|((s, e), _)| (*s, e))
            .collect();
        on_writer!(self, pool => {
            let mut tx = pool.begin_write().await?;
            // One UPDATE for a run of ended executions, each with its own values.
            let mut finished = std::collections::HashSet::new();
            for chunk in crate::shaped_chunks(&once, SEQ_CHUNK) {
                let mut q = sqlx::QueryBuilder::new("WITH v (v_seq, v_state, v_hash, v_code, v_message, v_data, v_at, v_leg) AS (");
                q.push_values(chunk, |mut b, (seq, end)| {
                    let f = &end.finish;
                    b.push_bind(*seq).push_bind(f.state().as_str()).push_bind(f.tx_hash.as_deref())
                        .push_bind(f.error_code.as_deref()).push_bind(f.error_message.as_deref()).push_bind(f.data.as_deref())
                        .push_bind(end.now).push_bind(f.leg_open.then_some(LegState::Open.as_str()));
                });
                q.push(
                    ") UPDATE intent_executions SET state = v.v_state, tx_hash = v.v_hash, error_code = v.v_code,
                         error_message = v.v_message, data = v.v_data, finished_at = v.v_at, leg = v.v_leg
                     FROM v WHERE intent_executions.intent_id = ",
                )
                .push_bind(intent_id)
                .push(" AND intent_executions.seq = v.v_seq AND intent_executions.state = 'started' AND EXISTS (SELECT 1 FROM intents WHERE id = ")
                .push_bind(intent_id)
                .push(" AND lease_owner = ")
                .push_bind(owner)
                .push(") RETURNING seq");
                finished.extend(q.build_query_scalar::<i32>().fetch_all(&mut *tx).await.map_err(err)?);
            }
            let changed: Vec<bool> = seqs.iter().zip(&first).map(|(s, f)| *f && finished.contains(s)).collect();
            // The ended executions' audit events, written together after them.
            insert_events!(tx, ends.iter().zip(&changed).filter(|(_, c)| **c).map(|(e, _)| &e.event));
            tx.commit().await.map_err(err)?;
            Ok(changed)
        })
    }

    async fn open_legs(&self, skip: u32, limit: u32) -> Result<Vec<OpenLeg>, StoreError> {
        let open: Vec<(String, i32, i64)> = on_pool!(self, pool => sqlx::query_as(
            "SELECT intent_id, seq, finished_at FROM intent_executions
             WHERE leg = 'open' ORDER BY finished_at, intent_id, seq LIMIT $1 OFFSET $2",
        )
        .bind(i64::from(limit))
        .bind(i64::from(skip))
        .fetch_all(pool)
        .await
        .map_err(err)?);
        let mut ids: Vec<String> = open.iter().map(|(id, _, _)| id.clone()).collect();
        ids.sort();
        ids.dedup();
        let executions = self.list_executions_of(&ids).await?;
        let mut intents = std::collections::HashMap::new();
        for id in &ids {
            if let Some(intent) = self.get_intent(id).await? {
                intents.insert(id.clone(), intent);
            }
        }
        Ok(open
            .into_iter()
            .filter_map(|(id, seq, finished_at)| {
                let execution = executions
                    .iter()
                    .find(|e| e.intent_id == id && i64::from(e.seq) == i64::from(seq))?;
                Some(OpenLeg {
                    intent: intents.get(&id)?.clone(),
                    execution: execution.clone(),
                    finished_at,
                })
            })
            .collect())
    }

    async fn end_leg(
        &self,
        intent_id: &str,
        seq: u32,
        state: LegState,
        event: &AuditEvent,
    ) -> Result<bool, StoreError> {
        let seq = i32::try_from(seq).map_err(err)?;
        update_with_event!(
            self,
            sqlx::query(
                "UPDATE intent_executions SET leg = $3 WHERE intent_id = $1 AND seq = $2 AND leg = 'open'",
            )
            .bind(intent_id)
            .bind(seq)
            .bind(state.as_str()),
            event
        )
    }

    async fn finish_intent(
        &self,
        intent_id: &str,
        now: i64,
    ) -> Result<Option<IntentRecord>, StoreError> {
        on_writer!(self, pool => {
            let mut tx = pool.begin_write().await?;
            let settle = Settle { owner: String::new(), intents: vec![intent_id.to_owned()], done: Vec::new(), now };
            settle_and_accept!(tx, std::slice::from_ref(&settle), &[])?;
            let row = sqlx::query(concat!("SELECT ", intent_columns!(), " FROM intents WHERE id = $1"))
                .bind(intent_id)
                .fetch_optional(&mut *tx)
                .await
                .map_err(err)?;
            tx.commit().await.map_err(err)?;
            row.as_ref().map(intent_from_row).transpose()
        })
    }
    async fn hold_execution(
        &self,
        intent_id: &str,
        seq: u32,
        owner: &str,
        data: &str,
        until: i64,
    ) -> Result<bool, StoreError> {
        let seq = i32::try_from(seq).map_err(err)?;
        on_writer!(self, pool => {
            let mut tx = pool.begin_write().await?;
            let held = sqlx::query(
                "UPDATE intent_executions SET state = 'pending', started_at = NULL, data = $4
                 WHERE intent_id = $1 AND seq = $2 AND state = 'started'
                   AND EXISTS (SELECT 1 FROM intents WHERE id = $1 AND lease_owner = $3 AND status = 'queued')",
            )
            .bind(intent_id)
            .bind(seq)
            .bind(owner)
            .bind(data)
            .execute(&mut *tx)
            .await
            .map_err(err)?
            .rows_affected()
                == 1;
            if held {
                sqlx::query(
                    "UPDATE intents SET lease_owner = NULL, lease_until = $3 WHERE id = $1 AND lease_owner = $2",
                )
                .bind(intent_id)
                .bind(owner)
                .bind(until)
                .execute(&mut *tx)
                .await
                .map_err(err)?;
            }
            tx.commit().await.map_err(err)?;
            Ok(held)
        })
    }

    async fn end_order(&self, end: &OrderEnd) -> Result<bool, StoreError> {
        let seq = i32::try_from(end.seq).map_err(err)?;
        let f = &end.finish;
        on_writer!(self, pool => {
            let mut tx = pool.begin_write().await?;
            let ended = sqlx::query(
                "UPDATE intent_executions SET state = 'failed', tx_hash = $4, error_code = $5, error_message = $6,
                     data = $7, finished_at = $8
                 WHERE intent_id = $1 AND seq = $2
                   AND ((CAST($3 AS TEXT) IS NULL AND state = 'pending'
                         AND EXISTS (SELECT 1 FROM intents WHERE id = $1 AND status = 'queued'))
                     OR (state = 'started'
                         AND EXISTS (SELECT 1 FROM intents WHERE id = $1 AND lease_owner = $3 AND status = 'queued')))",
            )
            .bind(&end.intent_id)
            .bind(seq)
            .bind(end.owner.as_deref())
            .bind(&f.tx_hash)
            .bind(&f.error_code)
            .bind(&f.error_message)
            .bind(&f.data)
            .bind(end.now)
            .execute(&mut *tx)
            .await
            .map_err(err)?
            .rows_affected()
                == 1;
            if ended {
                sqlx::query(
                    "UPDATE agent_daily_usage
                     SET used_micros = CASE WHEN used_micros > $3 THEN used_micros - $3 ELSE 0 END
                     WHERE agent_id = $1 AND day = $2",
                )
                .bind(&end.agent_id)
                .bind(end.day)
                .bind(end.release_micros)
                .execute(&mut *tx)
                .await
                .map_err(err)?;
            }
            tx.commit().await.map_err(err)?;
            Ok(ended)
        })
    }

    async fn list_approvals(
        &self,
        account_id: &str,
        state: ApprovalState,
        limit: u32,
    ) -> Result<Vec<IntentRecord>, StoreError> {
        on_pool!(self, pool => {
            let rows = sqlx::query(concat!(
                "SELECT ", intent_columns!(),
                " FROM intents WHERE account_id = $1 AND approval_state = $2
                  ORDER BY approval_requested_at DESC, id DESC LIMIT $3"
            ))
            .bind(account_id)
            .bind(state.as_str())
            .bind(i64::from(limit))
            .fetch_all(pool)
            .await
            .map_err(err)?;
            rows.iter().map(intent_from_row).collect()
        })
    }

    async fn approve_intent(
        &self,
        intent_id: &str,
        account_id: &str,
        now: i64,
        event: &AuditEvent,
    ) -> Result<bool, StoreError> {
        update_with_event!(
            self,
            sqlx::query(
                "UPDATE intents SET approval_state = 'approved', approval_decided_at = $3
                 WHERE id = $1 AND account_id = $2 AND status = 'queued'
                   AND approval_state = 'pending' AND approval_expires_at > $3",
            )
            .bind(intent_id)
            .bind(account_id)
            .bind(now),
            event
        )
    }

    async fn end_approval(&self, end: &ApprovalEnd) -> Result<bool, StoreError> {
        on_writer!(self, pool => {
            let mut tx = pool.begin_write().await?;
            let ended = sqlx::query(
                "UPDATE intents SET approval_state = $3, approval_decided_at = $4, approval_reason = $5
                 WHERE id = $1 AND (CAST($2 AS TEXT) IS NULL OR account_id = $2)
                   AND status = 'queued' AND approval_state = 'pending'",
            )
            .bind(&end.intent_id)
            .bind(end.account_id.as_deref())
            .bind(end.state.as_str())
            .bind(end.now)
            .bind(end.reason.as_deref())
            .execute(&mut *tx)
            .await
            .map_err(err)?
            .rows_affected()
                == 1;
            if ended {
                sqlx::query(
                    "UPDATE intent_executions SET state = 'failed', error_code = $2, error_message = $3,
                         finished_at = $4
                     WHERE intent_id = $1 AND state = 'pending'",
                )
                .bind(&end.intent_id)
                .bind(&end.code)
                .bind(&end.message)
                .bind(end.now)
                .execute(&mut *tx)
                .await
                .map_err(err)?;
                sqlx::query(
                    "UPDATE agent_daily_usage
                     SET used_micros = CASE WHEN used_micros > $3 THEN used_micros - $3 ELSE 0 END
                     WHERE agent_id = $1 AND day = $2",
                )
                .bind(&end.agent_id)
                .bind(end.day)
                .bind(end.release_micros)
                .execute(&mut *tx)
                .await
                .map_err(err)?;
                let settle = Settle {
                    owner: String::new(),
                    intents: vec![end.intent_id.clone()],
                    done: Vec::new(),
                    now: end.now,
                };
                settle_and_accept!(tx, std::slice::from_ref(&settle), &[])?;
                insert_events!(tx, [&end.event]);
            }
            tx.commit().await.map_err(err)?;
            Ok(ended)
        })
    }

    async fn due_approvals(&self, now: i64, limit: u32) -> Result<Vec<IntentRecord>, StoreError> {
        on_pool!(self, pool => {
            let rows = sqlx::query(concat!(
                "SELECT ", intent_columns!(),
                " FROM intents WHERE approval_state = 'pending' AND approval_expires_at <= $1
                  ORDER BY approval_expires_at, id LIMIT $2"
            ))
            .bind(now)
            .bind(i64::from(limit))
            .fetch_all(pool)
            .await
            .map_err(err)?;
            rows.iter().map(intent_from_row).collect()
        })
    }

    async fn list_account_intents(
        &self,
        account_id: &str,
        limit: u32,
    ) -> Result<Vec<IntentRecord>, StoreError> {
        on_pool!(self, pool => {
            let rows = sqlx::query(concat!(
                "SELECT ", intent_columns!(),
                " FROM intents WHERE account_id = $1 ORDER BY created_at DESC, id DESC LIMIT $2"
            ))
            .bind(account_id)
            .bind(i64::from(limit))
            .fetch_all(pool)
            .await
            .map_err(err)?;
            rows.iter().map(intent_from_row).collect()
        })
    }

    async fn list_agent_intents(
        &self,
        agent_id: &str,
        action: &str,
        limit: u32,
    ) -> Result<Vec<IntentRecord>, StoreError> {
        on_pool!(self, pool => {
            let rows = sqlx::query(concat!(
                "SELECT ", intent_columns!(),
                " FROM intents WHERE agent_id = $1 AND action = $2 ORDER BY created_at DESC, id DESC LIMIT $3"
            ))
            .bind(agent_id)
            .bind(action)
            .bind(i64::from(limit))
            .fetch_all(pool)
            .await
            .map_err(err)?;
            rows.iter().map(intent_from_row).collect()
        })
    }
}
