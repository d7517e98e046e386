//! Venue readiness: what blocks an action of a venue (a provider family of the catalog) for this
//! agent on a chain and a lane, read live, and what fixes it.

use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::chain::UnsignedTransaction;

/// Why a venue is not ready. Each comes with what fixes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum BlockingCode {
    /// The chain has no RPC URL, or not the venue's contracts.
    ChainNotConfigured,
    /// The wallet that sends cannot pay for a transaction at the current fee.
    GasShort,
    /// The wallet holds less of the token than the amount.
    BalanceShort,
    /// The wallet's allowance to the venue's spender is short (build-tx lane).
    ApprovalRequired,
    /// No active delegation to the agent covers the venue's contracts (fan-out lane).
    DelegationMissing,
    /// The gateway cannot price the token (a stale or missing price): a write of it is refused.
    PriceUnavailable,
    /// The venue says so onchain: a paused token, a vault that accepts no deposits, no code at the
    /// configured contract.
    VenuePaused,
    /// The venue needs credentials this deployment does not have.
    CredentialsMissing,
    /// The account's credits and today's free requests do not cover one more execution.
    CreditsShort,
    /// This deployment does not run the venue's actions through the lane.
    VenueUnavailable,
    /// A lending write of the amount would leave the holder's health factor below the policy's
    /// minimum (`POLICY_HEALTH_FACTOR` at submit).
    HealthFactorLow,
}

impl BlockingCode {
    /// The wire name (`GAS_SHORT`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ChainNotConfigured => "CHAIN_NOT_CONFIGURED",
            Self::GasShort => "GAS_SHORT",
            Self::BalanceShort => "BALANCE_SHORT",
            Self::ApprovalRequired => "APPROVAL_REQUIRED",
            Self::DelegationMissing => "DELEGATION_MISSING",
            Self::PriceUnavailable => "PRICE_UNAVAILABLE",
            Self::VenuePaused => "VENUE_PAUSED",
            Self::CredentialsMissing => "CREDENTIALS_MISSING",
            Self::CreditsShort => "CREDITS_SHORT",
            Self::VenueUnavailable => "VENUE_UNAVAILABLE",
            Self::HealthFactorLow => "HEALTH_FACTOR_LOW",
        }
    }
}

/// What to do about a blocking reason.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Fix {
    /// A sentence for a person.
    pub text: String,
    /// The catalog action that does it, when one does (`wrap-native`, `transfer`, …).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
    /// The route that does it, when one does (`POST /api/v1/agent/delegation/create`, …).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub route: Option<String>,
    /// The transaction that does it, unsigned, for the wallet named in the reason to sign (an
    /// approval).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transaction: Option<UnsignedTransaction>,
}

/// One reason a venue is not ready.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BlockingReason {
    pub code: BlockingCode,
    /// What was found, for a person.
    pub message: String,
    pub fix: Fix,
}

impl BlockingReason {
    pub fn new(code: BlockingCode, message: impl Into<String>, fix: Fix) -> Self {
        Self {
            code,
            message: message.into(),
            fix,
        }
    }
}

/// `data` of `GET /api/v1/agent/venues/readiness` (SPEC "Venue readiness").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct VenueReadiness {
    /// The venue: a `providerId` of the catalog.
    pub venue: String,
    pub chain_id: u64,
    /// `executeIntent`, `execute` or `buildTx`.
    pub lane: String,
    /// No reason blocks the venue.
    pub ready: bool,
    /// Empty when ready.
    pub blocking_reasons: Vec<BlockingReason>,
    /// When the state was read (RFC 3339): read live for this answer.
    pub checked_at: String,
}

/// The query of a readiness check.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema, IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct ReadinessQuery {
    /// The venue: a `providerId` of the catalog (`uniswap-v2`, `erc4626-vaults`, …).
    pub venue: String,
    /// The chain; 8453 when omitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chain_id: Option<u64>,
    /// `executeIntent` (fan-out, the default), `execute` (the agent's wallet) or `buildTx` (a
    /// wallet that signs locally).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lane: Option<String>,
    /// An amount in token units (with `token`): the balance and allowance are checked against it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub amount: Option<String>,
    /// A token symbol of the chain's list or a 0x address: its price, balance and allowance are
    /// checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// The wallet that signs on the buildTx lane (its gas, balance and allowances are read):
    /// required there; ignored on the other lanes, which send from the agent's wallet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wallet_address: Option<String>,
}

/// One venue of `GET /api/v1/agent/venues`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct VenueSummary {
    pub venue: String,
    pub description: String,
    /// The venue's enabled actions through the lane.
    pub actions: Vec<String>,
    pub ready: bool,
    pub blocking_reasons: Vec<BlockingReason>,
}

/// `data` of `GET /api/v1/agent/venues`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct VenueList {
    pub chain_id: u64,
    pub lane: String,
    pub venues: Vec<VenueSummary>,
    pub checked_at: String,
}

/// The query of `GET /api/v1/agent/venues`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema, IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct VenueListQuery {
    /// The chain; 8453 when omitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chain_id: Option<u64>,
    /// The lane; `executeIntent` when omitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lane: Option<String>,
    /// The wallet that signs on the buildTx lane: required there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wallet_address: Option<String>,
}
