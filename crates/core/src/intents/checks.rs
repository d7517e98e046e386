//! The checks of CONTRACT "Policy" that the core makes from a request alone, in their order: the
//! allowlist, the lane, the params, the chain, the amount limits (a write's USD amount is the larger
//! of the stated one and the gateway's own price, [`crate::prices`]; a write it cannot price is
//! refused with `PRICE_UNAVAILABLE`). Submit, build-tx and preflight run
//! this one sequence ([`Intents::policy_checks`]); what follows it (the daily limit, the users
//! addressed, credits) is decided when the intent is accepted ([`crate::acceptance`]).

use actiongate_api_types::ErrorCode;
use serde_json::Value;

use super::Intents;
use super::refusal;
use crate::catalog::{ActionSpec, Lane};
use crate::error::Result;
use crate::execution::HealthQuery;
use crate::health::check_health;
use crate::money::{micros_to_usd, usd_to_micros};
use crate::prices::Valuation;
use crate::store::PolicyRecord;
use crate::venues::chain_check;

/// One check of the sequence before the amount.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PolicyCheck {
    Allowed,
    Enabled,
    Params,
    Chain,
}

/// What the sequence found: each check before the amount with its verdict, in order, and the USD
/// amount the limits saw (or the amount check's refusal).
pub(crate) struct PolicyChecks {
    verdicts: [(PolicyCheck, Result<()>); 4],
    pub(crate) amount: Result<i64>,
    /// The gateway's price of the write, when it priced one.
    pub(crate) valuation: Option<Valuation>,
}

impl PolicyChecks {
    /// The first refusal in CONTRACT order, else the amount.
    pub(crate) fn first_refusal(self) -> Result<i64> {
        for (_, verdict) in self.verdicts {
            verdict?;
        }
        self.amount
    }

    /// Every check in order, as preflight names and reports it: what it found, or its refusal.
    pub(crate) fn report(&self, lane: Lane, chain_id: u64) -> Vec<(&'static str, Result<String>)> {
        let mut report: Vec<(&'static str, Result<String>)> = self
            .verdicts
            .iter()
            .map(|(check, verdict)| {
                let (name, found) = match check {
                    PolicyCheck::Allowed => ("allowed", "on the allowlist".to_owned()),
                    PolicyCheck::Enabled => ("enabled", format!("through {}", lane.as_str())),
                    PolicyCheck::Params => ("params", "match paramsSchema".to_owned()),
                    PolicyCheck::Chain => ("chain", format!("chain {chain_id}")),
                };
                (name, verdict.clone().map(|()| found))
            })
            .collect();
        let priced = match &self.valuation {
            Some(Valuation {
                quote: Some((token, quote)),
                ..
            }) => format!(
                " (the gateway's price: {} USD per {} from {})",
                quote.price.to_decimal_string(),
                token.name(),
                quote.source.as_str()
            ),
            Some(Valuation { quote: None, .. }) => " (moves no value)".to_owned(),
            None => String::new(),
        };
        let amount = self.amount.clone();
        report.push((
            "amountLimit",
            amount.map(|a| format!("{} USD{priced}", micros_to_usd(a))),
        ));
        report
    }
}

impl Intents {
    /// Runs the sequence for `spec` through `lane` with these params on `chain_id` under `policy`.
    /// Every check runs (preflight reports each); a submit answers the first refusal. A write is
    /// priced only when the checks before the amount pass; `holder` is the one wallet it runs for,
    /// when it has one (a fan-out has many).
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn policy_checks(
        &self,
        spec: &ActionSpec,
        lane: Lane,
        params: &Value,
        chain_id: u64,
        estimated_amount_usd: Option<f64>,
        policy: &PolicyRecord,
        holder: Option<&str>,
    ) -> PolicyChecks {
        let verdicts = [
            (PolicyCheck::Allowed, check_allowed(spec, policy)),
            (PolicyCheck::Enabled, check_lane(spec, lane)),
            (
                PolicyCheck::Params,
                check_params(spec, params).and_then(|()| {
                    crate::orders::check_placement(
                        spec.name(),
                        params,
                        crate::clock::to_millis(self.clock.now()),
                    )
                }),
            ),
            (PolicyCheck::Chain, self.check_chain(spec, chain_id)),
        ];
        // A write is priced only when the checks before the amount pass (its params and chain are
        // what pricing reads); otherwise only the stated amount is held to the limits.
        let earlier_refused = verdicts.iter().any(|(_, v)| v.is_err());
        let valuation = match spec.is_read() || earlier_refused {
            true => Ok(None),
            false => self
                .value_write(spec, params, chain_id, holder)
                .await
                .map(Some),
        };
        let mut amount = self.usd_amount(spec, &valuation, estimated_amount_usd, policy);
        if !spec.is_read() && earlier_refused && amount.is_ok() {
            amount = Err(refusal(
                ErrorCode::PriceUnavailable,
                "not priced: a check before the amount refused the request.",
            ));
        }
        PolicyChecks {
            verdicts,
            amount,
            valuation: valuation.ok().flatten(),
        }
    }

    /// What the gateway prices a write of `spec` with these params at.
    async fn value_write(
        &self,
        spec: &ActionSpec,
        params: &Value,
        chain_id: u64,
        holder: Option<&str>,
    ) -> Result<Valuation> {
        let Some(rule) = &spec.value else {
            return Err(refusal(
                ErrorCode::PriceUnavailable,
                format!("The gateway cannot price {} writes.", spec.name()),
            ));
        };
        let chain = self.settings.chains.known(chain_id)?;
        let now = u64::try_from(self.clock.now().unix_timestamp()).unwrap_or(0);
        self.prices
            .value(rule, params, chain_id, chain, holder, now)
            .await
    }

    fn check_chain(&self, spec: &ActionSpec, chain_id: u64) -> Result<()> {
        chain_check(spec, &self.settings.chains, chain_id)
    }
}

/// The first offending field of a params document, as a JSON pointer-ish path.
fn params_error(spec: &ActionSpec, params: &Value) -> Option<String> {
    let error = spec.validator.iter_errors(params).next()?;
    let path = error.instance_path().to_string();
    let field = if path.is_empty() {
        "params".to_owned()
    } else {
        format!("params{}", path.replace('/', "."))
    };
    Some(format!("{field}: {error}"))
}

pub(super) fn check_allowed(spec: &ActionSpec, policy: &PolicyRecord) -> Result<()> {
    if policy.allowed_actions.iter().any(|a| a == spec.name()) {
        return Ok(());
    }
    Err(refusal(
        ErrorCode::ActionNotAllowed,
        format!(
            "{} is not on this agent's allowlist; its owner can allow it in the agent's policy.",
            spec.name()
        ),
    ))
}

fn check_lane(spec: &ActionSpec, lane: Lane) -> Result<()> {
    if !spec.entry.enabled {
        return Err(refusal(
            ErrorCode::ActionDisabled,
            format!("{} is not enabled in this deployment.", spec.name()),
        ));
    }
    let live = match lane {
        Lane::ExecuteIntent => spec.entry.supports_execute_intent,
        Lane::Execute => spec.entry.supports_execute,
        Lane::BuildTx => spec.entry.supports_build_tx,
    };
    if live {
        return Ok(());
    }
    Err(refusal(
        ErrorCode::ActionDisabled,
        format!(
            "{} is not available through {} in this deployment.",
            spec.name(),
            lane.as_str()
        ),
    ))
}

fn check_params(spec: &ActionSpec, params: &Value) -> Result<()> {
    match params_error(spec, params) {
        Some(problem) => Err(refusal(ErrorCode::InvalidParams, problem)),
        None => Ok(()),
    }
}

impl Intents {
    /// The policy's minimum health factor on a write that may lower a lending position's
    /// (`None`: the write cannot). Read from the chain through the provider that runs the write.
    pub(crate) async fn health_check(
        &self,
        spec: &ActionSpec,
        lane: Lane,
        params: &Value,
        chain_id: u64,
        policy: &PolicyRecord,
        wallet: Option<&str>,
    ) -> Option<Result<String>> {
        if spec.is_read() {
            return None;
        }
        let provider = self.registry.provider(spec.name(), lane)?;
        let query = HealthQuery {
            action: spec.name(),
            params,
            chain_id,
            wallet,
        };
        match provider.health_change(&query).await {
            Ok(None) => None,
            Ok(Some(change)) => Some(check_health(&change, policy.min_health_factor_bps)),
            Err(e) => Some(Err(e)),
        }
    }

    /// The USD amount the limits see (the larger of the stated amount and the gateway's price; a
    /// read counts what it states, or 0), checked against the action's maxAmountUsd and the
    /// policy's per-action cap.
    fn usd_amount(
        &self,
        spec: &ActionSpec,
        valuation: &Result<Option<Valuation>>,
        estimated_amount_usd: Option<f64>,
        policy: &PolicyRecord,
    ) -> Result<i64> {
        let stated = estimated_amount_usd
            .map(|v| usd_to_micros("estimatedAmountUsd", v))
            .transpose()?
            .unwrap_or(0);
        let priced = match valuation {
            Ok(v) => v.as_ref().map_or(0, |v| v.micros),
            Err(e) => return Err(e.clone()),
        };
        let amount = stated.max(priced);
        if let Some(max) = spec.entry.max_amount_usd {
            let max_micros = usd_to_micros("maxAmountUsd", max)?;
            if amount > max_micros && !spec.is_read() {
                return Err(refusal(
                    ErrorCode::PolicyAmountLimit,
                    format!(
                        "{} USD is above {}'s maxAmountUsd of {max}.",
                        micros_to_usd(amount),
                        spec.name()
                    ),
                ));
            }
        }
        if let Some(cap) = policy.max_per_action_micros
            && amount > cap
        {
            return Err(refusal(
                ErrorCode::PolicyAmountLimit,
                format!(
                    "{} USD is above this agent's per-action cap of {} USD.",
                    micros_to_usd(amount),
                    micros_to_usd(cap)
                ),
            ));
        }
        Ok(amount)
    }
}
