//! What an agent reads back: an intent in SPEC's shape, its credits, who it is.

use actiongate_api_types::ErrorCode;
use actiongate_api_types::ErrorFamily;
use actiongate_api_types::account::{AccountIntent, AccountIntentList};
use actiongate_api_types::intents::{AgentIdentity, CreditBalance, Intent, IntentResult};
use serde_json::Value;

use super::Intents;
use crate::clock::{from_millis, rfc3339, to_millis};
use crate::error::{Error, Result};
use crate::execution::Subject;
use crate::ledger::{day_of, day_start};
use crate::states::{ExecutionState, IntentStatus};
use crate::store::{ExecutionRecord, IntentRecord};

impl Intents {
    /// The intent, for the agent that submitted it; 404 for anyone else.
    pub async fn intent_status(&self, agent_key: Option<&str>, intent_id: &str) -> Result<Intent> {
        self.wait_for_intent(agent_key, intent_id, std::time::Duration::ZERO)
            .await
    }

    /// [`Intents::intent_status`] answered once the intent has ended or after `wait_seconds`
    /// (at most [`MAX_STATUS_WAIT_SECONDS`]), whichever comes first: a long poll, one request where
    /// an agent would poll many times. Above the most: `INVALID_REQUEST`, nothing read.
    pub async fn intent_status_waiting(
        &self,
        agent_key: Option<&str>,
        intent_id: &str,
        wait_seconds: u64,
    ) -> Result<Intent> {
        if wait_seconds > MAX_STATUS_WAIT_SECONDS {
            return Err(Error::invalid(format!(
                "waitSeconds is at most {MAX_STATUS_WAIT_SECONDS} (got {wait_seconds}); ask again to wait longer."
            )));
        }
        self.wait_for_intent(
            agent_key,
            intent_id,
            std::time::Duration::from_secs(wait_seconds),
        )
        .await
    }

    /// Adds to each successful result the leg its venue still runs elsewhere (a bridge's fill on
    /// its destination, read from the chains now) as `data.leg`, and shows the intent `queued`
    /// while a leg is open (`PENDING`, or not readable now): an agent waits on one thing.
    async fn follow_legs(&self, intent: &IntentRecord, view: &mut Intent) {
        let Some(provider) = self.registry.provider(&intent.action, intent.lane) else {
            return;
        };
        let mut open = false;
        for r in view.results.iter_mut().filter(|r| r.success) {
            let Some(data) = r.data.as_mut() else {
                continue;
            };
            let leg = match provider.follow(&intent.action, r.chain_id, data).await {
                Ok(None) => continue,
                Ok(Some(leg)) => leg,
                Err(e) => serde_json::json!({"status": "UNKNOWN", "substatusMessage": e.message}),
            };
            open |= matches!(leg["status"].as_str(), Some("PENDING" | "UNKNOWN"));
            data["leg"] = leg;
        }
        if open && intent.status == IntentStatus::Completed {
            view.status = IntentStatus::Queued.to_string();
        }
    }

    /// The intent row, for the agent that submitted it; 404 for anyone else.
    async fn agent_intent(&self, agent_id: &str, intent_id: &str) -> Result<IntentRecord> {
        let not_found = || Error::not_found(format!("No intent {intent_id} for this agent."));
        let intent = self
            .store
            .get_intent(intent_id)
            .await?
            .ok_or_else(not_found)?;
        if intent.agent_id != agent_id {
            return Err(not_found());
        }
        Ok(intent)
    }

    /// The intent once it has ended, or as it stands when `timeout` has passed: the one way to
    /// wait for an intent (MCP `agentRun`, the status route's `waitSeconds`; a status read is the
    /// wait of zero). Wakes when this process's runner ends an intent, and
    /// looks again at least every [`LOOK_AGAIN`] (another process's runner may end it).
    ///
    /// A wait is one request of the key's rate however often it looks (each later look checks the
    /// key again without spending it, so a key revoked meanwhile ends the wait `UNAUTHORIZED`), and
    /// a look reads the intent's executions only when it will answer: the intent has ended, or the
    /// wait is over.
    pub async fn wait_for_intent(
        &self,
        agent_key: Option<&str>,
        intent_id: &str,
        timeout: std::time::Duration,
    ) -> Result<Intent> {
        let deadline = tokio::time::Instant::now() + timeout;
        let agent_id = self.identity.authenticate_agent(agent_key).await?.agent.id;
        loop {
            let ended = self.runner.intent_ended();
            tokio::pin!(ended);
            ended.as_mut().enable();
            let intent = self.agent_intent(&agent_id, intent_id).await?;
            let last = tokio::time::Instant::now() >= deadline;
            if intent.status.is_ended() || last {
                let executions = self.store.list_executions(intent_id).await?;
                let mut view = intent_view(&intent, &executions);
                // The answer shows the legs still running elsewhere, as a status read does.
                self.follow_legs(&intent, &mut view).await;
                if has_ended(&view) || last {
                    return Ok(view);
                }
            }
            tokio::select! {
                () = ended => {}
                () = tokio::time::sleep(LOOK_AGAIN) => {}
                () = tokio::time::sleep_until(deadline) => {}
            }
            self.identity.recognize_agent(agent_key).await?;
        }
    }

    /// The owner's account's latest intents (at most 100), newest first, each as its agent reads
    /// it with what it was (action, agent, when).
    pub async fn account_intents(
        &self,
        owner: &crate::identity::OwnerContext,
    ) -> Result<AccountIntentList> {
        let intents = self
            .store
            .list_account_intents(&owner.account_id, 100)
            .await?;
        let ids: Vec<String> = intents.iter().map(|i| i.id.clone()).collect();
        let executions = self.store.list_executions_of(&ids).await?;
        let intents = intents
            .into_iter()
            .map(|i| {
                let mine: Vec<ExecutionRecord> = executions
                    .iter()
                    .filter(|e| e.intent_id == i.id)
                    .cloned()
                    .collect();
                AccountIntent {
                    agent_id: i.agent_id.clone(),
                    action: i.action.clone(),
                    lane: i.lane.as_str().to_owned(),
                    created_at: rfc3339(from_millis(i.created_at)),
                    intent: intent_view(&i, &mine),
                }
            })
            .collect();
        Ok(AccountIntentList { intents })
    }

    /// The agent's account's credits.
    pub async fn credit_balance(&self, agent_key: Option<&str>) -> Result<CreditBalance> {
        let agent = self.identity.authenticate_agent(agent_key).await?;
        let account = self.store.credit_account(&agent.agent.account_id).await?;
        let now = to_millis(self.clock.now());
        let today = day_of(now);
        let (balance, reserved, used) = match account {
            Some(a) => (a.balance, a.reserved, a.free_used_on(today)),
            None => (0, 0, 0),
        };
        Ok(CreditBalance {
            balance,
            reserved,
            free_requests_used_today: used,
            free_requests_per_day: self.settings.credits.free_per_day,
            free_resets_at: rfc3339(from_millis(day_start(today + 1))),
        })
    }

    /// Who the key belongs to.
    pub async fn whoami(&self, agent_key: Option<&str>) -> Result<AgentIdentity> {
        let agent = self.identity.authenticate_agent(agent_key).await?;
        Ok(AgentIdentity {
            agent_id: agent.agent.id,
            agent_address: agent.agent.wallet_address,
            account_id: agent.agent.account_id,
            name: agent.agent.name,
        })
    }
}

pub(super) fn parse_code(code: Option<&str>) -> Option<ErrorCode> {
    serde_json::from_value(Value::String(code?.to_owned())).ok()
}

fn family_name(family: ErrorFamily) -> String {
    serde_json::to_value(family)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

/// The longest a status read waits for its intent to end ([`Intents::intent_status_waiting`]).
pub const MAX_STATUS_WAIT_SECONDS: u64 = 30;

/// How often [`Intents::wait_for_intent`] looks again without being woken.
const LOOK_AGAIN: std::time::Duration = std::time::Duration::from_millis(500);

/// Whether an intent, as SPEC shapes it, has ended ([`IntentStatus::is_ended`]): the one predicate
/// of every surface that waits for an intent.
pub fn has_ended(intent: &Intent) -> bool {
    intent
        .status
        .parse::<IntentStatus>()
        .is_ok_and(IntentStatus::is_ended)
}

/// The SPEC intent shape of a stored intent.
pub fn intent_view(intent: &IntentRecord, executions: &[ExecutionRecord]) -> Intent {
    let results: Vec<IntentResult> = executions
        .iter()
        .filter(|e| e.state.is_ended())
        .map(|e| {
            let success = e.state == ExecutionState::Succeeded;
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
        success: intent.status != IntentStatus::Failed,
        intent_id: intent.id.clone(),
        status: intent.status.to_string(),
        total: u64::from(intent.total),
        executed: results.len() as u64,
        results,
        approval: intent
            .approval
            .as_ref()
            .map(crate::approvals::approval_view),
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
