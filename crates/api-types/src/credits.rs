//! Buying credits with x402 (SPEC "Credits"): the metadata, the request, the 402 challenge and the
//! purchase answer.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// A credit package.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CreditPackage {
    /// credits_100, credits_1000, credits_10000.
    pub sku: String,
    pub credits: i64,
    /// Price in the stablecoin, a decimal string ("18.00").
    pub price: String,
    /// Price in the stablecoin's base units ("18000000").
    pub price_atomic: String,
}

/// The stablecoin credits are paid in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PaymentCurrency {
    pub address: String,
    pub symbol: String,
    pub decimals: u8,
}

/// `data` of `GET /api/v1/credits/x402-metadata`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct X402Metadata {
    pub packages: Vec<CreditPackage>,
    /// Where payments go.
    pub recipient: String,
    pub currency: PaymentCurrency,
    /// The network's name (`base`, `base-sepolia`, or the configured chain's name).
    pub network: String,
    pub chain_id: u64,
    /// Confirmations a payment needs before credits are added.
    pub confirmations: u64,
    /// How long a challenge's invoice stays open.
    pub invoice_ttl_seconds: u64,
    /// The wallet that settles standard x402 payments (EIP-3009 authorizations); it pays their gas.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub settlement_address: Option<String>,
}

/// Body of `POST /api/v1/credits/buy-with-x402` and `POST /api/v1/agent/credits/buy-with-x402`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BuyCreditsRequest {
    /// credits_100, credits_1000 or credits_10000.
    pub sku: String,
    /// The paying wallet. Required on the open route; on the agent route the agent's wallet when omitted.
    #[serde(default)]
    pub user_address: Option<String>,
}

/// The payment challenge (SPEC).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct X402Challenge {
    pub invoice_id: String,
    /// In the currency's units, a decimal string ("18.00").
    pub amount: String,
    pub recipient: String,
    /// The stablecoin's symbol.
    pub currency: String,
    /// The network's name.
    pub network: String,
}

/// The HTTP 402 body.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChallengeBody {
    pub x402_challenge: X402Challenge,
}

/// A completed purchase (SPEC).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CreditPurchase {
    pub success: bool,
    /// Credits bought.
    pub credits: i64,
    /// The account's balance after the purchase (or, for a wallet not linked to an account yet, the
    /// credits held for it).
    pub balance: i64,
    pub message: String,
}

/// Body of `POST /api/v1/wallets/link/begin`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WalletLinkBegin {
    /// The wallet to link.
    pub address: String,
    /// The chain named in the message (default 8453).
    #[serde(default)]
    pub chain_id: Option<u64>,
}

/// `data` of `POST /api/v1/wallets/link/begin`: the EIP-4361 message for the wallet to sign
/// (`personal_sign`), exactly as issued.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct WalletLinkChallenge {
    pub message: String,
    pub nonce: String,
    pub expires_at: String,
}

/// Body of `POST /api/v1/wallets/link`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WalletLinkRequest {
    /// The issued message, unchanged.
    pub message: String,
    /// The wallet's EIP-191 signature of it (65 bytes, hex).
    pub signature: String,
}

/// `data` of `POST /api/v1/wallets/link`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct WalletLinked {
    pub address: String,
    pub account_id: String,
    /// Credits bought by the wallet before it was linked, now in the account's balance.
    pub credits_moved: i64,
}
