//! Intent submission with every check of CONTRACT "Policy" in order, intent status, direct
//! execution, and the credit balance.

use std::collections::BTreeMap;

use actiongate_api_types::chain::{BuildTxData, BuildTxRequest};
use actiongate_api_types::intents::{
    AgentIdentity, CreditBalance, DirectExecution, ExecuteIntentRequest, Intent, IntentResult,
    PreflightCheck, PreflightReport,
};
use actiongate_api_types::{ErrorCode, ErrorFamily};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::catalog::{ActionSpec, Lane};
use crate::clock::{from_millis, rfc3339, to_millis};
use crate::error::{Error, Result};
use crate::execution::{ExecutionContext, Subject};
use crate::gateway::{AgentBasis, AgentContext, Gateway};
use crate::ledger::{Cover, day_of, day_start, price_for};
use crate::money::{micros_to_usd, usd_to_micros};
use crate::store::{
    AcceptOutcome, ExecutionDraft, ExecutionRecord, IntentDraft, IntentRecord, PolicyRecord,
};

/// The default chain (SPEC).
pub const DEFAULT_CHAIN_ID: u64 = 8453;
const MAX_IDEMPOTENCY_KEY: usize = 255;

/// What a submission produced.
#[derive(Debug)]
pub enum Submitted {
    /// A new intent.
    New(IntentRecord),
    /// The same request was accepted before under this key.
    Replay(IntentRecord),
}

impl Submitted {
    pub fn intent(&self) -> &IntentRecord {
        match self {
            Submitted::New(i) | Submitted::Replay(i) => i,
        }
    }
}

/// A JSON value with every object's keys sorted, so that equal requests hash equally.
fn canonical(v: &Value) -> Value {
    match v {
        Value::Object(map) => {
            let sorted: BTreeMap<&String, Value> =
                map.iter().map(|(k, v)| (k, canonical(v))).collect();
            Value::Object(sorted.into_iter().map(|(k, v)| (k.clone(), v)).collect())
        }
        Value::Array(items) => Value::Array(items.iter().map(canonical).collect()),
        other => other.clone(),
    }
}

fn refusal(code: ErrorCode, message: impl Into<String>) -> Error {
    Error::new(code, message)
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

impl Gateway {
    /// Submits an intent (Model A) or a direct execution (`lane` Execute). Runs the checks of CONTRACT
    /// "Policy" in order; the first failure answers, and a refusal creates nothing.
    pub async fn submit(&self, req: &ExecuteIntentRequest, lane: Lane) -> Result<Submitted> {
        self.submit_scoped(req, lane, None).await
    }

    /// [`Gateway::submit`], a fan-out addressing only one delegator (a redemption of one delegation,
    /// given as (delegator, delegation hash)), which runs in the request like a direct execution.
    pub(crate) async fn submit_scoped(
        &self,
        req: &ExecuteIntentRequest,
        lane: Lane,
        only: Option<(&str, &str)>,
    ) -> Result<Submitted> {
        // The first attempt checks against this process's cached agent and policy: an acceptance is
        // confirmed by the accepting transaction, and anything else is decided again on a fresh
        // read. A fresh attempt that finds them changed meanwhile (a concurrent key rotation or
        // policy change) reads once more.
        let key = Some(req.agent_api_key.as_str());
        if let Some(basis) = self.cached_agent_basis(key)
            && let Ok(Some(done)) = self.submit_with(req, lane, only, basis, false).await
        {
            return Ok(done);
        }
        for _ in 0..2 {
            let basis = self.read_agent_basis(key).await?;
            if let Some(done) = self.submit_with(req, lane, only, basis, true).await? {
                return Ok(done);
            }
        }
        Err(Error::new(
            ErrorCode::NotAvailable,
            "The agent's key or policy changed while this request was checked; send it again.",
        )
        .with_retry_after(1))
    }

    /// One attempt of a submit against `basis` (`fresh`: read for this attempt). `None`: the basis is
    /// not the agent's any more, or a cached basis met a refusal; nothing was written.
    async fn submit_with(
        &self,
        req: &ExecuteIntentRequest,
        lane: Lane,
        only: Option<(&str, &str)>,
        basis: AgentBasis,
        fresh: bool,
    ) -> Result<Option<Submitted>> {
        let only_delegator = only.map(|(delegator, _)| delegator);
        let AgentBasis {
            agent,
            policy: stored_policy,
            key_hash,
        } = basis;
        let refuse = |e: Error| if fresh { Err(e) } else { Ok(None) };
        let Some(spec) = self.catalog().resolve(&req.action) else {
            return refuse(refusal(
                ErrorCode::UnknownAction,
                format!("No action named {:?} is in the catalog.", req.action),
            ));
        };
        let explicit_key = match &req.idempotency_key {
            Some(k)
                if k.is_empty()
                    || k.len() > MAX_IDEMPOTENCY_KEY
                    || k.chars().any(char::is_control) =>
            {
                return refuse(Error::invalid(format!(
                    "idempotencyKey must be 1 to {MAX_IDEMPOTENCY_KEY} printable characters"
                )));
            }
            other => other.clone(),
        };
        if lane == Lane::Execute && !spec.is_read() && explicit_key.is_none() {
            return refuse(refusal(
                ErrorCode::WalletIdempotencyKeyRequired,
                "A write from the agent wallet needs an explicit idempotencyKey, so that a retry cannot pay twice.",
            ));
        }
        let chain_id = req.chain_id.unwrap_or(DEFAULT_CHAIN_ID);
        if !req.params.is_object() {
            return refuse(refusal(
                ErrorCode::InvalidParams,
                "params must be a JSON object.",
            ));
        }
        if let Some(Err(e)) = req
            .estimated_amount_usd
            .map(|v| usd_to_micros("estimatedAmountUsd", v))
        {
            return refuse(e);
        }

        // A retry of an accepted request answers the first response even if the policy has changed
        // since: the accepting transaction finds the key when every check passes; when one fails,
        // the key is looked up before the refusal is answered.
        let now = self.now();
        let request_hash: [u8; 32] = Sha256::digest(
            canonical(&json!({
                "lane": lane.as_str(),
                "action": spec.name(),
                "params": req.params,
                "chainId": chain_id,
                "estimatedAmountUsd": req.estimated_amount_usd,
                "delegation": only.map(|(_, hash)| hash),
            }))
            .to_string()
            .as_bytes(),
        )
        .into();
        let window = self.settings().idempotency_window;
        let (idempotency_key, replace_before) = match &explicit_key {
            Some(k) => (format!("k:{k}"), None),
            None => (
                format!("d:{}", hex::encode(request_hash)),
                Some(to_millis(now - window)),
            ),
        };
        let policy = stored_policy
            .clone()
            .unwrap_or_else(|| self.default_policy(&agent.agent.id, now));
        let checked = (|| {
            check_allowed(spec, &policy)?;
            check_lane(spec, lane)?;
            check_params(spec, &req.params)?;
            self.check_chain(spec, chain_id)?;
            self.usd_amount(spec, &req.params, req.estimated_amount_usd, &policy)
        })();
        let amount = match checked {
            Ok(v) => v,
            Err(refused) if !fresh => return refuse(refused),
            Err(refused) => {
                return match self
                    .replay(&agent, &idempotency_key, &request_hash, replace_before)
                    .await?
                {
                    Some(replayed) => Ok(Some(Submitted::Replay(replayed))),
                    None => Err(refused),
                };
            }
        };

        let intent_id = uuid::Uuid::now_v7().to_string();
        let fan_out = spec.entry.requires_subscription && lane == Lane::ExecuteIntent;
        // A direct execution or a redemption runs in the request; a read for the agent itself is
        // handed to this process's runner as accepted (no claim); the rest wait to be claimed.
        let in_request = lane == Lane::Execute || only_delegator.is_some();
        let lease = if in_request {
            Some((
                self.runner().owner().to_owned(),
                to_millis(now + self.settings().direct_timeout + self.settings().lease),
            ))
        } else if spec.is_read() && !fan_out {
            self.runner().read_lease()
        } else {
            None
        };
        let handed = !in_request && lease.is_some();
        let draft = IntentDraft {
            id: intent_id.clone(),
            agent_id: agent.agent.id.clone(),
            account_id: agent.agent.account_id.clone(),
            action: spec.name().to_owned(),
            lane: lane.as_str().to_owned(),
            params: canonical(&req.params).to_string(),
            chain_id,
            amount_micros: amount,
            is_write: !spec.is_read(),
            daily_limit_micros: policy.daily_limit_micros,
            price_per_execution: self
                .settings()
                .credits
                .price(spec.entry.billing_tier.as_deref()),
            free_per_day: self.settings().credits.free_per_day,
            idempotency_key,
            request_hash,
            replace_idempotency_before: replace_before,
            fan_out,
            only_delegator: only_delegator.map(str::to_owned),
            own: ExecutionDraft {
                user_did: format!("did:pkh:eip155:{chain_id}:{}", agent.agent.wallet_address),
                wallet_address: agent.agent.wallet_address.clone(),
            },
            lease,
            day: day_of(to_millis(now)),
            now: to_millis(now),
            key_hash,
            policy: stored_policy,
        };
        let (outcome, draft) = if handed {
            // Accepted and handed over in a task of its own: should the caller go away while the
            // batch commits (a client that disconnects, a cancelled future), the accepted read still
            // goes to the runner at once instead of waiting for its lease to run out.
            let (store, runner) = (self.store().clone(), self.runner().clone());
            tokio::spawn(async move {
                let outcome = store.accept_intent(&draft).await;
                if let Ok(AcceptOutcome::Accepted {
                    total,
                    reserved_credits,
                    free_request,
                }) = &outcome
                {
                    let execution =
                        ExecutionRecord::pending(&draft.id, 0, draft.own.clone(), draft.chain_id);
                    runner.hand(
                        accepted_record(&draft, *total, *reserved_credits, *free_request),
                        execution,
                    );
                }
                (outcome, draft)
            })
            .await
            .map_err(Error::internal)?
        } else {
            (self.store().accept_intent(&draft).await, draft)
        };
        let (total, reserved_credits, free_request) = match outcome? {
            AcceptOutcome::Accepted {
                total,
                reserved_credits,
                free_request,
            } => (total, reserved_credits, free_request),
            AcceptOutcome::Replay { intent_id } => {
                return Ok(Some(Submitted::Replay(
                    self.intent_record(&intent_id).await?,
                )));
            }
            AcceptOutcome::Stale => return Ok(None),
            AcceptOutcome::KeyReused => return Err(key_reused()),
            AcceptOutcome::DailyLimit { used_micros } => {
                return Err(refusal(
                    ErrorCode::PolicyDailyLimit,
                    format!(
                        "This agent has used {} of its {} USD daily limit; {} USD more does not fit. The limit resets at 00:00 UTC.",
                        micros_to_usd(used_micros),
                        micros_to_usd(policy.daily_limit_micros),
                        micros_to_usd(amount)
                    ),
                ));
            }
            AcceptOutcome::DelegationRequired => {
                return Err(refusal(
                    ErrorCode::DelegationRequired,
                    format!(
                        "{} fans out to delegated users, and no user has an active delegation to this agent on chain {chain_id}.",
                        spec.name()
                    ),
                ));
            }
            AcceptOutcome::InsufficientCredits { balance, price } => {
                return Err(refusal(
                    ErrorCode::InsufficientCredits,
                    format!(
                        "This costs {price} credits; the balance is {balance} and today's free requests are used. Buy credits to continue."
                    ),
                ));
            }
            AcceptOutcome::DailyFreeLimitExceeded => {
                return Err(refusal(
                    ErrorCode::DailyFreeLimitExceeded,
                    format!(
                        "Today's {} free requests are used and the paid balance is empty. Buy credits, or wait for 00:00 UTC.",
                        self.settings().credits.free_per_day
                    ),
                ));
            }
        };
        tracing::info!(
            intent_id,
            agent_id = agent.agent.id,
            action = spec.name(),
            lane = lane.as_str(),
            "intent accepted"
        );
        let record = accepted_record(&draft, total, reserved_credits, free_request);
        if draft.lease.is_none() {
            self.runner().wake();
        }
        Ok(Some(Submitted::New(record)))
    }

    async fn replay(
        &self,
        agent: &AgentContext,
        key: &str,
        hash: &[u8; 32],
        replace_before: Option<i64>,
    ) -> Result<Option<IntentRecord>> {
        let Some(found) = self.store().find_idempotency(&agent.agent.id, key).await? else {
            return Ok(None);
        };
        if replace_before.is_some_and(|t| found.created_at < t) {
            return Ok(None);
        }
        if &found.request_hash != hash {
            return Err(key_reused());
        }
        Ok(Some(self.intent_record(&found.intent_id).await?))
    }

    async fn intent_record(&self, intent_id: &str) -> Result<IntentRecord> {
        self.store()
            .get_intent(intent_id)
            .await?
            .ok_or_else(|| Error::internal(format!("intent {intent_id} vanished")))
    }

    fn check_chain(&self, spec: &ActionSpec, chain_id: u64) -> Result<()> {
        let Some(chain) = self.settings().chains.get(chain_id) else {
            return Err(refusal(
                ErrorCode::UnknownChain,
                format!("Chain {chain_id} is not one this gateway knows."),
            ));
        };
        let chains = &spec.entry.supported_chains;
        if !chains.is_empty() && !chains.contains(&chain_id) {
            return Err(refusal(
                ErrorCode::ChainNotConfigured,
                format!(
                    "{} does not run on chain {chain_id}; it runs on {chains:?}.",
                    spec.name()
                ),
            ));
        }
        let needs_rpc = !chains.is_empty()
            && matches!(
                spec.entry.billing_tier.as_deref(),
                Some("write" | "read_rpc")
            );
        if needs_rpc && chain.rpc_url.is_none() {
            return Err(refusal(
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

    /// Submits an intent (Model A) and answers SPEC's submit shape.
    pub async fn execute_intent(&self, req: &ExecuteIntentRequest) -> Result<Intent> {
        let submitted = self
            .submit(req, Lane::ExecuteIntent)
            .await
            .map_err(Error::intent_rejection)?;
        Ok(Intent {
            success: true,
            intent_id: submitted.intent().id.clone(),
            status: "queued".into(),
            total: 0,
            executed: 0,
            results: Vec::new(),
        })
    }

    /// Runs an action from the agent's own wallet and answers when it has ended (bounded).
    pub async fn execute_direct(&self, req: &ExecuteIntentRequest) -> Result<DirectExecution> {
        self.run_direct(req).await.map_err(Error::intent_rejection)
    }

    /// Runs a new intent leased at submit (a direct execution, a redemption) in its own task, so that
    /// a client that goes away or the answer deadline does not cut it short: it ends, records and
    /// settles on its own. Waits for it up to the direct-execution timeout.
    pub(crate) async fn run_in_request(&self, submitted: &Submitted) -> Result<()> {
        let Submitted::New(record) = submitted else {
            return Ok(());
        };
        let (runner, record) = (self.runner().clone(), record.clone());
        let id = record.id.clone();
        let work = tokio::spawn(async move { runner.process(record).await });
        match tokio::time::timeout(self.settings().direct_timeout.unsigned_abs(), work).await {
            Ok(Ok(result)) => result,
            Ok(Err(e)) => Err(Error::internal(format!("execution task: {e}"))),
            Err(_) => {
                tracing::warn!(
                    intent_id = id,
                    "execution still running at the answer deadline"
                );
                Ok(())
            }
        }
    }

    async fn run_direct(&self, req: &ExecuteIntentRequest) -> Result<DirectExecution> {
        let submitted = self.submit(req, Lane::Execute).await?;
        let intent = submitted.intent().clone();
        self.run_in_request(&submitted).await?;
        let executions = self.store().list_executions(&intent.id).await?;
        let Some(e) = executions.first() else {
            return Err(Error::internal(format!(
                "direct intent {} has no execution",
                intent.id
            )));
        };
        let data = e.data.as_deref().and_then(|d| serde_json::from_str(d).ok());
        let status = match e.state.as_str() {
            "succeeded" => "confirmed",
            // Mined and reverted: the transaction exists. A refused simulation sent nothing and is
            // answered as the refusal it is (below).
            "failed"
                if e.tx_hash.is_some()
                    && e.error_code.as_deref() == Some(ErrorCode::ExecutionReverted.as_str()) =>
            {
                "reverted"
            }
            "failed" => {
                let code = parse_code(e.error_code.as_deref()).unwrap_or(ErrorCode::Internal);
                return Err(Error::new(
                    code,
                    e.error_message.clone().unwrap_or_default(),
                ));
            }
            _ => "pending",
        };
        Ok(DirectExecution {
            intent_id: intent.id,
            tx_hash: e.tx_hash.clone(),
            chain_id: intent.chain_id,
            wallet_address: e.wallet_address.clone(),
            status: status.to_owned(),
            data,
        })
    }

    /// Builds the unsigned transactions of an action for a wallet to sign locally (Model B). The
    /// checks of a submission up to the amount limit run first, in CONTRACT order; then the action's
    /// provider plans and simulates the transactions. Nothing is written and nothing is charged: the
    /// gateway moves nothing, the wallet's owner signs and pays the gas.
    pub async fn build_tx(&self, req: &BuildTxRequest) -> Result<BuildTxData> {
        self.build_unsigned(req)
            .await
            .map_err(Error::intent_rejection)
    }

    async fn build_unsigned(&self, req: &BuildTxRequest) -> Result<BuildTxData> {
        let agent = self.authenticate_agent(Some(&req.agent_api_key)).await?;
        let spec = self.catalog().resolve(&req.action).ok_or_else(|| {
            refusal(
                ErrorCode::UnknownAction,
                format!("No action named {:?} is in the catalog.", req.action),
            )
        })?;
        if !req.params.is_object() {
            return Err(refusal(
                ErrorCode::InvalidParams,
                "params must be a JSON object.",
            ));
        }
        let policy = self.policy_of(&agent.agent.id).await?;
        check_allowed(spec, &policy)?;
        check_lane(spec, Lane::BuildTx)?;
        check_params(spec, &req.params)?;
        self.check_chain(spec, req.chain_id)?;
        self.usd_amount(spec, &req.params, req.estimated_amount_usd, &policy)?;
        let provider = self
            .registry()
            .provider(spec.name(), Lane::BuildTx)
            .ok_or_else(|| {
                refusal(
                    ErrorCode::ActionDisabled,
                    format!(
                        "{} is not available through buildTx in this deployment.",
                        spec.name()
                    ),
                )
            })?;
        let wallet = req.wallet_address.clone().unwrap_or_default();
        let ctx = ExecutionContext {
            intent_id: String::new(),
            execution_key: String::new(),
            action: spec.name().to_owned(),
            params: req.params.clone(),
            chain_id: req.chain_id,
            lane: Lane::BuildTx,
            subject: Subject {
                user_did: format!("did:pkh:eip155:{}:{wallet}", req.chain_id),
                wallet_address: wallet,
            },
            agent_id: agent.agent.id.clone(),
            agent_address: agent.agent.wallet_address.clone(),
        };
        let built = provider
            .build_tx(&ctx, req.wallet_address.as_deref())
            .await?;
        tracing::info!(
            agent_id = agent.agent.id,
            action = spec.name(),
            chain_id = req.chain_id,
            transactions = built.transactions.len(),
            "transactions built"
        );
        Ok(built)
    }

    /// The intent, for the agent that submitted it; 404 for anyone else.
    pub async fn intent_status(&self, agent_key: Option<&str>, intent_id: &str) -> Result<Intent> {
        let agent = self.authenticate_agent(agent_key).await?;
        let not_found = || Error::not_found(format!("No intent {intent_id} for this agent."));
        let intent = self
            .store()
            .get_intent(intent_id)
            .await?
            .ok_or_else(not_found)?;
        if intent.agent_id != agent.agent.id {
            return Err(not_found());
        }
        let executions = self.store().list_executions(intent_id).await?;
        Ok(intent_view(&intent, &executions))
    }

    /// The agent's account's credits.
    pub async fn credit_balance(&self, agent_key: Option<&str>) -> Result<CreditBalance> {
        let agent = self.authenticate_agent(agent_key).await?;
        let account = self.store().credit_account(&agent.agent.account_id).await?;
        let now = to_millis(self.now());
        let today = day_of(now);
        let (balance, reserved, used) = match account {
            Some(a) => (a.balance, a.reserved, a.free_used_on(today)),
            None => (0, 0, 0),
        };
        Ok(CreditBalance {
            balance,
            reserved,
            free_requests_used_today: used,
            free_requests_per_day: self.settings().credits.free_per_day,
            free_resets_at: rfc3339(from_millis(day_start(today + 1))),
        })
    }
}

fn check_allowed(spec: &ActionSpec, policy: &PolicyRecord) -> Result<()> {
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

impl Gateway {
    /// The USD amount the limits see (the larger of the stated and the gateway's own estimate),
    /// checked against the action's maxAmountUsd and the policy's per-action cap.
    fn usd_amount(
        &self,
        spec: &ActionSpec,
        params: &Value,
        estimated_amount_usd: Option<f64>,
        policy: &PolicyRecord,
    ) -> Result<i64> {
        let own_estimate = self.settings().prices.estimate_micros(params);
        let stated = estimated_amount_usd
            .map(|v| usd_to_micros("estimatedAmountUsd", v))
            .transpose()?;
        let amount = match (own_estimate, stated) {
            (Some(a), Some(b)) => a.max(b),
            (Some(a), None) | (None, Some(a)) => a,
            (None, None) if spec.is_read() => 0,
            (None, None) => {
                return Err(refusal(
                    ErrorCode::InvalidParams,
                    format!(
                        "estimatedAmountUsd is required: the gateway cannot price these params of {}.",
                        spec.name()
                    ),
                ));
            }
        };
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
        const LATER: [&str; 9] = [
            "actionKnown",
            "allowed",
            "enabled",
            "params",
            "chain",
            "amountLimit",
            "dailyLimit",
            "delegation",
            "credits",
        ];
        let agent = match self.authenticate_agent(Some(&req.agent_api_key)).await {
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
        let Some(spec) = self.catalog().resolve(&req.action) else {
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
        let policy = self.policy_of(&agent.agent.id).await?;
        let chain_id = req.chain_id.unwrap_or(DEFAULT_CHAIN_ID);
        checks.push(verdict(
            "allowed",
            check_allowed(spec, &policy).map(|()| "on the allowlist".into()),
        ));
        checks.push(verdict(
            "enabled",
            check_lane(spec, lane).map(|()| format!("through {}", lane.as_str())),
        ));
        checks.push(verdict(
            "params",
            check_params(spec, &req.params).map(|()| "match paramsSchema".into()),
        ));
        checks.push(verdict(
            "chain",
            self.check_chain(spec, chain_id)
                .map(|()| format!("chain {chain_id}")),
        ));
        let amount = self.usd_amount(spec, &req.params, req.estimated_amount_usd, &policy);
        checks.push(verdict(
            "amountLimit",
            amount.clone().map(|a| format!("{} USD", micros_to_usd(a))),
        ));
        let amount = amount.unwrap_or(0);
        let day = day_of(to_millis(self.now()));
        let used = self.store().daily_usage(&agent.agent.id, day).await?;
        let daily = if spec.is_read()
            || crate::pricing::fits_daily_limit(used, amount, policy.daily_limit_micros)
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
                    micros_to_usd(amount)
                ),
            ))
        };
        checks.push(verdict("dailyLimit", daily));
        let fan_out = spec.entry.requires_subscription && lane == Lane::ExecuteIntent;
        let users = if fan_out {
            self.store()
                .count_active_delegations(&agent.agent.id, chain_id, to_millis(self.now()))
                .await?
        } else {
            1
        };
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
        let account = self.store().credit_account(&agent.agent.account_id).await?;
        let account = account.unwrap_or_default();
        let free_per_day = self.settings().credits.free_per_day;
        let per_execution = self
            .settings()
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
        checks.push(skipped(
            "venueReady",
            "not checked: venue readiness is not available in this deployment yet",
        ));
        let ready = checks.iter().all(|c| c.ok != Some(false));
        Ok(PreflightReport { ready, checks })
    }

    /// Who the key belongs to.
    pub async fn whoami(&self, agent_key: Option<&str>) -> Result<AgentIdentity> {
        let agent = self.authenticate_agent(agent_key).await?;
        Ok(AgentIdentity {
            agent_id: agent.agent.id,
            agent_address: agent.agent.wallet_address,
            account_id: agent.agent.account_id,
            name: agent.agent.name,
        })
    }
}

fn key_reused() -> Error {
    refusal(
        ErrorCode::IdempotencyKeyReused,
        "This idempotencyKey was used with a different request; use a new key for a new request.",
    )
}

fn parse_code(code: Option<&str>) -> Option<ErrorCode> {
    serde_json::from_value(Value::String(code?.to_owned())).ok()
}

fn family_name(family: ErrorFamily) -> String {
    serde_json::to_value(family)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

/// The SPEC intent shape of a stored intent.
pub fn intent_view(intent: &IntentRecord, executions: &[ExecutionRecord]) -> Intent {
    let results: Vec<IntentResult> = executions
        .iter()
        .filter(|e| e.state == "succeeded" || e.state == "failed")
        .map(|e| {
            let success = e.state == "succeeded";
            let code = if success { None } else { e.error_code.clone() };
            IntentResult {
                user_did: e.user_did.clone(),
                wallet_address: e.wallet_address.clone(),
                chain_id: e.chain_id,
                success,
                tx_hash: e.tx_hash.clone(),
                error: code.as_deref().map(|c| {
                    parse_code(Some(c))
                        .map_or_else(|| "INTERNAL".to_owned(), |c| family_name(c.family()))
                }),
                code,
                message: if success {
                    None
                } else {
                    e.error_message.clone()
                },
                data: e.data.as_deref().and_then(|d| serde_json::from_str(d).ok()),
            }
        })
        .collect();
    Intent {
        success: intent.status != "failed",
        intent_id: intent.id.clone(),
        status: intent.status.clone(),
        total: u64::from(intent.total),
        executed: results.len() as u64,
        results,
    }
}

impl Subject {
    /// The subject of an execution row.
    pub fn of(e: &ExecutionRecord) -> Self {
        Subject {
            user_did: e.user_did.clone(),
            wallet_address: e.wallet_address.clone(),
        }
    }
}

/// The record of a draft the store accepted, as it was written.
fn accepted_record(
    draft: &IntentDraft,
    total: u32,
    reserved_credits: i64,
    free_request: bool,
) -> IntentRecord {
    IntentRecord {
        id: draft.id.clone(),
        agent_id: draft.agent_id.clone(),
        account_id: draft.account_id.clone(),
        action: draft.action.clone(),
        lane: draft.lane.clone(),
        params: draft.params.clone(),
        chain_id: draft.chain_id,
        amount_micros: draft.amount_micros,
        price_per_execution: draft.price_per_execution,
        reserved_credits,
        free_request,
        status: "queued".into(),
        total,
        created_at: draft.now,
        finished_at: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_sorts_nested_keys() {
        let a = canonical(&json!({"b": 1, "a": {"d": [ {"z": 1, "y": 2} ], "c": 3}}));
        assert_eq!(a.to_string(), r#"{"a":{"c":3,"d":[{"y":2,"z":1}]},"b":1}"#);
    }
}
