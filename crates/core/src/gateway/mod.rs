//! The gateway's use cases for identity, catalog reads and policy. REST, MCP and the CLI all call
//! these methods and render what they answer.

mod identity;
mod policy;

use std::sync::Arc;

use actiongate_api_types::ErrorCode;
use time::Duration;

use crate::catalog::Catalog;
use crate::chains::Chains;
use crate::clock::Clock;
use crate::crypto::{Keyring, SecretHash};
use crate::delegation_chain::DelegationChain;
use crate::error::{Error, Result};
use crate::execution::Registry;
use crate::gateway::policy::canonical_names;
use crate::mail::Mailer;
use crate::money::usd_to_micros;
use crate::payments::{AuthorizationSettler, PaymentVerifier, PurchaseSettings};
use crate::prices::{PriceBook, Prices};
use crate::pricing::CreditSettings;
use crate::runner::IntentRunner;
use crate::store::{AgentRecord, PolicyRecord, Store};

const HASH_AGENT_KEY: &str = "agent-key";
const HASH_SESSION: &str = "owner-session";
const HASH_EMAIL_CODE: &str = "email-code";
/// How soon a new code may replace a live one.
const RESEND_COOLDOWN_MS: i64 = 30_000;

/// The policy a new agent starts with (`[policy.default]`).
#[derive(Debug, Clone)]
pub struct DefaultPolicy {
    /// `None`: every enabled read action of the catalog.
    pub allowed_actions: Option<Vec<String>>,
    pub daily_limit_usd: f64,
    pub max_amount_usd_per_action: Option<f64>,
}

impl Default for DefaultPolicy {
    fn default() -> Self {
        Self {
            allowed_actions: None,
            daily_limit_usd: 1000.0,
            max_amount_usd_per_action: None,
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
    /// How credits are sold (x402).
    pub purchase: PurchaseSettings,
    /// How often active delegations are checked onchain for revocations; zero: never.
    pub delegation_sweep: Duration,
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
            purchase: PurchaseSettings::default(),
            delegation_sweep: Duration::seconds(30),
        }
    }
}

/// The gateway's connections to the outside world.
pub struct Ports {
    pub store: Arc<dyn Store>,
    pub mailer: Arc<dyn Mailer>,
    pub clock: Arc<dyn Clock>,
    /// Checks credit payments onchain; credit purchases are off without it.
    pub payments: Option<Arc<dyn PaymentVerifier>>,
    /// Settles x402 EIP-3009 authorizations; the standard x402 scheme is off without it.
    pub settler: Option<Arc<dyn AuthorizationSettler>>,
    /// ERC-7710 delegations on the Delegation Framework; the delegation routes are off without it.
    pub delegations: Option<Arc<dyn DelegationChain>>,
    /// The price layer, shared with the providers that read prices; without it, the fixed
    /// `[prices]` book alone prices writes.
    pub prices: Option<Arc<Prices>>,
}

/// An authenticated agent.
#[derive(Debug, Clone)]
pub struct AgentContext {
    pub agent: AgentRecord,
}

/// An authenticated owner.
#[derive(Debug, Clone)]
pub struct OwnerContext {
    pub account_id: String,
}

/// An agent and its stored policy as read for a submit, with the hash of the key that found them.
#[derive(Debug, Clone)]
pub(crate) struct AgentBasis {
    pub agent: AgentContext,
    pub policy: Option<PolicyRecord>,
    pub key_hash: SecretHash,
}

/// Agents with their stored policies by key hash, so that a submit need not read them. An entry is
/// trusted only for an acceptance, which the accepting transaction confirms against the database
/// (`AcceptOutcome::Stale` otherwise); a refusal is always decided again on a fresh read. Entries
/// live [`AGENT_CACHE_TTL`]; the map is emptied when it holds [`AGENT_CACHE_MAX`].
#[derive(Default)]
struct AgentCache {
    entries:
        std::sync::Mutex<std::collections::HashMap<SecretHash, (std::time::Instant, AgentBasis)>>,
}

const AGENT_CACHE_TTL: std::time::Duration = std::time::Duration::from_secs(30);
const AGENT_CACHE_MAX: usize = 10_000;

impl AgentCache {
    fn get(&self, hash: &SecretHash) -> Option<AgentBasis> {
        let entries = self
            .entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        entries
            .get(hash)
            .filter(|(at, _)| at.elapsed() < AGENT_CACHE_TTL)
            .map(|(_, b)| b.clone())
    }

    fn put(&self, basis: &AgentBasis) {
        let mut entries = self
            .entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if entries.len() >= AGENT_CACHE_MAX {
            entries.clear();
        }
        entries.insert(
            basis.key_hash.clone(),
            (std::time::Instant::now(), basis.clone()),
        );
    }

    fn forget(&self, hash: &SecretHash) {
        self.entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(hash);
    }

    fn forget_agent(&self, agent_id: &str) {
        self.entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .retain(|_, (_, b)| b.agent.agent.id != agent_id);
    }
}

/// The core: holds the ports and the catalog.
pub struct Gateway {
    store: Arc<dyn Store>,
    mailer: Arc<dyn Mailer>,
    clock: Arc<dyn Clock>,
    catalog: Arc<Catalog>,
    keys: Keyring,
    settings: Settings,
    runner: Arc<IntentRunner>,
    registry: Arc<Registry>,
    payments: Option<Arc<dyn PaymentVerifier>>,
    settler: Option<Arc<dyn AuthorizationSettler>>,
    delegations: Option<Arc<dyn DelegationChain>>,
    prices: Arc<Prices>,
    /// The default policy resolved against the catalog once.
    default_allowed: Vec<String>,
    default_daily_micros: i64,
    default_per_action_micros: Option<i64>,
    agents: AgentCache,
}

impl Gateway {
    /// Builds the core; fails when the default policy names actions the catalog does not have.
    pub fn new(
        ports: Ports,
        catalog: Arc<Catalog>,
        registry: Arc<Registry>,
        keys: Keyring,
        settings: Settings,
    ) -> Result<Self> {
        let Ports {
            store,
            mailer,
            clock,
            payments,
            settler,
            delegations,
            prices,
        } = ports;
        let prices = prices.unwrap_or_else(|| Arc::new(Prices::new(settings.prices.clone(), None)));
        let runner = Arc::new(IntentRunner::new(
            store.clone(),
            registry.clone(),
            catalog.clone(),
            clock.clone(),
            settings.lease,
        ));
        let default_allowed = match &settings.default_policy.allowed_actions {
            Some(names) => canonical_names(&catalog, names)?,
            None => catalog
                .actions()
                .filter(|a| a.is_read() && a.entry.enabled)
                .map(|a| a.name().to_owned())
                .collect(),
        };
        let default_daily_micros = usd_to_micros(
            "policy.default.dailyLimitUsd",
            settings.default_policy.daily_limit_usd,
        )?;
        let default_per_action_micros = settings
            .default_policy
            .max_amount_usd_per_action
            .map(|v| usd_to_micros("policy.default.maxAmountUsdPerAction", v))
            .transpose()?;
        Ok(Self {
            store,
            mailer,
            clock,
            catalog,
            keys,
            settings,
            runner,
            registry,
            payments,
            settler,
            delegations,
            prices,
            default_allowed,
            default_daily_micros,
            default_per_action_micros,
            agents: AgentCache::default(),
        })
    }

    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// The onchain payment checks, when the payment chain has an RPC URL.
    pub fn payments(&self) -> Option<&Arc<dyn PaymentVerifier>> {
        self.payments.as_ref()
    }

    /// The x402 settlement of EIP-3009 authorizations, when configured.
    pub fn settler(&self) -> Option<&Arc<dyn AuthorizationSettler>> {
        self.settler.as_ref()
    }

    /// The Delegation Framework's chain side, when configured.
    pub fn delegations(&self) -> Option<&Arc<dyn DelegationChain>> {
        self.delegations.as_ref()
    }

    /// The price layer: what a write is worth.
    pub fn prices(&self) -> &Prices {
        &self.prices
    }

    /// The providers of this build, by action and lane.
    pub fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    /// The intent runner; the server spawns its workers.
    pub fn runner(&self) -> &Arc<IntentRunner> {
        &self.runner
    }

    pub fn now(&self) -> time::OffsetDateTime {
        self.clock.now()
    }

    /// Answers when the database answers.
    pub async fn ready(&self) -> Result<()> {
        self.store.ping().await.map_err(|e| {
            Error::new(ErrorCode::NotAvailable, "The database does not answer.").with_detail(e)
        })
    }
}

impl Error {
    /// Attaches an internal detail for the log.
    pub fn with_detail(mut self, detail: impl std::fmt::Display) -> Self {
        self.detail = Some(detail.to_string());
        self
    }
}
