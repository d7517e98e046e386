//! Approvals (issue 27): a write the gateway prices above its policy's `approvalAboveUsd` is
//! accepted as an intent that waits for the owner (credits and the daily-limit share reserved as
//! for any submit). The runner leaves it alone while its approval is pending; the owner's approval
//! lets the runner claim it, and a rejection or the expiry (`[approvals] ttl-seconds`) ends it
//! `failed` (`APPROVAL_REJECTED`, `APPROVAL_EXPIRED`) with nothing sent and the reservation given
//! back, in one transaction ([`crate::store::IntentStore::end_approval`]).

use std::sync::Arc;

use actiongate_api_types::ErrorCode;
use actiongate_api_types::intents::{ApprovalItem, ApprovalList, IntentApproval};

use crate::acceptance::daily_share;
use crate::audit::{actor, kinds};
use crate::catalog::{ActionSpec, Lane};
use crate::clock::{Clock, from_millis, rfc3339, to_millis};
use crate::error::{Error, Result};
use crate::identity::OwnerContext;
use crate::mail::{Mailer, OutgoingMail};
use crate::money::micros_to_usd;
use crate::runner::IntentRunner;
use crate::settings::Settings;
use crate::states::ApprovalState;
use crate::store::{ApprovalEnd, ApprovalRecord, AuditEvent, IntentRecord, PolicyRecord, Store};
use serde_json::json;

/// Most approvals one listing answers.
const MAX_LIST: u32 = 200;
/// Expired approvals one sweep ends.
const SWEEP_BATCH: u32 = 100;
/// How often each process looks for approvals whose time ran out.
pub const SWEEP_EVERY: std::time::Duration = std::time::Duration::from_secs(5);
/// The longest reason an owner may give a rejection.
const MAX_REASON: usize = 500;

/// Whether a write priced at `amount_micros` (one execution, as the per-action cap sees it) waits
/// for the owner: only writes that move money from a wallet the gateway drives (the agent's own,
/// or delegated users' through a fan-out); an unsigned build-tx moves nothing until its user signs.
pub fn needs_approval(
    policy: &PolicyRecord,
    spec: &ActionSpec,
    lane: Lane,
    amount_micros: i64,
) -> bool {
    !spec.is_read()
        && lane != Lane::BuildTx
        && policy
            .approval_above_micros
            .is_some_and(|threshold| amount_micros > threshold)
}

/// The wire shape of an approval.
pub fn approval_view(a: &ApprovalRecord) -> IntentApproval {
    IntentApproval {
        state: a.state.as_str().to_owned(),
        requested_at: rfc3339(from_millis(a.requested_at)),
        expires_at: rfc3339(from_millis(a.expires_at)),
        decided_at: a.decided_at.map(|t| rfc3339(from_millis(t))),
        reason: a.reason.clone(),
    }
}

fn item(intent: &IntentRecord, approval: &ApprovalRecord) -> ApprovalItem {
    ApprovalItem {
        intent_id: intent.id.clone(),
        agent_id: intent.agent_id.clone(),
        action: intent.action.clone(),
        lane: intent.lane.as_str().to_owned(),
        chain_id: intent.chain_id,
        params: intent.params.value().unwrap_or(serde_json::Value::Null),
        amount_usd: micros_to_usd(intent.amount_micros),
        status: intent.status.as_str().to_owned(),
        approval: approval_view(approval),
    }
}

/// The owner's approval queue.
pub struct Approvals {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    runner: Arc<IntentRunner>,
    mailer: Arc<dyn Mailer>,
    settings: Arc<Settings>,
}

impl Approvals {
    pub(crate) fn new(
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        runner: Arc<IntentRunner>,
        mailer: Arc<dyn Mailer>,
        settings: Arc<Settings>,
    ) -> Self {
        Self {
            store,
            clock,
            runner,
            mailer,
            settings,
        }
    }

    /// When an approval asked for now runs out.
    pub(crate) fn expires_at(&self, now: i64) -> i64 {
        now.saturating_add(
            i64::try_from(self.settings.approval_ttl.whole_milliseconds()).unwrap_or(i64::MAX),
        )
    }

    /// Tells the owner an intent waits for them, by e-mail, in a task of its own: the submit does not
    /// wait for the mail server, and a mail that fails is logged (the queue and the intent's status
    /// still show it).
    pub(crate) fn requested(&self, intent: &IntentRecord) {
        let (store, mailer) = (self.store.clone(), self.mailer.clone());
        let Some(approval) = intent.approval.clone() else {
            return;
        };
        let intent = intent.clone();
        tokio::spawn(async move {
            let to = match store.account_email(&intent.account_id).await {
                Ok(Some(to)) => to,
                Ok(None) => return,
                Err(e) => {
                    tracing::warn!(intent_id = intent.id, error = %e, "approval mail: no address");
                    return;
                }
            };
            let mail = OutgoingMail {
                to,
                subject: format!(
                    "Approve {} for {} USD?",
                    intent.action,
                    micros_to_usd(intent.amount_micros)
                ),
                body: format!(
                    "Your agent {agent} asks to run {action} on chain {chain} for {usd} USD, above \
                     the approval threshold of its policy.\n\nParams: {params}\nIntent: {id}\n\n\
                     Nothing runs until you approve it. Approve or reject it in the console, with \
                     `actiongate approvals approve {id}` or `actiongate approvals reject {id}`, or \
                     through POST /api/v1/approvals/{id}/approve. Without an answer it expires at \
                     {expires} and nothing is sent.\n",
                    agent = intent.agent_id,
                    action = intent.action,
                    chain = intent.chain_id,
                    usd = micros_to_usd(intent.amount_micros),
                    params = intent.params.as_str(),
                    id = intent.id,
                    expires = rfc3339(from_millis(approval.expires_at)),
                ),
            };
            if let Err(e) = mailer.send(mail).await {
                tracing::warn!(intent_id = intent.id, error = %e, "approval mail not sent");
            }
        });
    }

    /// The account's approvals in `state` (default pending), newest first.
    pub async fn list(&self, owner: &OwnerContext, state: Option<&str>) -> Result<ApprovalList> {
        let state = match state {
            None => ApprovalState::Pending,
            Some(text) => text.parse().map_err(|_| {
                Error::new(
                    ErrorCode::InvalidRequest,
                    format!(
                        "state {text:?} is not an approval state (pending, approved, rejected, expired)."
                    ),
                )
            })?,
        };
        let intents = self
            .store
            .list_approvals(&owner.account_id, state, MAX_LIST)
            .await?;
        Ok(ApprovalList {
            approvals: intents
                .iter()
                .filter_map(|i| i.approval.as_ref().map(|a| item(i, a)))
                .collect(),
        })
    }

    /// Approves one of the account's pending intents; the runner runs it at once.
    pub async fn approve(&self, owner: &OwnerContext, intent_id: &str) -> Result<ApprovalItem> {
        let now = to_millis(self.clock.now());
        let event = AuditEvent::new(
            &owner.account_id,
            now,
            kinds::APPROVAL_APPROVED,
            actor::OWNER,
            intent_id,
            json!({}),
        );
        let approved = self
            .store
            .approve_intent(intent_id, &owner.account_id, now, &event)
            .await?;
        if approved {
            tracing::info!(account_id = owner.account_id, intent_id, "intent approved");
            self.runner.wake();
        }
        self.decided(owner, intent_id, approved, ApprovalState::Approved)
            .await
    }

    /// Rejects one of the account's pending intents: it ends failed (APPROVAL_REJECTED), nothing
    /// sent, its reservation given back.
    pub async fn reject(
        &self,
        owner: &OwnerContext,
        intent_id: &str,
        reason: Option<&str>,
    ) -> Result<ApprovalItem> {
        let reason = reason.map(str::trim).filter(|r| !r.is_empty());
        if reason.is_some_and(|r| r.chars().count() > MAX_REASON) {
            return Err(Error::new(
                ErrorCode::InvalidRequest,
                format!("reason is at most {MAX_REASON} characters."),
            ));
        }
        let intent = self.owned(owner, intent_id).await?;
        let message = match reason {
            Some(r) => format!("Its owner rejected this intent: {r}. Nothing was sent."),
            None => "Its owner rejected this intent. Nothing was sent.".to_owned(),
        };
        let ended = self
            .end(
                &intent,
                Some(&owner.account_id),
                ApprovalState::Rejected,
                reason,
                ErrorCode::ApprovalRejected,
                message,
            )
            .await?;
        self.decided(owner, intent_id, ended, ApprovalState::Rejected)
            .await
    }

    /// Ends every pending approval whose time ran out (APPROVAL_EXPIRED); how many it ended. Run by
    /// every process every [`SWEEP_EVERY`]; each approval ends once whoever runs it.
    pub async fn expire_due(&self) -> Result<usize> {
        let now = to_millis(self.clock.now());
        let mut ended = 0;
        for intent in self.store.due_approvals(now, SWEEP_BATCH).await? {
            let message = format!(
                "Its owner did not approve this intent within {} s. Nothing was sent.",
                self.settings.approval_ttl.whole_seconds()
            );
            if self
                .end(
                    &intent,
                    None,
                    ApprovalState::Expired,
                    None,
                    ErrorCode::ApprovalExpired,
                    message,
                )
                .await?
            {
                ended += 1;
            }
        }
        Ok(ended)
    }

    async fn end(
        &self,
        intent: &IntentRecord,
        account_id: Option<&str>,
        state: ApprovalState,
        reason: Option<&str>,
        code: ErrorCode,
        message: String,
    ) -> Result<bool> {
        let (day, release_micros) = daily_share(intent);
        let now = to_millis(self.clock.now());
        let (kind, actor) = match state {
            ApprovalState::Expired => (kinds::APPROVAL_EXPIRED, actor::GATEWAY),
            _ => (kinds::APPROVAL_REJECTED, actor::OWNER),
        };
        let event = AuditEvent::new(
            &intent.account_id,
            now,
            kind,
            actor,
            &intent.id,
            json!({"reason": reason, "releasedUsd": micros_to_usd(release_micros)}),
        )
        .with_agent(&intent.agent_id)
        .with_code(Some(code.as_str()));
        let end = ApprovalEnd {
            intent_id: intent.id.clone(),
            account_id: account_id.map(str::to_owned),
            state,
            reason: reason.map(str::to_owned),
            code: code.as_str().to_owned(),
            message,
            agent_id: intent.agent_id.clone(),
            day,
            release_micros,
            now,
            event,
        };
        let ended = self.store.end_approval(&end).await?;
        if ended {
            tracing::info!(intent_id = intent.id, state = %state, "approval ended; nothing was sent");
            crate::metrics::intent_ended(crate::states::IntentStatus::Failed);
            self.runner.intent_was_ended();
        }
        Ok(ended)
    }

    /// The account's intent that asked for an approval; 404 for anything else.
    async fn owned(&self, owner: &OwnerContext, intent_id: &str) -> Result<IntentRecord> {
        self.store
            .get_intent(intent_id)
            .await?
            .filter(|i| i.account_id == owner.account_id && i.approval.is_some())
            .ok_or_else(|| {
                Error::not_found(format!(
                    "No approval for intent {intent_id} in this account."
                ))
            })
    }

    /// The answer of a decision: the approval as it stands, or why nothing changed.
    async fn decided(
        &self,
        owner: &OwnerContext,
        intent_id: &str,
        changed: bool,
        wanted: ApprovalState,
    ) -> Result<ApprovalItem> {
        let intent = self.owned(owner, intent_id).await?;
        let approval = intent
            .approval
            .as_ref()
            .ok_or_else(|| Error::internal("an approval vanished"))?;
        // Decided now, or by an earlier run of the same decision: the same answer.
        if changed || approval.state == wanted {
            return Ok(item(&intent, approval));
        }
        let state = match approval.state {
            ApprovalState::Pending => "expired",
            other => other.as_str(),
        };
        Err(Error::new(
            ErrorCode::ApprovalNotPending,
            format!("The approval of intent {intent_id} is {state}: nothing changed."),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn views_carry_the_instants_and_reason() {
        let v = approval_view(&ApprovalRecord {
            state: ApprovalState::Rejected,
            requested_at: 0,
            expires_at: 3_600_000,
            decided_at: Some(60_000),
            reason: Some("too much".into()),
        });
        assert_eq!(v.state, "rejected");
        assert_eq!(v.requested_at, "1970-01-01T00:00:00.000Z");
        assert_eq!(v.expires_at, "1970-01-01T01:00:00.000Z");
        assert_eq!(v.decided_at.as_deref(), Some("1970-01-01T00:01:00.000Z"));
        assert_eq!(v.reason.as_deref(), Some("too much"));
    }
}
