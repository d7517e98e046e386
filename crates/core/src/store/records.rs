//! The rows the store reads and writes, as the core sees them. Instants are Unix milliseconds, USD
//! amounts are integer micro-dollars, secrets arrive only as keyed hashes.

use crate::crypto::SecretHash;
use crate::params::Params;
use crate::states::{
    ApprovalState, ChainTxState, DelegationStatus, ExecutionState, IntentStatus, Lane, LedgerKind,
};

/// A pending e-mail code.
#[derive(Debug, Clone)]
pub struct EmailChallenge {
    pub email: String,
    pub code_hash: SecretHash,
    pub expires_at: i64,
    pub attempts: u32,
}

/// What [`crate::store::Store::prune`] deletes, by instant (unix ms): the core decides them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PruneCutoffs {
    /// E-mail codes, owner sessions and wallet-link messages that expired before this.
    pub expired_before: i64,
    /// E-mail check budgets whose 24-hour window started before this.
    pub budget_window_before: i64,
    /// Idempotency keys made, and personhood challenges and unpaid invoices that expired, before
    /// this (kept a while for replays and support).
    pub retained_before: i64,
}

/// An address's code checks in its current 24-hour window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CheckBudget {
    pub checks: u32,
    /// Unix ms.
    pub window_start: i64,
}

/// What one counted code check found: the tries on the live code (`u32::MAX` when the code was
/// replaced or consumed meanwhile) and the address's budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CodeChecks {
    pub on_code: u32,
    pub budget: CheckBudget,
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
    /// The lowest health factor a borrow or withdrawal may leave a lending position at, in
    /// ten-thousandths (1.5 is 15000).
    pub min_health_factor_bps: i64,
    /// A write priced above this waits for the owner's approval; none: never.
    pub approval_above_micros: Option<i64>,
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
    /// Audit events written when the account is new (its first agent's), with its account.
    pub created_events: Vec<AuditEvent>,
    /// The sign-in's audit event, written with the account signed into.
    pub login_event: AuditEvent,
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
    pub lane: Lane,
    pub params: Params,
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
    /// For a fan-out: the params that name who receives, (field, what it names)
    /// ([`crate::acceptance::recipients`]); each must name the user addressed. Empty otherwise.
    pub recipients: Vec<(String, String)>,
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
    /// Accepted waiting for the owner's approval until this instant (none: runs as accepted).
    pub approval_expires_at: Option<i64>,
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
    /// Today's usage and what this draft counts (a fan-out: its amount times the users addressed)
    /// do not fit under the daily limit.
    DailyLimit {
        used_micros: i64,
        amount_micros: i64,
    },
    DelegationRequired,
    /// A fan-out whose params name someone other than a user addressed as a recipient.
    ForeignRecipient {
        field: String,
        named: String,
        delegator: String,
    },
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
    pub lane: Lane,
    pub params: Params,
    pub chain_id: u64,
    pub amount_micros: i64,
    pub price_per_execution: i64,
    pub reserved_credits: i64,
    pub free_request: bool,
    pub status: IntentStatus,
    pub total: u32,
    pub created_at: i64,
    pub finished_at: Option<i64>,
    /// The owner's approval, for an intent that needed one.
    pub approval: Option<ApprovalRecord>,
}

impl IntentRecord {
    /// Whether the intent waits for its owner's approval now: nothing of it may run.
    pub fn awaits_approval(&self) -> bool {
        self.approval
            .as_ref()
            .is_some_and(|a| a.state == ApprovalState::Pending)
    }
}

/// An intent's approval by its owner.
#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalRecord {
    pub state: ApprovalState,
    pub requested_at: i64,
    pub expires_at: i64,
    pub decided_at: Option<i64>,
    /// The owner's reason for a rejection.
    pub reason: Option<String>,
}

/// An approval ended without a run (rejected by the owner, or expired): by [`IntentStore::end_approval`]
/// in one transaction, the approval moved from pending to `state`, every pending execution of the
/// intent failed with `code` and `message`, and its share of the agent's daily usage given back.
#[derive(Debug, Clone)]
pub struct ApprovalEnd {
    pub intent_id: String,
    /// Only an intent of this account (an owner's decision); none: any (the expiry sweep).
    pub account_id: Option<String>,
    pub state: ApprovalState,
    pub reason: Option<String>,
    pub code: String,
    pub message: String,
    pub agent_id: String,
    pub day: i64,
    pub release_micros: i64,
    pub now: i64,
    /// Its audit entry, written in the same transaction.
    pub event: AuditEvent,
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
    pub state: ExecutionState,
    pub tx_hash: Option<String>,
    pub error_code: Option<String>,
    pub error_message: Option<String>,
    /// JSON.
    pub data: Option<String>,
}

/// A succeeded execution whose leg is still open ([`IntentStore::open_legs`]).
#[derive(Debug, Clone, PartialEq)]
pub struct OpenLeg {
    pub intent: IntentRecord,
    pub execution: ExecutionRecord,
    /// When the execution ended (ms).
    pub finished_at: i64,
}

/// The deterministic key of an intent's `seq`-th execution (how a provider re-identifies it).
pub fn execution_key(intent_id: &str, seq: u32) -> String {
    format!("{intent_id}:{seq}")
}

/// The key a gap fill's transactions are recorded under: `<execution>/fill/<ms>`, one per fill
/// of an execution (a later fill of the same execution is not answered with an earlier one's rows).
pub fn fill_key(execution_key: &str, now_ms: i64) -> String {
    format!("{execution_key}{FILL_KEY_PART}{now_ms}")
}

/// What every [`fill_key`] holds, and no execution's own key (those are [`execution_key`]s).
pub const FILL_KEY_PART: &str = "/fill/";

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
            state: ExecutionState::Pending,
            tx_hash: None,
            error_code: None,
            error_message: None,
            data: None,
        }
    }
}

/// The lease an execution runs under: its intent's, held by one worker. A transaction is recorded
/// as signed (and so sent) only while the lease is still this worker's and has not run out, checked
/// in the database transaction that records it; an execution's end is recorded only by the lease's
/// holder.
#[derive(Debug, Clone, PartialEq)]
pub struct LeaseFence {
    pub intent_id: String,
    pub owner: String,
}

/// How an execution ended, for [`Store::finish_execution`].
#[derive(Debug, Clone, PartialEq)]
pub struct ExecutionFinish {
    pub success: bool,
    pub tx_hash: Option<String>,
    pub error_code: Option<String>,
    pub error_message: Option<String>,
    pub data: Option<String>,
    /// The write succeeded and its venue goes on elsewhere (a bridge's fill): its leg is recorded
    /// open and followed until it ends ([`crate::legs::Legs`]).
    pub leg_open: bool,
}

impl ExecutionFinish {
    /// The state the execution ends in.
    pub fn state(&self) -> ExecutionState {
        ExecutionState::ended(self.success)
    }
}

/// One execution's end among those [`IntentStore::finish_executions`] records together (the intent
/// and the lease holder are the batch's).
#[derive(Debug, Clone, PartialEq)]
pub struct ExecutionEnd {
    pub seq: u32,
    pub finish: ExecutionFinish,
    pub now: i64,
    /// Its audit event, written with it.
    pub event: AuditEvent,
}

/// An order's execution ended without a fill ([`IntentStore::end_order`]): failed with `finish`,
/// and `release_micros` given back from the agent's daily usage of `day`.
#[derive(Debug, Clone, PartialEq)]
pub struct OrderEnd {
    pub intent_id: String,
    pub seq: u32,
    /// The holder of the intent's lease ending a started execution; `None`: a pending one is
    /// ended (a cancellation), whoever holds the lease.
    pub owner: Option<String>,
    pub agent_id: String,
    pub day: i64,
    pub release_micros: i64,
    pub finish: ExecutionFinish,
    pub now: i64,
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
    pub kind: LedgerKind,
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
    pub state: ChainTxState,
    pub tx_hash: Option<String>,
    /// The signed transaction (EIP-2718 bytes).
    pub raw_tx: Option<Vec<u8>>,
    /// Hashes of earlier signings at this nonce (fee bumps of a stuck transaction).
    pub prior_hashes: Vec<String>,
    /// 1 success, 0 reverted, once mined.
    pub receipt_status: Option<i64>,
    pub updated_at: i64,
}

/// What [`Store::reserve_signed`] reserves: `count` nonces of `wallet` for an execution, numbered
/// from at least `chain_nonce` (the node's pending count); with `gaps_only`, at most `count` of the
/// nonces given back that lie below a transaction of the wallet still in use (a gap the node would
/// hold that transaction behind), and never a new one.
#[derive(Debug, Clone, Copy)]
pub struct NonceRequest<'a> {
    pub chain_id: u64,
    pub wallet: &'a str,
    pub execution_key: &'a str,
    pub count: u32,
    pub chain_nonce: u64,
    pub now: i64,
    pub gaps_only: bool,
}

/// A transaction's receipt, for [`Store::record_mined_txs`].
#[derive(Debug, Clone, PartialEq)]
pub struct MinedTx {
    pub nonce: u64,
    /// The signing that was mined.
    pub tx_hash: String,
    /// 1 success, 0 reverted.
    pub status: i64,
}

/// One of the reservations [`Store::reserve_signed_batch`] makes in one transaction: what
/// [`Store::reserve_signed`] takes.
#[derive(Clone, Copy)]
pub struct ReserveItem<'a> {
    pub request: NonceRequest<'a>,
    pub fence: Option<&'a LeaseFence>,
    pub sign: Option<&'a SignAt<'a>>,
}

/// What [`Store::reserve_signed`] did.
#[derive(Debug, Clone, PartialEq)]
pub enum Reservation {
    /// Reserved now (and signed and recorded, when a signer was given): the execution's rows.
    New(Vec<ChainTxRecord>),
    /// The execution had rows already, one of them signed (or no signer was given): answered as
    /// stored, nothing signed again.
    Existing(Vec<ChainTxRecord>),
    /// The fence's lease is not held: nothing reserved, nothing recorded.
    LeaseLost,
}

/// Signs an execution's transactions at the nonces given, in plan order, inside the reservation's
/// transaction ([`Store::reserve_signed`]).
pub type SignAt<'a> = dyn Fn(&[u64]) -> Result<Vec<SignedTx>, super::StoreError> + Send + Sync + 'a;

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
    /// The package price in the stablecoin's base units (6 decimals): what the standard x402
    /// requirements ask (an EIP-3009 authorization is bound to its invoice by its own signature).
    pub amount_atomic: i64,
    /// The tag added to the price in the SPEC challenge (1 to 9,999 base units, below 0.01), distinct
    /// among the open invoices of the recipient and token; 0 on invoices made before tags.
    pub tag_atomic: i64,
    /// The paying wallet (`userAddress`), EIP-55.
    pub payer: String,
    /// Set when bought through the agent route: the credits go to this account.
    pub account_id: Option<String>,
    pub agent_id: Option<String>,
    pub chain_id: u64,
    pub token: String,
    pub recipient: String,
    pub created_at: i64,
    /// The payment chain's latest block when the invoice was issued: a payment mined at or below it
    /// was sent before the challenge existed. `None` on invoices made before it was recorded (their
    /// payment is ordered by `created_at` against the block's timestamp).
    pub issued_block: Option<i64>,
    pub expires_at: i64,
    pub paid_at: Option<i64>,
    pub tx_hash: Option<String>,
}

impl InvoiceRecord {
    /// What a SPEC payment of this invoice transfers, exactly: the price plus the tag.
    pub fn challenge_atomic(&self) -> i64 {
        self.amount_atomic.saturating_add(self.tag_atomic)
    }
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
    pub status: DelegationStatus,
    pub created_at: i64,
    /// Unix ms from which it cannot be used (its time window caveat), if it has one.
    pub expires_at: Option<i64>,
    /// The signed delegation (api-types `Delegation`, JSON).
    pub body: Option<String>,
}

impl DelegationRecord {
    /// Its status at `now`: an active one whose time window has closed is expired, whether or not
    /// the sweep has recorded it yet.
    pub fn status_at(&self, now: i64) -> DelegationStatus {
        match self.status {
            DelegationStatus::Active if self.expires_at.is_some_and(|e| e <= now) => {
                DelegationStatus::Expired
            }
            status => status,
        }
    }
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

/// One decision to record, written in the transaction that makes it. `account_id` may be left to
/// the store to find from `agent_id` (a decision that knows only the agent, such as a delegation
/// the sweep finds revoked).
#[derive(Debug, Clone, PartialEq)]
pub struct AuditEvent {
    pub account_id: Option<String>,
    pub agent_id: Option<String>,
    pub at: i64,
    /// `intent.accepted`, `approval.rejected`, `credits.capture`, … (dotted, lower case).
    pub kind: String,
    pub actor: String,
    /// What it is about: an intent, an agent, a delegation hash, an account.
    pub subject: String,
    /// The refusal's or failure's code, when there is one.
    pub code: Option<String>,
    /// Canonical JSON text of the details.
    pub data: String,
}

impl AuditEvent {
    pub fn new(
        account_id: &str,
        at: i64,
        kind: impl Into<String>,
        actor: impl Into<String>,
        subject: impl Into<String>,
        data: serde_json::Value,
    ) -> Self {
        Self {
            account_id: Some(account_id.to_owned()),
            agent_id: None,
            at,
            kind: kind.into(),
            actor: actor.into(),
            subject: subject.into(),
            code: None,
            data: crate::params::canonical(&data).to_string(),
        }
    }

    /// For a decision that knows the agent but not its account.
    pub fn for_agent(
        agent_id: &str,
        at: i64,
        kind: impl Into<String>,
        actor: impl Into<String>,
        subject: impl Into<String>,
        data: serde_json::Value,
    ) -> Self {
        Self {
            account_id: None,
            ..Self::new("", at, kind, actor, subject, data).with_agent(agent_id)
        }
    }

    pub fn with_agent(mut self, agent_id: &str) -> Self {
        self.agent_id = Some(agent_id.to_owned());
        self
    }

    pub fn with_code(mut self, code: Option<&str>) -> Self {
        self.code = code.map(str::to_owned);
        self
    }
}

/// An entry of an account's audit chain without its link: what the link hash covers.
#[derive(Debug, Clone, PartialEq)]
pub struct AuditRecord {
    pub account_id: String,
    pub seq: i64,
    pub at: i64,
    pub kind: String,
    pub actor: String,
    pub subject: String,
    pub code: Option<String>,
    pub data: String,
}

/// An entry of an account's audit chain: the entry, the previous entry's hash and its own.
#[derive(Debug, Clone, PartialEq)]
pub struct AuditEntry {
    pub entry: AuditRecord,
    pub prev_hash: [u8; 32],
    pub hash: [u8; 32],
}

/// Links audit events into an account's chain (the core's rule, `audit::Linker`), for the store's
/// chaining transaction.
pub trait ChainLinker: Send + Sync {
    /// Links `events` of one account after its head `(seq, hash)`; answers the entries and the new
    /// head.
    fn extend(
        &self,
        account_id: &str,
        head: (i64, [u8; 32]),
        events: &[AuditEvent],
    ) -> (Vec<AuditEntry>, (i64, [u8; 32]));

    /// The webhook events an entry makes, as (type, JSON payload); written as deliveries to the
    /// account's endpoints subscribed to the type, in the chaining transaction.
    fn events_of(&self, entry: &AuditEntry) -> Vec<(String, String)>;
}

/// A webhook endpoint of an account.
#[derive(Debug, Clone, PartialEq)]
pub struct WebhookRecord {
    pub id: String,
    pub account_id: String,
    pub url: String,
    /// Event types it receives.
    pub events: Vec<String>,
    /// Its signing secret, sealed under the master key for this row.
    pub secret_sealed: Vec<u8>,
    pub created_at: i64,
}

/// One event's delivery to one endpoint (an outbox row).
#[derive(Debug, Clone, PartialEq)]
pub struct DeliveryRecord {
    pub id: String,
    pub webhook_id: String,
    pub event_id: String,
    pub kind: String,
    /// The JSON body posted.
    pub payload: String,
    /// pending, delivered or failed.
    pub state: String,
    pub attempts: u32,
    pub next_at: i64,
    pub last_status: Option<u16>,
    pub last_error: Option<String>,
    pub created_at: i64,
    pub delivered_at: Option<i64>,
}

/// How a delivery attempt ended.
#[derive(Debug, Clone, PartialEq)]
pub enum DeliveryEnd {
    Delivered {
        status: u16,
    },
    /// Tried again at `at`.
    Retry {
        status: Option<u16>,
        error: String,
        at: i64,
    },
    /// Tried for a day: given up.
    GivenUp {
        status: Option<u16>,
        error: String,
    },
}
