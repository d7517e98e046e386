//! The gateway's tunables, as the server's configuration resolves them.

use time::Duration;

use crate::chains::Chains;
use crate::limits::LimitSettings;
use crate::payments::PurchaseSettings;
use crate::personhood::PersonhoodSettings;
use crate::prices::PriceBook;
use crate::pricing::CreditSettings;

/// The policy a new agent starts with (`[policy.default]`).
#[derive(Debug, Clone)]
pub struct DefaultPolicy {
    /// `None`: every enabled read action of the catalog.
    pub allowed_actions: Option<Vec<String>>,
    pub daily_limit_usd: f64,
    pub max_amount_usd_per_action: Option<f64>,
    /// The lowest health factor a borrow or withdrawal may leave a lending position at.
    pub min_health_factor: f64,
}

impl Default for DefaultPolicy {
    fn default() -> Self {
        Self {
            allowed_actions: None,
            daily_limit_usd: 1000.0,
            max_amount_usd_per_action: None,
            min_health_factor: 1.5,
        }
    }
}

/// Tunables of the gateway.
#[derive(Debug, Clone)]
pub struct Settings {
    pub email_code_ttl: Duration,
    pub email_code_max_attempts: u32,
    pub session_ttl: Duration,
    pub default_policy: DefaultPolicy,
    pub credits: CreditSettings,
    pub prices: PriceBook,
    pub chains: Chains,
    /// How long a derived idempotency key (no explicit key) makes a repeat the same intent.
    pub idempotency_window: Duration,
    /// How long an intent lease lasts without renewal.
    pub lease: Duration,
    /// How long a direct execution's answer waits for its outcome.
    pub direct_timeout: Duration,
    /// How many executions of one fan-out intent run at once (`[intents] fanout-concurrency`).
    pub fanout_concurrency: usize,
    /// How credits are sold (x402).
    pub purchase: PurchaseSettings,
    /// How often active delegations are checked onchain for revocations; zero: never.
    pub delegation_sweep: Duration,
    /// The World ID relying party (`[personhood]`).
    pub personhood: PersonhoodSettings,
    /// Rate limits (`[limits]`).
    pub limits: LimitSettings,
    /// How long an intent waits for its owner's approval (`[approvals] ttl-seconds`).
    pub approval_ttl: Duration,
    /// A ledger entry that takes an account's balance below this is a `credits.low` event
    /// (`[webhooks] credits-low-below`).
    pub credits_low_below: i64,
    /// Whether webhooks may be posted to private, loopback and link-local addresses
    /// (`[webhooks] allow-private`; never in production).
    pub webhooks_allow_private: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            email_code_ttl: Duration::minutes(10),
            email_code_max_attempts: 5,
            session_ttl: Duration::days(7),
            default_policy: DefaultPolicy::default(),
            credits: CreditSettings::default(),
            prices: PriceBook::default(),
            chains: Chains::default(),
            idempotency_window: Duration::seconds(60),
            lease: Duration::seconds(30),
            direct_timeout: Duration::seconds(30),
            // docs/benchmarks.md, stop 45: at N=1,000 ~0.35 of the node's full-block rate at 256,
            // ~0.28 at 64.
            fanout_concurrency: 256,
            purchase: PurchaseSettings::default(),
            delegation_sweep: Duration::seconds(30),
            personhood: PersonhoodSettings::default(),
            limits: LimitSettings::default(),
            approval_ttl: Duration::hours(1),
            credits_low_below: 100,
            webhooks_allow_private: false,
        }
    }
}
