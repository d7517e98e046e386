//! The storage port. `actiongate-store` implements it on SQLite and PostgreSQL; both pass the same
//! contract tests. Instants are Unix milliseconds, USD amounts are integer micro-dollars, secrets
//! arrive here only as keyed hashes.

use async_trait::async_trait;

use crate::crypto::SecretHash;

/// A storage failure. Its text is for the log, never for a response.
#[derive(Debug, thiserror::Error)]
#[error("store: {0}")]
pub struct StoreError(pub String);

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

/// The storage port.
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// Answers when the database answers.
    async fn ping(&self) -> Result<(), StoreError>;

    /// Stores a new code for an e-mail, replacing any earlier one (its tries reset).
    async fn put_email_challenge(&self, challenge: &EmailChallenge) -> Result<(), StoreError>;
    async fn get_email_challenge(&self, email: &str) -> Result<Option<EmailChallenge>, StoreError>;
    /// Counts a wrong code atomically and answers the number of wrong codes so far.
    async fn count_failed_attempt(&self, email: &str) -> Result<u32, StoreError>;
    async fn complete_onboarding(&self, onboarding: &Onboarding) -> Result<OnboardingOutcome, StoreError>;

    /// The session with this token hash, if it has not expired at `now`.
    async fn find_session(&self, token_hash: &SecretHash, now: i64) -> Result<Option<SessionRecord>, StoreError>;

    async fn find_agent_by_key(&self, key_hash: &SecretHash) -> Result<Option<AgentRecord>, StoreError>;
    async fn get_agent(&self, agent_id: &str) -> Result<Option<AgentRecord>, StoreError>;
    async fn list_agents(&self, account_id: &str) -> Result<Vec<AgentRecord>, StoreError>;
    async fn create_agent(&self, agent: &NewAgent, policy: &PolicyRecord) -> Result<(), StoreError>;
    /// Replaces the agent's key hash; the old key stops working in the same statement.
    async fn rotate_agent_key(&self, agent_id: &str, key_hash: &SecretHash, now: i64) -> Result<bool, StoreError>;
    /// The sealed execution-wallet key of an agent.
    async fn agent_wallet_sealed(&self, agent_id: &str) -> Result<Option<Vec<u8>>, StoreError>;

    async fn get_policy(&self, agent_id: &str) -> Result<Option<PolicyRecord>, StoreError>;
    async fn put_policy(&self, policy: &PolicyRecord) -> Result<(), StoreError>;
}
