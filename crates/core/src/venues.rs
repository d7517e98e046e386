//! Venue readiness (SPEC "Check"): what blocks a venue's actions for this agent on a chain and a
//! lane, read live, each reason with what fixes it. A venue is a provider family of the catalog.
//! The core tells what it owns (the chain, credits, delegations, prices); the provider that runs the
//! venue's writes tells what the chain says (gas, balances, allowances, pauses), through
//! [`Provider::readiness`]. A submit of a write runs [`Venues::blocking`] for its action and is
//! refused with `VENUE_NOT_READY` when the chain says no.

use std::sync::Arc;

use actiongate_api_types::ErrorCode;
use actiongate_api_types::delegation::Delegation;
use actiongate_api_types::venues::{
    BlockingCode, BlockingReason, Fix, ReadinessQuery, VenueList, VenueListQuery, VenueReadiness,
    VenueSummary,
};
use serde_json::{Value, json};

use crate::catalog::{ActionSpec, Catalog, Lane};
use crate::chains::{Chains, DEFAULT_CHAIN_ID};
use crate::clock::{Clock, rfc3339, to_millis};
use crate::delegation_chain::DelegationChain;
use crate::error::{Error, Result};
use crate::execution::{HealthQuery, Provider, Registry, VenueCheck};
use crate::health::check_health;
use crate::identity::Identity;
use crate::ledger::{Cover, day_of};
use crate::prices::{Prices, TokenRef, ValueRule};
use crate::settings::Settings;
use crate::states::DelegationStatus;
use crate::store::{AgentRecord, Store};

/// The provider kinds whose venues need credentials of their own (an exchange account).
const CREDENTIAL_KINDS: &[&str] = &["cex", "offchainPerp"];

/// Venue readiness.
pub struct Venues {
    identity: Arc<Identity>,
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    catalog: Arc<Catalog>,
    registry: Arc<Registry>,
    prices: Arc<Prices>,
    settings: Arc<Settings>,
    delegations: Option<Arc<dyn DelegationChain>>,
}

/// What one readiness check is about, beside the venue, chain and lane.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Subject<'a> {
    /// Only this action of the venue (a submit, a preflight); `None`: the venue's actions.
    pub action: Option<&'a ActionSpec>,
    pub params: Option<&'a Value>,
    pub token: Option<&'a str>,
    pub amount: Option<&'a str>,
    /// The signer on the buildTx lane.
    pub wallet: Option<&'a str>,
}

/// Which reasons a check tells: all of them (a readiness read), or only what the chain says (a
/// submit, whose acceptance decides credits and delegations with its own codes and whose checks
/// before priced the token).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scope {
    All,
    Chain,
}

/// Whether the venue's action runs on a chain this gateway knows, with an RPC URL where it needs one:
/// `UNKNOWN_CHAIN` for a chain it does not know, `CHAIN_NOT_CONFIGURED` for one the action does not
/// run on here. The one rule of the policy checks' `chain` step and of readiness.
pub(crate) fn chain_check(spec: &ActionSpec, chains: &Chains, chain_id: u64) -> Result<()> {
    let chain = chains.known(chain_id)?;
    let supported = &spec.entry.supported_chains;
    if !supported.is_empty() && !supported.contains(&chain_id) {
        return Err(Error::new(
            ErrorCode::ChainNotConfigured,
            format!(
                "{} does not run on chain {chain_id}; it runs on {supported:?}.",
                spec.name()
            ),
        ));
    }
    let needs_rpc = !supported.is_empty()
        && matches!(
            spec.entry.billing_tier.as_deref(),
            Some("write" | "read_rpc")
        );
    if needs_rpc && chain.rpc_url.is_none() {
        return Err(Error::new(
            ErrorCode::ChainNotConfigured,
            format!(
                "{} needs chain {chain_id} ({}), which has no RPC URL configured here.",
                spec.name(),
                chain.name
            ),
        ));
    }
    Ok(())
}

/// The lane of a query: `executeIntent` when omitted.
fn lane_of(text: Option<&str>) -> Result<Lane> {
    match text {
        None => Ok(Lane::ExecuteIntent),
        Some(t) => t.parse().map_err(|_| {
            Error::invalid(format!(
                "lane must be executeIntent, execute or buildTx, not {t:?}"
            ))
        }),
    }
}

/// The signer a buildTx check reads (gas, balance, allowances): required there, a 0x address.
fn signer_of(lane: Lane, wallet: Option<&str>) -> Result<()> {
    match (lane, wallet) {
        (_, Some(w)) if !crate::prices::is_address(w) => {
            Err(Error::invalid("walletAddress must be a 0x address"))
        }
        (Lane::BuildTx, None) => Err(Error::invalid(
            "walletAddress is required on the buildTx lane: its gas, balance and allowances are what is checked",
        )),
        _ => Ok(()),
    }
}

/// The token and amount a write of `spec` takes from its holder: by its value rule, except that
/// unwrapping takes WETH (its value is priced as the native coin it gives back).
fn moved<'a>(spec: &ActionSpec, params: &'a Value) -> (Option<&'a str>, Option<&'a str>) {
    let get = |name: &str| params.get(name).and_then(Value::as_str);
    if spec.name() == "unwrap-native" {
        return (Some("WETH"), get("amount"));
    }
    match &spec.value {
        Some(ValueRule::Token { token, amount } | ValueRule::Position { token, amount, .. }) => {
            (get(token), get(amount))
        }
        Some(ValueRule::Native { amount }) => (Some("ETH"), get(amount)),
        Some(ValueRule::VaultAsset { amount, .. } | ValueRule::MarketCollateral { amount, .. }) => {
            (None, get(amount))
        }
        Some(ValueRule::Nothing) | None => (None, None),
    }
}

fn reason(
    code: BlockingCode,
    message: impl Into<String>,
    text: impl Into<String>,
) -> BlockingReason {
    BlockingReason::new(
        code,
        message,
        Fix {
            text: text.into(),
            ..Fix::default()
        },
    )
}

impl Venues {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        identity: Arc<Identity>,
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        catalog: Arc<Catalog>,
        registry: Arc<Registry>,
        prices: Arc<Prices>,
        settings: Arc<Settings>,
        delegations: Option<Arc<dyn DelegationChain>>,
    ) -> Self {
        Self {
            identity,
            store,
            clock,
            catalog,
            registry,
            prices,
            settings,
            delegations,
        }
    }

    /// `GET /api/v1/agent/venues/readiness`: the venue for the agent of `agent_key`.
    pub async fn readiness(
        &self,
        agent_key: Option<&str>,
        q: &ReadinessQuery,
    ) -> Result<VenueReadiness> {
        let agent = self.identity.authenticate_agent(agent_key).await?.agent;
        let lane = lane_of(q.lane.as_deref())?;
        let chain_id = q.chain_id.unwrap_or(DEFAULT_CHAIN_ID);
        self.known_chain(chain_id)?;
        if !self.catalog.is_provider(&q.venue) {
            return Err(Error::not_found(format!(
                "No venue {:?}: a venue is a providerId of the catalog (GET /api/v1/agent/venues lists them).",
                q.venue
            )));
        }
        signer_of(lane, q.wallet_address.as_deref())?;
        let subject = Subject {
            token: q.token.as_deref(),
            amount: q.amount.as_deref(),
            wallet: q.wallet_address.as_deref(),
            ..Subject::default()
        };
        let reasons = self
            .blocking(&agent, &q.venue, chain_id, lane, subject, Scope::All)
            .await?;
        Ok(VenueReadiness {
            venue: q.venue.clone(),
            chain_id,
            lane: lane.as_str().to_owned(),
            ready: reasons.is_empty(),
            blocking_reasons: reasons,
            checked_at: rfc3339(self.clock.now()),
        })
    }

    /// `GET /api/v1/agent/venues`: every venue of the catalog with its enabled actions through the
    /// lane and whether it is ready for this agent.
    pub async fn list(&self, agent_key: Option<&str>, q: &VenueListQuery) -> Result<VenueList> {
        let agent = self.identity.authenticate_agent(agent_key).await?.agent;
        let lane = lane_of(q.lane.as_deref())?;
        let chain_id = q.chain_id.unwrap_or(DEFAULT_CHAIN_ID);
        self.known_chain(chain_id)?;
        signer_of(lane, q.wallet_address.as_deref())?;
        let subject = Subject {
            wallet: q.wallet_address.as_deref(),
            ..Subject::default()
        };
        let mut venues = Vec::new();
        for family in &self.catalog.document().provider_families {
            let venue = family.provider_id.as_str();
            let reasons = self
                .blocking(&agent, venue, chain_id, lane, subject, Scope::All)
                .await?;
            venues.push(VenueSummary {
                venue: venue.to_owned(),
                description: family.description.clone(),
                actions: self
                    .actions(venue, lane, None)
                    .iter()
                    .map(|a| a.name().to_owned())
                    .collect(),
                ready: reasons.is_empty(),
                blocking_reasons: reasons,
            });
        }
        Ok(VenueList {
            chain_id,
            lane: lane.as_str().to_owned(),
            venues,
            checked_at: rfc3339(self.clock.now()),
        })
    }

    /// The submit's gate and the preflight's `venueReady`: `VENUE_NOT_READY`, the reasons in its
    /// detail, when the chain says the venue cannot run `spec` with these params for the agent now
    /// (only what the chain says: credits, delegations and prices keep their own codes).
    pub(crate) async fn gate(
        &self,
        agent: &AgentRecord,
        spec: &ActionSpec,
        params: &Value,
        chain_id: u64,
        lane: Lane,
    ) -> Result<()> {
        let (token, amount) = moved(spec, params);
        let subject = Subject {
            action: Some(spec),
            params: Some(params),
            token,
            amount,
            wallet: None,
        };
        let venue = &spec.entry.provider_id;
        let reasons = self
            .blocking(agent, venue, chain_id, lane, subject, Scope::Chain)
            .await?;
        match reasons.is_empty() {
            true => Ok(()),
            false => Err(not_ready(venue, chain_id, lane, &reasons)),
        }
    }

    fn known_chain(&self, chain_id: u64) -> Result<()> {
        self.settings.chains.known(chain_id).map(drop)
    }

    /// The venue's enabled actions through `lane` (only `only` when given).
    fn actions<'a>(
        &'a self,
        venue: &str,
        lane: Lane,
        only: Option<&'a ActionSpec>,
    ) -> Vec<&'a ActionSpec> {
        match only {
            Some(spec) => vec![spec],
            None => self
                .catalog
                .actions()
                .filter(|a| a.entry.provider_id == venue && a.entry.enabled)
                .filter(|a| self.registry.provider(a.name(), lane).is_some())
                .collect(),
        }
    }

    /// Every reason that blocks the venue, in a fixed order: what this deployment runs, the chain,
    /// credits, delegations, the token's price, then what the venue's provider reads onchain.
    pub(crate) async fn blocking(
        &self,
        agent: &AgentRecord,
        venue: &str,
        chain_id: u64,
        lane: Lane,
        subject: Subject<'_>,
        scope: Scope,
    ) -> Result<Vec<BlockingReason>> {
        let mut reasons = Vec::new();
        let actions = self.actions(venue, lane, subject.action);
        if actions.is_empty() {
            let kind = self
                .catalog
                .document()
                .provider_families
                .iter()
                .find(|f| f.provider_id == venue)
                .map(|f| f.provider_kind.as_str())
                .unwrap_or_default();
            reasons.push(if CREDENTIAL_KINDS.contains(&kind) {
                reason(
                    BlockingCode::CredentialsMissing,
                    format!("{venue} needs account credentials at the venue, and this deployment has none."),
                    "Use a deployment that holds credentials for this venue, or another venue.",
                )
            } else {
                reason(
                    BlockingCode::VenueUnavailable,
                    format!("This deployment runs none of {venue}'s actions through {}.", lane.as_str()),
                    "Use another lane or venue: GET /api/v1/agent/venues lists what runs here.",
                )
            });
            return Ok(reasons);
        }
        // The chain: the actions that run on it here.
        let mut on_chain = Vec::new();
        let mut refusal = None;
        for spec in &actions {
            match chain_check(spec, &self.settings.chains, chain_id) {
                Ok(()) => on_chain.push(*spec),
                Err(e) => refusal = refusal.or(Some(e)),
            }
        }
        if on_chain.is_empty() {
            let message = refusal.map_or_else(String::new, |e| e.message);
            reasons.push(reason(
                BlockingCode::ChainNotConfigured,
                message,
                format!(
                    "The operator configures chain {chain_id}: [chains.{chain_id}] rpc-url and the venue's contracts."
                ),
            ));
            return Ok(reasons);
        }
        let writes: Vec<&ActionSpec> = on_chain.iter().copied().filter(|a| !a.is_read()).collect();
        if scope == Scope::All {
            reasons.extend(self.credits_short(agent, &on_chain).await?);
            if lane == Lane::ExecuteIntent && writes.iter().any(|a| a.fans_out(lane)) {
                reasons.extend(self.delegation_missing(agent, chain_id, &writes).await?);
            }
            if let Some(token) = subject.token {
                reasons.extend(self.price_unavailable(chain_id, token).await);
            }
        }
        if writes.is_empty() {
            return Ok(reasons);
        }
        let sender = match lane {
            Lane::BuildTx => subject.wallet,
            Lane::Execute | Lane::ExecuteIntent => Some(agent.wallet_address.as_str()),
        };
        let holder = match lane {
            Lane::ExecuteIntent => None,
            _ => sender,
        };
        // Each provider that runs some of the writes, asked once for those.
        let mut asked: Vec<(&Arc<dyn Provider>, Vec<&str>)> = Vec::new();
        for spec in &writes {
            if let Some(p) = self.registry.provider(spec.name(), lane) {
                match asked.iter_mut().find(|(q, _)| Arc::ptr_eq(q, p)) {
                    Some((_, names)) => names.push(spec.name()),
                    None => asked.push((p, vec![spec.name()])),
                }
            }
        }
        for (provider, names) in asked {
            let check = VenueCheck {
                venue,
                actions: names,
                chain_id,
                lane,
                sender,
                holder,
                token: subject.token,
                amount: subject.amount,
                params: subject.params,
            };
            reasons.extend(provider.readiness(&check).await?);
        }
        // The venue as a whole, for a token and an amount: each lending write of that amount the
        // policy's health factor would refuse.
        if let (Scope::All, Some(token), Some(amount)) = (scope, subject.token, subject.amount) {
            let params = json!({"asset": token, "amount": amount});
            let policy = self.identity.policy_of(&agent.id).await?;
            for spec in &writes {
                let Some(provider) = self.registry.provider(spec.name(), lane) else {
                    continue;
                };
                let query = HealthQuery {
                    action: spec.name(),
                    params: &params,
                    chain_id,
                    wallet: holder,
                };
                // A position that cannot be read here is the submit's refusal, not a reason.
                if let Ok(Some(change)) = provider.health_change(&query).await
                    && let Err(e) = check_health(&change, policy.min_health_factor_bps)
                {
                    reasons.push(reason(
                        BlockingCode::HealthFactorLow,
                        format!("{} of {amount} {token}: {}", spec.name(), e.message),
                        "Supply more collateral or repay first, or ask the owner for a lower minHealthFactor.",
                    ));
                }
            }
        }
        Ok(reasons)
    }

    /// `CREDITS_SHORT`: the account cannot pay one more execution of the dearest of the actions.
    async fn credits_short(
        &self,
        agent: &AgentRecord,
        actions: &[&ActionSpec],
    ) -> Result<Option<BlockingReason>> {
        let credits = &self.settings.credits;
        let price = actions
            .iter()
            .map(|a| credits.price(a.entry.billing_tier.as_deref()))
            .max()
            .unwrap_or(0);
        let account = self
            .store
            .credit_account(&agent.account_id)
            .await?
            .unwrap_or_default();
        let day = day_of(to_millis(self.clock.now()));
        let short = match account.cover(price, credits.free_per_day, day) {
            Cover::Covered { .. } => return Ok(None),
            Cover::Insufficient { balance, price } => {
                format!(
                    "One execution costs {price} credits; the balance is {balance} and today's free requests are used."
                )
            }
            Cover::AllowanceUsed => format!(
                "Today's {} free requests are used and the paid balance is empty.",
                credits.free_per_day
            ),
        };
        Ok(Some(BlockingReason::new(
            BlockingCode::CreditsShort,
            short,
            Fix {
                text: "Buy credits with x402, or wait for 00:00 UTC for today's free requests."
                    .into(),
                route: Some("POST /api/v1/agent/credits/buy-with-x402".into()),
                ..Fix::default()
            },
        )))
    }

    /// `DELEGATION_MISSING`: no active delegation to the agent on the chain lets it call the
    /// contracts of any of the venue's fan-out writes.
    async fn delegation_missing(
        &self,
        agent: &AgentRecord,
        chain_id: u64,
        writes: &[&ActionSpec],
    ) -> Result<Option<BlockingReason>> {
        let now = to_millis(self.clock.now());
        let delegations = self
            .store
            .list_delegations(&agent.id, Some(chain_id), None)
            .await?;
        let covered = delegations
            .iter()
            .filter(|d| d.status_at(now) == DelegationStatus::Active)
            .any(|d| {
                let Some(chain) = &self.delegations else {
                    return true;
                };
                let body = d
                    .body
                    .as_deref()
                    .and_then(|b| serde_json::from_str::<Delegation>(b).ok());
                body.is_some_and(|body| {
                    writes
                        .iter()
                        .any(|a| chain.covers(chain_id, &body, a.name()))
                })
            });
        if covered {
            return Ok(None);
        }
        let first = writes.first().map(|a| a.name()).unwrap_or_default();
        Ok(Some(BlockingReason::new(
            BlockingCode::DelegationMissing,
            format!(
                "No user has an active delegation to this agent on chain {chain_id} that lets it call this venue's contracts."
            ),
            Fix {
                text: format!(
                    "Have a user sign a delegation for {first}: create it, the user signs it, then activate it."
                ),
                route: Some("POST /api/v1/agent/delegation/create".into()),
                action: None,
                transaction: None,
            },
        )))
    }

    /// `PRICE_UNAVAILABLE`: the gateway cannot price the token now, so a write of it is refused.
    async fn price_unavailable(&self, chain_id: u64, token: &str) -> Option<BlockingReason> {
        let chain = self.settings.chains.get(chain_id)?;
        let now_secs = u64::try_from(self.clock.now().unix_timestamp()).unwrap_or_default();
        let t = TokenRef::resolve(token, chain);
        let e = self
            .prices
            .quote(chain_id, chain, &t, now_secs)
            .await
            .err()?;
        Some(reason(
            BlockingCode::PriceUnavailable,
            e.message,
            "Wait for the price source to update, or use a token the gateway prices (the operator configures [prices] and the chain's feeds).",
        ))
    }
}

/// `VENUE_NOT_READY`: the refusal of a submit whose venue is blocked, the reasons in `detail`.
pub(crate) fn not_ready(
    venue: &str,
    chain_id: u64,
    lane: Lane,
    reasons: &[BlockingReason],
) -> Error {
    let codes: Vec<&str> = reasons.iter().map(|r| r.code.as_str()).collect();
    let first = reasons
        .first()
        .map(|r| r.message.as_str())
        .unwrap_or_default();
    Error::new(
        ErrorCode::VenueNotReady,
        format!(
            "{venue} is not ready on chain {chain_id} ({}): {first}",
            codes.join(", ")
        ),
    )
    .with_shown(json!({
        "venue": venue,
        "chainId": chain_id,
        "lane": lane.as_str(),
        "blockingReasons": reasons,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lane_is_named_or_defaults_to_fan_out() {
        assert_eq!(lane_of(None).ok(), Some(Lane::ExecuteIntent));
        assert_eq!(lane_of(Some("buildTx")).ok(), Some(Lane::BuildTx));
        assert_eq!(
            lane_of(Some("wallet")).err().map(|e| e.code),
            Some(ErrorCode::InvalidRequest)
        );
    }

    #[test]
    fn a_refusal_carries_the_reasons_in_its_detail() {
        let reasons = [reason(BlockingCode::GasShort, "no gas", "send gas")];
        let e = not_ready("uniswap-v2", 84532, Lane::Execute, &reasons);
        assert_eq!(e.code, ErrorCode::VenueNotReady);
        assert!(e.message.contains("GAS_SHORT"), "{}", e.message);
        assert_eq!(
            e.shown,
            Some(json!({
                "venue": "uniswap-v2",
                "chainId": 84532,
                "lane": "execute",
                "blockingReasons": [{"code": "GAS_SHORT", "message": "no gas", "fix": {"text": "send gas"}}],
            }))
        );
    }
}
