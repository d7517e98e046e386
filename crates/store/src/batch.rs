//! The batcher (group commit): accepting drafts and settling ended reads, many in one transaction
//! and one commit. It reads and locks what the core's decisions need ([`acceptance::decide`],
//! [`CreditLedger`]), lets the core decide, and writes what it answers.

use actiongate_core::states::IntentStatus;
use std::time::Duration;

use actiongate_core::acceptance;
use actiongate_core::acceptance::{AgentNow, Snapshot};
use actiongate_core::ledger::CreditLedger;
use actiongate_core::states::ExecutionState;
use actiongate_core::store::{
    AcceptOutcome, CreditAccount, ExecutionFinish, IdempotencyRecord, IntentDraft, IntentRecord,
    StoreError, StoreErrorKind,
};
use sqlx::{Postgres, Row, Sqlite};

use crate::Backend;
use crate::error::{closed, corrupt, err};
use crate::rows::{CreditRow, credit_from, hash_from, intent_from_row, policy_from_row};
use crate::write::{BatchRows, BatchWriter};

/// The delegators a fan-out draft addresses ([`Snapshot::delegators`]): every delegator with an
/// active, unexpired delegation to the agent on the chain, once each however many delegations it
/// gave, oldest first (only `only_delegator` for a redemption).
macro_rules! delegators_of {
    ($tx:ident, $d:expr) => {{
        let d: &IntentDraft = $d;
        let delegators: Vec<String> = sqlx::query_scalar(concat!(
            "SELECT MIN(delegator) ",
            usable_delegations!(),
            " AND ($4 IS NULL OR lower(delegator) = lower($4))
             GROUP BY lower(delegator) ORDER BY MIN(created_at), lower(delegator)"
        ))
        .bind(&d.agent_id)
        .bind(i64::try_from(d.chain_id).map_err(err)?)
        .bind(d.now)
        .bind(&d.only_delegator)
        .fetch_all(&mut *$tx)
        .await
        .map_err(err)?;
        delegators
    }};
}

/// Adds `amount` to an account's balance with a ledger entry ([`CreditLedger::credit`]), inside the
/// open transaction `$tx`; evaluates to the account as it is then.
macro_rules! credit_account {
    ($tx:ident, $credit:expr) => {{
        let credit: Credit<'_> = $credit;
        let accounts = lock_accounts!($tx, std::iter::once(credit.account_id), credit.at);
        let mut ledger = CreditLedger::new(accounts);
        let account = ledger.credit(&credit).map_err(err)?;
        let (credits, ledger) = ledger.into_writes();
        let events = actiongate_core::audit::batch_events(&[], &[], &ledger, credit.at);
        let rows = BatchRows {
            credits,
            ledger,
            events,
            ..BatchRows::default()
        };
        BatchWriter::write_rows(&mut *$tx, &rows).await?;
        account
    }};
}

/// Locks the credit rows of `$ids` in account order (creating a missing one) and reads them.
macro_rules! lock_accounts {
    ($tx:ident, $ids:expr, $now:expr) => {{
        let mut ids: Vec<&str> = $ids.collect();
        ids.sort_unstable();
        ids.dedup();
        let mut accounts: std::collections::BTreeMap<&str, CreditAccount> =
            std::collections::BTreeMap::new();
        for id in ids {
            let row: Option<CreditRow> = sqlx::query_as(
                "UPDATE credit_accounts SET updated_at = $2 WHERE account_id = $1
                 RETURNING balance, reserved, free_day, free_used",
            )
            .bind(id)
            .bind($now)
            .fetch_optional(&mut *$tx)
            .await
            .map_err(err)?;
            let row = match row {
                Some(r) => r,
                None => sqlx::query_as(
                    "INSERT INTO credit_accounts (account_id, updated_at) VALUES ($1, $2)
                     RETURNING balance, reserved, free_day, free_used",
                )
                .bind(id)
                .bind($now)
                .fetch_one(&mut *$tx)
                .await
                .map_err(err)?,
            };
            accounts.insert(id, credit_from(row)?);
        }
        accounts
    }};
}

/// How a write transaction's SELECT locks the rows it reads: PostgreSQL locks rows as it goes; a
/// SQLite write transaction (`BEGIN IMMEDIATE`) holds the database's one write lock already.
pub(crate) trait RowLock {
    const FOR_UPDATE: &'static str;
}

impl RowLock for Sqlite {
    const FOR_UPDATE: &'static str = "";
}

impl RowLock for Postgres {
    const FOR_UPDATE: &'static str = " FOR UPDATE";
}

pub(crate) fn for_update<DB: sqlx::Database + RowLock>(
    _: &sqlx::Transaction<'_, DB>,
) -> &'static str {
    DB::FOR_UPDATE
}

/// Locks the intents `$ids` and reads the queued ones (a concurrent settle of the same intent
/// waits here, then finds it no longer queued and changes nothing): id -> (record, lease owner).
/// By primary key alone, and the status checked here: a `status = 'queued'` condition lets
/// PostgreSQL pick the partial index of queued intents, whose dead entries it then walks.
macro_rules! lock_queued_intents {
    ($tx:ident, $ids:expr) => {{
        let ids: &[String] = $ids;
        let mut intents: std::collections::HashMap<String, (IntentRecord, Option<String>)> =
            std::collections::HashMap::new();
        if !ids.is_empty() {
            let mut q = sqlx::QueryBuilder::new(concat!(
                "SELECT lease_owner, ",
                intent_columns!(),
                " FROM intents WHERE id IN ("
            ));
            let mut list = q.separated(", ");
            for id in ids {
                list.push_bind(id);
            }
            q.push(")").push(for_update(&$tx));
            for row in &q.build().fetch_all(&mut *$tx).await.map_err(err)? {
                let i = intent_from_row(row)?;
                if i.status == IntentStatus::Queued {
                    intents.insert(i.id.clone(), (i, row.try_get("lease_owner").map_err(err)?));
                }
            }
        }
        intents
    }};
}

/// The states of the executions of `$intents` (from [`lock_queued_intents`]), as they will be once
/// this batch's ended reads (`$reads`) are written: intent id -> states.
macro_rules! execution_states {
    ($tx:ident, $intents:expr, $reads:expr) => {{
        let intents: &std::collections::HashMap<String, (IntentRecord, Option<String>)> = $intents;
        let mut by_intent: std::collections::HashMap<String, Vec<ExecutionState>> =
            std::collections::HashMap::new();
        if !intents.is_empty() {
            let mut q = sqlx::QueryBuilder::new(
                "SELECT intent_id, seq, state FROM intent_executions WHERE intent_id IN (",
            );
            let mut list = q.separated(", ");
            for id in intents.keys() {
                list.push_bind(id);
            }
            q.push(")");
            let states: Vec<(String, i32, String)> =
                q.build_query_as().fetch_all(&mut *$tx).await.map_err(err)?;
            let ending: std::collections::HashMap<(&str, i64), ExecutionState> = $reads
                .iter()
                .map(|(id, seq, f, _): &(&str, u32, &ExecutionFinish, i64)| {
                    ((*id, i64::from(*seq)), f.state())
                })
                .collect();
            for (intent, seq, state) in states {
                let mut state: ExecutionState = state.parse().map_err(err)?;
                if let Some(ended) = ending.get(&(intent.as_str(), i64::from(seq))) {
                    state = state.record(*ended);
                }
                by_intent.entry(intent).or_default().push(state);
            }
        }
        by_intent
    }};
}

/// Reads what the acceptance of `$drafts` depends on ([`Snapshot`]) in a few statements, inside
/// the open transaction `$tx` whose credit rows are locked already: the agents' keys and policies,
/// the batch's idempotency keys, today's usage of its writers, and the delegators of its fan-outs.
macro_rules! read_snapshot {
    ($tx:ident, $drafts:expr) => {{
        let drafts: &[IntentDraft] = $drafts;
        let mut snapshot = Snapshot::default();
        // The agents' keys and policies now, to confirm what each draft was checked against.
        let mut q = sqlx::QueryBuilder::new(concat!(
            "SELECT a.id, a.key_hash, ",
            policy_columns!(),
            " FROM agents a LEFT JOIN agent_policies p ON p.agent_id = a.id WHERE a.id IN ("
        ));
        let mut agent_ids: Vec<&str> = drafts.iter().map(|d| d.agent_id.as_str()).collect();
        agent_ids.sort_unstable();
        agent_ids.dedup();
        let mut list = q.separated(", ");
        for id in &agent_ids {
            list.push_bind(*id);
        }
        q.push(")");
        for row in q.build().fetch_all(&mut *$tx).await.map_err(err)? {
            let id: String = row.try_get("id").map_err(err)?;
            let policy = policy_from_row(&row, &id)?;
            let key_hash = hash_from(row.try_get("key_hash").map_err(err)?)?;
            snapshot.agents.insert(id, AgentNow { key_hash, policy });
        }
        // Idempotency records of the batch's keys, joined to the batch's (agent, key) pairs so
        // that each pair is one lookup of the primary key (an OR of the pairs lets PostgreSQL
        // factor the agent out and scan all of its keys).
        let mut q = sqlx::QueryBuilder::new("WITH v (agent_id, key) AS (");
        q.push_values(drafts, |mut b, d| {
            b.push_bind(&d.agent_id).push_bind(&d.idempotency_key);
        });
        q.push(
            ") SELECT i.agent_id, i.key, i.request_hash, i.intent_id, i.created_at
             FROM v JOIN idempotency_keys i ON i.agent_id = v.agent_id AND i.key = v.key",
        );
        let rows: Vec<(String, String, Vec<u8>, String, i64)> =
            q.build_query_as().fetch_all(&mut *$tx).await.map_err(err)?;
        for (agent, key, hash, intent_id, created_at) in rows {
            let request_hash = <[u8; 32]>::try_from(hash)
                .map_err(|_| corrupt("a stored request hash is not 32 bytes"))?;
            let record = IdempotencyRecord {
                request_hash,
                intent_id,
                created_at,
            };
            snapshot
                .idempotency
                .entry(agent)
                .or_default()
                .insert(key, record);
        }
        // Today's usage of the agents with writes in the batch.
        let writers: Vec<&IntentDraft> = drafts.iter().filter(|d| d.is_write).collect();
        if !writers.is_empty() {
            let mut q = sqlx::QueryBuilder::new(
                "SELECT agent_id, day, used_micros FROM agent_daily_usage WHERE ",
            );
            for (i, d) in writers.iter().enumerate() {
                if i > 0 {
                    q.push(" OR ");
                }
                q.push("(agent_id = ")
                    .push_bind(&d.agent_id)
                    .push(" AND day = ")
                    .push_bind(d.day)
                    .push(")");
            }
            let rows: Vec<(String, i64, i64)> =
                q.build_query_as().fetch_all(&mut *$tx).await.map_err(err)?;
            for (agent, day, used) in rows {
                snapshot.usage.entry(agent).or_default().insert(day, used);
            }
        }
        for d in drafts.iter().filter(|d| d.fan_out) {
            let delegators = delegators_of!($tx, d);
            snapshot.delegators.insert(d.id.clone(), delegators);
        }
        snapshot
    }};
}

/// Intents to settle, once the outcomes of their reads in `done` (leased to `owner`) are recorded
/// ([`Store::finish_reads`]); `done` is empty for intents whose executions were recorded one by one
/// ([`Store::finish_intent`]).
pub(crate) struct Settle {
    pub(crate) owner: String,
    pub(crate) intents: Vec<String>,
    pub(crate) done: Vec<(String, u32, ExecutionFinish)>,
    pub(crate) now: i64,
}

pub(crate) type Reply = tokio::sync::oneshot::Sender<Result<AcceptOutcome, StoreError>>;
pub(crate) type SettleReply = tokio::sync::oneshot::Sender<Result<(), StoreError>>;

/// Work for the batcher, with where its answer goes.
pub(crate) enum Job {
    /// Boxed: a draft is ten times the size of a settle's handle.
    Accept(Box<IntentDraft>, Reply),
    Settle(Settle, SettleReply),
}

/// What the batcher found waiting.
#[derive(Default)]
pub(crate) struct Batch {
    pub(crate) settles: Vec<Settle>,
    pub(crate) settle_replies: Vec<SettleReply>,
    pub(crate) drafts: Vec<IntentDraft>,
    pub(crate) replies: Vec<Reply>,
}

impl Batch {
    fn push(&mut self, job: Job) {
        match job {
            Job::Accept(draft, reply) => {
                self.drafts.push(*draft);
                self.replies.push(reply);
            }
            Job::Settle(settle, reply) => {
                self.settles.push(settle);
                self.settle_replies.push(reply);
            }
        }
    }
}

/// Records the ended reads of `$settles` and settles their intents, then accepts `$drafts`, in the
/// open transaction `$tx` (either may be empty): the settled intents and the drafts share one lock
/// of their credit rows (taken in account order, so two processes' batches never wait on each other
/// in a cycle), and everything they write is decided in memory and written at the end
/// ([`BatchWriter`]: one statement on PostgreSQL). Evaluates to one outcome per draft. The one path
/// of every accept and settle: a batch, its fallbacks, and [`Store::finish_intent`].
macro_rules! settle_and_accept {
    ($tx:ident, $settles:expr, $drafts:expr) => {{
        let (settles, drafts): (&[Settle], &[IntentDraft]) = ($settles, $drafts);
        let result: Result<Vec<AcceptOutcome>, StoreError> = async {
            let now = settles
                .iter()
                .map(|s| s.now)
                .chain(drafts.iter().map(|d| d.now))
                .max()
                .unwrap_or(0);
            let ids: Vec<String> = settles
                .iter()
                .flat_map(|s| s.intents.iter().cloned())
                .collect();
            let intents = lock_queued_intents!($tx, &ids);
            let mut rows = BatchRows {
                finished_at: now,
                ..BatchRows::default()
            };
            // Only while each intent is still queued and leased to the owner recording it.
            for s in settles {
                for (id, seq, f) in &s.done {
                    if intents
                        .get(id)
                        .is_some_and(|(_, owner)| owner.as_deref() == Some(s.owner.as_str()))
                    {
                        rows.reads.push((id.as_str(), *seq, f, s.now));
                    }
                }
            }
            let accounts = lock_accounts!(
                $tx,
                intents
                    .values()
                    .map(|(i, _)| i.account_id.as_str())
                    .chain(drafts.iter().map(|d| d.account_id.as_str())),
                now
            );
            let mut ledger = CreditLedger::new(accounts);
            // Settled in the order given, each intent once.
            let states = execution_states!($tx, &intents, rows.reads);
            let mut settled = std::collections::HashSet::new();
            for id in &ids {
                let Some((intent, _)) = intents.get(id) else {
                    continue;
                };
                if !settled.insert(id.as_str()) {
                    continue;
                }
                let states = states.get(id).map(Vec::as_slice).unwrap_or_default();
                if let Some(status) = ledger.settle(intent, states, now).map_err(err)? {
                    rows.finished.push((id.as_str(), status));
                }
            }
            if !drafts.is_empty() {
                let snapshot = read_snapshot!($tx, drafts);
                rows.accepted = acceptance::decide(drafts, &snapshot, &mut ledger).map_err(err)?;
                for (agent, key) in &rows.accepted.replaced_keys {
                    sqlx::query("DELETE FROM idempotency_keys WHERE agent_id = $1 AND key = $2")
                        .bind(agent)
                        .bind(key)
                        .execute(&mut *$tx)
                        .await
                        .map_err(err)?;
                }
            }
            (rows.credits, rows.ledger) = ledger.into_writes();
            let ended: Vec<_> = rows
                .finished
                .iter()
                .filter_map(|(id, status)| intents.get(*id).map(|(i, _)| (i, *status)))
                .collect();
            rows.events = actiongate_core::audit::batch_events(
                &rows.accepted.intents,
                &ended,
                &rows.ledger,
                now,
            );
            BatchWriter::write_rows(&mut *$tx, &rows).await?;
            Ok(std::mem::take(&mut rows.accepted.outcomes))
        }
        .await;
        result
    }};
}

/// How many times a batch that met a busy database is tried whole.
pub(crate) const BATCH_ATTEMPTS: u64 = 3;

/// Runs a batch on the batcher's connection `$conn` (`$begin` opens a write transaction on it): the
/// settles and the drafts in one transaction and one commit (group commit), tried again when the
/// database was busy ([`BATCH_ATTEMPTS`]). Should that fail, it is rolled back whole, the settles run in a transaction of their own and each draft is accepted
/// inside its own savepoint, so that one draft's error leaves nothing while the others commit.
/// Evaluates to (the settles' result, one result per draft).
macro_rules! write_batch {
    ($conn:expr, $begin:literal, $settles:expr, $drafts:expr) => {{
        let (conn, settles, drafts): (_, &[Settle], &[IntentDraft]) = ($conn, $settles, $drafts);
        let mut attempts = 0;
        let together: Result<Vec<AcceptOutcome>, StoreError> = loop {
            attempts += 1;
            let started = std::time::Instant::now();
            let tried: Result<Vec<AcceptOutcome>, StoreError> = async {
                let mut tx = sqlx::Connection::begin_with(&mut *conn, $begin).await.map_err(err)?;
                let outcomes = settle_and_accept!(tx, settles, drafts)?;
                tx.commit().await.map_err(err)?;
                Ok(outcomes)
            }
            .await;
            if let Ok(outcomes) = &tried {
                let accepted = outcomes
                    .iter()
                    .filter(|o| matches!(o, AcceptOutcome::Accepted { .. }))
                    .count();
                actiongate_core::metrics::batch(settles.len() + drafts.len(), accepted, started.elapsed());
            }
            match tried {
                // A busy database (a lock another process held, a serialization failure) wrote
                // nothing: the same batch again, a few times, before it is split up.
                Err(e) if e.is_retryable() && attempts < BATCH_ATTEMPTS => {
                    tracing::debug!(error = %e, attempts, "batch busy; trying again");
                    tokio::time::sleep(Duration::from_millis(5 * attempts)).await;
                }
                other => break other,
            }
        };
        match together {
            Ok(outcomes) => (Ok(()), Ok(outcomes.into_iter().map(Ok).collect())),
            Err(e) => {
                tracing::warn!(error = %e, settles = settles.len(), drafts = drafts.len(), "batch failed; settling alone and accepting the drafts one by one");
                let settled: Result<(), StoreError> = async {
                    if settles.is_empty() {
                        return Ok(());
                    }
                    let mut tx = sqlx::Connection::begin_with(&mut *conn, $begin).await.map_err(err)?;
                    settle_and_accept!(tx, settles, &[])?;
                    tx.commit().await.map_err(err)
                }
                .await;
                let one_by_one: Result<Vec<Result<AcceptOutcome, StoreError>>, StoreError> = async {
                    if drafts.is_empty() {
                        return Ok(Vec::new());
                    }
                    let started = std::time::Instant::now();
                    let mut tx = sqlx::Connection::begin_with(&mut *conn, $begin).await.map_err(err)?;
                    // Lock accounts in one order (by id) in every transaction that takes several: no deadlock.
                    let mut order: Vec<usize> = (0..drafts.len()).collect();
                    order.sort_by(|a, b| drafts[*a].account_id.cmp(&drafts[*b].account_id));
                    let mut outcomes: Vec<Option<Result<AcceptOutcome, StoreError>>> = (0..drafts.len()).map(|_| None).collect();
                    for i in order {
                        let d = &drafts[i];
                        sqlx::query("SAVEPOINT draft").execute(&mut *tx).await.map_err(err)?;
                        let outcome = async { settle_and_accept!(tx, &[], std::slice::from_ref(d)) }.await.map(|mut o| o.remove(0));
                        if !matches!(outcome, Ok(AcceptOutcome::Accepted { .. })) {
                            sqlx::query("ROLLBACK TO SAVEPOINT draft").execute(&mut *tx).await.map_err(err)?;
                        }
                        sqlx::query("RELEASE SAVEPOINT draft").execute(&mut *tx).await.map_err(err)?;
                        outcomes[i] = Some(outcome);
                    }
                    tx.commit().await.map_err(err)?;
                    let accepted = outcomes
                        .iter()
                        .filter(|o| matches!(o, Some(Ok(AcceptOutcome::Accepted { .. }))))
                        .count();
                    actiongate_core::metrics::batch(drafts.len(), accepted, started.elapsed());
                    Ok(outcomes.into_iter().map(|o| o.unwrap_or_else(|| Err(StoreError::new(StoreErrorKind::Other, "draft skipped")))).collect())
                }
                .await;
                (settled, one_by_one)
            }
        }
    }};
}

/// Everything waiting (at least one job, up to 256); none once the store is gone.
pub(crate) async fn next_batch(jobs: &mut tokio::sync::mpsc::Receiver<Job>) -> Option<Batch> {
    let mut batch = Batch::default();
    batch.push(jobs.recv().await?);
    for _ in 1..256 {
        match jobs.try_recv() {
            Ok(job) => batch.push(job),
            Err(_) => break,
        }
    }
    Some(batch)
}

/// How a batch went ([`write_batch`]): the settles' result, and one result per draft.
pub(crate) type BatchResult = (
    Result<(), StoreError>,
    Result<Vec<Result<AcceptOutcome, StoreError>>, StoreError>,
);

/// Sends each job of a batch begun at `started` its answer.
pub(crate) fn answer(
    started: std::time::Instant,
    settle_replies: Vec<SettleReply>,
    replies: Vec<Reply>,
    (settled, accepted): BatchResult,
) {
    tracing::debug!(
        settles = settle_replies.len(),
        drafts = replies.len(),
        ms = started.elapsed().as_secs_f64() * 1e3,
        "batch written"
    );
    if let Err(e) = &settled {
        tracing::error!(error = %e, size = settle_replies.len(), "settling failed");
    }
    for reply in settle_replies {
        let _ = reply.send(settled.as_ref().map(|_| ()).map_err(StoreError::clone));
    }
    match accepted {
        Ok(outcomes) => {
            for (reply, outcome) in replies.into_iter().zip(outcomes) {
                let _ = reply.send(outcome);
            }
        }
        Err(e) => {
            tracing::error!(error = %e, size = replies.len(), "accept batch failed");
            for reply in replies {
                let _ = reply.send(Err(e.clone()));
            }
        }
    }
}

/// How many prepared statements the connection that runs the batches keeps: a batch's statements
/// have one text per batch size (up to 256), and preparing them again costs more than running them.
pub(crate) const BATCH_STATEMENT_CACHE: usize = 2048;

/// The one task that accepts intents and records ended reads: it takes every job that is waiting and
/// runs them together ([`write_batch`]). On SQLite it takes the writer's turn per batch; on
/// PostgreSQL it has a connection of its own, outside the pool (a pool's acquire and release each
/// cost a round trip), replaced after an error and closed when the pool closes.
pub(crate) async fn run_batcher(backend: Backend, mut jobs: tokio::sync::mpsc::Receiver<Job>) {
    match backend {
        Backend::Sqlite { writer, .. } => {
            while let Some(batch) = next_batch(&mut jobs).await {
                let Batch {
                    settles,
                    settle_replies,
                    drafts,
                    replies,
                } = batch;
                let started = std::time::Instant::now();
                let mut turn = writer.lock().await;
                let result = match turn.as_mut() {
                    Some(conn) => write_batch!(conn, "BEGIN IMMEDIATE", &settles, &drafts),
                    None => (Err(closed()), Err(closed())),
                };
                drop(turn);
                answer(started, settle_replies, replies, result);
            }
        }
        Backend::Postgres(pool) => {
            let options = pool
                .connect_options()
                .as_ref()
                .clone()
                .statement_cache_capacity(BATCH_STATEMENT_CACHE)
                .options([
                    // Every statement of a batch finds its rows by key. A table that grows by thousands of
                    // rows a second has no statistics yet for minutes (autovacuum analyzes it later), and
                    // the planner, seeing a few pages, scans all of them; it then does so at every batch
                    // as the table grows (measured: 1-4 ms per statement at a few thousand rows).
                    ("enable_seqscan", "off"),
                ]);
            let mut held: Option<sqlx::PgConnection> = None;
            while let Ok(Some(batch)) = pool.close_event().do_until(next_batch(&mut jobs)).await {
                let Batch {
                    settles,
                    settle_replies,
                    drafts,
                    replies,
                } = batch;
                let conn = match &mut held {
                    Some(conn) => Ok(conn),
                    None => sqlx::ConnectOptions::connect(&options)
                        .await
                        .map(|c| held.insert(c))
                        .map_err(err),
                };
                let started = std::time::Instant::now();
                let result = match conn {
                    Ok(conn) => write_batch!(conn, "BEGIN", &settles, &drafts),
                    Err(e) => (Err(e.clone()), Err(e)),
                };
                if result.0.is_err() || result.1.is_err() {
                    held = None;
                }
                answer(started, settle_replies, replies, result);
            }
            if let Some(conn) = held {
                let _ = sqlx::Connection::close(conn).await;
            }
        }
    }
}
