//! Policies: the owner's limits for an agent (allowlist, daily limit, per-action cap), the default
//! of an agent without one, and the actions an agent may call.

use actiongate_api_types::ErrorCode;
use actiongate_api_types::catalog::ActionList;
use actiongate_api_types::identity::{PolicyRequest, PolicyView};

use super::{Identity, OwnerContext};
use crate::audit::{actor, kinds};
use crate::catalog::Catalog;
use crate::clock::{from_millis, rfc3339, to_millis};
use crate::error::{Error, Result};
use crate::money::{micros_to_usd, usd_to_micros};
use crate::store::{AuditEvent, PolicyRecord};

impl Identity {
    /// The policy of an agent that has none stored: the server's `[policy.default]`.
    pub(crate) fn default_policy(&self, agent_id: &str, now: time::OffsetDateTime) -> PolicyRecord {
        PolicyRecord {
            agent_id: agent_id.to_owned(),
            allowed_actions: self.default_allowed.clone(),
            daily_limit_micros: self.default_daily_micros,
            max_per_action_micros: self.default_per_action_micros,
            min_health_factor_bps: self.default_health_factor_bps,
            approval_above_micros: None,
            updated_at: to_millis(now),
        }
    }

    // ------------------------------------------------------------------ policy

    pub async fn get_policy(&self, owner: &OwnerContext, agent_id: &str) -> Result<PolicyView> {
        self.owned_agent(owner, agent_id).await?;
        let policy = self.policy_of(agent_id).await?;
        Ok(policy_view(&policy))
    }

    /// The stored policy of an agent (the default if none was ever stored).
    pub async fn policy_of(&self, agent_id: &str) -> Result<PolicyRecord> {
        Ok(self
            .store
            .get_policy(agent_id)
            .await?
            .unwrap_or_else(|| self.default_policy(agent_id, self.clock.now())))
    }

    /// Replaces an agent's policy. Names are resolved through aliases and stored canonical; an
    /// unknown name refuses the whole request and changes nothing.
    pub async fn put_policy(
        &self,
        owner: &OwnerContext,
        agent_id: &str,
        req: &PolicyRequest,
    ) -> Result<PolicyView> {
        self.owned_agent(owner, agent_id).await?;
        let allowed = canonical_names(&self.catalog, &req.allowed_actions)?;
        let policy = PolicyRecord {
            agent_id: agent_id.to_owned(),
            allowed_actions: allowed,
            daily_limit_micros: usd_to_micros("dailyLimitUsd", req.daily_limit_usd)?,
            max_per_action_micros: req
                .max_amount_usd_per_action
                .map(|v| usd_to_micros("maxAmountUsdPerAction", v))
                .transpose()?,
            min_health_factor_bps: match req.min_health_factor {
                Some(v) => health_factor_bps("minHealthFactor", v)?,
                None => self.default_health_factor_bps,
            },
            approval_above_micros: req
                .approval_above_usd
                .map(|v| usd_to_micros("approvalAboveUsd", v))
                .transpose()?,
            updated_at: to_millis(self.clock.now()),
        };
        let view = policy_view(&policy);
        let event = AuditEvent::new(
            &owner.account_id,
            policy.updated_at,
            kinds::POLICY_CHANGED,
            actor::OWNER,
            agent_id,
            serde_json::to_value(&view).map_err(Error::internal)?,
        )
        .with_agent(agent_id);
        self.store.put_policy(&policy, &event).await?;
        self.agents.forget_agent(agent_id);
        tracing::info!(account_id = owner.account_id, agent_id, "policy replaced");
        Ok(view)
    }

    // ------------------------------------------------------------------ catalog reads

    /// Every action; with an agent key, only those its policy allows and that are enabled.
    pub async fn list_actions(&self, agent_key: Option<&str>) -> Result<ActionList> {
        let Some(key) = agent_key else {
            return Ok(ActionList {
                actions: self.catalog.document().actions.clone(),
                filtered_by_policy: false,
            });
        };
        let agent = self.authenticate_agent(Some(key)).await?;
        let policy = self.policy_of(&agent.agent.id).await?;
        let actions = self
            .catalog
            .actions()
            .filter(|a| a.entry.enabled && policy.allowed_actions.iter().any(|n| n == a.name()))
            .map(|a| a.entry.clone())
            .collect();
        Ok(ActionList {
            actions,
            filtered_by_policy: true,
        })
    }
}

pub(super) fn policy_view(p: &PolicyRecord) -> PolicyView {
    PolicyView {
        agent_id: p.agent_id.clone(),
        allowed_actions: p.allowed_actions.clone(),
        daily_limit_usd: micros_to_usd(p.daily_limit_micros),
        max_amount_usd_per_action: p.max_per_action_micros.map(micros_to_usd),
        min_health_factor: p.min_health_factor_bps as f64 / 10_000.0,
        approval_above_usd: p.approval_above_micros.map(micros_to_usd),
        updated_at: rfc3339(from_millis(p.updated_at)),
    }
}

/// A minimum health factor (1 to 100, at most four decimals kept) in ten-thousandths.
pub(crate) fn health_factor_bps(field: &str, value: f64) -> Result<i64> {
    if !value.is_finite() || !(1.0..=100.0).contains(&value) {
        return Err(Error::new(
            ErrorCode::InvalidRequest,
            format!("{field} must be a number from 1 to 100 (Aave liquidates below 1)."),
        ));
    }
    // In range, so the product fits; ten-thousandths are what a policy keeps.
    Ok((value * 10_000.0).round() as i64)
}

/// Resolves names through aliases to canonical names, deduplicated, in the order given.
pub(super) fn canonical_names(catalog: &Catalog, names: &[String]) -> Result<Vec<String>> {
    let mut out: Vec<String> = Vec::with_capacity(names.len());
    for name in names {
        let spec = catalog.resolve(name).ok_or_else(|| {
            Error::new(
                ErrorCode::UnknownAction,
                format!("No action named {name:?} is in the catalog."),
            )
        })?;
        if !out.iter().any(|n| n == spec.name()) {
            out.push(spec.name().to_owned());
        }
    }
    Ok(out)
}
