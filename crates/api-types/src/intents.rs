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
    /// confirmed, reverted or pending.
    pub status: String,
    /// For a read: what was read.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub data: Option<serde_json::Value>,
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
