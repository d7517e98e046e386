//! Intents: submission (the checks of CONTRACT "Policy" in order, [`checks`], then acceptance in
//! the store's transaction, decided by [`crate::acceptance`]), direct execution, build-tx,
//! preflight, and what an agent reads back ([`views`]).

mod build_tx;
mod checks;
mod preflight;
mod views;

use std::sync::Arc;

use actiongate_api_types::ErrorCode;
use actiongate_api_types::intents::{DirectExecution, ExecuteIntentRequest, Intent};
use serde_json::json;
use sha2::{Digest, Sha256};

use views::parse_code;
pub use views::{has_ended, intent_view};

use crate::acceptance::{
    check_idempotency_key, foreign_recipient_refusal, is_stale_derived_key, recipients, user_did,
};
use crate::approvals::{Approvals, approval_view, needs_approval};
use crate::audit::{actor, kinds};
use crate::catalog::{Catalog, Lane};
use crate::chains::DEFAULT_CHAIN_ID;
use crate::clock::{Clock, to_millis};
use crate::error::{Error, Result};
use crate::execution::Registry;
use crate::identity::{AgentBasis, AgentContext, Identity};
use crate::ledger::day_of;
use crate::money::{micros_to_usd, usd_to_micros};
use crate::params::{Params, canonical};
use crate::prices::Prices;
use crate::runner::IntentRunner;
use crate::settings::Settings;
use crate::states::{ApprovalState, ExecutionState, IntentStatus};
use crate::store::{
    AcceptOutcome, ApprovalRecord, AuditEvent, ExecutionDraft, ExecutionRecord, IntentDraft,
    IntentRecord, Store,
};
use crate::venues::Venues;

/// Intents: submit, direct execution, build-tx, preflight and what an agent reads back.
pub struct Intents {
    identity: Arc<Identity>,
    venues: Arc<Venues>,
    approvals: Arc<Approvals>,
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    catalog: Arc<Catalog>,
    registry: Arc<Registry>,
    runner: Arc<IntentRunner>,
    prices: Arc<Prices>,
    settings: Arc<Settings>,
}

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

fn refusal(code: ErrorCode, message: impl Into<String>) -> Error {
    Error::new(code, message)
}

impl Intents {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        identity: Arc<Identity>,
        venues: Arc<Venues>,
        approvals: Arc<Approvals>,
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        catalog: Arc<Catalog>,
        registry: Arc<Registry>,
        runner: Arc<IntentRunner>,
        prices: Arc<Prices>,
        settings: Arc<Settings>,
    ) -> Self {
        Self {
            identity,
            venues,
            approvals,
            store,
            clock,
            catalog,
            registry,
            runner,
            prices,
            settings,
        }
    }

    /// Submits an intent (Model A) or a direct execution (`lane` Execute). Runs the checks of CONTRACT
    /// "Policy" in order; the first failure answers, and a refusal creates nothing.
    pub async fn submit(&self, req: &ExecuteIntentRequest, lane: Lane) -> Result<Submitted> {
        self.submit_scoped(req, lane, None).await
    }

    /// [`Intents::submit`], a fan-out addressing only one delegator (a redemption of one delegation,
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
        self.identity.admit_agent(key)?;
        if let Some(basis) = self.identity.cached_agent_basis(key)
            && let Ok(Some(done)) = self.submit_with(req, lane, only, basis, false).await
        {
            return Ok(done);
        }
        for _ in 0..2 {
            let basis = self.identity.read_agent_basis(key).await?;
            let agent = basis.agent.agent.clone();
            match self.submit_with(req, lane, only, basis, true).await {
                Ok(Some(done)) => return Ok(done),
                Ok(None) => {}
                Err(refused) => {
                    self.record_refusal(&agent, req, lane, &refused);
                    return Err(refused);
                }
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
        let Some(spec) = self.catalog.resolve(&req.action) else {
            return refuse(refusal(
                ErrorCode::UnknownAction,
                format!("No action named {:?} is in the catalog.", req.action),
            ));
        };
        if let Some(Err(e)) = req.idempotency_key.as_deref().map(check_idempotency_key) {
            return refuse(e);
        }
        let explicit_key = req.idempotency_key.clone();
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
        let now = self.clock.now();
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
        let window = self.settings.idempotency_window;
        let (idempotency_key, replace_before) = match &explicit_key {
            Some(k) => (format!("k:{k}"), None),
            None => (
                format!("d:{}", hex::encode(request_hash)),
                Some(to_millis(now - window)),
            ),
        };
        let policy = stored_policy
            .clone()
            .unwrap_or_else(|| self.identity.default_policy(&agent.agent.id, now));
        let fan_out = spec.fans_out(lane);
        // The one wallet a write runs for (a vault's `max` is its position); a fan-out has many.
        let holder = (!fan_out).then_some(agent.agent.wallet_address.as_str());
        let checked = self
            .policy_checks(
                spec,
                lane,
                &req.params,
                chain_id,
                req.estimated_amount_usd,
                &policy,
                holder,
            )
            .await
            .first_refusal();
        // A lending write must leave the position's health factor at the policy's minimum.
        let checked = match checked {
            Ok(amount) => match self
                .health_check(spec, lane, &req.params, chain_id, &policy, holder)
                .await
            {
                Some(Err(refused)) => Err(refused),
                _ => Ok(amount),
            },
            other => other,
        };
        // A write whose venue the chain says is not ready (gas, balance, a pause) is refused before
        // anything is written; credits and delegations are decided by the acceptance.
        let checked = match checked {
            Ok(amount) if !spec.is_read() && lane != Lane::BuildTx => self
                .venues
                .gate(&agent.agent, spec, &req.params, chain_id, lane)
                .await
                .map(|()| amount),
            other => other,
        };
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
        // Above the policy's approval threshold, the intent waits for its owner (never in the
        // request): accepted and reserved as any other, claimed by the runner once approved.
        let approval_expires_at = needs_approval(&policy, spec, lane, amount)
            .then(|| self.approvals.expires_at(to_millis(now)));
        // A direct execution or a redemption runs in the request; a read for the agent itself is
        // handed to this process's runner as accepted (no claim); the rest wait to be claimed.
        let in_request =
            (lane == Lane::Execute || only_delegator.is_some()) && approval_expires_at.is_none();
        let lease = if in_request {
            Some((
                self.runner.owner().to_owned(),
                to_millis(now + self.settings.direct_timeout + self.settings.lease),
            ))
        } else if spec.is_read() && !fan_out {
            self.runner.read_lease()
        } else {
            None
        };
        let handed = !in_request && lease.is_some();
        let draft = IntentDraft {
            id: intent_id.clone(),
            agent_id: agent.agent.id.clone(),
            account_id: agent.agent.account_id.clone(),
            action: spec.name().to_owned(),
            lane,
            params: Params::new(&req.params),
            chain_id,
            amount_micros: amount,
            is_write: !spec.is_read(),
            daily_limit_micros: policy.daily_limit_micros,
            price_per_execution: self
                .settings
                .credits
                .price(spec.entry.billing_tier.as_deref()),
            free_per_day: self.settings.credits.free_per_day,
            idempotency_key,
            request_hash,
            replace_idempotency_before: replace_before,
            fan_out,
            only_delegator: only_delegator.map(str::to_owned),
            recipients: match fan_out {
                true => recipients(&req.params, &spec.recipients),
                false => vec![],
            },
            own: ExecutionDraft {
                user_did: user_did(chain_id, &agent.agent.wallet_address),
                wallet_address: agent.agent.wallet_address.clone(),
            },
            lease,
            day: day_of(to_millis(now)),
            now: to_millis(now),
            key_hash,
            policy: stored_policy,
            approval_expires_at,
        };
        let (outcome, draft) = if handed {
            // Accepted and handed over in a task of its own: should the caller go away while the
            // batch commits (a client that disconnects, a cancelled future), the accepted read still
            // goes to the runner at once instead of waiting for its lease to run out.
            let (store, runner) = (self.store.clone(), self.runner.clone());
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
            (self.store.accept_intent(&draft).await, draft)
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
            AcceptOutcome::DailyLimit {
                used_micros,
                amount_micros,
            } => {
                let per_user = match amount_micros == amount {
                    true => String::new(),
                    false => format!(" ({} USD for each user addressed)", micros_to_usd(amount)),
                };
                return Err(refusal(
                    ErrorCode::PolicyDailyLimit,
                    format!(
                        "This agent has used {} of its {} USD daily limit; {} USD more{per_user} does not fit. The limit resets at 00:00 UTC.",
                        micros_to_usd(used_micros),
                        micros_to_usd(policy.daily_limit_micros),
                        micros_to_usd(amount_micros)
                    ),
                ));
            }
            AcceptOutcome::ForeignRecipient {
                field,
                named,
                delegator,
            } => return Err(foreign_recipient_refusal(&field, &named, &delegator)),
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
                        self.settings.credits.free_per_day
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
        if record.approval.is_some() {
            self.approvals.requested(&record);
        } else if draft.lease.is_none() {
            self.runner.wake();
        }
        Ok(Some(Submitted::New(record)))
    }

    /// Writes a refused submission's audit entry, in a task of its own (a refusal writes nothing
    /// else; its answer does not wait). A failure of the gateway itself is not a refusal.
    fn record_refusal(
        &self,
        agent: &crate::store::AgentRecord,
        req: &ExecuteIntentRequest,
        lane: Lane,
        refused: &Error,
    ) {
        if matches!(refused.code, ErrorCode::NotAvailable | ErrorCode::Internal) {
            return;
        }
        let event = AuditEvent::new(
            &agent.account_id,
            to_millis(self.clock.now()),
            kinds::INTENT_REFUSED,
            actor::agent(&agent.id),
            &req.action,
            json!({
                "action": req.action,
                "lane": lane.as_str(),
                "chainId": req.chain_id.unwrap_or(DEFAULT_CHAIN_ID),
                "message": refused.message,
            }),
        )
        .with_agent(&agent.id)
        .with_code(Some(refused.code.as_str()));
        let store = self.store.clone();
        tokio::spawn(async move {
            if let Err(e) = store.append_audit(std::slice::from_ref(&event)).await {
                tracing::warn!(error = %e, "a refusal's audit entry was not written");
            }
        });
    }

    async fn replay(
        &self,
        agent: &AgentContext,
        key: &str,
        hash: &[u8; 32],
        replace_before: Option<i64>,
    ) -> Result<Option<IntentRecord>> {
        let Some(found) = self.store.find_idempotency(&agent.agent.id, key).await? else {
            return Ok(None);
        };
        if is_stale_derived_key(found.created_at, replace_before) {
            return Ok(None);
        }
        if &found.request_hash != hash {
            return Err(key_reused());
        }
        Ok(Some(self.intent_record(&found.intent_id).await?))
    }

    async fn intent_record(&self, intent_id: &str) -> Result<IntentRecord> {
        self.store
            .get_intent(intent_id)
            .await?
            .ok_or_else(|| Error::internal(format!("intent {intent_id} vanished")))
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
            status: IntentStatus::Queued.to_string(),
            total: 0,
            executed: 0,
            results: Vec::new(),
            approval: submitted.intent().approval.as_ref().map(approval_view),
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
        if record.awaits_approval() {
            return Ok(());
        }
        let (runner, record) = (self.runner.clone(), record.clone());
        let id = record.id.clone();
        let work = tokio::spawn(async move { runner.process(record).await });
        match tokio::time::timeout(self.settings.direct_timeout.unsigned_abs(), work).await {
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
        let executions = self.store.list_executions(&intent.id).await?;
        let Some(e) = executions.first() else {
            return Err(Error::internal(format!(
                "direct intent {} has no execution",
                intent.id
            )));
        };
        let data = e.data.as_deref().and_then(|d| serde_json::from_str(d).ok());
        let approval = intent.approval.as_ref().map(approval_view);
        let status = match e.state {
            ExecutionState::Succeeded => "confirmed",
            // Mined and reverted: the transaction exists. A refused simulation sent nothing and is
            // answered as the refusal it is (below).
            ExecutionState::Failed
                if e.tx_hash.is_some()
                    && e.error_code.as_deref() == Some(ErrorCode::ExecutionReverted.as_str()) =>
            {
                "reverted"
            }
            ExecutionState::Failed => {
                let code = parse_code(e.error_code.as_deref()).unwrap_or(ErrorCode::Internal);
                return Err(Error::new(
                    code,
                    e.error_message.clone().unwrap_or_default(),
                ));
            }
            ExecutionState::Pending | ExecutionState::Started => "pending",
        };
        // Not ended: the hash of what was sent, when something was (a receipt not in yet). The
        // gateway keeps re-sending and bumping it until it is mined; the intent tells the end.
        let tx_hash = match (&e.tx_hash, e.state.is_ended()) {
            (None, false) => self
                .store
                .execution_txs(&e.execution_key)
                .await?
                .iter()
                .rev()
                .find_map(|t| t.tx_hash.clone()),
            (hash, _) => hash.clone(),
        };
        Ok(DirectExecution {
            intent_id: intent.id,
            tx_hash,
            chain_id: intent.chain_id,
            wallet_address: e.wallet_address.clone(),
            status: status.to_owned(),
            data,
            approval,
        })
    }
}

fn key_reused() -> Error {
    refusal(
        ErrorCode::IdempotencyKeyReused,
        "This idempotencyKey was used with a different request; use a new key for a new request.",
    )
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
        lane: draft.lane,
        params: draft.params.clone(),
        chain_id: draft.chain_id,
        amount_micros: draft.amount_micros,
        price_per_execution: draft.price_per_execution,
        reserved_credits,
        free_request,
        status: IntentStatus::Queued,
        total,
        created_at: draft.now,
        finished_at: None,
        approval: draft.approval_expires_at.map(|expires_at| ApprovalRecord {
            state: ApprovalState::Pending,
            requested_at: draft.now,
            expires_at,
            decided_at: None,
            reason: None,
        }),
    }
}
