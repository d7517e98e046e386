//! The [`Store`] port on SQLite (the embedded default, WAL) and PostgreSQL (several gateway
//! processes on one database), chosen by URL scheme. Each backend has its own migrations folder;
//! the SQL of the queries is shared (both accept `$n` placeholders), and both backends pass the same
//! contract tests in `tests/contract.rs`.

use std::str::FromStr;
use std::time::Duration;

use actiongate_core::acceptance::{self, Acceptance, AgentNow, Snapshot};
use actiongate_core::crypto::SecretHash;
use actiongate_core::ledger::{Credit, CreditLedger, LedgerRow};
use actiongate_core::states::{ExecutionState, IntentStatus, LedgerKind};
use actiongate_core::store::{
    AcceptOutcome, AgentRecord, ChainTxRecord, ConsumeOutcome, CreditAccount, DelegationRecord,
    EmailChallenge, ExecutionFinish, ExecutionRecord, IdempotencyRecord, IntentDraft, IntentRecord,
    InvoiceRecord, LedgerEntry, NewAgent, Onboarding, OnboardingOutcome, PersonhoodChallenge,
    PersonhoodEffect, PersonhoodOutcome, PolicyRecord, SessionRecord, SettleOutcome, SignedTx,
    Store, StoreError, StoreErrorKind,
};
use async_trait::async_trait;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteConnection, SqliteJournalMode, SqlitePool, SqlitePoolOptions,
    SqliteSynchronous,
};
use sqlx::{Postgres, Row, Sqlite};

mod error;

use error::{Failure, closed, corrupt, err};

static SQLITE_MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/sqlite");
static POSTGRES_MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/postgres");

#[derive(Clone)]
enum Backend {
    /// SQLite has one writer: every write of the process, the batcher's included, runs on one
    /// connection taken in turn (a fair queue in the process, instead of SQLite's busy handler, and
    /// no pool round trips); reads use the pool.
    Sqlite {
        read: SqlitePool,
        writer: std::sync::Arc<tokio::sync::Mutex<Option<SqliteConnection>>>,
    },
    Postgres(PgPool),
}

/// Runs the same body against whichever pool is configured. The body is compiled once per backend,
/// so query builders and rows keep their concrete types.
macro_rules! on_pool {
    ($self:expr, $pool:ident => $body:expr) => {
        match &$self.backend {
            Backend::Sqlite { read: $pool, .. } => $body,
            Backend::Postgres($pool) => $body,
        }
    };
}

/// As [`on_pool`], for statements that write.
macro_rules! on_writer {
    ($self:expr, $pool:ident => $body:expr) => {
        match &$self.backend {
            Backend::Sqlite { writer, .. } => {
                let mut turn = writer.lock().await;
                let $pool: &mut SqliteConnection = turn.as_mut().ok_or_else(closed)?;
                $body
            }
            Backend::Postgres($pool) => $body,
        }
    };
}

/// How each backend opens a transaction that will write, and the few statements whose text differs;
/// implemented by what [`on_writer`] hands its body.
trait Dialect<'c>: Sized {
    type Db: sqlx::Database;
    /// SQLite takes the write lock at once (`BEGIN IMMEDIATE`), so that a transaction that reads
    /// first never fails to upgrade; PostgreSQL locks rows as it goes.
    async fn begin_write(self) -> Result<sqlx::Transaction<'c, Self::Db>, StoreError>;
    /// Leases up to `$4` of the oldest runnable intents.
    fn claim_many_sql(&self) -> &'static str;
}

macro_rules! claim_many_sql {
    ($lock:literal) => {
        concat!(
            "UPDATE intents SET lease_owner = $1, lease_until = $2 WHERE id IN (",
            "SELECT id FROM intents WHERE status = 'queued' AND (lease_until IS NULL OR lease_until < $3) ",
            "ORDER BY created_at, id LIMIT $4", $lock, ") RETURNING ", intent_columns!()
        )
    };
}

macro_rules! intent_columns {
    () => {
        "id, agent_id, account_id, action, lane, params, chain_id, amount_micros, price_per_execution, \
         reserved_credits, free_request, status, total, created_at, finished_at"
    };
}

/// The stored policy joined to an agent row (`LEFT JOIN agent_policies`, its `updated_at` as
/// `policy_updated_at`): none when the agent has never had one stored.
fn policy_from_row<R: Row>(row: &R, agent_id: &str) -> Result<Option<PolicyRecord>, StoreError>
where
    for<'a> &'a str: sqlx::ColumnIndex<R>,
    Option<String>: for<'r> sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    Option<i64>: for<'r> sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
{
    let Some(allowed) = row
        .try_get::<Option<String>, _>("allowed_actions")
        .map_err(err)?
    else {
        return Ok(None);
    };
    Ok(Some(PolicyRecord {
        agent_id: agent_id.to_owned(),
        allowed_actions: serde_json::from_str(&allowed).map_err(err)?,
        daily_limit_micros: row
            .try_get::<Option<i64>, _>("daily_limit_micros")
            .map_err(err)?
            .unwrap_or_default(),
        max_per_action_micros: row.try_get("max_per_action_micros").map_err(err)?,
        updated_at: row
            .try_get::<Option<i64>, _>("policy_updated_at")
            .map_err(err)?
            .unwrap_or_default(),
    }))
}

/// The policy columns [`policy_from_row`] reads, from `agent_policies p`.
macro_rules! policy_columns {
    () => {
        "p.allowed_actions, p.daily_limit_micros, p.max_per_action_micros, p.updated_at AS policy_updated_at"
    };
}

impl<'c> Dialect<'c> for &'c mut SqliteConnection {
    type Db = Sqlite;
    async fn begin_write(self) -> Result<sqlx::Transaction<'c, Sqlite>, StoreError> {
        sqlx::Connection::begin_with(self, "BEGIN IMMEDIATE")
            .await
            .map_err(err)
    }
    fn claim_many_sql(&self) -> &'static str {
        claim_many_sql!("")
    }
}

impl<'c> Dialect<'c> for &'c PgPool {
    type Db = Postgres;
    async fn begin_write(self) -> Result<sqlx::Transaction<'c, Postgres>, StoreError> {
        self.begin().await.map_err(err)
    }
    fn claim_many_sql(&self) -> &'static str {
        claim_many_sql!(" FOR UPDATE SKIP LOCKED")
    }
}

fn intent_from_row<R: Row>(row: &R) -> Result<IntentRecord, StoreError>
where
    for<'a> &'a str: sqlx::ColumnIndex<R>,
    String: for<'r> sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    i64: for<'r> sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    i32: for<'r> sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    bool: for<'r> sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    Option<i64>: for<'r> sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
{
    let chain: i64 = row.try_get("chain_id").map_err(err)?;
    let total: i32 = row.try_get("total").map_err(err)?;
    Ok(IntentRecord {
        id: row.try_get("id").map_err(err)?,
        agent_id: row.try_get("agent_id").map_err(err)?,
        account_id: row.try_get("account_id").map_err(err)?,
        action: row.try_get("action").map_err(err)?,
        lane: row.try_get("lane").map_err(err)?,
        params: row.try_get("params").map_err(err)?,
        chain_id: u64::try_from(chain).map_err(err)?,
        amount_micros: row.try_get("amount_micros").map_err(err)?,
        price_per_execution: row.try_get("price_per_execution").map_err(err)?,
        reserved_credits: row.try_get("reserved_credits").map_err(err)?,
        free_request: row.try_get("free_request").map_err(err)?,
        status: row.try_get("status").map_err(err)?,
        total: u32::try_from(total).map_err(err)?,
        created_at: row.try_get("created_at").map_err(err)?,
        finished_at: row.try_get("finished_at").map_err(err)?,
    })
}

/// Writes ledger rows inside the open transaction `$tx`, in one statement.
macro_rules! write_ledger {
    ($tx:ident, $rows:expr) => {{
        let rows: &[LedgerRow<'_>] = $rows;
        if !rows.is_empty() {
            let mut q = sqlx::QueryBuilder::new(
                "INSERT INTO credit_ledger (id, account_id, agent_id, kind, reason, intent_id,
                     balance_before, balance_after, reserved_before, reserved_after, created_at,
                     invoice_id) ",
            );
            q.push_values(rows, |mut b, r| {
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
            q.build().execute(&mut *$tx).await.map_err(err)?;
        }
    }};
}

fn new_id() -> String {
    uuid::Uuid::now_v7().to_string()
}

/// Inserts an agent and its policy inside the open transaction `$tx`.
macro_rules! insert_agent_with_policy {
    ($tx:ident, $agent:expr, $policy:expr, $allowed:expr) => {{
        let (a, p) = ($agent, $policy);
        sqlx::query(
            "INSERT INTO agents (id, account_id, name, key_hash, wallet_address, wallet_sealed, created_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(&a.record.id)
        .bind(&a.record.account_id)
        .bind(&a.record.name)
        .bind(a.key_hash.0.to_vec())
        .bind(&a.record.wallet_address)
        .bind(&a.wallet_sealed)
        .bind(a.record.created_at)
        .execute(&mut *$tx)
        .await
        .map_err(err)?;
        sqlx::query(
            "INSERT INTO agent_policies (agent_id, allowed_actions, daily_limit_micros, max_per_action_micros, updated_at)
             VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(&p.agent_id)
        .bind($allowed)
        .bind(p.daily_limit_micros)
        .bind(p.max_per_action_micros)
        .bind(p.updated_at)
        .execute(&mut *$tx)
        .await
        .map_err(err)?;
    }};
}

/// The delegations of agent `$1` on chain `$2` that are active and unexpired at `$3` (the fan-out
/// gate: the users a submit addresses, the preflight's count, the delegation an execution runs under).
macro_rules! usable_delegations {
    () => {
        "FROM delegations WHERE agent_id = $1 AND chain_id = $2 AND status = 'active' AND (expires_at IS NULL OR expires_at > $3)"
    };
}

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

macro_rules! delegation_columns {
    () => {
        "hash, agent_id, delegator, chain_id, status, created_at, expires_at, body"
    };
}

macro_rules! invoice_columns {
    () => {
        "id, sku, credits, amount_atomic, payer, account_id, agent_id, chain_id, token, recipient, created_at, expires_at, paid_at, tx_hash"
    };
}

type InvoiceRow = (
    String,
    String,
    i64,
    i64,
    String,
    Option<String>,
    Option<String>,
    i64,
    String,
    String,
    i64,
    i64,
    Option<i64>,
    Option<String>,
);

fn invoice_from(row: InvoiceRow) -> Result<InvoiceRecord, StoreError> {
    let (
        id,
        sku,
        credits,
        amount_atomic,
        payer,
        account_id,
        agent_id,
        chain,
        token,
        recipient,
        created_at,
        expires_at,
        paid_at,
        tx_hash,
    ) = row;
    Ok(InvoiceRecord {
        id,
        sku,
        credits,
        amount_atomic,
        payer,
        account_id,
        agent_id,
        chain_id: u64::try_from(chain).map_err(err)?,
        token,
        recipient,
        created_at,
        expires_at,
        paid_at,
        tx_hash,
    })
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
        let rows = BatchRows {
            credits,
            ledger,
            ..BatchRows::default()
        };
        BatchWriter::write_rows(&mut *$tx, &rows).await?;
        account
    }};
}

macro_rules! chain_tx_columns {
    () => {
        "chain_id, wallet, nonce, execution_key, idx, state, tx_hash, raw_tx, prior_hashes, receipt_status, updated_at"
    };
}

type ChainTxRow = (
    i64,
    String,
    i64,
    String,
    i64,
    String,
    Option<String>,
    Option<Vec<u8>>,
    String,
    Option<i64>,
    i64,
);

fn chain_tx_from(row: ChainTxRow) -> Result<ChainTxRecord, StoreError> {
    let (
        chain,
        wallet,
        nonce,
        execution_key,
        idx,
        state,
        tx_hash,
        raw_tx,
        prior,
        receipt_status,
        updated_at,
    ) = row;
    Ok(ChainTxRecord {
        chain_id: u64::try_from(chain).map_err(err)?,
        wallet,
        nonce: u64::try_from(nonce).map_err(err)?,
        execution_key,
        idx: u32::try_from(idx).map_err(err)?,
        state,
        tx_hash,
        raw_tx,
        prior_hashes: prior
            .split(',')
            .filter(|h| !h.is_empty())
            .map(str::to_owned)
            .collect(),
        receipt_status,
        updated_at,
    })
}

macro_rules! challenge_columns {
    () => {
        "nonce, kind, account_id, subject, action, signal, chain_id, challenge_id, idempotency_key, details, \
         created_at, expires_at, used_at"
    };
}

type ChallengeRow = (
    String,
    String,
    String,
    String,
    String,
    String,
    i64,
    Option<String>,
    Option<String>,
    Option<String>,
    i64,
    i64,
    Option<i64>,
);

fn challenge_from(row: ChallengeRow) -> Result<PersonhoodChallenge, StoreError> {
    let (
        nonce,
        kind,
        account_id,
        subject,
        action,
        signal,
        chain,
        challenge_id,
        idempotency_key,
        details,
        created_at,
        expires_at,
        used_at,
    ) = row;
    Ok(PersonhoodChallenge {
        nonce,
        kind,
        account_id,
        subject,
        action,
        signal,
        chain_id: u64::try_from(chain).map_err(err)?,
        challenge_id,
        idempotency_key,
        details,
        created_at,
        expires_at,
        used_at,
    })
}

/// A credit row as read: (balance, reserved, free_day, free_used).
type CreditRow = (i64, i64, i64, i32);

fn credit_from(row: CreditRow) -> Result<CreditAccount, StoreError> {
    let (balance, reserved, free_day, free_used) = row;
    Ok(CreditAccount {
        balance,
        reserved,
        free_day,
        free_used: u32::try_from(free_used).map_err(err)?,
    })
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
trait RowLock {
    const FOR_UPDATE: &'static str;
}

impl RowLock for Sqlite {
    const FOR_UPDATE: &'static str = "";
}

impl RowLock for Postgres {
    const FOR_UPDATE: &'static str = " FOR UPDATE";
}

fn for_update<DB: sqlx::Database + RowLock>(_: &sqlx::Transaction<'_, DB>) -> &'static str {
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
                if i.status == "queued" {
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

/// Everything a batch writes, decided in memory by the core ([`CreditLedger::settle`],
/// [`acceptance::decide`]) and written at its end by [`BatchWriter::write_rows`], inside the
/// batch's transaction.
#[derive(Default)]
struct BatchRows<'a> {
    /// Reads that ended: (intent, seq, how, when), each written only if it has not ended already.
    /// Their intents are locked by the transaction, queued, and leased to the owner recording them.
    /// Reads are side-effect free, so they are never marked started first.
    reads: Vec<(&'a str, u32, &'a ExecutionFinish, i64)>,
    /// Intents that ended (locked by the transaction, and queued), with their status.
    finished: Vec<(&'a str, IntentStatus)>,
    /// When the intents of `finished` ended (the batch's time).
    finished_at: i64,
    /// The intents, executions and daily usage the accepted drafts write.
    accepted: Acceptance<'a>,
    /// Credit rows that changed, as they are now.
    credits: Vec<(&'a str, CreditAccount)>,
    ledger: Vec<LedgerRow<'a>>,
}

/// Writes a batch's rows ([`BatchRows`]) on a connection inside its open transaction.
trait BatchWriter {
    async fn write_rows(&mut self, rows: &BatchRows<'_>) -> Result<(), StoreError>;
}

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
                     price_per_execution, reserved_credits, free_request, status, total, lease_owner, lease_until, created_at) ",
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
                        .push_bind(&d.lane)
                        .push_bind(&d.params)
                        .push_bind(chain_id)
                        .push_bind(d.amount_micros)
                        .push_bind(d.price_per_execution)
                        .push_bind(i.reserved_credits)
                        .push_bind(i.free_request)
                        .push_bind(IntentStatus::Queued.as_str())
                        .push_bind(i64::from(i.total))
                        .push_bind(d.lease.as_ref().map(|(o, _)| o.as_str()))
                        .push_bind(d.lease.as_ref().map(|(_, u)| *u))
                        .push_bind(d.now);
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
        write_ledger!(conn, &rows.ledger);
        Ok(())
    }
}

/// Every write of a batch on PostgreSQL, in one statement: each table's rows are bound as arrays
/// (one per column) and written by a data-modifying `WITH` of its own, so that the batch costs one
/// round trip for its writes whatever it holds, and the statement has one text (prepared once per
/// connection). The parts touch different rows (the reads and intents that ended are not the ones
/// inserted). These tables have no foreign keys on PostgreSQL (migration 0010: a query per row each).
const PG_WRITE_ROWS: &str = "
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
        price_per_execution, reserved_credits, free_request, status, total, lease_owner, lease_until, created_at)
    SELECT id, agent_id, account_id, action, lane, params, chain_id, amount_micros, price_per_execution,
        reserved_credits, free_request, 'queued', total, lease_owner, lease_until, created_at
    FROM unnest($12::text[], $13::text[], $14::text[], $15::text[], $16::text[], $17::text[], $18::int8[], $19::int8[],
        $20::int8[], $21::int8[], $22::bool[], $23::int4[], $24::text[], $25::int8[], $26::int8[])
        AS v (id, agent_id, account_id, action, lane, params, chain_id, amount_micros, price_per_execution,
            reserved_credits, free_request, total, lease_owner, lease_until, created_at)
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
            .execute(self)
            .await
            .map_err(err)?;
        Ok(())
    }
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
            snapshot.idempotency.insert((agent, key), record);
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
                snapshot.usage.insert((agent, day), used);
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
struct Settle {
    owner: String,
    intents: Vec<String>,
    done: Vec<(String, u32, ExecutionFinish)>,
    now: i64,
}

type Reply = tokio::sync::oneshot::Sender<Result<AcceptOutcome, StoreError>>;
type SettleReply = tokio::sync::oneshot::Sender<Result<(), StoreError>>;

/// Work for the batcher, with where its answer goes.
enum Job {
    /// Boxed: a draft is ten times the size of a settle's handle.
    Accept(Box<IntentDraft>, Reply),
    Settle(Settle, SettleReply),
}

/// What the batcher found waiting.
#[derive(Default)]
struct Batch {
    settles: Vec<Settle>,
    settle_replies: Vec<SettleReply>,
    drafts: Vec<IntentDraft>,
    replies: Vec<Reply>,
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
            BatchWriter::write_rows(&mut *$tx, &rows).await?;
            Ok(std::mem::take(&mut rows.accepted.outcomes))
        }
        .await;
        result
    }};
}

/// How many times a batch that met a busy database is tried whole.
const BATCH_ATTEMPTS: u64 = 3;

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
            let tried: Result<Vec<AcceptOutcome>, StoreError> = async {
                let mut tx = sqlx::Connection::begin_with(&mut *conn, $begin).await.map_err(err)?;
                let outcomes = settle_and_accept!(tx, settles, drafts)?;
                tx.commit().await.map_err(err)?;
                Ok(outcomes)
            }
            .await;
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
                    Ok(outcomes.into_iter().map(|o| o.unwrap_or_else(|| Err(StoreError::new(StoreErrorKind::Other, "draft skipped")))).collect())
                }
                .await;
                (settled, one_by_one)
            }
        }
    }};
}

/// Everything waiting (at least one job, up to 256); none once the store is gone.
async fn next_batch(jobs: &mut tokio::sync::mpsc::Receiver<Job>) -> Option<Batch> {
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
type BatchResult = (
    Result<(), StoreError>,
    Result<Vec<Result<AcceptOutcome, StoreError>>, StoreError>,
);

/// Sends each job of a batch begun at `started` its answer.
fn answer(
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

/// How often [`checkpoint_wal`] runs. A checkpoint writes the pages changed since the last one to
/// their places in the database file and syncs it, and a commit whose WAL sync meets that sync waits
/// for it: the fewer pages a checkpoint has, the shorter the wait. Measured at 3400 submits/s: every
/// 100 ms, checkpoints of up to 24 ms (a few thousand pages, many of them random: idempotency keys)
/// and batches stalled as long; every 10 ms, checkpoints of 3-10 ms. An idle checkpoint (nothing new
/// in the WAL) writes and syncs nothing.
const CHECKPOINT_EVERY: Duration = Duration::from_millis(10);

/// Copies the SQLite WAL back into the database file every [`CHECKPOINT_EVERY`], on a read
/// connection, without waiting for readers or the writer (`PASSIVE`): the writer's commits then only
/// append to the WAL and sync it. Left to SQLite's automatic checkpoint, the commit that crosses
/// 1000 pages copies and syncs them all (measured: commits of 15-35 ms every few batches under
/// load). Ends when the pool closes or the store is dropped (its writer gone).
async fn checkpoint_wal(
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

/// How many prepared statements the connection that runs the batches keeps: a batch's statements
/// have one text per batch size (up to 256), and preparing them again costs more than running them.
const BATCH_STATEMENT_CACHE: usize = 2048;

/// The one task that accepts intents and records ended reads: it takes every job that is waiting and
/// runs them together ([`write_batch`]). On SQLite it takes the writer's turn per batch; on
/// PostgreSQL it has a connection of its own, outside the pool (a pool's acquire and release each
/// cost a round trip), replaced after an error and closed when the pool closes.
async fn run_batcher(backend: Backend, mut jobs: tokio::sync::mpsc::Receiver<Job>) {
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

/// A SQL store.
pub struct SqlStore {
    backend: Backend,
    /// Where intent drafts go to be accepted, and ended reads to be recorded, in batches (one
    /// commit for all that wait).
    batcher: tokio::sync::mpsc::Sender<Job>,
}

/// Which backend a URL names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendKind {
    Sqlite,
    Postgres,
}

impl BackendKind {
    pub fn of_url(url: &str) -> Result<Self, StoreError> {
        if url.starts_with("sqlite:") {
            Ok(Self::Sqlite)
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Ok(Self::Postgres)
        } else {
            Err(StoreError::new(
                StoreErrorKind::Other,
                "database URL must start with sqlite:// or postgres://",
            ))
        }
    }
}

impl SqlStore {
    /// Gives the batcher a job and waits for its answer.
    async fn batch<T>(
        &self,
        job: impl FnOnce(tokio::sync::oneshot::Sender<Result<T, StoreError>>) -> Job,
    ) -> Result<T, StoreError> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        if self.batcher.send(job(reply)).await.is_ok()
            && let Ok(outcome) = answer.await
        {
            return outcome;
        }
        Err(StoreError::new(
            StoreErrorKind::Unavailable,
            "the store's batcher stopped",
        ))
    }

    /// Connects to `url` (`sqlite://path` or `postgres://…`). SQLite files are created when missing
    /// and run in WAL mode with full synchronous commits.
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        let backend = match BackendKind::of_url(url)? {
            BackendKind::Sqlite => {
                let options = SqliteConnectOptions::from_str(url)
                    .map_err(err)?
                    .create_if_missing(true)
                    .journal_mode(SqliteJournalMode::Wal)
                    .synchronous(SqliteSynchronous::Full)
                    .foreign_keys(true)
                    .busy_timeout(Duration::from_secs(10))
                    // Statement journals and sorts in memory: spilled to files, each is a file created
                    // and deleted in /var/tmp (tens a second under load), metadata the file system
                    // journals beside the WAL's syncs.
                    .pragma("temp_store", "memory");
                // The writer runs every batch, whose statements take a text per batch size: keep them
                // prepared (SQLite's default cache of 100 would prepare most of them again).
                let mut writer = sqlx::ConnectOptions::connect(
                    &options
                        .clone()
                        .statement_cache_capacity(BATCH_STATEMENT_CACHE),
                )
                .await
                .map_err(err)?;
                // Checkpoints run beside the writer ([`checkpoint_wal`]), not inside its commits; this
                // one is only the bound should they fall behind (64 MiB of WAL at 4 KiB pages).
                sqlx::query("PRAGMA wal_autocheckpoint = 16384")
                    .execute(&mut writer)
                    .await
                    .map_err(err)?;
                let read = SqlitePoolOptions::new()
                    .max_connections(8)
                    .test_before_acquire(false)
                    .connect_with(options)
                    .await
                    .map_err(err)?;
                let writer = std::sync::Arc::new(tokio::sync::Mutex::new(Some(writer)));
                tokio::spawn(checkpoint_wal(
                    read.clone(),
                    std::sync::Arc::downgrade(&writer),
                ));
                Backend::Sqlite { read, writer }
            }
            BackendKind::Postgres => {
                let options = PgConnectOptions::from_str(url).map_err(err)?;
                let pool = PgPoolOptions::new()
                    .max_connections(16)
                    .acquire_timeout(Duration::from_secs(10))
                    .connect_with(options)
                    .await
                    .map_err(err)?;
                Backend::Postgres(pool)
            }
        };
        let (tx, rx) = tokio::sync::mpsc::channel(4096);
        // The batcher runs on a thread of its own: every statement of a batch is a wait for the
        // database, and on the request runtime each of its wake-ups would queue behind the request
        // handlers (many statements a batch, all of them on the path of every waiting submit).
        let batcher_backend = backend.clone();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(err)?;
        std::thread::Builder::new()
            .name("actiongate-batcher".into())
            .spawn(move || runtime.block_on(run_batcher(batcher_backend, rx)))
            .map_err(err)?;
        Ok(Self {
            backend,
            batcher: tx,
        })
    }

    pub fn kind(&self) -> BackendKind {
        match self.backend {
            Backend::Sqlite { .. } => BackendKind::Sqlite,
            Backend::Postgres(_) => BackendKind::Postgres,
        }
    }

    /// Applies the backend's migrations. Safe to run from several processes at once (PostgreSQL
    /// takes an advisory lock; SQLite has one writer).
    pub async fn migrate(&self) -> Result<(), StoreError> {
        match &self.backend {
            Backend::Sqlite { writer, .. } => {
                let mut turn = writer.lock().await;
                SQLITE_MIGRATIONS
                    .run(turn.as_mut().ok_or_else(closed)?)
                    .await
                    .map_err(err)
            }
            Backend::Postgres(pool) => POSTGRES_MIGRATIONS.run(pool).await.map_err(err),
        }
    }

    /// Whether an account with this id exists (for operator commands).
    pub async fn get_account_exists(&self, account_id: &str) -> Result<bool, StoreError> {
        let n: i64 = on_pool!(self, pool => sqlx::query_scalar("SELECT COUNT(*) FROM accounts WHERE id = $1")
            .bind(account_id)
            .fetch_one(pool)
            .await
            .map_err(err)?);
        Ok(n == 1)
    }

    /// Closes the pool, waiting for connections in use to be returned.
    pub async fn close(&self) {
        if let Backend::Sqlite { writer, .. } = &self.backend {
            let taken = writer.lock().await.take();
            if let Some(conn) = taken {
                let _ = sqlx::Connection::close(conn).await;
            }
        }
        on_pool!(self, pool => pool.close().await)
    }
}

fn agent_from_row<R: Row>(row: &R) -> Result<AgentRecord, StoreError>
where
    for<'a> &'a str: sqlx::ColumnIndex<R>,
    String: for<'r> sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    Option<String>: for<'r> sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    i64: for<'r> sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    Option<i64>: for<'r> sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
{
    Ok(AgentRecord {
        id: row.try_get("id").map_err(err)?,
        account_id: row.try_get("account_id").map_err(err)?,
        name: row.try_get("name").map_err(err)?,
        wallet_address: row.try_get("wallet_address").map_err(err)?,
        created_at: row.try_get("created_at").map_err(err)?,
        key_rotated_at: row.try_get("key_rotated_at").map_err(err)?,
    })
}

fn hash_from(bytes: Vec<u8>) -> Result<SecretHash, StoreError> {
    let arr: [u8; 32] = bytes
        .try_into()
        .map_err(|_| corrupt("a stored key hash is not 32 bytes"))?;
    Ok(SecretHash(arr))
}

macro_rules! select_agents {
    ($where:literal) => {
        concat!(
            "SELECT id, account_id, name, wallet_address, created_at, key_rotated_at FROM agents ",
            $where
        )
    };
}

#[async_trait]
impl Store for SqlStore {
    async fn ping(&self) -> Result<(), StoreError> {
        on_pool!(self, pool => sqlx::query("SELECT 1").execute(pool).await.map(|_| ()).map_err(err))
    }

    async fn put_email_challenge(&self, c: &EmailChallenge) -> Result<(), StoreError> {
        let attempts = i32::try_from(c.attempts).map_err(err)?;
        on_writer!(self, pool => sqlx::query(
            "INSERT INTO email_challenges (email, code_hash, expires_at, attempts) VALUES ($1, $2, $3, $4)
             ON CONFLICT (email) DO UPDATE SET code_hash = excluded.code_hash,
                 expires_at = excluded.expires_at, attempts = excluded.attempts",
        )
        .bind(&c.email)
        .bind(c.code_hash.0.to_vec())
        .bind(c.expires_at)
        .bind(attempts)
        .execute(pool)
        .await
        .map(|_| ())
        .map_err(err))
    }

    async fn get_email_challenge(&self, email: &str) -> Result<Option<EmailChallenge>, StoreError> {
        let row: Option<(String, Vec<u8>, i64, i32)> = on_pool!(self, pool => sqlx::query_as(
            "SELECT email, code_hash, expires_at, attempts FROM email_challenges WHERE email = $1",
        )
        .bind(email)
        .fetch_optional(pool)
        .await
        .map_err(err)?);
        row.map(|(email, hash, expires_at, attempts)| {
            Ok(EmailChallenge {
                email,
                code_hash: hash_from(hash)?,
                expires_at,
                attempts: u32::try_from(attempts).map_err(err)?,
            })
        })
        .transpose()
    }

    async fn count_failed_attempt(&self, email: &str) -> Result<u32, StoreError> {
        let attempts: Option<i32> = on_writer!(self, pool => sqlx::query_scalar(
            "UPDATE email_challenges SET attempts = attempts + 1 WHERE email = $1 RETURNING attempts",
        )
        .bind(email)
        .fetch_optional(pool)
        .await
        .map_err(err)?);
        // A challenge replaced or consumed meanwhile: count the try as the last one allowed.
        Ok(attempts.map_or(u32::MAX, |a| u32::try_from(a).unwrap_or(u32::MAX)))
    }

    async fn complete_onboarding(&self, o: &Onboarding) -> Result<OnboardingOutcome, StoreError> {
        let allowed = serde_json::to_string(&o.first_policy.allowed_actions).map_err(err)?;
        on_writer!(self, pool => {
            let mut tx = pool.begin_write().await?;
            // The write comes first, so that SQLite takes its write lock before any read.
            let consumed = sqlx::query(
                "DELETE FROM email_challenges WHERE email = $1 AND code_hash = $2 AND expires_at > $3 AND attempts <= $4",
            )
            .bind(&o.email)
            .bind(o.code_hash.0.to_vec())
            .bind(o.now)
            .bind(i32::try_from(o.max_attempts).unwrap_or(i32::MAX))
            .execute(&mut *tx)
            .await
            .map_err(err)?
            .rows_affected();
            if consumed != 1 {
                tx.rollback().await.map_err(err)?;
                return Ok(OnboardingOutcome::ChallengeGone);
            }
            let inserted = sqlx::query(
                "INSERT INTO accounts (id, email, created_at) VALUES ($1, $2, $3) ON CONFLICT (email) DO NOTHING",
            )
            .bind(&o.new_account_id)
            .bind(&o.email)
            .bind(o.now)
            .execute(&mut *tx)
            .await
            .map_err(err)?
            .rows_affected();
            let outcome = if inserted == 1 {
                sqlx::query("INSERT INTO credit_accounts (account_id, updated_at) VALUES ($1, $2)")
                    .bind(&o.new_account_id)
                    .bind(o.now)
                    .execute(&mut *tx)
                    .await
                    .map_err(err)?;
                insert_agent_with_policy!(tx, &o.first_agent, &o.first_policy, &allowed);
                OnboardingOutcome::Created { account_id: o.new_account_id.clone() }
            } else {
                let id: String = sqlx::query_scalar("SELECT id FROM accounts WHERE email = $1")
                    .bind(&o.email)
                    .fetch_one(&mut *tx)
                    .await
                    .map_err(err)?;
                OnboardingOutcome::SignedIn { account_id: id }
            };
            let account_id = match &outcome {
                OnboardingOutcome::Created { account_id } | OnboardingOutcome::SignedIn { account_id } => account_id.clone(),
                OnboardingOutcome::ChallengeGone => String::new(),
            };
            sqlx::query(
                "INSERT INTO owner_sessions (token_hash, account_id, created_at, expires_at) VALUES ($1, $2, $3, $4)",
            )
            .bind(o.session_hash.0.to_vec())
            .bind(&account_id)
            .bind(o.now)
            .bind(o.session_expires_at)
            .execute(&mut *tx)
            .await
            .map_err(err)?;
            tx.commit().await.map_err(err)?;
            Ok(outcome)
        })
    }

    async fn find_session(
        &self,
        token_hash: &SecretHash,
        now: i64,
    ) -> Result<Option<SessionRecord>, StoreError> {
        let row: Option<(String, i64)> = on_pool!(self, pool => sqlx::query_as(
            "SELECT account_id, expires_at FROM owner_sessions WHERE token_hash = $1 AND expires_at > $2",
        )
        .bind(token_hash.0.to_vec())
        .bind(now)
        .fetch_optional(pool)
        .await
        .map_err(err)?);
        Ok(row.map(|(account_id, expires_at)| SessionRecord {
            account_id,
            expires_at,
        }))
    }

    async fn delete_session(&self, token_hash: &SecretHash) -> Result<bool, StoreError> {
        on_writer!(self, pool => sqlx::query("DELETE FROM owner_sessions WHERE token_hash = $1")
            .bind(token_hash.0.to_vec())
            .execute(pool)
            .await
            .map(|r| r.rows_affected() == 1)
            .map_err(err))
    }

    async fn find_agent_and_policy(
        &self,
        key_hash: &SecretHash,
    ) -> Result<Option<(AgentRecord, Option<PolicyRecord>)>, StoreError> {
        on_pool!(self, pool => {
            let row = sqlx::query(concat!(
                "SELECT a.id, a.account_id, a.name, a.wallet_address, a.created_at, a.key_rotated_at, ",
                policy_columns!(),
                " FROM agents a LEFT JOIN agent_policies p ON p.agent_id = a.id WHERE a.key_hash = $1"
            ))
            .bind(key_hash.0.to_vec())
            .fetch_optional(pool)
            .await
            .map_err(err)?;
            let Some(row) = row else { return Ok(None) };
            let agent = agent_from_row(&row)?;
            let policy = policy_from_row(&row, &agent.id)?;
            Ok(Some((agent, policy)))
        })
    }

    async fn get_agent(&self, agent_id: &str) -> Result<Option<AgentRecord>, StoreError> {
        let sql = select_agents!("WHERE id = $1");
        on_pool!(self, pool => {
            let row = sqlx::query(sql).bind(agent_id).fetch_optional(pool).await.map_err(err)?;
            row.as_ref().map(agent_from_row).transpose()
        })
    }

    async fn list_agents(&self, account_id: &str) -> Result<Vec<AgentRecord>, StoreError> {
        let sql = select_agents!("WHERE account_id = $1 ORDER BY created_at, id");
        on_pool!(self, pool => {
            let rows = sqlx::query(sql).bind(account_id).fetch_all(pool).await.map_err(err)?;
            rows.iter().map(agent_from_row).collect()
        })
    }

    async fn create_agent(&self, a: &NewAgent, p: &PolicyRecord) -> Result<(), StoreError> {
        let allowed = serde_json::to_string(&p.allowed_actions).map_err(err)?;
        on_writer!(self, pool => {
            let mut tx = pool.begin_write().await?;
            insert_agent_with_policy!(tx, a, p, &allowed);
            tx.commit().await.map_err(err)
        })
    }

    async fn rotate_agent_key(
        &self,
        agent_id: &str,
        key_hash: &SecretHash,
        now: i64,
    ) -> Result<bool, StoreError> {
        on_writer!(self, pool => sqlx::query("UPDATE agents SET key_hash = $1, key_rotated_at = $2 WHERE id = $3")
            .bind(key_hash.0.to_vec())
            .bind(now)
            .bind(agent_id)
            .execute(pool)
            .await
            .map(|r| r.rows_affected() == 1)
            .map_err(err))
    }

    async fn agent_wallet_sealed(&self, agent_id: &str) -> Result<Option<Vec<u8>>, StoreError> {
        on_pool!(self, pool => sqlx::query_scalar("SELECT wallet_sealed FROM agents WHERE id = $1")
            .bind(agent_id)
            .fetch_optional(pool)
            .await
            .map_err(err))
    }

    async fn get_policy(&self, agent_id: &str) -> Result<Option<PolicyRecord>, StoreError> {
        on_pool!(self, pool => {
            let row = sqlx::query(concat!("SELECT ", policy_columns!(), " FROM agent_policies p WHERE p.agent_id = $1"))
                .bind(agent_id)
                .fetch_optional(pool)
                .await
                .map_err(err)?;
            Ok(match row {
                Some(row) => policy_from_row(&row, agent_id)?,
                None => None,
            })
        })
    }

    async fn put_policy(&self, p: &PolicyRecord) -> Result<(), StoreError> {
        let allowed = serde_json::to_string(&p.allowed_actions).map_err(err)?;
        on_writer!(self, pool => sqlx::query(
            "INSERT INTO agent_policies (agent_id, allowed_actions, daily_limit_micros, max_per_action_micros, updated_at)
             VALUES ($1, $2, $3, $4, $5)
             ON CONFLICT (agent_id) DO UPDATE SET allowed_actions = excluded.allowed_actions,
                 daily_limit_micros = excluded.daily_limit_micros,
                 max_per_action_micros = excluded.max_per_action_micros,
                 updated_at = excluded.updated_at",
        )
        .bind(&p.agent_id)
        .bind(&allowed)
        .bind(p.daily_limit_micros)
        .bind(p.max_per_action_micros)
        .bind(p.updated_at)
        .execute(pool)
        .await
        .map(|_| ())
        .map_err(err))
    }
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
                        state,
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

    async fn start_execution(
        &self,
        intent_id: &str,
        seq: u32,
        owner: &str,
        now: i64,
    ) -> Result<bool, StoreError> {
        let seq = i32::try_from(seq).map_err(err)?;
        on_writer!(self, pool => sqlx::query(
            "UPDATE intent_executions SET state = 'started', started_at = $4
             WHERE intent_id = $1 AND seq = $2 AND state = 'pending'
               AND EXISTS (SELECT 1 FROM intents WHERE id = $1 AND lease_owner = $3 AND status = 'queued' AND lease_until > $4)",
        )
        .bind(intent_id)
        .bind(seq)
        .bind(owner)
        .bind(now)
        .execute(pool)
        .await
        .map(|r| r.rows_affected() == 1)
        .map_err(err))
    }

    async fn finish_execution(
        &self,
        intent_id: &str,
        seq: u32,
        f: &ExecutionFinish,
        now: i64,
    ) -> Result<bool, StoreError> {
        let seq = i32::try_from(seq).map_err(err)?;
        let state = f.state().as_str();
        on_writer!(self, pool => sqlx::query(
            "UPDATE intent_executions SET state = $3, tx_hash = $4, error_code = $5, error_message = $6, data = $7,
                 finished_at = $8
             WHERE intent_id = $1 AND seq = $2 AND state = 'started'",
        )
        .bind(intent_id)
        .bind(seq)
        .bind(state)
        .bind(&f.tx_hash)
        .bind(&f.error_code)
        .bind(&f.error_message)
        .bind(&f.data)
        .bind(now)
        .execute(pool)
        .await
        .map(|r| r.rows_affected() == 1)
        .map_err(err))
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

    async fn credit_account(&self, account_id: &str) -> Result<Option<CreditAccount>, StoreError> {
        let row: Option<(i64, i64, i64, i32)> = on_pool!(self, pool => sqlx::query_as(
            "SELECT balance, reserved, free_day, free_used FROM credit_accounts WHERE account_id = $1",
        )
        .bind(account_id)
        .fetch_optional(pool)
        .await
        .map_err(err)?);
        Ok(
            row.map(|(balance, reserved, free_day, free_used)| CreditAccount {
                balance,
                reserved,
                free_day,
                free_used: u32::try_from(free_used).unwrap_or(0),
            }),
        )
    }

    async fn grant_credits(
        &self,
        account_id: &str,
        amount: i64,
        kind: &str,
        reason: &str,
        now: i64,
    ) -> Result<CreditAccount, StoreError> {
        on_writer!(self, pool => {
            let mut tx = pool.begin_write().await?;
            let kind: LedgerKind = kind.parse().map_err(err)?;
            let credit = Credit { account_id, agent_id: None, invoice_id: None, amount, kind, reason, at: now };
            let account = credit_account!(tx, credit);
            tx.commit().await.map_err(err)?;
            Ok(account)
        })
    }

    async fn ledger(&self, account_id: &str) -> Result<Vec<LedgerEntry>, StoreError> {
        type Row = (
            String,
            String,
            Option<String>,
            Option<String>,
            Option<String>,
            i64,
            i64,
            i64,
            i64,
            i64,
        );
        let rows: Vec<Row> = on_pool!(self, pool => sqlx::query_as(
            "SELECT kind, reason, agent_id, intent_id, invoice_id, balance_before, balance_after, reserved_before,
                 reserved_after, created_at
             FROM credit_ledger WHERE account_id = $1 ORDER BY created_at, id",
        )
        .bind(account_id)
        .fetch_all(pool)
        .await
        .map_err(err)?);
        Ok(rows
            .into_iter()
            .map(
                |(kind, reason, agent_id, intent_id, invoice_id, bb, ba, rb, ra, created_at)| {
                    LedgerEntry {
                        kind,
                        reason,
                        agent_id,
                        intent_id,
                        invoice_id,
                        balance_before: bb,
                        balance_after: ba,
                        reserved_before: rb,
                        reserved_after: ra,
                        created_at,
                    }
                },
            )
            .collect())
    }

    async fn daily_usage(&self, agent_id: &str, day: i64) -> Result<i64, StoreError> {
        let used: Option<i64> = on_pool!(self, pool => sqlx::query_scalar(
            "SELECT used_micros FROM agent_daily_usage WHERE agent_id = $1 AND day = $2",
        )
        .bind(agent_id)
        .bind(day)
        .fetch_optional(pool)
        .await
        .map_err(err)?);
        Ok(used.unwrap_or(0))
    }

    async fn put_delegation(&self, d: &DelegationRecord) -> Result<(), StoreError> {
        let chain = i64::try_from(d.chain_id).map_err(err)?;
        on_writer!(self, pool => sqlx::query(
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
        .bind(&d.status)
        .bind(d.created_at)
        .bind(d.expires_at)
        .bind(&d.body)
        .execute(pool)
        .await
        .map(|_| ())
        .map_err(err))
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

    async fn active_delegation(
        &self,
        agent_id: &str,
        chain_id: u64,
        delegator: &str,
        now: i64,
    ) -> Result<Option<DelegationRecord>, StoreError> {
        let chain = i64::try_from(chain_id).map_err(err)?;
        let row: Option<DelegationRow> = on_pool!(self, pool => sqlx::query_as(concat!(
            "SELECT ", delegation_columns!(), " ", usable_delegations!(), " AND lower(delegator) = lower($4)
               ORDER BY created_at DESC, hash LIMIT 1"
        ))
        .bind(agent_id)
        .bind(chain)
        .bind(now)
        .bind(delegator)
        .fetch_optional(pool)
        .await
        .map_err(err)?);
        row.map(delegation_record).transpose()
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
        status: &str,
        now: i64,
    ) -> Result<bool, StoreError> {
        let done = on_writer!(self, pool => sqlx::query("UPDATE delegations SET status = $2, updated_at = $3 WHERE hash = $1")
            .bind(hash)
            .bind(status)
            .bind(now)
            .execute(pool)
            .await
            .map(|r| r.rows_affected())
            .map_err(err)?);
        Ok(done > 0)
    }

    async fn put_mcp_session(&self, id: &str, state: &str, now: i64) -> Result<(), StoreError> {
        on_writer!(self, pool => sqlx::query(
            "INSERT INTO mcp_sessions (id, state, created_at) VALUES ($1, $2, $3)
             ON CONFLICT (id) DO UPDATE SET state = excluded.state",
        )
        .bind(id)
        .bind(state)
        .bind(now)
        .execute(pool)
        .await
        .map(|_| ())
        .map_err(err))
    }

    async fn get_mcp_session(&self, id: &str) -> Result<Option<String>, StoreError> {
        on_pool!(self, pool => sqlx::query_scalar("SELECT state FROM mcp_sessions WHERE id = $1")
            .bind(id)
            .fetch_optional(pool)
            .await
            .map_err(err))
    }

    async fn delete_mcp_session(&self, id: &str) -> Result<(), StoreError> {
        on_writer!(self, pool => sqlx::query("DELETE FROM mcp_sessions WHERE id = $1")
            .bind(id)
            .execute(pool)
            .await
            .map(|_| ())
            .map_err(err))
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

    async fn insert_personhood_challenge(&self, c: &PersonhoodChallenge) -> Result<(), StoreError> {
        let chain = i64::try_from(c.chain_id).map_err(err)?;
        on_writer!(self, pool => sqlx::query(
            "INSERT INTO personhood_challenges (nonce, kind, account_id, subject, action, signal, chain_id, challenge_id,
                 idempotency_key, details, created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
        )
        .bind(&c.nonce)
        .bind(&c.kind)
        .bind(&c.account_id)
        .bind(&c.subject)
        .bind(&c.action)
        .bind(&c.signal)
        .bind(chain)
        .bind(&c.challenge_id)
        .bind(&c.idempotency_key)
        .bind(&c.details)
        .bind(c.created_at)
        .bind(c.expires_at)
        .execute(pool)
        .await
        .map(|_| ())
        .map_err(err))
    }

    async fn get_personhood_challenge(
        &self,
        nonce: &str,
    ) -> Result<Option<PersonhoodChallenge>, StoreError> {
        let row: Option<ChallengeRow> = on_pool!(self, pool => sqlx::query_as(
            concat!("SELECT ", challenge_columns!(), " FROM personhood_challenges WHERE nonce = $1"),
        )
        .bind(nonce)
        .fetch_optional(pool)
        .await
        .map_err(err)?);
        row.map(challenge_from).transpose()
    }

    async fn find_personhood_challenge_by_key(
        &self,
        account_id: &str,
        key: &str,
    ) -> Result<Option<PersonhoodChallenge>, StoreError> {
        let row: Option<ChallengeRow> = on_pool!(self, pool => sqlx::query_as(
            concat!("SELECT ", challenge_columns!(), " FROM personhood_challenges WHERE account_id = $1 AND idempotency_key = $2"),
        )
        .bind(account_id)
        .bind(key)
        .fetch_optional(pool)
        .await
        .map_err(err)?);
        row.map(challenge_from).transpose()
    }

    async fn open_personhood_challenge(
        &self,
        account_id: &str,
        kind: &str,
        subject: &str,
        now: i64,
    ) -> Result<Option<PersonhoodChallenge>, StoreError> {
        let row: Option<ChallengeRow> = on_pool!(self, pool => sqlx::query_as(
            concat!("SELECT ", challenge_columns!(), " FROM personhood_challenges
                 WHERE account_id = $1 AND kind = $2 AND subject = $3 AND used_at IS NULL AND expires_at > $4
                 ORDER BY created_at DESC LIMIT 1"),
        )
        .bind(account_id)
        .bind(kind)
        .bind(subject)
        .bind(now)
        .fetch_optional(pool)
        .await
        .map_err(err)?);
        row.map(challenge_from).transpose()
    }

    async fn complete_personhood(
        &self,
        nonce: &str,
        now: i64,
        effect: &PersonhoodEffect,
    ) -> Result<PersonhoodOutcome, StoreError> {
        on_writer!(self, pool => {
            let mut tx = pool.begin_write().await?;
            let taken = sqlx::query(
                "UPDATE personhood_challenges SET used_at = $2 WHERE nonce = $1 AND used_at IS NULL AND expires_at > $2",
            )
            .bind(nonce)
            .bind(now)
            .execute(&mut *tx)
            .await
            .map_err(err)?
            .rows_affected();
            if taken != 1 {
                tx.rollback().await.map_err(err)?;
                return Ok(PersonhoodOutcome::NonceUsed);
            }
            let outcome = match effect {
                PersonhoodEffect::Lock { kind, subject, nullifier } => {
                    sqlx::query(
                        "INSERT INTO personhood_locks (kind, subject, nullifier, locked_at) VALUES ($1, $2, $3, $4)
                         ON CONFLICT (kind, subject) DO NOTHING",
                    )
                    .bind(kind)
                    .bind(subject)
                    .bind(nullifier)
                    .bind(now)
                    .execute(&mut *tx)
                    .await
                    .map_err(err)?;
                    let (locked, at): (String, i64) = sqlx::query_as(
                        "SELECT nullifier, locked_at FROM personhood_locks WHERE kind = $1 AND subject = $2",
                    )
                    .bind(kind)
                    .bind(subject)
                    .fetch_one(&mut *tx)
                    .await
                    .map_err(err)?;
                    if &locked == nullifier { PersonhoodOutcome::Locked { locked_at: at } } else { PersonhoodOutcome::Mismatch }
                }
                PersonhoodEffect::Receipt { receipt_id, lock_kind, subject, challenge_id, nullifier } => {
                    let locked: Option<String> = sqlx::query_scalar(
                        "SELECT nullifier FROM personhood_locks WHERE kind = $1 AND subject = $2",
                    )
                    .bind(lock_kind)
                    .bind(subject)
                    .fetch_optional(&mut *tx)
                    .await
                    .map_err(err)?;
                    match locked {
                        None => PersonhoodOutcome::NotLocked,
                        Some(l) if &l != nullifier => PersonhoodOutcome::Mismatch,
                        Some(_) => {
                            sqlx::query(
                                "INSERT INTO deposit_receipts (id, subject, challenge_id, nullifier, created_at)
                                 VALUES ($1, $2, $3, $4, $5)",
                            )
                            .bind(receipt_id)
                            .bind(subject)
                            .bind(challenge_id)
                            .bind(nullifier)
                            .bind(now)
                            .execute(&mut *tx)
                            .await
                            .map_err(err)?;
                            PersonhoodOutcome::Receipt { receipt_id: receipt_id.clone() }
                        }
                    }
                }
            };
            if matches!(outcome, PersonhoodOutcome::Mismatch | PersonhoodOutcome::NotLocked) {
                tx.rollback().await.map_err(err)?;
            } else {
                tx.commit().await.map_err(err)?;
            }
            Ok(outcome)
        })
    }

    async fn personhood_lock(&self, kind: &str, subject: &str) -> Result<Option<i64>, StoreError> {
        on_pool!(self, pool => sqlx::query_scalar("SELECT locked_at FROM personhood_locks WHERE kind = $1 AND subject = $2")
            .bind(kind)
            .bind(subject)
            .fetch_optional(pool)
            .await
            .map_err(err))
    }

    async fn consume_receipt(
        &self,
        receipt_id: &str,
        subject: &str,
        details: &str,
        now: i64,
    ) -> Result<ConsumeOutcome, StoreError> {
        on_writer!(self, pool => {
            let mut tx = pool.begin_write().await?;
            let done = sqlx::query(
                "UPDATE deposit_receipts SET consumed_at = $3, consumed = $4
                 WHERE id = $1 AND subject = $2 AND consumed_at IS NULL",
            )
            .bind(receipt_id)
            .bind(subject)
            .bind(now)
            .bind(details)
            .execute(&mut *tx)
            .await
            .map_err(err)?
            .rows_affected();
            if done == 1 {
                tx.commit().await.map_err(err)?;
                return Ok(ConsumeOutcome::Consumed { consumed_at: now });
            }
            let exists: Option<i64> = sqlx::query_scalar("SELECT created_at FROM deposit_receipts WHERE id = $1 AND subject = $2")
                .bind(receipt_id)
                .bind(subject)
                .fetch_optional(&mut *tx)
                .await
                .map_err(err)?;
            Ok(if exists.is_some() { ConsumeOutcome::AlreadyUsed } else { ConsumeOutcome::NotFound })
        })
    }

    async fn create_invoice(&self, i: &InvoiceRecord) -> Result<(), StoreError> {
        let chain = i64::try_from(i.chain_id).map_err(err)?;
        on_writer!(self, pool => sqlx::query(
            "INSERT INTO invoices (id, sku, credits, amount_atomic, payer, account_id, agent_id, chain_id, token, recipient, created_at, expires_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
        )
        .bind(&i.id).bind(&i.sku).bind(i.credits).bind(i.amount_atomic).bind(&i.payer).bind(&i.account_id).bind(&i.agent_id)
        .bind(chain).bind(&i.token).bind(&i.recipient).bind(i.created_at).bind(i.expires_at)
        .execute(pool).await.map(|_| ()).map_err(err))
    }

    async fn get_invoice(&self, id: &str) -> Result<Option<InvoiceRecord>, StoreError> {
        let row: Option<InvoiceRow> = on_writer!(self, pool => sqlx::query_as(concat!("SELECT ", invoice_columns!(), " FROM invoices WHERE id = $1"))
            .bind(id).fetch_optional(pool).await.map_err(err))?;
        row.map(invoice_from).transpose()
    }

    async fn settle_invoice(
        &self,
        invoice_id: &str,
        tx_hash: &str,
        now: i64,
    ) -> Result<SettleOutcome, StoreError> {
        on_writer!(self, pool => {
            let mut tx = pool.begin_write().await?;
            // The invoice row first: racing retries of one invoice queue here.
            let paid = sqlx::query("UPDATE invoices SET paid_at = $2, tx_hash = $3 WHERE id = $1 AND paid_at IS NULL")
                .bind(invoice_id).bind(now).bind(tx_hash)
                .execute(&mut *tx).await.map_err(err)?.rows_affected();
            let row: InvoiceRow = sqlx::query_as(concat!("SELECT ", invoice_columns!(), " FROM invoices WHERE id = $1"))
                .bind(invoice_id).fetch_one(&mut *tx).await.map_err(err)?;
            let invoice = invoice_from(row)?;
            let account: Option<String> = match &invoice.account_id {
                Some(a) => Some(a.clone()),
                None => sqlx::query_scalar("SELECT account_id FROM wallet_links WHERE address = $1")
                    .bind(&invoice.payer).fetch_optional(&mut *tx).await.map_err(err)?,
            };
            if paid == 0 {
                let same = invoice.tx_hash.as_deref() == Some(tx_hash);
                let balance: i64 = match (&account, same) {
                    (_, false) => 0,
                    (Some(a), true) => sqlx::query_scalar("SELECT balance FROM credit_accounts WHERE account_id = $1")
                        .bind(a).fetch_optional(&mut *tx).await.map_err(err)?.unwrap_or(0),
                    (None, true) => sqlx::query_scalar("SELECT CAST(COALESCE(SUM(credits), 0) AS BIGINT) FROM held_credits WHERE address = $1 AND claimed_at IS NULL")
                        .bind(&invoice.payer).fetch_one(&mut *tx).await.map_err(err)?,
                };
                tx.rollback().await.map_err(err)?;
                return Ok(if same { SettleOutcome::AlreadyPaid { account, balance } } else { SettleOutcome::InvoicePaid });
            }
            let used = sqlx::query("INSERT INTO used_payments (tx_hash, invoice_id, created_at) VALUES ($1, $2, $3) ON CONFLICT (tx_hash) DO NOTHING")
                .bind(tx_hash).bind(invoice_id).bind(now)
                .execute(&mut *tx).await.map_err(err)?.rows_affected();
            if used == 0 {
                tx.rollback().await.map_err(err)?;
                return Ok(SettleOutcome::PaymentUsed);
            }
            let reason = format!("bought {} ({} credits) with x402, tx {tx_hash}", invoice.sku, invoice.credits);
            let balance = match &account {
                Some(a) => {
                    let credit = Credit {
                        account_id: a,
                        agent_id: invoice.agent_id.as_deref(),
                        invoice_id: Some(invoice_id),
                        amount: invoice.credits,
                        kind: LedgerKind::Purchase,
                        reason: &reason,
                        at: now,
                    };
                    credit_account!(tx, credit).balance
                }
                None => {
                    sqlx::query("INSERT INTO held_credits (invoice_id, address, credits, created_at) VALUES ($1, $2, $3, $4)")
                        .bind(invoice_id).bind(&invoice.payer).bind(invoice.credits).bind(now)
                        .execute(&mut *tx).await.map_err(err)?;
                    sqlx::query_scalar("SELECT CAST(COALESCE(SUM(credits), 0) AS BIGINT) FROM held_credits WHERE address = $1 AND claimed_at IS NULL")
                        .bind(&invoice.payer).fetch_one(&mut *tx).await.map_err(err)?
                }
            };
            tx.commit().await.map_err(err)?;
            Ok(SettleOutcome::Credited { account, balance })
        })
    }

    async fn link_wallet(
        &self,
        address: &str,
        account_id: &str,
        now: i64,
    ) -> Result<Option<i64>, StoreError> {
        on_writer!(self, pool => {
            let mut tx = pool.begin_write().await?;
            sqlx::query("INSERT INTO wallet_links (address, account_id, linked_at) VALUES ($1, $2, $3) ON CONFLICT (address) DO NOTHING")
                .bind(address).bind(account_id).bind(now)
                .execute(&mut *tx).await.map_err(err)?;
            let owner: String = sqlx::query_scalar("SELECT account_id FROM wallet_links WHERE address = $1")
                .bind(address).fetch_one(&mut *tx).await.map_err(err)?;
            if owner != account_id {
                tx.rollback().await.map_err(err)?;
                return Ok(None);
            }
            let held: Vec<(String, i64)> = sqlx::query_as("SELECT invoice_id, credits FROM held_credits WHERE address = $1 AND claimed_at IS NULL ORDER BY created_at")
                .bind(address).fetch_all(&mut *tx).await.map_err(err)?;
            let mut moved = 0;
            for (invoice_id, credits) in &held {
                let claimed = sqlx::query("UPDATE held_credits SET claimed_by = $2, claimed_at = $3 WHERE invoice_id = $1 AND claimed_at IS NULL")
                    .bind(invoice_id).bind(account_id).bind(now)
                    .execute(&mut *tx).await.map_err(err)?
                    .rows_affected();
                if claimed != 1 {
                    // Claimed meanwhile by a concurrent link of the same wallet.
                    continue;
                }
                let reason = format!("credits bought by {address} before it was linked");
                let credit = Credit {
                    account_id,
                    agent_id: None,
                    invoice_id: Some(invoice_id.as_str()),
                    amount: *credits,
                    kind: LedgerKind::Purchase,
                    reason: &reason,
                    at: now,
                };
                credit_account!(tx, credit);
                moved += credits;
            }
            tx.commit().await.map_err(err)?;
            Ok(Some(moved))
        })
    }

    async fn paid_invoice_of(&self, tx_hash: &str) -> Result<Option<String>, StoreError> {
        on_writer!(self, pool => sqlx::query_scalar("SELECT invoice_id FROM used_payments WHERE tx_hash = $1")
            .bind(tx_hash).fetch_optional(pool).await.map_err(err))
    }

    async fn linked_account(&self, address: &str) -> Result<Option<String>, StoreError> {
        on_writer!(self, pool => sqlx::query_scalar("SELECT account_id FROM wallet_links WHERE address = $1")
            .bind(address).fetch_optional(pool).await.map_err(err))
    }

    async fn put_link_challenge(
        &self,
        nonce: &str,
        account_id: &str,
        address: &str,
        message: &str,
        expires_at: i64,
    ) -> Result<(), StoreError> {
        on_writer!(self, pool => sqlx::query(
            "INSERT INTO wallet_link_challenges (nonce, account_id, address, message, expires_at) VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(nonce).bind(account_id).bind(address).bind(message).bind(expires_at)
        .execute(pool).await.map(|_| ()).map_err(err))
    }

    async fn take_link_challenge(
        &self,
        nonce: &str,
        account_id: &str,
        now: i64,
    ) -> Result<Option<(String, String)>, StoreError> {
        on_writer!(self, pool => sqlx::query_as(
            "UPDATE wallet_link_challenges SET used_at = $3
             WHERE nonce = $1 AND account_id = $2 AND used_at IS NULL AND expires_at > $3 RETURNING address, message",
        )
        .bind(nonce).bind(account_id).bind(now)
        .fetch_optional(pool).await.map_err(err))
    }

    async fn reserve_nonces(
        &self,
        chain_id: u64,
        wallet: &str,
        execution_key: &str,
        count: u32,
        chain_nonce: u64,
        now: i64,
    ) -> Result<Vec<ChainTxRecord>, StoreError> {
        let chain = i64::try_from(chain_id).map_err(err)?;
        let chain_nonce = i64::try_from(chain_nonce).map_err(err)?;
        on_writer!(self, pool => {
            let mut tx = pool.begin_write().await?;
            // The wallet's row is locked first: reservations of one wallet queue here.
            sqlx::query("INSERT INTO wallet_nonces (chain_id, wallet, next_nonce) VALUES ($1, $2, $3) ON CONFLICT (chain_id, wallet) DO NOTHING")
                .bind(chain).bind(wallet).bind(chain_nonce)
                .execute(&mut *tx).await.map_err(err)?;
            let next: i64 = sqlx::query_scalar(
                "UPDATE wallet_nonces SET next_nonce = CASE WHEN next_nonce > $3 THEN next_nonce ELSE $3 END
                 WHERE chain_id = $1 AND wallet = $2 RETURNING next_nonce",
            )
            .bind(chain).bind(wallet).bind(chain_nonce)
            .fetch_one(&mut *tx).await.map_err(err)?;
            let existing: Vec<ChainTxRow> = sqlx::query_as(concat!("SELECT ", chain_tx_columns!(), " FROM chain_txs WHERE execution_key = $1 AND state <> 'voided' ORDER BY idx"))
                .bind(execution_key)
                .fetch_all(&mut *tx).await.map_err(err)?;
            if !existing.is_empty() {
                tx.commit().await.map_err(err)?;
                return existing.into_iter().map(chain_tx_from).collect();
            }
            // Voided nonces the chain has not used yet are filled first, so no gap stays behind.
            let voided: Vec<i64> = sqlx::query_scalar(
                "SELECT nonce FROM chain_txs WHERE chain_id = $1 AND wallet = $2 AND state = 'voided' AND nonce >= $3 ORDER BY nonce LIMIT $4",
            )
            .bind(chain).bind(wallet).bind(chain_nonce).bind(i64::from(count))
            .fetch_all(&mut *tx).await.map_err(err)?;
            sqlx::query("DELETE FROM chain_txs WHERE chain_id = $1 AND wallet = $2 AND state = 'voided' AND nonce < $3")
                .bind(chain).bind(wallet).bind(chain_nonce)
                .execute(&mut *tx).await.map_err(err)?;
            let fresh = i64::from(count) - voided.len() as i64;
            let nonces: Vec<i64> = voided.iter().copied().chain(next..next + fresh).collect();
            if fresh > 0 {
                sqlx::query("UPDATE wallet_nonces SET next_nonce = $3 WHERE chain_id = $1 AND wallet = $2")
                    .bind(chain).bind(wallet).bind(next + fresh)
                    .execute(&mut *tx).await.map_err(err)?;
            }
            for (idx, nonce) in nonces.iter().enumerate() {
                sqlx::query(
                    "INSERT INTO chain_txs (chain_id, wallet, nonce, execution_key, idx, state, created_at, updated_at)
                     VALUES ($1, $2, $3, $4, $5, 'reserved', $6, $6)
                     ON CONFLICT (chain_id, wallet, nonce) DO UPDATE SET execution_key = excluded.execution_key,
                       idx = excluded.idx, state = 'reserved', tx_hash = NULL, raw_tx = NULL, prior_hashes = '',
                       receipt_status = NULL, updated_at = excluded.updated_at",
                )
                .bind(chain).bind(wallet).bind(nonce).bind(execution_key).bind(idx as i64).bind(now)
                .execute(&mut *tx).await.map_err(err)?;
            }
            let rows: Vec<ChainTxRow> = sqlx::query_as(concat!("SELECT ", chain_tx_columns!(), " FROM chain_txs WHERE execution_key = $1 AND state <> 'voided' ORDER BY idx"))
                .bind(execution_key)
                .fetch_all(&mut *tx).await.map_err(err)?;
            tx.commit().await.map_err(err)?;
            rows.into_iter().map(chain_tx_from).collect()
        })
    }

    async fn execution_txs(&self, execution_key: &str) -> Result<Vec<ChainTxRecord>, StoreError> {
        // Read through the writer on SQLite: a transaction recorded a moment ago must be seen.
        on_writer!(self, pool => {
            let rows: Vec<ChainTxRow> = sqlx::query_as(concat!("SELECT ", chain_tx_columns!(), " FROM chain_txs WHERE execution_key = $1 AND state <> 'voided' ORDER BY idx"))
                .bind(execution_key)
                .fetch_all(pool).await.map_err(err)?;
            rows.into_iter().map(chain_tx_from).collect()
        })
    }

    async fn record_signed_txs(
        &self,
        chain_id: u64,
        wallet: &str,
        signed: &[SignedTx],
        now: i64,
    ) -> Result<(), StoreError> {
        let chain = i64::try_from(chain_id).map_err(err)?;
        on_writer!(self, pool => {
            let mut tx = pool.begin_write().await?;
            for t in signed {
                let nonce = i64::try_from(t.nonce).map_err(err)?;
                let done = sqlx::query(
                    "UPDATE chain_txs SET state = 'signed', raw_tx = $5, updated_at = $6,
                       prior_hashes = CASE WHEN tx_hash IS NULL OR tx_hash = $4 THEN prior_hashes
                                           WHEN prior_hashes = '' THEN tx_hash ELSE prior_hashes || ',' || tx_hash END,
                       tx_hash = $4
                     WHERE chain_id = $1 AND wallet = $2 AND nonce = $3 AND state IN ('reserved', 'signed')",
                )
                .bind(chain).bind(wallet).bind(nonce).bind(&t.tx_hash).bind(&t.raw_tx).bind(now)
                .execute(&mut *tx).await.map_err(err)?
                .rows_affected();
                if done != 1 {
                    tx.rollback().await.map_err(err)?;
                    return Err(StoreError::new(StoreErrorKind::Other, format!("no reserved transaction at nonce {nonce} of {wallet} on chain {chain_id}")));
                }
            }
            tx.commit().await.map_err(err)
        })
    }

    async fn record_mined_tx(
        &self,
        chain_id: u64,
        wallet: &str,
        nonce: u64,
        tx_hash: &str,
        status: i64,
        now: i64,
    ) -> Result<(), StoreError> {
        let chain = i64::try_from(chain_id).map_err(err)?;
        let nonce = i64::try_from(nonce).map_err(err)?;
        on_writer!(self, pool => sqlx::query(
            "UPDATE chain_txs SET state = 'mined', receipt_status = $5, updated_at = $6,
               prior_hashes = CASE WHEN tx_hash = $4 OR tx_hash IS NULL THEN prior_hashes
                                   WHEN prior_hashes = '' THEN tx_hash ELSE prior_hashes || ',' || tx_hash END,
               tx_hash = $4
             WHERE chain_id = $1 AND wallet = $2 AND nonce = $3",
        )
        .bind(chain).bind(wallet).bind(nonce).bind(tx_hash).bind(status).bind(now)
        .execute(pool).await.map(|_| ()).map_err(err))
    }

    async fn void_txs(
        &self,
        execution_key: &str,
        include_signed: bool,
        now: i64,
    ) -> Result<(), StoreError> {
        on_writer!(self, pool => sqlx::query(
            "UPDATE chain_txs SET state = 'voided', updated_at = $2
             WHERE execution_key = $1 AND (state = 'reserved' OR (state = 'signed' AND $3))",
        )
        .bind(execution_key).bind(now).bind(include_signed)
        .execute(pool).await.map(|_| ()).map_err(err))
    }
}

pub mod testing {
    //! Fresh databases for tests: a SQLite file in a temporary directory, or a new schema in the
    //! PostgreSQL named by `ACTIONGATE_TEST_POSTGRES_URL` (default `postgres://root@127.0.0.1:5432/test`).
    //! `scripts/test` makes sure that server runs; a test that cannot reach it fails, it does not skip.

    use std::str::FromStr;

    use sqlx::postgres::PgConnectOptions;
    use sqlx::{ConnectOptions, Connection};

    use super::{StoreError, err};

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
}

type DelegationRow = (
    String,
    String,
    String,
    i64,
    String,
    i64,
    Option<i64>,
    Option<String>,
);

fn delegation_record(
    (hash, agent_id, delegator, chain_id, status, created_at, expires_at, body): DelegationRow,
) -> Result<DelegationRecord, StoreError> {
    Ok(DelegationRecord {
        hash,
        agent_id,
        delegator,
        chain_id: u64::try_from(chain_id).map_err(err)?,
        status,
        created_at,
        expires_at,
        body,
    })
}
