//! The storage port. `actiongate-store` implements it on SQLite and PostgreSQL; both pass the same
//! contract tests. Instants are Unix milliseconds, USD amounts are integer micro-dollars, secrets
//! arrive here only as keyed hashes.

use async_trait::async_trait;

use crate::crypto::SecretHash;
use crate::states::ExecutionState;

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

/// A pending e-mail code.
#[derive(Debug, Clone)]
pub struct EmailChallenge {
    pub email: String,
    pub code_hash: SecretHash,
    pub expires_at: i64,
    pub attempts: u32,
}

/// An agent row as the core sees it (never its key, never its wallet secret).
#[derive(Debug, Clone, PartialEq)]
pub struct AgentRecord {
    pub id: String,
    pub account_id: String,
    pub name: Option<String>,
    pub wallet_address: String,
    pub created_at: i64,
    pub key_rotated_at: Option<i64>,
}

/// Everything needed to insert an agent.
#[derive(Debug, Clone)]
pub struct NewAgent {
    pub record: AgentRecord,
    pub key_hash: SecretHash,
    /// The execution wallet's private key sealed with the master key.
    pub wallet_sealed: Vec<u8>,
}

/// An agent's policy.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyRecord {
    pub agent_id: String,
    /// Canonical action names.
    pub allowed_actions: Vec<String>,
    pub daily_limit_micros: i64,
    pub max_per_action_micros: Option<i64>,
    pub updated_at: i64,
}

/// A live owner session.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionRecord {
    pub account_id: String,
    pub expires_at: i64,
}

/// One completed e-mail onboarding: consumes the code, creates the account with its first agent
/// unless the e-mail already has an account, and opens a session, in one transaction.
#[derive(Debug, Clone)]
pub struct Onboarding {
    pub email: String,
    pub code_hash: SecretHash,
    /// The code is consumed only while its tries are within this limit.
    pub max_attempts: u32,
    pub now: i64,
    /// Used only when the account is new.
    pub new_account_id: String,
    pub first_agent: NewAgent,
    pub first_policy: PolicyRecord,
    pub session_hash: SecretHash,
    pub session_expires_at: i64,
}

/// What [`Store::complete_onboarding`] did.
#[derive(Debug, Clone, PartialEq)]
pub enum OnboardingOutcome {
    /// A new account with its first agent.
    Created { account_id: String },
    /// The e-mail already had an account; only a session was opened.
    SignedIn { account_id: String },
    /// The code was consumed or replaced meanwhile: nothing happened.
    ChallengeGone,
}

/// A stored idempotency key.
#[derive(Debug, Clone, PartialEq)]
pub struct IdempotencyRecord {
    pub request_hash: [u8; 32],
    pub intent_id: String,
    pub created_at: i64,
}

/// One user an intent addresses, before it runs.
#[derive(Debug, Clone, PartialEq)]
pub struct ExecutionDraft {
    pub user_did: String,
    pub wallet_address: String,
}

/// An intent that passed every check the core can make alone; the store makes the rest (idempotency,
/// daily limit, delegation, credits) and writes it, all in one transaction.
#[derive(Debug, Clone)]
pub struct IntentDraft {
    pub id: String,
    pub agent_id: String,
    pub account_id: String,
    pub action: String,
    pub lane: String,
    /// JSON.
    pub params: String,
    pub chain_id: u64,
    pub amount_micros: i64,
    /// Counted against the daily limit.
    pub is_write: bool,
    pub daily_limit_micros: i64,
    pub price_per_execution: i64,
    pub free_per_day: u32,
    pub idempotency_key: String,
    pub request_hash: [u8; 32],
    /// For a derived key: a record created before this instant is stale and replaced.
    pub replace_idempotency_before: Option<i64>,
    /// Address every active delegation to the agent on the chain (fan-out); else `own`.
    pub fan_out: bool,
    /// Fan-out to this delegator only (a redemption of one delegation).
    pub only_delegator: Option<String>,
    pub own: ExecutionDraft,
    /// A lease taken at once (direct execution runs in the request).
    pub lease: Option<(String, i64)>,
    /// UTC day number (days since the epoch).
    pub day: i64,
    pub now: i64,
    /// What the submit's checks ran against: the hash of the key it came with and the agent's stored
    /// policy (none: the default). The accepting transaction answers [`AcceptOutcome::Stale`] when
    /// either is no longer the agent's, so that a submit may check against a cached copy.
    pub key_hash: SecretHash,
    pub policy: Option<PolicyRecord>,
}

/// What [`Store::accept_intent`] decided.
#[derive(Debug, Clone, PartialEq)]
pub enum AcceptOutcome {
    /// Written: the executions addressed, the credits reserved, whether a free request covers it.
    Accepted {
        total: u32,
        reserved_credits: i64,
        free_request: bool,
    },
    /// The same key with the same request: the earlier intent.
    Replay {
        intent_id: String,
    },
    /// The same key with a different request.
    KeyReused,
    DailyLimit {
        used_micros: i64,
    },
    DelegationRequired,
    /// The paid balance is short (not empty) and the free allowance is used.
    InsufficientCredits {
        balance: i64,
        price: i64,
    },
    /// The paid balance is empty and the free allowance is used.
    DailyFreeLimitExceeded,
    /// The agent's key or policy is no longer what the draft was checked against (rotated, replaced,
    /// agent gone): nothing was written; check again against a fresh read.
    Stale,
}

/// An intent row.
#[derive(Debug, Clone, PartialEq)]
pub struct IntentRecord {
    pub id: String,
    pub agent_id: String,
    pub account_id: String,
    pub action: String,
    pub lane: String,
    pub params: String,
    pub chain_id: u64,
    pub amount_micros: i64,
    pub price_per_execution: i64,
    pub reserved_credits: i64,
    pub free_request: bool,
    pub status: String,
    pub total: u32,
    pub created_at: i64,
    pub finished_at: Option<i64>,
}

/// An execution row.
#[derive(Debug, Clone, PartialEq)]
pub struct ExecutionRecord {
    pub intent_id: String,
    pub seq: u32,
    pub execution_key: String,
    pub user_did: String,
    pub wallet_address: String,
    pub chain_id: u64,
    /// pending, started, succeeded, failed.
    pub state: String,
    pub tx_hash: Option<String>,
    pub error_code: Option<String>,
    pub error_message: Option<String>,
    /// JSON.
    pub data: Option<String>,
}

/// The deterministic key of an intent's `seq`-th execution (how a provider re-identifies it).
pub fn execution_key(intent_id: &str, seq: u32) -> String {
    format!("{intent_id}:{seq}")
}

impl ExecutionRecord {
    /// An execution as accepted, before it runs.
    pub fn pending(intent_id: &str, seq: u32, user: ExecutionDraft, chain_id: u64) -> Self {
        Self {
            intent_id: intent_id.to_owned(),
            seq,
            execution_key: execution_key(intent_id, seq),
            user_did: user.user_did,
            wallet_address: user.wallet_address,
            chain_id,
            state: "pending".into(),
            tx_hash: None,
            error_code: None,
            error_message: None,
            data: None,
        }
    }
}

/// How an execution ended, for [`Store::finish_execution`].
#[derive(Debug, Clone, PartialEq)]
pub struct ExecutionFinish {
    pub success: bool,
    pub tx_hash: Option<String>,
    pub error_code: Option<String>,
    pub error_message: Option<String>,
    pub data: Option<String>,
}

impl ExecutionFinish {
    /// The state the execution ends in.
    pub fn state(&self) -> ExecutionState {
        ExecutionState::ended(self.success)
    }
}

/// An account's credits.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CreditAccount {
    pub balance: i64,
    pub reserved: i64,
    /// Free requests used on `free_day` (UTC day number).
    pub free_used: u32,
    pub free_day: i64,
}

/// One ledger row.
#[derive(Debug, Clone, PartialEq)]
pub struct LedgerEntry {
    /// grant, reserve, capture, release, free, free_refund, purchase.
    pub kind: String,
    pub reason: String,
    pub agent_id: Option<String>,
    pub intent_id: Option<String>,
    pub invoice_id: Option<String>,
    pub balance_before: i64,
    pub balance_after: i64,
    pub reserved_before: i64,
    pub reserved_after: i64,
    pub created_at: i64,
}

/// One transaction of a wallet, by its nonce: reserved before it is signed, its signed bytes kept
/// before it is sent, so that after a crash it is found again (and re-sent, never re-signed with
/// another nonce).
#[derive(Debug, Clone, PartialEq)]
pub struct ChainTxRecord {
    pub chain_id: u64,
    pub wallet: String,
    pub nonce: u64,
    /// The execution this transaction belongs to, and its place in the execution's plan.
    pub execution_key: String,
    pub idx: u32,
    /// reserved, signed, mined, voided.
    pub state: String,
    pub tx_hash: Option<String>,
    /// The signed transaction (EIP-2718 bytes).
    pub raw_tx: Option<Vec<u8>>,
    /// Hashes of earlier signings at this nonce (fee bumps of a stuck transaction).
    pub prior_hashes: Vec<String>,
    /// 1 success, 0 reverted, once mined.
    pub receipt_status: Option<i64>,
    pub updated_at: i64,
}

/// A transaction signed at a reserved nonce, for [`Store::record_signed_txs`].
#[derive(Debug, Clone, PartialEq)]
pub struct SignedTx {
    pub nonce: u64,
    pub tx_hash: String,
    pub raw_tx: Vec<u8>,
}

/// An x402 invoice: the challenge a credit purchase answers first, paid at most once.
#[derive(Debug, Clone, PartialEq)]
pub struct InvoiceRecord {
    pub id: String,
    pub sku: String,
    pub credits: i64,
    /// The price in the stablecoin's base units (6 decimals).
    pub amount_atomic: i64,
    /// The paying wallet (`userAddress`), EIP-55.
    pub payer: String,
    /// Set when bought through the agent route: the credits go to this account.
    pub account_id: Option<String>,
    pub agent_id: Option<String>,
    pub chain_id: u64,
    pub token: String,
    pub recipient: String,
    pub created_at: i64,
    pub expires_at: i64,
    pub paid_at: Option<i64>,
    pub tx_hash: Option<String>,
}

/// What paying an invoice did.
#[derive(Debug, Clone, PartialEq)]
pub enum SettleOutcome {
    /// Credits added (to `account`, or held for the unlinked payer); `balance` is the account's
    /// balance, or what is held for the wallet.
    Credited {
        account: Option<String>,
        balance: i64,
    },
    /// This transaction paid this invoice before: nothing added again.
    AlreadyPaid {
        account: Option<String>,
        balance: i64,
    },
    /// The transaction paid another invoice.
    PaymentUsed,
    /// The invoice was paid by another transaction.
    InvoicePaid,
}

/// A delegation row, as far as the fan-out gate reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct DelegationRecord {
    pub hash: String,
    pub agent_id: String,
    pub delegator: String,
    pub chain_id: u64,
    /// active, revoked, expired, invalid.
    pub status: String,
    pub created_at: i64,
    /// Unix ms from which it cannot be used (its time window caveat), if it has one.
    pub expires_at: Option<i64>,
    /// The signed delegation (api-types `Delegation`, JSON).
    pub body: Option<String>,
}

/// An issued personhood proof request.
#[derive(Debug, Clone, PartialEq)]
pub struct PersonhoodChallenge {
    /// 0x-hex field element; the primary key.
    pub nonce: String,
    /// org, agent or deposit.
    pub kind: String,
    pub account_id: String,
    /// The organization id or agent id the proof is for (account-scoped).
    pub subject: String,
    pub action: String,
    pub signal: String,
    pub chain_id: u64,
    pub challenge_id: Option<String>,
    pub idempotency_key: Option<String>,
    /// JSON of the deposit's runtimeId, amountUsd, destinationAddress.
    pub details: Option<String>,
    pub created_at: i64,
    pub expires_at: i64,
    pub used_at: Option<i64>,
}

/// What a verified proof does once its nonce is taken.
#[derive(Debug, Clone, PartialEq)]
pub enum PersonhoodEffect {
    /// Lock `(kind, subject)` to the nullifier, or confirm the same lock.
    Lock {
        kind: String,
        subject: String,
        nullifier: String,
    },
    /// Issue a receipt, only if `(lock_kind, subject)` is locked to this nullifier.
    Receipt {
        receipt_id: String,
        lock_kind: String,
        subject: String,
        challenge_id: String,
        nullifier: String,
    },
}

/// How [`Store::complete_personhood`] ended.
#[derive(Debug, Clone, PartialEq)]
pub enum PersonhoodOutcome {
    /// Locked now, or already locked to the same nullifier (idempotent): the lock's time.
    Locked { locked_at: i64 },
    /// Locked to another nullifier: nothing changed (the nonce is not used either).
    Mismatch,
    /// A receipt was issued.
    Receipt { receipt_id: String },
    /// The subject has no lock to match a deposit proof against.
    NotLocked,
    /// The nonce was used (or expired) meanwhile.
    NonceUsed,
}

/// How [`Store::consume_receipt`] ended.
#[derive(Debug, Clone, PartialEq)]
pub enum ConsumeOutcome {
    Consumed { consumed_at: i64 },
    AlreadyUsed,
    NotFound,
}

/// The storage port.
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// Answers when the database answers.
    async fn ping(&self) -> Result<(), StoreError>;

    /// Stores a new code for an e-mail, replacing any earlier one (its tries reset).
    async fn put_email_challenge(&self, challenge: &EmailChallenge) -> Result<(), StoreError>;
    async fn get_email_challenge(&self, email: &str) -> Result<Option<EmailChallenge>, StoreError>;
    /// Counts a try atomically (before the code is compared) and answers the tries so far.
    async fn count_failed_attempt(&self, email: &str) -> Result<u32, StoreError>;
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
    async fn create_agent(&self, agent: &NewAgent, policy: &PolicyRecord)
    -> Result<(), StoreError>;
    /// Replaces the agent's key hash; the old key stops working in the same statement.
    async fn rotate_agent_key(
        &self,
        agent_id: &str,
        key_hash: &SecretHash,
        now: i64,
    ) -> Result<bool, StoreError>;
    /// The sealed execution-wallet key of an agent.
    async fn agent_wallet_sealed(&self, agent_id: &str) -> Result<Option<Vec<u8>>, StoreError>;

    async fn get_policy(&self, agent_id: &str) -> Result<Option<PolicyRecord>, StoreError>;
    async fn put_policy(&self, policy: &PolicyRecord) -> Result<(), StoreError>;

    // ---------------------------------------------------------------- intents

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
    ) -> Result<bool, StoreError>;
    /// Records how a started execution ended; false when it was not in the started state.
    async fn finish_execution(
        &self,
        intent_id: &str,
        seq: u32,
        finish: &ExecutionFinish,
        now: i64,
    ) -> Result<bool, StoreError>;
    /// Ends a queued intent whose executions have all ended: sets its status, captures the credits of
    /// the successful executions and releases the rest. Idempotent.
    async fn finish_intent(
        &self,
        intent_id: &str,
        now: i64,
    ) -> Result<Option<IntentRecord>, StoreError>;

    // ---------------------------------------------------------------- credits

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
    async fn ledger(&self, account_id: &str) -> Result<Vec<LedgerEntry>, StoreError>;
    async fn daily_usage(&self, agent_id: &str, day: i64) -> Result<i64, StoreError>;

    // ---------------------------------------------------------------- delegations

    /// Stores a delegation; storing one with a known hash again updates its status and body.
    async fn put_delegation(&self, delegation: &DelegationRecord) -> Result<(), StoreError>;
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
    ) -> Result<Option<DelegationRecord>, StoreError>;
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
        status: &str,
        now: i64,
    ) -> Result<bool, StoreError>;

    // --- credit purchases (x402)
    async fn create_invoice(&self, invoice: &InvoiceRecord) -> Result<(), StoreError>;
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

    // --- wallet transactions (the per-wallet nonce manager)
    /// Reserves `count` nonces of a wallet for an execution, in one transaction: the execution's rows
    /// when it has them already (idempotent), else voided nonces of the wallet first (no gap is left
    /// behind), then new ones from `max(next stored, chain_nonce)`.
    async fn reserve_nonces(
        &self,
        chain_id: u64,
        wallet: &str,
        execution_key: &str,
        count: u32,
        chain_nonce: u64,
        now: i64,
    ) -> Result<Vec<ChainTxRecord>, StoreError>;
    /// The transactions of an execution, in plan order.
    async fn execution_txs(&self, execution_key: &str) -> Result<Vec<ChainTxRecord>, StoreError>;
    /// Keeps the signed bytes of reserved (or re-signed) transactions before any is sent, all or
    /// none, so that an execution's transactions are either all signed or none; an earlier hash at
    /// the same nonce moves to `prior_hashes`.
    async fn record_signed_txs(
        &self,
        chain_id: u64,
        wallet: &str,
        signed: &[SignedTx],
        now: i64,
    ) -> Result<(), StoreError>;
    /// Records the receipt of a transaction (whichever of its signings was mined).
    async fn record_mined_tx(
        &self,
        chain_id: u64,
        wallet: &str,
        nonce: u64,
        tx_hash: &str,
        status: i64,
        now: i64,
    ) -> Result<(), StoreError>;
    /// Gives the nonces of an execution none of whose transactions can be mined back; they are reused
    /// before new ones. `include_signed`: also signed ones (only when the node refused them), else only
    /// those never signed.
    async fn void_txs(
        &self,
        execution_key: &str,
        include_signed: bool,
        now: i64,
    ) -> Result<(), StoreError>;
    /// Delegators with an active, unexpired delegation to the agent on the chain.
    async fn count_active_delegations(
        &self,
        agent_id: &str,
        chain_id: u64,
        now: i64,
    ) -> Result<u64, StoreError>;

    // ---------------------------------------------------------------- personhood

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

    // ---------------------------------------------------------------- MCP sessions

    async fn put_mcp_session(&self, id: &str, state: &str, now: i64) -> Result<(), StoreError>;
    async fn get_mcp_session(&self, id: &str) -> Result<Option<String>, StoreError>;
    async fn delete_mcp_session(&self, id: &str) -> Result<(), StoreError>;
}
