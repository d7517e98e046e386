//! Execution goes through one provider trait, one implementation per provider family, so that a new
//! venue plugs in without touching the runner. The registry tells the catalog which lanes are live.

use std::collections::HashMap;
use std::sync::Arc;

use actiongate_api_types::ErrorCode;
use actiongate_api_types::chain::BuildTxData;
use actiongate_api_types::delegation::Delegation;
use actiongate_api_types::venues::BlockingReason;
use async_trait::async_trait;

use crate::catalog::{Implemented, Lane};

/// Who an execution runs for.
#[derive(Debug, Clone, PartialEq)]
pub struct Subject {
    /// `did:pkh:eip155:<chainId>:<address>`.
    pub user_did: String,
    pub wallet_address: String,
}

/// Everything a provider needs to run (or re-identify) one execution.
#[derive(Debug, Clone)]
pub struct ExecutionContext {
    pub intent_id: String,
    /// Deterministic and unique per (intent, user): a venue's client order id, a nonce reservation
    /// key. A provider uses it to find an execution again after a crash.
    pub execution_key: String,
    pub action: String,
    pub params: serde_json::Value,
    pub chain_id: u64,
    pub lane: Lane,
    /// The action only reads (the catalog's classification): nothing is sent, nothing to reconcile.
    pub read: bool,
    pub subject: Subject,
    pub agent_id: String,
    pub agent_address: String,
    /// What a fan-out execution runs under, resolved by the core before the provider is called;
    /// `None` on every other lane.
    pub grant: Option<Grant>,
    /// The intent's lease this execution runs under: a provider that signs records a transaction
    /// only while it holds ([`crate::store::NonceStore::record_signed_txs`]). `None` outside the
    /// runner (build-tx signs nothing).
    pub lease: Option<crate::store::LeaseFence>,
}

/// The delegation one fan-out execution runs under: the delegator's newest active delegation to the
/// agent when the execution starts (the core resolved it and refused the execution when there was
/// none). A provider that finds it disabled at the venue answers `DELEGATION_REVOKED`; the core then
/// records the delegation revoked.
#[derive(Debug, Clone)]
pub struct Grant {
    pub hash: String,
    pub delegator: String,
    /// The signed delegation; `None` where it was recorded without its body (a venue that needs no
    /// chain to redeem it).
    pub delegation: Option<Delegation>,
}

/// How one execution ended, or that it has not ended yet (`pending`).
#[derive(Debug, Clone, PartialEq)]
pub struct ExecutionOutcome {
    pub success: bool,
    pub tx_hash: Option<String>,
    /// What a read read.
    pub data: Option<serde_json::Value>,
    pub error: Option<(ErrorCode, String)>,
    /// Sent and not mined yet (or the lease was lost before anything was recorded): the execution
    /// has not ended. The runner leaves it started and looks at it again later (the provider's
    /// `reconcile` re-sends, bumps and waits), never records it failed.
    pub pending: bool,
    /// Nothing was sent and nothing will be for this attempt: a held order (a GTC or GTD
    /// prediction order) whose limit the market does not meet now. The runner puts the execution
    /// back to pending and looks at it again later; `data` is what the order says meanwhile.
    pub held: bool,
}

impl ExecutionOutcome {
    pub fn read(data: serde_json::Value) -> Self {
        Self {
            success: true,
            tx_hash: None,
            data: Some(data),
            error: None,
            pending: false,
            held: false,
        }
    }

    pub fn failed(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            success: false,
            tx_hash: None,
            data: None,
            error: Some((code, message.into())),
            pending: false,
            held: false,
        }
    }

    /// Not ended: `tx_hash` (when one was sent) is not mined yet.
    pub fn pending(tx_hash: Option<String>) -> Self {
        Self {
            success: false,
            tx_hash,
            data: None,
            error: None,
            pending: true,
            held: false,
        }
    }

    /// Not ended, nothing sent: a held order waits for its limit ([`ExecutionOutcome::held`]).
    pub fn held(data: serde_json::Value) -> Self {
        Self {
            success: false,
            tx_hash: None,
            data: Some(data),
            error: None,
            pending: false,
            held: true,
        }
    }
}

impl From<crate::error::Error> for ExecutionOutcome {
    /// A failure as the execution's outcome: its code and message (an internal error's detail is
    /// logged here, never shown).
    fn from(e: crate::error::Error) -> Self {
        if e.code == ErrorCode::Internal {
            tracing::error!(
                detail = e.detail.as_deref().unwrap_or(""),
                "execution failed"
            );
        }
        Self::failed(e.code, e.message)
    }
}

/// What a provider knows of an execution that was started but never recorded as ended (the process
/// running it died).
#[derive(Debug, Clone, PartialEq)]
pub enum Reconciled {
    /// It ended; here is how.
    Done(ExecutionOutcome),
    /// Nothing was sent (or the action is a read, safe to run again): run it now.
    NotSent,
}

/// What a readiness check asks the provider that runs a venue's actions ([`Provider::readiness`]).
#[derive(Debug, Clone)]
pub struct VenueCheck<'a> {
    /// The venue: a `providerId` of the catalog.
    pub venue: &'a str,
    /// The venue's writes through the lane that this provider runs on the chain.
    pub actions: Vec<&'a str>,
    pub chain_id: u64,
    pub lane: Lane,
    /// The wallet that sends and pays the gas: the agent's on execute and executeIntent (the agent
    /// wallet sends each redemption), the signer on buildTx (`None` when not given).
    pub sender: Option<&'a str>,
    /// Whose tokens move: the sender, except on a fan-out (each delegator's own, not read here).
    pub holder: Option<&'a str>,
    /// A token symbol or address, and an amount of it in token units, when known.
    pub token: Option<&'a str>,
    pub amount: Option<&'a str>,
    /// The params of the one action checked (a submit, a preflight); `None` for the venue as a whole.
    pub params: Option<&'a serde_json::Value>,
}

/// A write that may lower a lending position's health ([`Provider::health_change`]).
#[derive(Debug, Clone)]
pub struct HealthQuery<'a> {
    pub action: &'a str,
    pub params: &'a serde_json::Value,
    pub chain_id: u64,
    /// The wallet the write runs for (`None`: a fan-out, or build-tx without a signer).
    pub wallet: Option<&'a str>,
}

/// A lending position before and after a write, as its venue values it: the collateral weighted
/// by each asset's liquidation threshold, and the debt, both in the venue's base currency units.
/// Its health factor is the weighted collateral over the debt (none without debt).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthChange {
    /// Whose position it is.
    pub owner: String,
    pub weighted_collateral_before: u128,
    pub debt_before: u128,
    pub weighted_collateral_after: u128,
    pub debt_after: u128,
}

/// One provider family's execution.
#[async_trait]
pub trait Provider: Send + Sync + 'static {
    /// The (action, lane) pairs this provider runs.
    fn lanes(&self) -> Vec<(&'static str, Lane)>;

    /// The chains on which this provider really runs `action` (its contracts are configured and the
    /// chain has an RPC URL); `None` when the action is not tied to chains by this provider (the
    /// catalog then keeps the family's list).
    fn chains(&self, _action: &str) -> Option<Vec<u64>> {
        None
    }

    /// Builds the unsigned transactions of one action for a wallet to sign (Model B). `wallet` is
    /// the signer when given.
    async fn build_tx(
        &self,
        ctx: &ExecutionContext,
        _wallet: Option<&str>,
    ) -> Result<BuildTxData, crate::error::Error> {
        Err(crate::error::Error::new(
            ErrorCode::NotAvailable,
            format!("{} cannot be built as a transaction here.", ctx.action),
        ))
    }

    /// What blocks the venue's writes now, read live (balances, fees, allowances, pauses): the
    /// reasons the provider can tell (`GAS_SHORT`, `BALANCE_SHORT`, `APPROVAL_REQUIRED`,
    /// `VENUE_PAUSED`, `CHAIN_NOT_CONFIGURED` for a configured contract that is not there). The core
    /// adds the ones it tells (credits, delegations, prices). An error: the state could not be read.
    async fn readiness(
        &self,
        _check: &VenueCheck<'_>,
    ) -> Result<Vec<BlockingReason>, crate::error::Error> {
        Ok(Vec::new())
    }

    /// How a write would change the health of the lending position it touches, read from the
    /// chain now: `None` for a write that cannot lower one. An error when it may lower one and the
    /// position cannot be read (the core then refuses it: a limit that cannot be checked fails
    /// closed).
    async fn health_change(
        &self,
        _query: &HealthQuery<'_>,
    ) -> Result<Option<HealthChange>, crate::error::Error> {
        Ok(None)
    }

    /// Whether a write of `action` that succeeded goes on elsewhere (a bridge's fill on its
    /// destination): its leg is then recorded open and followed through [`Provider::follow`] in the
    /// background until it ends.
    fn follows(&self, _action: &str) -> bool {
        false
    }

    /// What happens after a write that succeeded, when the action goes on elsewhere (a bridge's
    /// deposit is filled on its destination): read from the venue now, given the execution's
    /// chain and its recorded data; `None` when there is nothing to follow. Its `status` is one of
    /// `NOT_FOUND`, `PENDING`, `DONE`, `FAILED` (the bridge vocabulary); only `PENDING` is open.
    async fn follow(
        &self,
        _action: &str,
        _chain_id: u64,
        _data: &serde_json::Value,
    ) -> Result<Option<serde_json::Value>, crate::error::Error> {
        Ok(None)
    }

    /// Runs one execution. Never panics; a failure is an outcome with a code. A fan-out execution
    /// carries its `grant`; answering `DELEGATION_REVOKED` for it tells the core the grant is dead.
    async fn execute(&self, ctx: &ExecutionContext) -> ExecutionOutcome;

    /// Finds an execution that was started but not recorded as ended. Answer `NotSent` only when
    /// certain that nothing was, or will still be, sent for this execution key (a nonce reserved in the
    /// database and unused, a venue that dedupes on the key, or a read); the runner then runs it.
    async fn reconcile(&self, ctx: &ExecutionContext) -> Reconciled;
}

/// Every provider of this build, by action and lane. A provider given later takes an (action, lane)
/// over from one given earlier.
#[derive(Default)]
pub struct Registry {
    by_lane: HashMap<(String, Lane), Arc<dyn Provider>>,
}

impl Registry {
    pub fn new(providers: Vec<Arc<dyn Provider>>) -> Self {
        let mut by_lane = HashMap::new();
        for provider in providers {
            for (action, lane) in provider.lanes() {
                by_lane.insert((action.to_owned(), lane), provider.clone());
            }
        }
        Self { by_lane }
    }

    pub fn provider(&self, action: &str, lane: Lane) -> Option<&Arc<dyn Provider>> {
        self.by_lane.get(&(action.to_owned(), lane))
    }
}

impl Implemented for Registry {
    fn implements(&self, action: &str, lane: Lane) -> bool {
        self.provider(action, lane).is_some()
    }

    /// The union of the chains its providers run the action on; `None` when no provider runs it or
    /// one of them is not tied to chains (the family's list stands).
    fn chains(&self, action: &str) -> Option<Vec<u64>> {
        let mut all = Vec::new();
        let mut any = false;
        for ((a, _), provider) in &self.by_lane {
            if a == action {
                all.extend(provider.chains(action)?);
                any = true;
            }
        }
        if !any {
            return None;
        }
        all.sort_unstable();
        all.dedup();
        Some(all)
    }
}
