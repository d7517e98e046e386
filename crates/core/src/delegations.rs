//! ERC-7710 delegation (CONTRACT "Delegation"): the owner signs, the agent redeems within the
//! caveats. The core owns who may do what (the agent's own delegations only, caps from its policy,
//! the stored status); the chain layer (`DelegationChain`) owns the framework's encoding, hashing,
//! signatures and onchain reads.

use std::sync::Arc;

use actiongate_api_types::ErrorCode;
use actiongate_api_types::account::{AccountDelegation, AccountDelegationList};
use actiongate_api_types::delegation::{
    Delegation, DelegationActivateRequest, DelegationActivated, DelegationBalance, DelegationCheck,
    DelegationCreateRequest, DelegationCreated, DelegationInspected, DelegationRedeemRequest,
    DelegationRedeemed, DelegationRevoke, DelegationRevokeRequest, DelegationSummary,
    DelegationVerified,
};

use crate::audit::{actor, delegation_event};
use crate::catalog::{Catalog, Lane};
use crate::chains::DEFAULT_CHAIN_ID;
use crate::clock::{Clock, to_millis};
use crate::crypto::random_bytes;
use crate::error::{Error, Result};
use crate::identity::{AgentContext, Identity};
use crate::intents::Intents;
use crate::prices::Prices;
use crate::settings::Settings;
use crate::states::{DelegationStatus, ExecutionState};
use crate::store::{DelegationRecord, Store};
use actiongate_api_types::intents::ExecuteIntentRequest;
use serde_json::json;

pub use crate::delegation_chain::{BuildDelegation, DelegationChain, TokenCap, Validated};

/// Delegation: create, activate, verify, inspect, revoke and redeem an agent's delegations, and the
/// sweep that records revocations made onchain.
pub struct Delegations {
    identity: Arc<Identity>,
    intents: Arc<Intents>,
    /// The Delegation Framework's chain side; the delegation routes are off without it.
    chain: Option<Arc<dyn DelegationChain>>,
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    catalog: Arc<Catalog>,
    prices: Arc<Prices>,
    settings: Arc<Settings>,
}

impl Delegations {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        identity: Arc<Identity>,
        intents: Arc<Intents>,
        chain: Option<Arc<dyn DelegationChain>>,
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        catalog: Arc<Catalog>,
        prices: Arc<Prices>,
        settings: Arc<Settings>,
    ) -> Self {
        Self {
            identity,
            intents,
            chain,
            store,
            clock,
            catalog,
            prices,
            settings,
        }
    }

    fn delegation_chain(&self) -> Result<&Arc<dyn DelegationChain>> {
        self.chain.as_ref().ok_or_else(|| Error::new(ErrorCode::NotAvailable, "Delegation needs a chain with an RPC URL and the Delegation Framework; none is configured here."))
    }

    fn now_secs(&self) -> u64 {
        u64::try_from(self.clock.now().unix_timestamp()).unwrap_or_default()
    }

    fn delegation_chain_id(&self, chain_id: Option<u64>) -> Result<u64> {
        let chain_id = chain_id.unwrap_or(DEFAULT_CHAIN_ID);
        self.settings.chains.known(chain_id)?;
        Ok(chain_id)
    }

    /// Builds a delegation for the owner to sign: caveats derived from the action (its contracts and
    /// functions; the native value one call may carry, from the policy's per-action cap) narrowed by
    /// the ones asked for.
    pub async fn delegation_create(
        &self,
        agent: &AgentContext,
        req: &DelegationCreateRequest,
    ) -> Result<DelegationCreated> {
        let chain_id = self.delegation_chain_id(req.chain_id)?;
        let mut caveats = req.caveats.clone().unwrap_or_default();
        if let Some(at) = req.expires_at {
            caveats.valid_until = Some(caveats.valid_until.map_or(at, |u| u.min(at)));
        }
        if caveats.valid_until.is_some_and(|u| u <= self.now_secs()) {
            return Err(Error::new(
                ErrorCode::DelegationExpired,
                "expiresAt (validUntil) lies in the past: the delegation could never be used.",
            ));
        }
        let mut native_cap = None;
        let mut token_caps = None;
        let action = match &req.action {
            Some(name) => {
                let spec = self.catalog.resolve(name).ok_or_else(|| {
                    Error::new(
                        ErrorCode::UnknownAction,
                        format!("No action named {name:?} is in the catalog."),
                    )
                })?;
                if !spec.is_read() {
                    let policy = self.identity.policy_of(&agent.agent.id).await?;
                    let action_cap = spec
                        .entry
                        .max_amount_usd
                        .map(|v| crate::money::usd_to_micros("maxAmountUsd", v))
                        .transpose()?;
                    let cap = [policy.max_per_action_micros, action_cap]
                        .into_iter()
                        .flatten()
                        .min();
                    if let Some(cap) = cap {
                        if caveats.max_native_value.is_none() {
                            native_cap = self.native_cap_wei(chain_id, cap).await;
                        }
                        if self.delegation_chain()?.caps_tokens(spec.name()) {
                            token_caps = Some(self.token_caps(chain_id, cap).await);
                        }
                    }
                }
                Some(spec.name().to_owned())
            }
            None => None,
        };
        if action.is_none() && caveats.allowed_targets.is_none() {
            return Err(Error::invalid(
                "Name an action, or caveats.allowedTargets: a delegation that may call any contract is not built here.",
            ));
        }
        let salt = random_bytes::<32>().map_err(Error::internal)?;
        let build = BuildDelegation {
            chain_id,
            delegate: agent.agent.wallet_address.clone(),
            delegator: req.delegator.clone(),
            action,
            caveats,
            policy_native_cap_wei: native_cap,
            policy_token_caps: token_caps,
            salt,
            now_secs: self.now_secs(),
        };
        self.delegation_chain()?.build(&build)
    }

    /// The policy's per-action cap in wei of the native coin, at the gateway's price of the native
    /// coin on `chain_id` (none when it has none).
    async fn native_cap_wei(&self, chain_id: u64, cap_micros: i64) -> Option<String> {
        let chain = self.settings.chains.get(chain_id)?;
        let token = crate::prices::TokenRef::resolve("ETH", chain);
        let quote = self
            .prices
            .quote(chain_id, chain, &token, self.now_secs())
            .await
            .ok()?;
        crate::prices::units_for_micros(cap_micros, quote.price, 18).map(|w| w.to_string())
    }

    /// The policy's per-action cap in each listed token of `chain_id` the gateway can price now (a
    /// token it cannot price gets no cap, so the caveat that lists the others refuses it).
    async fn token_caps(&self, chain_id: u64, cap_micros: i64) -> Vec<TokenCap> {
        let Some(chain) = self.settings.chains.get(chain_id) else {
            return vec![];
        };
        let mut caps = Vec::new();
        for (symbol, token) in &chain.tokens {
            let t = crate::prices::TokenRef::resolve(symbol, chain);
            let Ok(quote) = self
                .prices
                .quote(chain_id, chain, &t, self.now_secs())
                .await
            else {
                continue;
            };
            if let Some(raw) =
                crate::prices::units_for_micros(cap_micros, quote.price, token.decimals)
            {
                caps.push(TokenCap {
                    address: token.address.clone(),
                    raw,
                });
            }
        }
        caps
    }

    /// Checks a signed delegation and stores it as active.
    pub async fn delegation_activate(
        &self,
        agent: &AgentContext,
        req: &DelegationActivateRequest,
    ) -> Result<DelegationActivated> {
        let chain_id = self.delegation_chain_id(req.chain_id)?;
        let v = self
            .delegation_chain()?
            .validate(
                chain_id,
                &req.delegation,
                &agent.agent.wallet_address,
                self.now_secs(),
            )
            .await?;
        if let Some(existing) = self.store.get_delegation(&v.hash).await?
            && (existing.agent_id != agent.agent.id || existing.status == DelegationStatus::Revoked)
        {
            return Err(Error::new(
                ErrorCode::DelegationRevoked,
                "This delegation was revoked; the owner signs a new one.",
            ));
        }
        let mut stored = req.delegation.clone();
        stored.delegator = v.delegator.clone();
        let body = serde_json::to_string(&stored).map_err(Error::internal)?;
        let now = to_millis(self.clock.now());
        let record = DelegationRecord {
            hash: v.hash.clone(),
            agent_id: agent.agent.id.clone(),
            delegator: v.delegator.clone(),
            chain_id,
            status: DelegationStatus::Active,
            created_at: now,
            expires_at: v
                .expires_at
                .and_then(|s| i64::try_from(s).ok())
                .map(|s| s.saturating_mul(1000)),
            body: Some(body),
        };
        let event = delegation_event(
            &record.agent_id,
            &record.hash,
            record.status,
            &actor::agent(&record.agent_id),
            now,
            json!({"delegator": record.delegator, "chainId": record.chain_id, "expiresAt": record.expires_at}),
        );
        self.store.put_delegation(&record, &event).await?;
        tracing::info!(agent_id = %agent.agent.id, chain_id, delegation_hash = %v.hash, "delegation activated");
        Ok(DelegationActivated {
            delegation_hash: v.hash,
            status: DelegationStatus::Active.to_string(),
            delegator: v.delegator,
            chain_id,
            signature_kind: v.signature_kind,
            expires_at: v.expires_at,
        })
    }

    /// The agent's delegations as the database has them (the fan-out gate); an active one whose
    /// time window closed reads `expired`.
    pub async fn delegation_check(
        &self,
        agent: &AgentContext,
        chain_id: Option<u64>,
        delegator: Option<&str>,
    ) -> Result<DelegationCheck> {
        let now = to_millis(self.clock.now());
        let rows = self
            .store
            .list_delegations(&agent.agent.id, chain_id, delegator)
            .await?;
        let delegations: Vec<DelegationSummary> = rows
            .into_iter()
            .map(|d| {
                let status = d.status_at(now);
                DelegationSummary {
                    delegation_hash: d.hash,
                    delegator: d.delegator,
                    chain_id: d.chain_id,
                    status: status.to_string(),
                    expires_at: d.expires_at.and_then(|e| u64::try_from(e / 1000).ok()),
                }
            })
            .collect();
        Ok(DelegationCheck {
            active: delegations
                .iter()
                .any(|d| d.status == DelegationStatus::Active.as_str()),
            delegations,
        })
    }

    /// One of the agent's delegations with its signed body.
    async fn own_delegation(
        &self,
        agent: &AgentContext,
        hash: &str,
    ) -> Result<(DelegationRecord, Delegation)> {
        let record = self
            .store
            .get_delegation(&hash.to_ascii_lowercase())
            .await?
            .filter(|d| d.agent_id == agent.agent.id)
            .ok_or_else(|| {
                Error::new(
                    ErrorCode::NotFound,
                    format!("No delegation {hash} to this agent."),
                )
            })?;
        let body = record.body.as_deref().ok_or_else(|| {
            Error::new(
                ErrorCode::NotFound,
                format!("Delegation {hash} has no signed body here."),
            )
        })?;
        let delegation: Delegation = serde_json::from_str(body).map_err(Error::internal)?;
        Ok((record, delegation))
    }

    /// Checks a delegation against the chain; one found disabled onchain is recorded `revoked`.
    pub async fn delegation_verify(
        &self,
        agent: &AgentContext,
        hash: &str,
    ) -> Result<DelegationVerified> {
        let (record, delegation) = self.own_delegation(agent, hash).await?;
        let checks = self
            .delegation_chain()?
            .verify(record.chain_id, &delegation, self.now_secs())
            .await?;
        let now = to_millis(self.clock.now());
        let mut status = record.status;
        let failed = |name: &str| checks.iter().any(|c| c.name == name && !c.ok);
        let active = status == DelegationStatus::Active;
        if failed("notDisabled") {
            status = DelegationStatus::Revoked;
        } else if active && failed("timeWindow") {
            status = DelegationStatus::Expired;
        } else if active && failed("signature") {
            // The account no longer accepts the signature (its owner or its code changed).
            status = DelegationStatus::Invalid;
        }
        if status != record.status {
            let event = delegation_event(
                &record.agent_id,
                &record.hash,
                status,
                &actor::agent(&record.agent_id),
                now,
                json!({"delegator": record.delegator, "foundBy": "verify"}),
            );
            self.store
                .set_delegation_status(&record.hash, status, now, &event)
                .await?;
        }
        let valid = status == DelegationStatus::Active && checks.iter().all(|c| c.ok);
        Ok(DelegationVerified {
            delegation_hash: record.hash,
            valid,
            status: status.to_string(),
            checks,
        })
    }

    pub async fn delegation_inspect(
        &self,
        agent: &AgentContext,
        hash: &str,
    ) -> Result<DelegationInspected> {
        let (record, delegation) = self.own_delegation(agent, hash).await?;
        let caveats = self
            .delegation_chain()?
            .inspect(record.chain_id, &delegation)
            .await?;
        Ok(DelegationInspected {
            delegation_hash: record.hash,
            status: record.status.to_string(),
            chain_id: record.chain_id,
            delegation,
            caveats,
        })
    }

    pub async fn delegation_balance(
        &self,
        agent: &AgentContext,
        hash: &str,
    ) -> Result<DelegationBalance> {
        let (record, delegation) = self.own_delegation(agent, hash).await?;
        self.delegation_chain()?
            .balance(record.chain_id, &delegation)
            .await
    }

    /// Answers the `disableDelegation` transaction for the owner to sign, or, once the chain has the
    /// delegation disabled (by that transaction or any other), records and answers `revoked`.
    pub async fn delegation_revoke(
        &self,
        agent: &AgentContext,
        req: &DelegationRevokeRequest,
    ) -> Result<DelegationRevoke> {
        let (record, delegation) = self.own_delegation(agent, &req.delegation_hash).await?;
        let chain = self.delegation_chain()?;
        if chain.is_disabled(record.chain_id, &record.hash).await? {
            if record.status != DelegationStatus::Revoked {
                let now = to_millis(self.clock.now());
                let event = delegation_event(
                    &record.agent_id,
                    &record.hash,
                    DelegationStatus::Revoked,
                    &actor::agent(&record.agent_id),
                    now,
                    json!({"delegator": record.delegator, "foundBy": "revoke"}),
                );
                self.store
                    .set_delegation_status(&record.hash, DelegationStatus::Revoked, now, &event)
                    .await?;
                tracing::info!(delegation_hash = %record.hash, "delegation revoked onchain");
            }
            return Ok(DelegationRevoke {
                delegation_hash: record.hash,
                status: DelegationStatus::Revoked.to_string(),
                transaction: None,
            });
        }
        let transaction = chain.revoke_tx(record.chain_id, &delegation)?;
        Ok(DelegationRevoke {
            delegation_hash: record.hash,
            status: record.status.to_string(),
            transaction: Some(transaction),
        })
    }

    /// The agent redeems one execution within one delegation: a fan-out intent addressing only its
    /// delegator, with every check of a submission (policy, limits, credits; an explicit
    /// idempotencyKey, so a retry answers the first result and sends nothing again), run in the
    /// request like a direct execution.
    pub async fn delegation_redeem(
        &self,
        agent: &AgentContext,
        key: &str,
        req: &DelegationRedeemRequest,
    ) -> Result<DelegationRedeemed> {
        let (record, _) = self.own_delegation(agent, &req.delegation_hash).await?;
        let now = to_millis(self.clock.now());
        let status = record.status_at(now);
        if status != DelegationStatus::Active {
            let code = if status == DelegationStatus::Revoked {
                ErrorCode::DelegationRevoked
            } else {
                ErrorCode::DelegationExpired
            };
            return Err(Error::new(
                code,
                format!("Delegation {} is not active (it is {status}).", record.hash),
            ));
        }
        let fans_out = self
            .catalog
            .resolve(&req.action)
            .is_some_and(|spec| spec.fans_out(Lane::ExecuteIntent) && !spec.is_read());
        if !fans_out {
            return Err(Error::invalid(format!(
                "{} does not run under a delegation: redeem takes an action that runs for delegated users.",
                req.action
            )));
        }
        // A delegator's executions run under its newest active delegation: redeem only that one.
        let current = self
            .store
            .active_delegation(&agent.agent.id, record.chain_id, &record.delegator, now)
            .await?;
        if current.as_ref().map(|d| d.hash.as_str()) != Some(record.hash.as_str()) {
            return Err(Error::new(
                ErrorCode::DelegationInvalid,
                format!(
                    "{} gave a newer delegation to this agent; it supersedes {}: redeem that one.",
                    record.delegator, record.hash
                ),
            ));
        }
        let submission = ExecuteIntentRequest {
            agent_api_key: key.to_owned(),
            action: req.action.clone(),
            params: req.params.clone(),
            chain_id: Some(record.chain_id),
            estimated_amount_usd: req.estimated_amount_usd,
            idempotency_key: Some(req.idempotency_key.clone()),
        };
        let submitted = self
            .intents
            .submit_scoped(
                &submission,
                Lane::ExecuteIntent,
                Some((&record.delegator, &record.hash)),
            )
            .await
            .map_err(Error::intent_rejection)?;
        self.intents.run_in_request(&submitted).await?;
        let intent = submitted.intent();
        let executions = self.store.list_executions(&intent.id).await?;
        let e = executions.first().ok_or_else(|| {
            Error::internal(format!("redemption intent {} has no execution", intent.id))
        })?;
        let ended = e.state.is_ended();
        Ok(DelegationRedeemed {
            delegation_hash: record.hash,
            intent_id: intent.id.clone(),
            user_did: e.user_did.clone(),
            wallet_address: e.wallet_address.clone(),
            chain_id: e.chain_id,
            status: if ended {
                e.state.to_string()
            } else {
                ExecutionState::Pending.to_string()
            },
            success: e.state == ExecutionState::Succeeded,
            tx_hash: e.tx_hash.clone(),
            code: e.error_code.clone(),
            message: e.error_message.clone(),
        })
    }

    /// The delegations given to the owner's agents, newest first.
    pub async fn owner_delegations(
        &self,
        owner: &crate::identity::OwnerContext,
    ) -> Result<AccountDelegationList> {
        let mut out = Vec::new();
        for agent in self.store.list_agents(&owner.account_id).await? {
            out.extend(self.store.list_delegations(&agent.id, None, None).await?);
        }
        out.sort_by_key(|d| std::cmp::Reverse(d.created_at));
        let now = to_millis(self.clock.now());
        Ok(AccountDelegationList {
            delegations: out.iter().map(|d| account_delegation(d, now)).collect(),
        })
    }

    /// The owner stops the gateway from using a delegation given to one of their agents: recorded
    /// revoked at once (no fan-out runs under it again); the delegator's own onchain revocation is
    /// theirs to send. Revoking a revoked one answers it as it is.
    pub async fn owner_revoke(
        &self,
        owner: &crate::identity::OwnerContext,
        hash: &str,
    ) -> Result<AccountDelegation> {
        let record = self.store.get_delegation(hash).await?.ok_or_else(|| {
            Error::not_found(format!("No delegation {hash} to this account's agents."))
        })?;
        let agent = self.store.get_agent(&record.agent_id).await?;
        if agent.is_none_or(|a| a.account_id != owner.account_id) {
            return Err(Error::not_found(format!(
                "No delegation {hash} to this account's agents."
            )));
        }
        if record.status != DelegationStatus::Revoked {
            let now = to_millis(self.clock.now());
            let event = delegation_event(
                &record.agent_id,
                &record.hash,
                DelegationStatus::Revoked,
                actor::OWNER,
                now,
                json!({"delegator": record.delegator, "foundBy": "owner"}),
            );
            self.store
                .set_delegation_status(&record.hash, DelegationStatus::Revoked, now, &event)
                .await?;
            tracing::info!(delegation_hash = %record.hash, "delegation revoked by the agent's owner");
        }
        let revoked = DelegationRecord {
            status: DelegationStatus::Revoked,
            ..record
        };
        Ok(account_delegation(&revoked, to_millis(self.clock.now())))
    }

    /// Checks every active delegation against the chain: one its delegator disabled (by the
    /// transaction `revoke` built, or any other) is recorded `revoked`, one whose time window closed
    /// `expired`. Delegations on chains this gateway cannot read are left as they are. Answers how
    /// many changed.
    pub async fn sweep_delegations(&self) -> Result<u32> {
        let Some(chain) = &self.chain else {
            return Ok(0);
        };
        let mut after: Option<String> = None;
        let mut changed = 0;
        loop {
            let page = self.store.active_delegations(after.as_deref(), 200).await?;
            let Some(last) = page.last() else { break };
            after = Some(last.hash.clone());
            for d in &page {
                let now = to_millis(self.clock.now());
                let status = if d.status_at(now) == DelegationStatus::Expired {
                    DelegationStatus::Expired
                } else {
                    match chain.is_disabled(d.chain_id, &d.hash).await {
                        Ok(true) => DelegationStatus::Revoked,
                        Ok(false) => continue,
                        // A chain without an RPC URL or a node that does not answer: next sweep.
                        Err(e) => {
                            tracing::debug!(delegation_hash = %d.hash, code = %e.code, "delegation not checked onchain");
                            continue;
                        }
                    }
                };
                let event = delegation_event(
                    &d.agent_id,
                    &d.hash,
                    status,
                    actor::GATEWAY,
                    now,
                    json!({"delegator": d.delegator, "foundBy": "sweep"}),
                );
                if self
                    .store
                    .set_delegation_status(&d.hash, status, now, &event)
                    .await?
                {
                    tracing::info!(delegation_hash = %d.hash, %status, "delegation status from the chain");
                    changed += 1;
                }
            }
        }
        Ok(changed)
    }
}

/// A delegation as its agent's owner reads it: its status at `now`.
fn account_delegation(d: &DelegationRecord, now: i64) -> AccountDelegation {
    let at = |ms: i64| crate::clock::rfc3339(crate::clock::from_millis(ms));
    AccountDelegation {
        hash: d.hash.clone(),
        agent_id: d.agent_id.clone(),
        delegator: d.delegator.clone(),
        chain_id: d.chain_id,
        status: d.status_at(now).as_str().to_owned(),
        created_at: at(d.created_at),
        expires_at: d.expires_at.map(at),
    }
}
