//! Intents (SPEC "Intent"), direct execution, and the credit balance (CONTRACT "Credits").

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Body of `POST /api/v1/agent/execute-intent` and `POST /api/v1/agent/execute`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExecuteIntentRequest {
    /// The agent API key.
    pub agent_api_key: String,
    /// Catalog action name; kebab-case canonical, any alias accepted.
    pub action: String,
    /// Action-specific, per the action's paramsSchema.
    #[schema(value_type = Object)]
    pub params: serde_json::Value,
    /// Default 8453.
    #[serde(default)]
    pub chain_id: Option<u64>,
    /// USD estimate used for policy limits; the gateway uses the larger of it and its own estimate.
    #[serde(default)]
    pub estimated_amount_usd: Option<f64>,
    /// Prevents duplicate submissions; a derived key (60 s window) is used when omitted.
    #[serde(default)]
    pub idempotency_key: Option<String>,
}

/// One addressed user's execution.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct IntentResult {
    /// `did:pkh:eip155:<chainId>:<address>`.
    pub user_did: String,
    pub wallet_address: String,
    pub chain_id: u64,
    pub success: bool,
    /// Present when a transaction was sent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tx_hash: Option<String>,
    /// When `success` is false: the refusal family.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// When `success` is false: the precise code.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// When `success` is false: a sentence for a person.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// For a read: what was read.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub data: Option<serde_json::Value>,
}

/// An intent (SPEC): the submit answer and the status answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Intent {
    /// False only when the intent failed.
    pub success: bool,
    pub intent_id: String,
    /// queued, completed or failed.
    pub status: String,
    /// Number of users addressed.
    pub total: u64,
    /// Number of executions that have ended.
    pub executed: u64,
    pub results: Vec<IntentResult>,
    /// Present when the intent needed its owner's approval (its amount above the policy's
    /// `approvalAboveUsd`): it runs only once approved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<IntentApproval>,
}

/// An intent's approval by its owner.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct IntentApproval {
    /// pending, approved, rejected or expired.
    pub state: String,
    pub requested_at: String,
    /// Past it, a pending approval ends `expired` and the intent `failed` (APPROVAL_EXPIRED).
    pub expires_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_at: Option<String>,
    /// The owner's reason for a rejection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// One intent in the owner's approval queue (`GET /api/v1/approvals`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalItem {
    pub intent_id: String,
    pub agent_id: String,
    pub action: String,
    /// execute (the agent's wallet) or executeIntent (fan-out to delegated users).
    pub lane: String,
    pub chain_id: u64,
    #[schema(value_type = Object)]
    pub params: serde_json::Value,
    /// What the gateway priced one execution at, in USD (what the threshold compares).
    pub amount_usd: f64,
    /// The intent's status: queued while pending or approved and running, then completed or failed.
    pub status: String,
    pub approval: IntentApproval,
}

/// `data` of `GET /api/v1/approvals`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalList {
    pub approvals: Vec<ApprovalItem>,
}

/// Body of `POST /api/v1/approvals/{intentId}/reject`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RejectRequest {
    /// Shown to the agent in the intent's failure message (at most 500 characters).
    #[serde(default)]
    pub reason: Option<String>,
}

/// `data` of `POST /api/v1/agent/execute` (direct execution from the agent's wallet).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DirectExecution {
    /// The intent id the execution is recorded under (for support and audit).
    pub intent_id: String,
    /// Present when a transaction was sent.
    pub tx_hash: Option<String>,
    pub chain_id: u64,
    pub wallet_address: String,
    /// confirmed, reverted or pending (sent and not mined yet, or waiting for the owner's approval).
    pub status: String,
    /// For a read: what was read.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub data: Option<serde_json::Value>,
    /// Present when the execution waits for its owner's approval (answered 202): nothing was sent;
    /// the intent id tells the end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<IntentApproval>,
}

/// `data` of `GET /api/v1/agent/credits/balance`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CreditBalance {
    /// Paid credits available now.
    pub balance: i64,
    /// Credits held for intents that have not ended.
    pub reserved: i64,
    pub free_requests_used_today: u32,
    pub free_requests_per_day: u32,
    /// Next 00:00 UTC.
    pub free_resets_at: String,
}

/// One check of a preflight.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PreflightCheck {
    /// keyValid, actionKnown, allowed, enabled, params, chain, amountLimit, healthFactor (lending
    /// writes that can lower one), dailyLimit, delegation, credits, venueReady.
    pub name: String,
    /// true passed, false failed, null not checked.
    pub ok: Option<bool>,
    /// The code a submission would be refused with.
    pub code: Option<String>,
    pub detail: String,
}

/// `data` of `POST /api/v1/agent/preflight`: every check, each with its verdict; nothing written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PreflightReport {
    /// No check failed.
    pub ready: bool,
    pub checks: Vec<PreflightCheck>,
}

/// `data` of `GET /api/v1/agent/me`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentIdentity {
    pub agent_id: String,
    pub agent_address: String,
    pub account_id: String,
    pub name: Option<String>,
}
