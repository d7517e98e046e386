//! What an owner reads of their account (issue 27), beside the console: its agents' intents, its
//! credits and ledger, and the delegations given to its agents. Owner routes (`Authorization:
//! Bearer owner-…`).

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::intents::Intent;

/// One intent of the account, as its agent reads it, with what it was.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AccountIntent {
    pub agent_id: String,
    pub action: String,
    /// execute, executeIntent or buildTx.
    pub lane: String,
    pub created_at: String,
    #[serde(flatten)]
    pub intent: Intent,
}

/// `data` of `GET /api/v1/intents`: the account's latest intents (at most 100), newest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AccountIntentList {
    pub intents: Vec<AccountIntent>,
}

/// One row of the account's credit ledger.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct LedgerItem {
    /// grant, purchase, reserve, free, capture or release.
    pub kind: String,
    pub reason: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intent_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub invoice_id: Option<String>,
    pub balance_before: i64,
    pub balance_after: i64,
    pub reserved_before: i64,
    pub reserved_after: i64,
    pub created_at: String,
}

/// `data` of `GET /api/v1/credits`: the balance, what is held for intents that have not ended, and
/// the ledger newest first (at most 200 rows).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AccountCredits {
    pub balance: i64,
    pub reserved: i64,
    pub ledger: Vec<LedgerItem>,
}

/// A delegation given to one of the account's agents.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AccountDelegation {
    pub hash: String,
    pub agent_id: String,
    pub delegator: String,
    pub chain_id: u64,
    /// active, revoked, expired or invalid (an active one past its time window reads expired).
    pub status: String,
    pub created_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
}

/// `data` of `GET /api/v1/delegations`, newest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AccountDelegationList {
    pub delegations: Vec<AccountDelegation>,
}
