//! The audit trail (issue 27): an account's append-only, hash-chained record of decisions.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// One entry of an account's audit trail: a line of the JSONL export.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AuditEntryView {
    /// 1, 2, 3, … within the account, without gaps.
    pub seq: i64,
    pub at: String,
    /// `intent.accepted`, `intent.refused`, `intent.completed`, `intent.failed`, `execution.ended`,
    /// `approval.requested|approved|rejected|expired`, `credits.<ledger kind>`, `policy.changed`,
    /// `agent.created`, `agent.key_rotated`, `owner.login`, `delegation.activated|revoked|expired`.
    pub kind: String,
    /// `owner`, `agent:<agentId>` or `gateway`.
    pub actor: String,
    /// What the entry is about: an intent id, an agent id, a delegation hash, an account.
    pub subject: String,
    /// The refusal's or failure's code, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    #[schema(value_type = Object)]
    pub data: serde_json::Value,
    /// Hex of the previous entry's hash (zeros before the first).
    pub prev_hash: String,
    /// Hex of HMAC-SHA-256 over the previous hash and this entry, under a key the gateway derives
    /// from its master key.
    pub hash: String,
}

/// `data` of `GET /api/v1/audit/verify`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AuditVerify {
    /// True when every entry follows the one before and matches its hash, and the chain ends at
    /// its stored head.
    pub ok: bool,
    /// Entries checked and found intact (up to the first break).
    pub entries: u64,
    /// The hash of the last intact entry.
    pub head: String,
    /// The seq where the chain breaks (an entry changed, inserted or removed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub broken_at: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}
