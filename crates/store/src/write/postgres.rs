//! PostgreSQL: every write of a batch in one statement.

use actiongate_core::store::StoreError;

use crate::error::{Failure, err};
use crate::new_id;
use crate::write::{BatchRows, BatchWriter};

/// Every write of a batch on PostgreSQL, in one statement: each table's rows are bound as arrays
/// (one per column) and written by a data-modifying `WITH` of its own, so that the batch costs one
/// round trip for its writes whatever it holds, and the statement has one text (prepared once per
/// connection). The parts touch different rows (the reads and intents that ended are not the ones
/// inserted). These tables have no foreign keys on PostgreSQL (migration 0010: a query per row each).
pub(crate) const PG_WRITE_ROWS: &str = "
WITH ended_reads AS (
    UPDATE intent_executions SET state = v.state, tx_hash = v.tx_hash, error_code = v.error_code,
        error_message = v.error_message, data = v.data, started_at = COALESCE(intent_executions.started_at, v.now),
        finished_at = v.now
    FROM unnest($1::text[], $2::int4[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::int8[])
        AS v (intent_id, seq, state, tx_hash, error_code, error_message, data, now)
    WHERE intent_executions.intent_id = v.intent_id AND intent_executions.seq = v.seq
      AND intent_executions.state IN ('pending', 'started')
), ended_intents AS (
    UPDATE intents SET status = v.status, finished_at = $9, lease_owner = NULL, lease_until = NULL
    FROM unnest($10::text[], $11::text[]) AS v (id, status)
    WHERE intents.id = v.id
), new_intents AS (
    INSERT INTO intents (id, agent_id, account_id, action, lane, params, chain_id, amount_micros,
        price_per_execution, reserved_credits, free_request, status, total, lease_owner, lease_until, created_at,
        approval_state, approval_requested_at, approval_expires_at)
    SELECT id, agent_id, account_id, action, lane, params, chain_id, amount_micros, price_per_execution,
        reserved_credits, free_request, 'queued', total, lease_owner, lease_until, created_at,
        CASE WHEN approval_expires_at IS NULL THEN NULL ELSE 'pending' END,
        CASE WHEN approval_expires_at IS NULL THEN NULL ELSE created_at END, approval_expires_at
    FROM unnest($12::text[], $13::text[], $14::text[], $15::text[], $16::text[], $17::text[], $18::int8[], $19::int8[],
        $20::int8[], $21::int8[], $22::bool[], $23::int4[], $24::text[], $25::int8[], $26::int8[], $55::int8[])
        AS v (id, agent_id, account_id, action, lane, params, chain_id, amount_micros, price_per_execution,
            reserved_credits, free_request, total, lease_owner, lease_until, created_at, approval_expires_at)
), new_keys AS (
    INSERT INTO idempotency_keys (agent_id, key, request_hash, intent_id, created_at)
    SELECT * FROM unnest($13::text[], $27::text[], $28::bytea[], $12::text[], $26::int8[])
), new_executions AS (
    INSERT INTO intent_executions (intent_id, seq, execution_key, user_did, wallet_address, chain_id, state)
    SELECT intent_id, seq, execution_key, user_did, wallet_address, chain_id, 'pending'
    FROM unnest($29::text[], $30::int4[], $31::text[], $32::text[], $33::text[], $34::int8[])
        AS v (intent_id, seq, execution_key, user_did, wallet_address, chain_id)
), usage AS (
    INSERT INTO agent_daily_usage (agent_id, day, used_micros)
    SELECT * FROM unnest($35::text[], $36::int8[], $37::int8[])
    ON CONFLICT (agent_id, day) DO UPDATE SET used_micros = agent_daily_usage.used_micros + excluded.used_micros
), credits AS (
    UPDATE credit_accounts SET balance = v.balance, reserved = v.reserved, free_day = v.free_day, free_used = v.free_used
    FROM unnest($38::text[], $39::int8[], $40::int8[], $41::int8[], $42::int4[]) AS v (account_id, balance, reserved, free_day, free_used)
    WHERE credit_accounts.account_id = v.account_id
), ledger AS (
    INSERT INTO credit_ledger (id, account_id, agent_id, kind, reason, intent_id, balance_before, balance_after,
        reserved_before, reserved_after, created_at, invoice_id)
    SELECT * FROM unnest($43::text[], $44::text[], $45::text[], $46::text[], $47::text[], $48::text[], $49::int8[],
        $50::int8[], $51::int8[], $52::int8[], $53::int8[], $54::text[])
), events AS (
    INSERT INTO audit_events (account_id, at, kind, actor, subject, code, data)
    SELECT * FROM unnest($56::text[], $57::int8[], $58::text[], $59::text[], $60::text[], $61::text[], $62::text[])
)
SELECT 1";

/// PostgreSQL: the one statement [`PG_WRITE_ROWS`] (a statement per table costs a round trip each,
/// a wait for the server's process to be scheduled on a busy machine, with the credit rows locked).
impl BatchWriter for sqlx::PgConnection {
    async fn write_rows(&mut self, rows: &BatchRows<'_>) -> Result<(), StoreError> {
        fn column<'r, T, U>(items: &'r [T], f: impl FnMut(&'r T) -> U) -> Vec<U> {
            items.iter().map(f).collect()
        }
        fn int<T, U: TryFrom<T>>(v: T) -> Result<U, StoreError>
        where
            Failure: From<U::Error>,
        {
            U::try_from(v).map_err(err)
        }
        fn ints<'r, T, U: TryFrom<V>, V>(
            items: &'r [T],
            f: impl Fn(&'r T) -> V,
        ) -> Result<Vec<U>, StoreError>
        where
            Failure: From<U::Error>,
        {
            items.iter().map(|t| int(f(t))).collect()
        }
        let (reads, ledger) = (&rows.reads[..], &rows.ledger[..]);
        let (intents, execs) = (&rows.accepted.intents[..], &rows.accepted.executions[..]);
        let usage = &rows.accepted.usage[..];
        let events = &rows.events[..];
        let seqs: Vec<i32> = ints(reads, |r| r.1)?;
        let intent_chains: Vec<i64> = ints(intents, |i| i.draft.chain_id)?;
        let totals: Vec<i32> = ints(intents, |i| i.total)?;
        let exec_seqs: Vec<i32> = ints(execs, |e| e.seq)?;
        let exec_chains: Vec<i64> = ints(execs, |e| e.chain_id)?;
        let free_used: Vec<i32> = ints(&rows.credits, |c| c.1.free_used)?;
        sqlx::query(PG_WRITE_ROWS)
            .bind(column(reads, |r| r.0))
            .bind(seqs)
            .bind(column(reads, |r| r.2.state().as_str()))
            .bind(column(reads, |r| r.2.tx_hash.as_deref()))
            .bind(column(reads, |r| r.2.error_code.as_deref()))
            .bind(column(reads, |r| r.2.error_message.as_deref()))
            .bind(column(reads, |r| r.2.data.as_deref()))
            .bind(column(reads, |r| r.3))
            .bind(rows.finished_at)
            .bind(column(&rows.finished, |f| f.0))
            .bind(column(&rows.finished, |f| f.1.as_str()))
            .bind(column(intents, |i| i.draft.id.as_str()))
            .bind(column(intents, |i| i.draft.agent_id.as_str()))
            .bind(column(intents, |i| i.draft.account_id.as_str()))
            .bind(column(intents, |i| i.draft.action.as_str()))
            .bind(column(intents, |i| i.draft.lane.as_str()))
            .bind(column(intents, |i| i.draft.params.as_str()))
            .bind(intent_chains)
            .bind(column(intents, |i| i.draft.amount_micros))
            .bind(column(intents, |i| i.draft.price_per_execution))
            .bind(column(intents, |i| i.reserved_credits))
            .bind(column(intents, |i| i.free_request))
            .bind(totals)
            .bind(column(intents, |i| {
                i.draft.lease.as_ref().map(|(o, _)| o.as_str())
            }))
            .bind(column(intents, |i| i.draft.lease.as_ref().map(|(_, u)| *u)))
            .bind(column(intents, |i| i.draft.now))
            .bind(column(intents, |i| i.draft.idempotency_key.as_str()))
            .bind(column(intents, |i| i.draft.request_hash.to_vec()))
            .bind(column(execs, |e| e.intent_id))
            .bind(exec_seqs)
            .bind(column(execs, |e| e.execution_key.as_str()))
            .bind(column(execs, |e| e.user.user_did.as_str()))
            .bind(column(execs, |e| e.user.wallet_address.as_str()))
            .bind(exec_chains)
            .bind(column(usage, |u| u.0.as_str()))
            .bind(column(usage, |u| u.1))
            .bind(column(usage, |u| u.2))
            .bind(column(&rows.credits, |c| c.0))
            .bind(column(&rows.credits, |c| c.1.balance))
            .bind(column(&rows.credits, |c| c.1.reserved))
            .bind(column(&rows.credits, |c| c.1.free_day))
            .bind(free_used)
            .bind(column(ledger, |_| new_id()))
            .bind(column(ledger, |l| l.account_id))
            .bind(column(ledger, |l| l.agent_id))
            .bind(column(ledger, |l| l.kind.as_str()))
            .bind(column(ledger, |l| l.reason.as_str()))
            .bind(column(ledger, |l| l.intent_id))
            .bind(column(ledger, |l| l.before.balance))
            .bind(column(ledger, |l| l.after.balance))
            .bind(column(ledger, |l| l.before.reserved))
            .bind(column(ledger, |l| l.after.reserved))
            .bind(column(ledger, |l| l.at))
            .bind(column(ledger, |l| l.invoice_id))
            .bind(column(intents, |i| i.draft.approval_expires_at))
            .bind(column(events, |e| e.account_id.as_deref()))
            .bind(column(events, |e| e.at))
            .bind(column(events, |e| e.kind.as_str()))
            .bind(column(events, |e| e.actor.as_str()))
            .bind(column(events, |e| e.subject.as_str()))
            .bind(column(events, |e| e.code.as_deref()))
            .bind(column(events, |e| e.data.as_str()))
            .execute(self)
            .await
            .map_err(err)?;
        Ok(())
    }
}
