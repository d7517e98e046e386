//! ERC-7710 delegation on the MetaMask Delegation Framework (CONTRACT "Delegation"): the delegation
//! as the framework defines it, the readable caveat request `create` derives its caveats from, and
//! the bodies of the delegation routes.

use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::chain::UnsignedTransaction;

/// One caveat as the framework encodes it: an enforcer contract and the terms it reads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Caveat {
    /// The enforcer contract (0x address).
    pub enforcer: String,
    /// The enforcer's terms (0x hex), as signed.
    pub terms: String,
    /// Redemption-time arguments (0x hex; not signed). `0x` unless an enforcer needs some.
    #[serde(default = "empty_hex")]
    pub args: String,
}

fn empty_hex() -> String {
    "0x".into()
}

/// A delegation as the framework's `Delegation` struct: `authority` is the ROOT authority
/// (`0xff…ff`) for a delegation straight from the delegator; `salt` a uint256 as 0x hex.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Delegation {
    pub delegate: String,
    pub delegator: String,
    pub authority: String,
    pub caveats: Vec<Caveat>,
    pub salt: String,
    /// The delegator's signature over the EIP-712 typed data (absent until signed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
}

/// A cap on one ERC-20 token, in the token's units (a decimal string, `"250.5"`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TokenCap {
    /// A symbol of the chain's token list, or a 0x address of a listed token.
    pub token: String,
    pub amount: String,
}

/// A cap on one ERC-20 token per period.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PeriodCap {
    pub token: String,
    /// Per period, in the token's units.
    pub amount: String,
    pub period_seconds: u64,
    /// Unix seconds when the first period starts (default: now).
    #[serde(default)]
    pub start_date: Option<u64>,
}

/// The power a delegation grants, readable; each field becomes one caveat for its enforcer.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CaveatRequest {
    /// Contracts the delegate may call (AllowedTargetsEnforcer).
    #[serde(default)]
    pub allowed_targets: Option<Vec<String>>,
    /// Functions it may call: 4-byte selectors (`0x095ea7b3`) or signatures
    /// (`approve(address,uint256)`) (AllowedMethodsEnforcer).
    #[serde(default)]
    pub allowed_methods: Option<Vec<String>>,
    /// Most native value (wei, decimal string) one call may carry (ValueLteEnforcer); default 0.
    #[serde(default)]
    pub max_native_value: Option<String>,
    /// Total an ERC-20 `transfer` may move over the delegation's life (ERC20TransferAmountEnforcer).
    #[serde(default)]
    pub erc20_transfer_cap: Option<TokenCap>,
    /// ERC-20 `transfer` amount per period (ERC20PeriodTransferEnforcer).
    #[serde(default)]
    pub erc20_period_cap: Option<PeriodCap>,
    /// Most a single execution may lower the delegator's balance of a token
    /// (ERC20BalanceChangeEnforcer, decrease); what caps a swap or a deposit.
    #[serde(default)]
    pub erc20_spend_caps: Option<Vec<TokenCap>>,
    /// Unix seconds before which it cannot be used (TimestampEnforcer).
    #[serde(default)]
    pub valid_from: Option<u64>,
    /// Unix seconds from which it cannot be used (TimestampEnforcer); `expiresAt` sets the same.
    #[serde(default)]
    pub valid_until: Option<u64>,
    /// How many redemptions it allows (LimitedCallsEnforcer).
    #[serde(default)]
    pub max_calls: Option<u64>,
}

/// Body of `POST /api/v1/agent/delegation/create`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DelegationCreateRequest {
    /// The agent API key, when not in `x-agent-api-key`.
    #[serde(default)]
    pub agent_api_key: Option<String>,
    /// The user's smart account (or EIP-7702 account) granting the power.
    pub delegator: String,
    /// Default 8453.
    #[serde(default)]
    pub chain_id: Option<u64>,
    /// Derive the caveats this catalog action needs (targets, methods, caps from the policy).
    #[serde(default)]
    pub action: Option<String>,
    /// Caveats asked for explicitly; they narrow (or, without `action`, define) the power.
    #[serde(default)]
    pub caveats: Option<CaveatRequest>,
    /// Unix seconds from which the delegation cannot be used.
    #[serde(default)]
    pub expires_at: Option<u64>,
}

/// EIP-712 typed data ready for `eth_signTypedData_v4`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TypedData {
    #[schema(value_type = Object)]
    pub types: serde_json::Value,
    #[schema(value_type = Object)]
    pub domain: serde_json::Value,
    pub primary_type: String,
    #[schema(value_type = Object)]
    pub message: serde_json::Value,
}

/// `data` of a create.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DelegationCreated {
    pub delegation: Delegation,
    /// The framework's hash of the delegation (`getDelegationHash`), the key of every other route.
    pub delegation_hash: String,
    pub chain_id: u64,
    pub typed_data: TypedData,
    /// The caveats in words.
    pub caveats_decoded: Vec<DecodedCaveat>,
}

/// Body of `POST /api/v1/agent/delegation/activate`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DelegationActivateRequest {
    #[serde(default)]
    pub agent_api_key: Option<String>,
    /// The delegation with its `signature`.
    pub delegation: Delegation,
    /// Default 8453.
    #[serde(default)]
    pub chain_id: Option<u64>,
}

/// `data` of an activate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DelegationActivated {
    pub delegation_hash: String,
    /// `active`.
    pub status: String,
    pub delegator: String,
    pub chain_id: u64,
    /// `ecdsa` (a codeless delegator) or `erc1271` (a smart account).
    pub signature_kind: String,
    /// Unix seconds from which it cannot be used, when a time window caveat says so.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<u64>,
}

/// One delegation as `check` lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DelegationSummary {
    pub delegation_hash: String,
    pub delegator: String,
    pub chain_id: u64,
    /// `active`, `revoked`, `expired` or `invalid`.
    pub status: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<u64>,
}

/// `data` of a check.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DelegationCheck {
    /// Whether any listed delegation is active.
    pub active: bool,
    pub delegations: Vec<DelegationSummary>,
}

/// One onchain check of a verify.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct VerifyCheck {
    pub name: String,
    pub ok: bool,
    pub detail: String,
}

/// `data` of a verify.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DelegationVerified {
    pub delegation_hash: String,
    pub valid: bool,
    /// The status after the checks (a delegation found disabled onchain is now `revoked`).
    pub status: String,
    pub checks: Vec<VerifyCheck>,
}

/// A caveat in words, with what was used of it so far where the enforcer keeps count.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DecodedCaveat {
    /// The enforcer's name (`AllowedTargetsEnforcer`, …) or `unknown`.
    pub kind: String,
    pub enforcer: String,
    /// The terms read back (targets, selectors, token, amounts in base units and token units).
    #[schema(value_type = Object)]
    pub terms: serde_json::Value,
    /// Used so far, read from the enforcer (calls made, amount transferred), when it keeps count.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Object)]
    pub used: Option<serde_json::Value>,
}

/// `data` of an inspect.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DelegationInspected {
    pub delegation_hash: String,
    pub status: String,
    pub chain_id: u64,
    pub delegation: Delegation,
    pub caveats: Vec<DecodedCaveat>,
}

/// One token balance of a delegator.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TokenBalance {
    /// The symbol when listed, else the address.
    pub token: String,
    pub address: String,
    /// Base units, decimal string.
    pub raw: String,
    /// Token units, decimal string.
    pub amount: String,
}

/// `data` of a balance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DelegationBalance {
    pub delegation_hash: String,
    pub delegator: String,
    pub chain_id: u64,
    /// Native coin, wei.
    pub native: String,
    pub tokens: Vec<TokenBalance>,
}

/// Body of `POST /api/v1/agent/delegation/revoke`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DelegationRevokeRequest {
    #[serde(default)]
    pub agent_api_key: Option<String>,
    pub delegation_hash: String,
}

/// `data` of a revoke: either the transaction for the owner to sign (the delegator account calls
/// `disableDelegation`), or, once it is mined (or the owner disabled it elsewhere), `revoked`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DelegationRevoke {
    pub delegation_hash: String,
    /// `active` (not disabled onchain yet) or `revoked`.
    pub status: String,
    /// The call the delegator account makes: `to` the DelegationManager, `data`
    /// `disableDelegation(delegation)`. Absent once revoked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transaction: Option<UnsignedTransaction>,
}

/// Body of `POST /api/v1/agent/delegation/redeem`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DelegationRedeemRequest {
    #[serde(default)]
    pub agent_api_key: Option<String>,
    pub delegation_hash: String,
    /// The action to run from the delegator's account, and its params.
    pub action: String,
    #[schema(value_type = Object)]
    pub params: serde_json::Value,
    /// Required: a retry with the same key answers the same result and sends nothing again.
    pub idempotency_key: String,
    #[serde(default)]
    pub estimated_amount_usd: Option<f64>,
}

/// `data` of a redeem: the execution as it ended (or `pending` at the answer deadline).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DelegationRedeemed {
    pub delegation_hash: String,
    /// The intent it ran as (its status route tracks it).
    pub intent_id: String,
    pub user_did: String,
    pub wallet_address: String,
    pub chain_id: u64,
    /// `succeeded`, `failed` or `pending`.
    pub status: String,
    pub success: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tx_hash: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// Query of `GET /api/v1/agent/delegation/check`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct DelegationCheckQuery {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chain_id: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delegator: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_api_key: Option<String>,
}

/// Query of the routes that name one delegation (verify, inspect, balance).
#[derive(Debug, Clone, Serialize, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct DelegationHashQuery {
    pub delegation_hash: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_api_key: Option<String>,
}
