//! Preflight: every check of a submission with its verdict, nothing written.

use actiongate_api_types::ErrorCode;
use actiongate_api_types::intents::{ExecuteIntentRequest, PreflightCheck, PreflightReport};

use super::Intents;
use super::refusal;
use crate::acceptance::counted_usage;
use crate::catalog::Lane;
use crate::chains::DEFAULT_CHAIN_ID;
use crate::clock::to_millis;
use crate::error::Result;
use crate::ledger::{Cover, day_of, price_for};
use crate::money::micros_to_usd;

impl Intents {
    /// Every check of a submission, each with its verdict, and nothing written. The daily limit,
    /// delegation and credits are read as they stand now; the submission itself decides them again
    /// in its transaction.
    pub async fn preflight(
        &self,
        req: &ExecuteIntentRequest,
        lane: Lane,
    ) -> Result<PreflightReport> {
        let mut checks: Vec<PreflightCheck> = Vec::new();
        let verdict = |name: &str, r: Result<String>| match r {
            Ok(detail) => PreflightCheck {
                name: name.into(),
                ok: Some(true),
                code: None,
                detail,
            },
            Err(e) => PreflightCheck {
                name: name.into(),
                ok: Some(false),
                code: Some(e.code.as_str().into()),
                detail: e.message,
            },
        };
        let skipped = |name: &str, why: &str| PreflightCheck {
            name: name.into(),
            ok: None,
            code: None,
            detail: why.into(),
        };
        const LATER: [&str; 10] = [
            "actionKnown",
            "allowed",
            "enabled",
            "params",
            "chain",
            "amountLimit",
            "dailyLimit",
            "delegation",
            "credits",
            "venueReady",
        ];
        let agent = match self
            .identity
            .authenticate_agent(Some(&req.agent_api_key))
            .await
        {
            Ok(a) => {
                checks.push(verdict("keyValid", Ok(format!("agent {}", a.agent.id))));
                a
            }
            Err(e) => {
                checks.push(verdict("keyValid", Err(e)));
                checks.extend(
                    LATER
                        .iter()
                        .map(|n| skipped(n, "not checked: the key is not valid")),
                );
                return Ok(PreflightReport {
                    ready: false,
                    checks,
                });
            }
        };
        let Some(spec) = self.catalog.resolve(&req.action) else {
            checks.push(verdict(
                "actionKnown",
                Err(refusal(
                    ErrorCode::UnknownAction,
                    format!("No action named {:?} is in the catalog.", req.action),
                )),
            ));
            checks.extend(
                LATER[1..]
                    .iter()
                    .map(|n| skipped(n, "not checked: the action is unknown")),
            );
            return Ok(PreflightReport {
                ready: false,
                checks,
            });
        };
        checks.push(verdict("actionKnown", Ok(spec.name().to_owned())));
        let policy = self.identity.policy_of(&agent.agent.id).await?;
        let chain_id = req.chain_id.unwrap_or(DEFAULT_CHAIN_ID);
        let holder = (!spec.fans_out(lane)).then_some(agent.agent.wallet_address.as_str());
        let policy_checks = self
            .policy_checks(
                spec,
                lane,
                &req.params,
                chain_id,
                req.estimated_amount_usd,
                &policy,
                holder,
            )
            .await;
        for (name, result) in policy_checks.report(lane, chain_id) {
            checks.push(verdict(name, result));
        }
        // The health factor a lending write leaves, once the checks before it pass.
        if policy_checks.amount.is_ok()
            && let Some(result) = self
                .health_check(spec, lane, &req.params, chain_id, &policy, holder)
                .await
        {
            checks.push(verdict("healthFactor", result));
        }
        let amount = policy_checks.amount.unwrap_or(0);
        let day = day_of(to_millis(self.clock.now()));
        let used = self.store.daily_usage(&agent.agent.id, day).await?;
        let fan_out = spec.fans_out(lane);
        let users = if fan_out {
            self.store
                .count_active_delegations(&agent.agent.id, chain_id, to_millis(self.clock.now()))
                .await?
        } else {
            1
        };
        let counted = counted_usage(amount, usize::try_from(users.max(1)).unwrap_or(usize::MAX));
        let daily = if spec.is_read()
            || crate::pricing::fits_daily_limit(used, counted, policy.daily_limit_micros)
        {
            Ok(format!(
                "{} of {} USD used today",
                micros_to_usd(used),
                micros_to_usd(policy.daily_limit_micros)
            ))
        } else {
            Err(refusal(
                ErrorCode::PolicyDailyLimit,
                format!(
                    "{} USD more does not fit today's limit.",
                    micros_to_usd(counted)
                ),
            ))
        };
        checks.push(verdict("dailyLimit", daily));
        let delegation = if !fan_out {
            Ok("not needed: runs for the agent's own wallet".to_owned())
        } else if users > 0 {
            Ok(format!("{users} active delegations on chain {chain_id}"))
        } else {
            Err(refusal(
                ErrorCode::DelegationRequired,
                format!("No active delegation to this agent on chain {chain_id}."),
            ))
        };
        checks.push(verdict("delegation", delegation));
        let account = self.store.credit_account(&agent.agent.account_id).await?;
        let account = account.unwrap_or_default();
        let free_per_day = self.settings.credits.free_per_day;
        let per_execution = self
            .settings
            .credits
            .price(spec.entry.billing_tier.as_deref());
        let credits = match price_for(per_execution, users.max(1)) {
            // Refused as the accepting transaction refuses it.
            None => Err(refusal(
                ErrorCode::InsufficientCredits,
                format!(
                    "{per_execution} credits for each of {users} users is more than any balance holds."
                ),
            )),
            Some(price) => match account.cover(price, free_per_day, day) {
                Cover::Covered {
                    reserve: 0,
                    free_request: false,
                } => Ok("free".to_owned()),
                Cover::Covered {
                    free_request: true, ..
                } => Ok(format!(
                    "a free request ({} used today)",
                    account.free_used_on(day)
                )),
                Cover::Covered { reserve, .. } => {
                    Ok(format!("{reserve} of {} credits", account.balance))
                }
                Cover::Insufficient { balance, price } => Err(refusal(
                    ErrorCode::InsufficientCredits,
                    format!("{price} credits needed, {balance} available."),
                )),
                Cover::AllowanceUsed => Err(refusal(
                    ErrorCode::DailyFreeLimitExceeded,
                    "The balance is empty and today's free requests are used.",
                )),
            },
        };
        checks.push(verdict("credits", credits));
        let venue = &spec.entry.provider_id;
        let venue_ready = if spec.is_read() {
            Ok(format!("a read of {venue}: its venue never blocks it"))
        } else {
            self.venues
                .gate(&agent.agent, spec, &req.params, chain_id, lane)
                .await
                .map(|()| format!("{venue} is ready on chain {chain_id}"))
        };
        checks.push(verdict("venueReady", venue_ready));
        let ready = checks.iter().all(|c| c.ok != Some(false));
        Ok(PreflightReport { ready, checks })
    }
}
