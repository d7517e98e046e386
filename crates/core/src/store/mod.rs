//! The storage ports: one trait per aggregate ([`IdentityStore`], [`IntentStore`], [`CreditStore`],
//! [`DelegationStore`], [`PaymentStore`], [`NonceStore`], [`PersonhoodStore`]), together the
//! domain's [`Store`]; [`McpSessionStore`] for the MCP surface alone; the rows they carry
//! ([`records`]); a typed [`StoreError`]. `actiongate-store` implements them on SQLite and
//! PostgreSQL; both pass the same contract tests. The store reads, locks, writes and batches; what
//! a row's change means for money is decided in the core ([`crate::acceptance`], [`crate::ledger`]).

use async_trait::async_trait;

use crate::crypto::SecretHash;
use crate::states::{ApprovalState, DelegationStatus};

mod records;

pub use records::*;

/// What kind of storage failure it was, for those that act on it: a busy transaction is tried
/// again, an unavailable database is answered "try again later", the rest are bugs or corruption
/// and are logged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreErrorKind {
    /// Another transaction held what this one needed (SQLite busy or locked; PostgreSQL
    /// serialization failure, deadlock, lock not available): the same work may succeed when tried
    /// again, and nothing of it was written.
    Busy,
    /// The database cannot be reached, or the store is closed or shutting down.
    Unavailable,
    /// A stored value the code cannot read: a state it does not know, a hash of the wrong length,
    /// a number out of its type's range.
    Corrupt,
    /// Anything else: a statement the database refused, a broken invariant.
    Other,
}

/// A storage failure, with its kind and, when it came from below, its source. Its text is for the
/// log, never for a response.
#[derive(Debug, Clone, thiserror::Error)]
#[error("store ({kind:?}): {message}")]
pub struct StoreError {
    kind: StoreErrorKind,
    message: String,
    #[source]
    source: Option<std::sync::Arc<dyn std::error::Error + Send + Sync + 'static>>,
}

impl StoreError {
    pub fn new(kind: StoreErrorKind, message: impl Into<String>) -> Self {
        StoreError {
            kind,
            message: message.into(),
            source: None,
        }
    }

    /// A failure of `kind` caused by `source` (its text is the message).
    pub fn from_source(
        kind: StoreErrorKind,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        StoreError {
            kind,
            message: source.to_string(),
            source: Some(std::sync::Arc::new(source)),
        }
    }

    pub fn kind(&self) -> StoreErrorKind {
        self.kind
    }

    /// Whether trying the same work again may succeed ([`StoreErrorKind::Busy`]).
    pub fn is_retryable(&self) -> bool {
        self.kind == StoreErrorKind::Busy
    }
}

/// Onboarding codes, owner sessions, agents and their policies.
#[async_trait]
pub trait IdentityStore: Send + Sync + 'static {
    /// Stores a new code for an e-mail, replacing any earlier one (its tries reset).
    async fn put_email_challenge(&self, challenge: &EmailChallenge) -> Result<(), StoreError>;

    async fn get_email_challenge(&self, email: &str) -> Result<Option<EmailChallenge>, StoreError>;

    /// Counts a try atomically (before the code is compared) on the code and, when it is one of the
    /// code's `max_on_code` tries (it will be compared), on the address's 24-hour budget across
    /// codes (a window that started 24 hours or more before `now` starts again at `now`); answers
    /// both counts.
    async fn count_code_check(
        &self,
        email: &str,
        now: i64,
        max_on_code: u32,
    ) -> Result<CodeChecks, StoreError>;

    /// The address's budget of code checks as it stands (`None`: no check counted yet).
    async fn code_check_budget(&self, email: &str) -> Result<Option<CheckBudget>, StoreError>;

    async fn complete_onboarding(
        &self,
        onboarding: &Onboarding,
    ) -> Result<OnboardingOutcome, StoreError>;

    /// The session with this token hash, if it has not expired at `now`.
    async fn find_session(
        &self,
        token_hash: &SecretHash,
        now: i64,
    ) -> Result<Option<SessionRecord>, StoreError>;

    /// Revokes a session; false when there was none.
    async fn delete_session(&self, token_hash: &SecretHash) -> Result<bool, StoreError>;

    /// The agent of a key with its policy (none stored: the default applies), in one read.
    async fn find_agent_and_policy(
        &self,
        key_hash: &SecretHash,
    ) -> Result<Option<(AgentRecord, Option<PolicyRecord>)>, StoreError>;

    async fn get_agent(&self, agent_id: &str) -> Result<Option<AgentRecord>, StoreError>;

    async fn list_agents(&self, account_id: &str) -> Result<Vec<AgentRecord>, StoreError>;

    /// The e-mail address an account signed up with.
    async fn account_email(&self, account_id: &str) -> Result<Option<String>, StoreError>;

    /// Creates an agent with its policy, and writes `event` (its audit entry) in the same
    /// transaction.
    async fn create_agent(
        &self,
        agent: &NewAgent,
        policy: &PolicyRecord,
        event: &AuditEvent,
    ) -> Result<(), StoreError>;

    /// Replaces the agent's key hash; the old key stops working in the same statement.
    async fn rotate_agent_key(
        &self,
        agent_id: &str,
        key_hash: &SecretHash,
        now: i64,
        event: &AuditEvent,
    ) -> Result<bool, StoreError>;

    /// The sealed execution-wallet key of an agent.
    async fn agent_wallet_sealed(&self, agent_id: &str) -> Result<Option<Vec<u8>>, StoreError>;

    async fn get_policy(&self, agent_id: &str) -> Result<Option<PolicyRecord>, StoreError>;

    /// Replaces the agent's policy and writes `event` (its audit entry) in the same transaction.
    async fn put_policy(&self, policy: &PolicyRecord, event: &AuditEvent)
    -> Result<(), StoreError>;
}

/// Intents and their executions: acceptance (the batcher), leases, outcomes, settlement.
#[async_trait]
pub trait IntentStore: Send + Sync + 'static {
    async fn find_idempotency(
        &self,
        agent_id: &str,
        key: &str,
    ) -> Result<Option<IdempotencyRecord>, StoreError>;

    /// Checks idempotency, the daily limit, delegation and credits, and writes the intent, its
    /// executions, the idempotency record, the daily usage and the credit reservation — or nothing.
    async fn accept_intent(&self, draft: &IntentDraft) -> Result<AcceptOutcome, StoreError>;

    async fn get_intent(&self, intent_id: &str) -> Result<Option<IntentRecord>, StoreError>;

    /// The executions of several intents, by intent and seq, in one read.
    async fn list_executions_of(
        &self,
        intent_ids: &[String],
    ) -> Result<Vec<ExecutionRecord>, StoreError>;

    async fn list_executions(&self, intent_id: &str) -> Result<Vec<ExecutionRecord>, StoreError>;

    async fn count_intents(&self, agent_id: &str) -> Result<u64, StoreError>;

    /// Leases up to `limit` of the oldest queued intents whose lease is free or expired.
    async fn claim_intents(
        &self,
        owner: &str,
        now: i64,
        lease_until: i64,
        limit: u32,
    ) -> Result<Vec<IntentRecord>, StoreError>;

    /// Records the outcomes of reads (side-effect free, so never marked started first) and settles
    /// their intents, in one transaction (the SQL store's: the batcher's next one, shared with the
    /// drafts accepted at that moment); only while `owner` holds each intent's lease. Their accounts
    /// are locked in account order; within an account, the intents are settled in the order given.
    async fn finish_reads(
        &self,
        owner: &str,
        intents: &[String],
        done: &[(String, u32, ExecutionFinish)],
        now: i64,
    ) -> Result<(), StoreError>;

    /// Gives a lease back (an intent claimed in a batch but left for another worker).
    async fn release_lease(&self, intent_id: &str, owner: &str) -> Result<(), StoreError>;

    /// Extends a lease this owner holds; false when it was lost.
    async fn renew_lease(
        &self,
        intent_id: &str,
        owner: &str,
        lease_until: i64,
    ) -> Result<bool, StoreError>;

    /// Marks a pending execution started, only while `owner` holds the intent's lease.
    async fn start_execution(
        &self,
        intent_id: &str,
        seq: u32,
        owner: &str,
        now: i64,
    ) -> Result<bool, StoreError> {
        let started = self.start_executions(intent_id, &[seq], owner, now).await?;
        Ok(started.first().copied().unwrap_or(false))
    }

    /// Marks pending executions of one intent started ([`IntentStore::start_execution`] for each),
    /// in one transaction: one answer per seq, in order. An error fails them all (nothing written).
    async fn start_executions(
        &self,
        intent_id: &str,
        seqs: &[u32],
        owner: &str,
        now: i64,
    ) -> Result<Vec<bool>, StoreError>;

    /// Records how a started execution ended, by the holder of its intent's lease (`owner`); false
    /// when it was not in the started state or the lease is another worker's.
    async fn finish_execution(
        &self,
        intent_id: &str,
        seq: u32,
        owner: &str,
        finish: &ExecutionFinish,
        now: i64,
        event: &AuditEvent,
    ) -> Result<bool, StoreError> {
        let end = ExecutionEnd {
            seq,
            finish: finish.clone(),
            now,
            event: event.clone(),
        };
        let finished = self
            .finish_executions(intent_id, owner, std::slice::from_ref(&end))
            .await?;
        Ok(finished.first().copied().unwrap_or(false))
    }

    /// Records how started executions of one intent ended ([`IntentStore::finish_execution`] for
    /// each, each with its audit event), in one transaction: one answer per end, in order. An error
    /// fails them all (nothing written).
    async fn finish_executions(
        &self,
        intent_id: &str,
        owner: &str,
        ends: &[ExecutionEnd],
    ) -> Result<Vec<bool>, StoreError>;

    /// The succeeded executions whose leg is still open, the longest open first, `skip` of them
    /// passed over (at most `limit`).
    async fn open_legs(&self, skip: u32, limit: u32) -> Result<Vec<OpenLeg>, StoreError>;

    /// Ends an open leg in `state`, with its audit event in the same transaction; false when it
    /// was not open (another process ended it first).
    async fn end_leg(
        &self,
        intent_id: &str,
        seq: u32,
        state: crate::states::LegState,
        event: &AuditEvent,
    ) -> Result<bool, StoreError>;

    /// Ends a queued intent whose executions have all ended: sets its status, captures the credits of
    /// the successful executions and releases the rest. Idempotent.
    async fn finish_intent(
        &self,
        intent_id: &str,
        now: i64,
    ) -> Result<Option<IntentRecord>, StoreError>;

    /// A held order's execution sent nothing and waits for its limit: by the holder of its intent's
    /// lease (`owner`), puts the started execution back to pending with `data` (what the order
    /// says meanwhile) and frees the lease until `until`, when any process may claim the intent
    /// again. One transaction; false when the execution was not started or the lease is another's.
    async fn hold_execution(
        &self,
        intent_id: &str,
        seq: u32,
        owner: &str,
        data: &str,
        until: i64,
    ) -> Result<bool, StoreError>;

    /// Ends an order's execution that filled nothing (cancelled, expired, nothing to fill) and
    /// gives its share back to the agent's daily usage, in one transaction: a pending execution of
    /// a queued intent when `end.owner` is `None`, else a started one whose intent's lease
    /// `end.owner` holds. False when neither: nothing changed. The intent is settled after, with
    /// [`IntentStore::finish_intent`].
    async fn end_order(&self, end: &OrderEnd) -> Result<bool, StoreError>;

    /// The account's intents whose approval is in `state`, newest request first, at most `limit`.
    async fn list_approvals(
        &self,
        account_id: &str,
        state: ApprovalState,
        limit: u32,
    ) -> Result<Vec<IntentRecord>, StoreError>;

    /// Approves a pending approval of one of the account's queued intents that has not expired by
    /// `now`; false when there is none such (nothing changed). The runner claims it after.
    async fn approve_intent(
        &self,
        intent_id: &str,
        account_id: &str,
        now: i64,
        event: &AuditEvent,
    ) -> Result<bool, StoreError>;

    /// Ends a pending approval without a run ([`ApprovalEnd`]), in one transaction; false when the
    /// approval was not pending (nothing changed). The intent is settled after, with
    /// [`IntentStore::finish_intent`] (the runner also settles one found so after a crash).
    async fn end_approval(&self, end: &ApprovalEnd) -> Result<bool, StoreError>;

    /// Pending approvals whose time ran out by `now`, oldest first, at most `limit`.
    async fn due_approvals(&self, now: i64, limit: u32) -> Result<Vec<IntentRecord>, StoreError>;

    /// The account's intents, newest first, at most `limit`.
    async fn list_account_intents(
        &self,
        account_id: &str,
        limit: u32,
    ) -> Result<Vec<IntentRecord>, StoreError>;

    /// The agent's intents of `action`, newest first, at most `limit`.
    async fn list_agent_intents(
        &self,
        agent_id: &str,
        action: &str,
        limit: u32,
    ) -> Result<Vec<IntentRecord>, StoreError>;
}

/// Credit accounts, grants, the ledger and daily usage.
#[async_trait]
pub trait CreditStore: Send + Sync + 'static {
    async fn credit_account(&self, account_id: &str) -> Result<Option<CreditAccount>, StoreError>;

    /// Adds credits (support grants, purchases) with a ledger entry.
    async fn grant_credits(
        &self,
        account_id: &str,
        amount: i64,
        kind: &str,
        reason: &str,
        now: i64,
    ) -> Result<CreditAccount, StoreError>;

    /// The account's ledger, oldest first.
    async fn ledger(&self, account_id: &str) -> Result<Vec<LedgerEntry>, StoreError>;

    /// The account's newest `limit` ledger rows, newest first (what the owner reads).
    async fn recent_ledger(
        &self,
        account_id: &str,
        limit: u32,
    ) -> Result<Vec<LedgerEntry>, StoreError>;

    async fn daily_usage(&self, agent_id: &str, day: i64) -> Result<i64, StoreError>;
}

/// ERC-7710 delegations to agents (the fan-out gate).
#[async_trait]
pub trait DelegationStore: Send + Sync + 'static {
    /// Stores a delegation; storing one with a known hash again updates its status and body.
    /// Stores a delegation (a new one, or its status and window again) and writes `event` (its
    /// audit entry) in the same transaction.
    async fn put_delegation(
        &self,
        delegation: &DelegationRecord,
        event: &AuditEvent,
    ) -> Result<(), StoreError>;

    async fn get_delegation(&self, hash: &str) -> Result<Option<DelegationRecord>, StoreError>;

    /// The agent's delegations, newest first, optionally of one chain and one delegator.
    async fn list_delegations(
        &self,
        agent_id: &str,
        chain_id: Option<u64>,
        delegator: Option<&str>,
    ) -> Result<Vec<DelegationRecord>, StoreError>;

    /// The delegation the fan-out runs under for one delegator: the newest active, unexpired one.
    async fn active_delegation(
        &self,
        agent_id: &str,
        chain_id: u64,
        delegator: &str,
        now: i64,
    ) -> Result<Option<DelegationRecord>, StoreError> {
        Ok(self
            .active_delegations_of(agent_id, chain_id, &[delegator.to_owned()], now)
            .await?
            .pop()
            .flatten())
    }

    /// [`DelegationStore::active_delegation`] for each of `delegators` (any case), in their order:
    /// a fan-out's executions that start together look up their grants with one query.
    async fn active_delegations_of(
        &self,
        agent_id: &str,
        chain_id: u64,
        delegators: &[String],
        now: i64,
    ) -> Result<Vec<Option<DelegationRecord>>, StoreError>;

    /// Active delegations of every agent, by hash after `after`, at most `limit` (the revocation sweep).
    async fn active_delegations(
        &self,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<DelegationRecord>, StoreError>;

    /// Moves a delegation to `status` (revoked, expired, invalid); answers whether it was found.
    async fn set_delegation_status(
        &self,
        hash: &str,
        status: DelegationStatus,
        now: i64,
        event: &AuditEvent,
    ) -> Result<bool, StoreError>;

    /// Delegators with an active, unexpired delegation to the agent on the chain.
    async fn count_active_delegations(
        &self,
        agent_id: &str,
        chain_id: u64,
        now: i64,
    ) -> Result<u64, StoreError>;
}

/// Credit purchases (x402 invoices, paid at most once) and wallets linked to accounts.
#[async_trait]
pub trait PaymentStore: Send + Sync + 'static {
    /// Stores an invoice if its tag is free for its recipient and token at `now`: held by no other
    /// invoice, or held by one whose hold ended. The tag is held until `open_until` (or until the
    /// invoice is paid); answers false, storing nothing, when the tag is taken.
    async fn create_invoice(
        &self,
        invoice: &InvoiceRecord,
        open_until: i64,
        now: i64,
    ) -> Result<bool, StoreError>;

    /// The account that owns the agent whose execution wallet is `address`, if any.
    async fn agent_wallet_account(&self, address: &str) -> Result<Option<String>, StoreError>;

    async fn get_invoice(&self, id: &str) -> Result<Option<InvoiceRecord>, StoreError>;

    /// Marks the invoice paid by `tx_hash`, records the hash as used and adds the credits, all in one
    /// transaction: to the invoice's account, else to the account the payer's wallet is linked to,
    /// else held for the wallet.
    async fn settle_invoice(
        &self,
        invoice_id: &str,
        tx_hash: &str,
        now: i64,
    ) -> Result<SettleOutcome, StoreError>;

    /// Links a wallet to an account and moves the credits held for it into the account's balance (one
    /// ledger entry per held purchase); answers the credits moved. A wallet linked to another account
    /// is not moved.
    async fn link_wallet(
        &self,
        address: &str,
        account_id: &str,
        now: i64,
    ) -> Result<Option<i64>, StoreError>;

    /// The invoice a payment transaction paid, if any.
    async fn paid_invoice_of(&self, tx_hash: &str) -> Result<Option<String>, StoreError>;

    /// The account a wallet is linked to.
    async fn linked_account(&self, address: &str) -> Result<Option<String>, StoreError>;

    /// Stores an issued EIP-4361 message for `address` to sign.
    async fn put_link_challenge(
        &self,
        nonce: &str,
        account_id: &str,
        address: &str,
        message: &str,
        expires_at: i64,
    ) -> Result<(), StoreError>;

    /// Takes (uses) an unexpired, unused link challenge of the account: its (address, message).
    async fn take_link_challenge(
        &self,
        nonce: &str,
        account_id: &str,
        now: i64,
    ) -> Result<Option<(String, String)>, StoreError>;
}

/// The per-wallet nonce manager: every transaction of a wallet by its nonce.
#[async_trait]
pub trait NonceStore: Send + Sync + 'static {
    /// Reserves `count` nonces of a wallet for an execution and, with `sign`, signs the
    /// transactions at them and records the signed bytes, all in one transaction: the execution's
    /// rows when it has them already (idempotent; reserved-only rows are signed then), else voided
    /// nonces of the wallet first (no gap is left behind), then new ones from `max(next stored,
    /// chain_nonce)`. With a `fence`, only while that lease holds ([`Reservation::LeaseLost`],
    /// reserving nothing, when it does not). A failed signing reserves nothing.
    async fn reserve_signed(
        &self,
        request: NonceRequest<'_>,
        fence: Option<&LeaseFence>,
        sign: Option<&SignAt<'_>>,
    ) -> Result<Reservation, StoreError>;

    /// Several reservations ([`NonceStore::reserve_signed`] each, in order: later items reserve
    /// above earlier ones of the same wallet) in one transaction, so that the executions waiting
    /// for a wallet's turn are reserved, signed and recorded with one commit. All or none: an error
    /// of one item (a failed signing) fails the batch, and nothing of it is recorded.
    async fn reserve_signed_batch(
        &self,
        items: &[ReserveItem<'_>],
    ) -> Result<Vec<Reservation>, StoreError>;

    /// Reserves nonces without signing ([`NonceStore::reserve_signed`] without a fence or a
    /// signer).
    async fn reserve_nonces(
        &self,
        chain_id: u64,
        wallet: &str,
        execution_key: &str,
        count: u32,
        chain_nonce: u64,
        now: i64,
    ) -> Result<Vec<ChainTxRecord>, StoreError> {
        let request = NonceRequest {
            chain_id,
            wallet,
            execution_key,
            count,
            chain_nonce,
            now,
            gaps_only: false,
        };
        Ok(match self.reserve_signed(request, None, None).await? {
            Reservation::New(rows) | Reservation::Existing(rows) => rows,
            Reservation::LeaseLost => Vec::new(),
        })
    }

    /// The transactions of an execution, in plan order.
    async fn execution_txs(&self, execution_key: &str) -> Result<Vec<ChainTxRecord>, StoreError>;

    /// Keeps the signed bytes of reserved (or re-signed) transactions of `execution_key` before any
    /// is sent, all or none, so that an execution's transactions are either all signed or none; an
    /// earlier hash at the same nonce moves to `prior_hashes`. With a `fence`, only while that lease
    /// holds (its intent queued, leased to its owner, not run out): false, recording nothing, when
    /// it does not.
    async fn record_signed_txs(
        &self,
        chain_id: u64,
        wallet: &str,
        execution_key: &str,
        signed: &[SignedTx],
        fence: Option<&LeaseFence>,
        now: i64,
    ) -> Result<bool, StoreError>;

    /// Claims until `until` the signed, unmined transactions of `wallet` last signed before
    /// `stale_before` that no other sweeper holds at `now`; answers their execution keys, each once.
    async fn claim_unmined(
        &self,
        chain_id: u64,
        wallet: &str,
        stale_before: i64,
        now: i64,
        until: i64,
    ) -> Result<Vec<String>, StoreError>;

    /// Claims until `until` the signed, unmined gap fills of any wallet on `chain_id` (the rows
    /// under [`fill_key`]s) last signed before `stale_before` that no other sweeper
    /// holds at `now`; answers their keys, each once.
    async fn claim_unmined_fills(
        &self,
        chain_id: u64,
        stale_before: i64,
        now: i64,
        until: i64,
    ) -> Result<Vec<String>, StoreError>;

    /// Records the receipts of transactions of a wallet (whichever of each one's signings was
    /// mined), in one write.
    async fn record_mined_txs(
        &self,
        chain_id: u64,
        wallet: &str,
        mined: &[MinedTx],
        now: i64,
    ) -> Result<(), StoreError>;

    /// Records the receipt of one transaction ([`NonceStore::record_mined_txs`]).
    async fn record_mined_tx(
        &self,
        chain_id: u64,
        wallet: &str,
        nonce: u64,
        tx_hash: &str,
        status: i64,
        now: i64,
    ) -> Result<(), StoreError> {
        let mined = MinedTx {
            nonce,
            tx_hash: tx_hash.to_owned(),
            status,
        };
        self.record_mined_txs(chain_id, wallet, std::slice::from_ref(&mined), now)
            .await
    }

    /// Gives the nonces of an execution none of whose transactions can be mined back; they are reused
    /// before new ones. `include_signed`: also signed ones (only when the node refused them), else only
    /// those never signed.
    async fn void_txs(
        &self,
        execution_key: &str,
        include_signed: bool,
        now: i64,
    ) -> Result<(), StoreError>;
}

/// Personhood proof requests, locks and receipts.
#[async_trait]
pub trait PersonhoodStore: Send + Sync + 'static {
    async fn insert_personhood_challenge(
        &self,
        challenge: &PersonhoodChallenge,
    ) -> Result<(), StoreError>;

    async fn get_personhood_challenge(
        &self,
        nonce: &str,
    ) -> Result<Option<PersonhoodChallenge>, StoreError>;

    /// A deposit challenge begun earlier with the same idempotency key by the same account.
    async fn find_personhood_challenge_by_key(
        &self,
        account_id: &str,
        key: &str,
    ) -> Result<Option<PersonhoodChallenge>, StoreError>;

    /// The newest unused, unexpired challenge of this kind for the subject.
    async fn open_personhood_challenge(
        &self,
        account_id: &str,
        kind: &str,
        subject: &str,
        now: i64,
    ) -> Result<Option<PersonhoodChallenge>, StoreError>;

    /// Takes the nonce (once, before it expires) and applies the effect, in one transaction; a
    /// mismatch changes nothing.
    async fn complete_personhood(
        &self,
        nonce: &str,
        now: i64,
        effect: &PersonhoodEffect,
    ) -> Result<PersonhoodOutcome, StoreError>;

    /// The lock of `(kind, subject)`: its time.
    async fn personhood_lock(&self, kind: &str, subject: &str) -> Result<Option<i64>, StoreError>;

    /// Consumes a receipt of `subject` once.
    async fn consume_receipt(
        &self,
        receipt_id: &str,
        subject: &str,
        details: &str,
        now: i64,
    ) -> Result<ConsumeOutcome, StoreError>;
}

/// Where the MCP server keeps its sessions, so that a session outlives the process that
/// opened it. Not a port of the domain: only the MCP surface uses it.
#[async_trait]
pub trait McpSessionStore: Send + Sync + 'static {
    async fn put_mcp_session(&self, id: &str, state: &str, now: i64) -> Result<(), StoreError>;

    async fn get_mcp_session(&self, id: &str) -> Result<Option<String>, StoreError>;

    async fn delete_mcp_session(&self, id: &str) -> Result<(), StoreError>;

    /// Records who opened a session (a keyed hash of its bearer).
    async fn set_mcp_session_owner(&self, id: &str, owner: &str) -> Result<(), StoreError>;

    /// Who opened a session: `None` when there is no such session, `Some(None)` when it was
    /// opened without a bearer.
    async fn mcp_session_owner(&self, id: &str) -> Result<Option<Option<String>>, StoreError>;

    /// Deletes the sessions created before `before` (unix ms); answers how many.
    async fn prune_mcp_sessions(&self, before: i64) -> Result<u64, StoreError>;
}

/// The audit trail: events written beside the decisions, moved into per-account hash chains.
#[async_trait]
pub trait AuditStore: Send + Sync + 'static {
    /// Writes events in a transaction of their own (a decision that writes nothing else).
    async fn append_audit(&self, events: &[AuditEvent]) -> Result<(), StoreError>;

    /// Moves up to `limit` waiting events, oldest first, into their accounts' chains: read and
    /// hashed outside the write, written in one transaction that goes ahead only if no other step
    /// chained those events or accounts meanwhile (else read again); answers the entries added.
    async fn chain_audit(
        &self,
        linker: &dyn ChainLinker,
        limit: u32,
    ) -> Result<Vec<AuditEntry>, StoreError>;

    /// The account's entries after seq `after`, in order, whose instant is in `[from, to)` when
    /// given; at most `limit`.
    async fn audit_page(
        &self,
        account_id: &str,
        after: i64,
        from: Option<i64>,
        to: Option<i64>,
        limit: u32,
    ) -> Result<Vec<AuditEntry>, StoreError>;

    /// The account's chain head as stored: its last entry's seq and hash.
    async fn audit_head(&self, account_id: &str) -> Result<Option<(i64, [u8; 32])>, StoreError>;
}

/// Webhook endpoints and their deliveries (the outbox the audit chaining writes).
#[async_trait]
pub trait WebhookStore: Send + Sync + 'static {
    async fn put_webhook(&self, webhook: &WebhookRecord) -> Result<(), StoreError>;

    async fn list_webhooks(&self, account_id: &str) -> Result<Vec<WebhookRecord>, StoreError>;

    /// Deletes the account's endpoint and its pending deliveries; false when there was none.
    async fn delete_webhook(&self, account_id: &str, id: &str) -> Result<bool, StoreError>;

    async fn set_webhook_secret(
        &self,
        account_id: &str,
        id: &str,
        sealed: &[u8],
    ) -> Result<bool, StoreError>;

    /// The endpoint's latest deliveries, newest first.
    async fn list_deliveries(
        &self,
        webhook_id: &str,
        limit: u32,
    ) -> Result<Vec<DeliveryRecord>, StoreError>;

    /// Claims up to `limit` pending deliveries due by `now` (until `claim_until` no other process
    /// takes them), oldest first, with their endpoint's URL and sealed secret.
    async fn claim_deliveries(
        &self,
        now: i64,
        claim_until: i64,
        limit: u32,
    ) -> Result<Vec<(DeliveryRecord, String, Vec<u8>)>, StoreError>;

    /// Records an attempt's end (`attempts` tries so far).
    async fn end_delivery(
        &self,
        id: &str,
        attempts: u32,
        end: &DeliveryEnd,
        now: i64,
    ) -> Result<(), StoreError>;
}

/// What [`Store::operations`] reads.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Operations {
    /// Intents accepted and not ended.
    pub queued: u64,
    /// When the oldest of them was accepted (unix ms).
    pub oldest_queued_at: Option<i64>,
    /// Signed transactions not mined yet, by chain (only chains that have some).
    pub unmined: Vec<(u64, u64)>,
}

/// The storage port of the domain: every aggregate's store, and a health check.
#[async_trait]
pub trait Store:
    IdentityStore
    + IntentStore
    + CreditStore
    + DelegationStore
    + PaymentStore
    + NonceStore
    + PersonhoodStore
    + AuditStore
    + WebhookStore
{
    /// Answers when the database answers.
    async fn ping(&self) -> Result<(), StoreError>;

    /// What an operator watches, read at each metrics scrape (indexed reads only).
    async fn operations(&self) -> Result<Operations, StoreError>;

    /// Deletes what has outlived its use ([`PruneCutoffs`]); answers how many rows went.
    async fn prune(&self, cutoffs: &PruneCutoffs) -> Result<u64, StoreError>;
}
