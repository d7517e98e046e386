//! Personhood (World ID): the owner's proof requests and what completing them answers. The request
//! bodies are the routes'; the MCP tools take the same fields as arguments.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};

/// Body of org begin.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OrgBegin {
    pub org_id: String,
    /// Default 8453.
    pub chain_id: Option<u64>,
}

/// Body of org complete and deposit complete.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OrgComplete {
    pub org_id: String,
    /// The proof client's result object.
    #[schema(value_type = Object)]
    pub proof: Value,
    /// Default 8453.
    pub chain_id: Option<u64>,
}

/// Body of the agent-scoped begin. The agent is named by `agentId` (an agent of the owner's
/// account, so the owner need not hold its key) or, as SPEC has it, by `agentKey`: one of the two.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AgentBegin {
    /// The agent's API key (SPEC); or name it by `agentId`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_key: Option<String>,
    /// The agent's id (an agent of the owner's account).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    /// Default 8453.
    pub chain_id: Option<u64>,
}

/// Body of the agent-scoped complete.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AgentComplete {
    /// The agent's API key (SPEC); or name it by `agentId`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_key: Option<String>,
    /// The agent's id (an agent of the owner's account).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    #[schema(value_type = Object)]
    pub proof: Value,
    /// Default 8453.
    pub chain_id: Option<u64>,
}

/// Body of deposit begin.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DepositBeginBody {
    pub org_id: String,
    /// Must start with `deposit:`; `deposit:{challengeId}` when omitted.
    pub deposit_signal: Option<String>,
    pub runtime_id: Option<String>,
    pub amount_usd: Option<f64>,
    pub destination_address: Option<String>,
    /// Default 8453.
    pub chain_id: Option<u64>,
    /// The same key answers the same challenge.
    pub idempotency_key: Option<String>,
}

/// Body of deposit consume.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DepositConsume {
    pub org_id: String,
    pub receipt_id: String,
    pub runtime_id: Option<String>,
    pub amount_usd: Option<f64>,
}

/// Query of org check.
#[derive(Debug, Clone, Serialize, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct OrgCheck {
    pub org_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chain_id: Option<u64>,
}

/// The relying party's signed context of a proof request (field names as the proof client reads
/// them: snake_case).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct RpContext {
    pub rp_id: String,
    /// 0x-hex field element, single-use.
    pub nonce: String,
    /// Unix seconds.
    pub created_at: i64,
    /// Unix seconds.
    pub expires_at: i64,
    /// The relying party's signature over nonce, times and action.
    pub signature: String,
}

/// What the owner's proof client needs to make a proof.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProofRequest {
    pub action: String,
    pub app_id: String,
    pub environment: String,
    pub signal: String,
    pub rp_context: RpContext,
}

/// A proof request begun (`challengeId` for a deposit only).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProofBegun {
    pub proof_request: ProofRequest,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub challenge_id: Option<String>,
}

/// Where a subject's personhood stands: `unverified`, or `locked` with `lockedAt`. Never the
/// nullifier.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PersonhoodState {
    pub status: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub locked_at: Option<String>,
}

/// `data` of a completed enrollment and of org check.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct PersonhoodStatus {
    pub personhood: PersonhoodState,
}

/// A single-use deposit receipt issued, or consumed (`consumedAt`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DepositReceipt {
    pub receipt_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub consumed_at: Option<String>,
}

/// `data` of `GET /api/v1/agent/delegation/personhood/rp`: the relying party proofs are made for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RelyingParty {
    pub rp_id: String,
    pub app_id: String,
    /// `production` or `staging`.
    pub environment: String,
    /// The address whose signature the proof client checks on each request.
    pub signer_address: String,
    /// How long a proof request stays open.
    pub ttl_seconds: i64,
}
