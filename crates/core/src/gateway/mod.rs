//! The gateway: a thin facade over the capability services. It builds them from the ports once,
//! in the one order their dependencies allow (identity; venue readiness over identity; audit and
//! approvals over the ports; intents over identity, venues and approvals; delegation over intents; credits over identity; personhood alone), and hands each out. REST, MCP and the CLI
//! call the services through it and render what they answer.

use std::sync::Arc;

use actiongate_api_types::ErrorCode;

use crate::approvals::Approvals;
use crate::audit::Audit;
use crate::catalog::Catalog;
use crate::clock::Clock;
use crate::clock::to_millis;
use crate::crypto::Keyring;
use crate::delegation_chain::DelegationChain;
use crate::delegations::Delegations;
use crate::error::{Error, Result};
use crate::execution::Registry;
use crate::identity::Identity;
use crate::intents::Intents;
use crate::legs::Legs;
use crate::limits::Limits;
use crate::mail::Mailer;
use crate::payments::{AuthorizationSettler, PaymentVerifier};
use crate::personhood::{Personhood, ProofVerifier, RpSigner};
use crate::prices::Prices;
use crate::purchases::Credits;
use crate::runner::IntentRunner;
use crate::settings::Settings;
use crate::store::{PruneCutoffs, Store};
use crate::webhooks::{WebhookTransport, Webhooks};

/// How long idempotency keys, used personhood challenges and unpaid invoices are kept.
pub const RETAINED: time::Duration = time::Duration::days(7);
use crate::venues::Venues;

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
    /// The World ID relying party's signer and the proof verifier it calls.
    pub personhood: PersonhoodPorts,
    /// Posts webhook deliveries; webhooks are off without it.
    pub webhooks: Option<Arc<dyn WebhookTransport>>,
}

/// What personhood needs from outside: the key that signs relying-party requests and the verifier
/// of proofs.
pub struct PersonhoodPorts {
    pub signer: RpSigner,
    pub verifier: Arc<dyn ProofVerifier>,
}

/// The core: the capability services, and what the surfaces read beside them.
pub struct Gateway {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    catalog: Arc<Catalog>,
    settings: Arc<Settings>,
    registry: Arc<Registry>,
    runner: Arc<IntentRunner>,
    prices: Arc<Prices>,
    limits: Arc<Limits>,
    identity: Arc<Identity>,
    venues: Arc<Venues>,
    audit: Arc<Audit>,
    webhooks: Arc<Webhooks>,
    approvals: Arc<Approvals>,
    legs: Arc<Legs>,
    intents: Arc<Intents>,
    delegations: Arc<Delegations>,
    credits: Arc<Credits>,
    personhood: Arc<Personhood>,
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
            personhood,
            webhooks,
        } = ports;
        let settings = Arc::new(settings);
        let prices = prices.unwrap_or_else(|| Arc::new(Prices::new(settings.prices.clone(), None)));
        let runner = Arc::new(IntentRunner::new(
            store.clone(),
            registry.clone(),
            catalog.clone(),
            clock.clone(),
            settings.lease,
            settings.fanout_concurrency,
        ));
        let limits = Arc::new(Limits::new(settings.limits.clone()));
        let linker = crate::audit::Linker::new(keys.clone())
            .with_credits_low_below(settings.credits_low_below);
        let webhooks = Arc::new(Webhooks::new(
            store.clone(),
            clock.clone(),
            keys.clone(),
            webhooks,
        ));
        let identity = Arc::new(Identity::new(
            store.clone(),
            mailer.clone(),
            clock.clone(),
            catalog.clone(),
            keys,
            settings.clone(),
            limits.clone(),
        )?);
        let venues = Arc::new(Venues::new(
            identity.clone(),
            store.clone(),
            clock.clone(),
            catalog.clone(),
            registry.clone(),
            prices.clone(),
            settings.clone(),
            delegations.clone(),
        ));
        let audit = Arc::new(Audit::new(store.clone(), linker));
        let approvals = Arc::new(Approvals::new(
            store.clone(),
            clock.clone(),
            runner.clone(),
            mailer,
            settings.clone(),
        ));
        let legs = Arc::new(Legs::new(store.clone(), registry.clone(), clock.clone()));
        let intents = Arc::new(Intents::new(
            identity.clone(),
            venues.clone(),
            approvals.clone(),
            store.clone(),
            clock.clone(),
            catalog.clone(),
            registry.clone(),
            runner.clone(),
            prices.clone(),
            settings.clone(),
        ));
        let delegations = Arc::new(Delegations::new(
            identity.clone(),
            intents.clone(),
            delegations,
            store.clone(),
            clock.clone(),
            catalog.clone(),
            prices.clone(),
            settings.clone(),
        ));
        let credits = Arc::new(Credits::new(
            identity.clone(),
            store.clone(),
            clock.clone(),
            settings.clone(),
            payments,
            settler,
        ));
        let personhood = Arc::new(Personhood::new(
            store.clone(),
            clock.clone(),
            personhood.signer,
            personhood.verifier,
            settings.personhood.clone(),
        ));
        Ok(Self {
            store,
            clock,
            catalog,
            settings,
            registry,
            runner,
            prices,
            limits,
            identity,
            venues,
            audit,
            webhooks,
            approvals,
            legs,
            intents,
            delegations,
            credits,
            personhood,
        })
    }

    /// Onboarding, sessions, agents and their keys, policies, and the catalog as an agent may see
    /// it.
    pub fn identity(&self) -> &Identity {
        &self.identity
    }

    /// Venue readiness: what blocks a venue's actions for an agent now.
    pub fn venues(&self) -> &Venues {
        &self.venues
    }

    /// The audit trail: the chaining step, export and verification.
    pub fn audit(&self) -> &Audit {
        &self.audit
    }

    /// Webhook endpoints and their deliveries.
    pub fn webhooks(&self) -> &Webhooks {
        &self.webhooks
    }

    /// The owner's approval queue: approve, reject, and the expiry of what was left waiting.
    pub fn approvals(&self) -> &Approvals {
        &self.approvals
    }

    /// The legs venues run elsewhere after a write (a bridge's fill), followed until they end.
    pub fn legs(&self) -> &Legs {
        &self.legs
    }

    /// Submit, direct execution, build-tx, preflight, and what an agent reads back.
    pub fn intents(&self) -> &Intents {
        &self.intents
    }

    /// ERC-7710 delegations of an agent.
    pub fn delegations(&self) -> &Delegations {
        &self.delegations
    }

    /// Buying credits (x402) and linking the wallets that pay.
    pub fn credits(&self) -> &Credits {
        &self.credits
    }

    /// Proof of personhood (World ID) for an account.
    pub fn personhood(&self) -> &Personhood {
        &self.personhood
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

    /// The process's rate limits; the surfaces apply the per-address ones (onboarding, MCP
    /// session starts), identity the per-key and per-session ones.
    pub fn limits(&self) -> &Limits {
        &self.limits
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

    /// Deletes what has outlived its use: expired e-mail codes, owner sessions and wallet-link
    /// messages at once; e-mail check budgets a day after their window began; idempotency keys
    /// ([`RETAINED`]: CONTRACT keeps them at least 24 hours), personhood challenges and unpaid
    /// invoices [`RETAINED`] after they were made or expired. Answers how many rows went.
    pub async fn prune(&self) -> Result<u64> {
        let now = to_millis(self.clock.now());
        let retained = i64::try_from(RETAINED.whole_milliseconds()).unwrap_or(i64::MAX);
        let cutoffs = PruneCutoffs {
            expired_before: now,
            budget_window_before: now.saturating_sub(86_400_000),
            retained_before: now.saturating_sub(retained),
        };
        Ok(self.store.prune(&cutoffs).await?)
    }

    /// Reads what an operator watches from the database and sets the metrics of it (a scrape of
    /// `GET /metrics`): queued intents, the runner's lag, signed transactions not mined, by chain.
    pub async fn record_operations(&self) -> Result<()> {
        let ops = self.store.operations().await.map_err(|e| {
            Error::new(ErrorCode::NotAvailable, "The database does not answer.").with_detail(e)
        })?;
        let chains: Vec<u64> = self
            .settings
            .chains
            .0
            .iter()
            .filter(|(_, c)| c.rpc_url.is_some())
            .map(|(id, _)| *id)
            .collect();
        crate::metrics::operations(&ops, to_millis(self.clock.now()), &chains);
        Ok(())
    }

    /// Answers when the database answers.
    pub async fn ready(&self) -> Result<()> {
        self.store.ping().await.map_err(|e| {
            Error::new(ErrorCode::NotAvailable, "The database does not answer.").with_detail(e)
        })
    }
}
