//! Onboarding, owner sessions, agents and their policies (CONTRACT "Identity and sessions", "Policy").

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Body of `POST /api/v1/onboarding/email/start`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EmailStartRequest {
    pub email: String,
}

/// `data` of `POST /api/v1/onboarding/email/start`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EmailStartResponse {
    /// The address the code was sent to, normalised.
    pub email: String,
    /// When the code stops working (ISO 8601).
    pub expires_at: String,
    /// How many wrong codes are tolerated before the code is burned.
    pub max_attempts: u32,
}

/// Body of `POST /api/v1/onboarding/email/complete`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EmailCompleteRequest {
    pub email: String,
    /// The 6-digit code from the e-mail.
    pub code: String,
    /// Must be `true`: the user has agreed to the terms. Anything else (absent, false, "true")
    /// is refused with TERMS_NOT_ACCEPTED.
    #[serde(default)]
    #[schema(value_type = bool)]
    pub accept_terms: Option<serde_json::Value>,
}

/// `data` of `POST /api/v1/onboarding/email/complete`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EmailCompleteResponse {
    /// The first agent with its key, on the account's first completion only; `null` when an
    /// existing owner signs in (the key is shown once; rotate it or create an agent for a new one).
    pub bootstrap: Option<AgentBootstrap>,
    pub session: OwnerSession,
    pub account: AccountSummary,
}

/// A newly issued agent key: shown once, never again.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentBootstrap {
    /// Prefix `agent-`.
    pub agent_api_key: String,
    pub agent_id: String,
    /// The agent's execution wallet (0x…).
    pub agent_address: String,
}

/// `data` of agent creation and key rotation.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentKeyIssued {
    pub bootstrap: AgentBootstrap,
}

/// An owner session, carried as `Authorization: Bearer owner-…`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct OwnerSession {
    /// Prefix `owner-`.
    pub token: String,
    pub expires_at: String,
}

/// The account an owner session belongs to.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AccountSummary {
    pub account_id: String,
    pub email: String,
    /// True when this completion created the account.
    pub created: bool,
}

/// Body of `POST /api/v1/agents`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateAgentRequest {
    /// A label for the owner's own use.
    #[serde(default)]
    pub name: Option<String>,
}

/// An agent as its owner sees it (never its key).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentView {
    pub agent_id: String,
    pub agent_address: String,
    pub name: Option<String>,
    pub created_at: String,
    pub key_rotated_at: Option<String>,
}

/// `data` of `GET /api/v1/agents`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentListResponse {
    pub agents: Vec<AgentView>,
}

/// Body of `PUT /api/v1/agents/{agentId}/policy`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PolicyRequest {
    /// Action names or aliases; stored canonical.
    pub allowed_actions: Vec<String>,
    /// USD an agent may move per UTC day across accepted writes.
    pub daily_limit_usd: f64,
    /// Optional cap per single action, below the action's own maxAmountUsd.
    #[serde(default)]
    pub max_amount_usd_per_action: Option<f64>,
    /// The lowest health factor a borrow or withdrawal may leave a lending position at (1 to
    /// 100); the server's default (1.5) when omitted.
    #[serde(default)]
    pub min_health_factor: Option<f64>,
    /// A write the gateway prices above this many USD waits for the owner's approval (null or
    /// omitted: never).
    #[serde(default)]
    pub approval_above_usd: Option<f64>,
}

/// `data` of the policy routes.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PolicyView {
    pub agent_id: String,
    pub allowed_actions: Vec<String>,
    pub daily_limit_usd: f64,
    pub max_amount_usd_per_action: Option<f64>,
    pub min_health_factor: f64,
    pub approval_above_usd: Option<f64>,
    pub updated_at: String,
}
