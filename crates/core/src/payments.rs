//! The payment ports of credit purchases (x402): checking a payment transaction onchain
//! ([`PaymentVerifier`]) and settling an EIP-3009 authorization ([`AuthorizationSettler`]), the
//! chain layer's; and what is sold ([`PurchaseSettings`], [`Package`]). The use cases are in
//! [`crate::purchases`].

use actiongate_api_types::ErrorCode;
use async_trait::async_trait;
use time::Duration;

use crate::error::Result;

/// A credit package: its price in the stablecoin's base units.
#[derive(Debug, Clone, PartialEq)]
pub struct Package {
    pub sku: String,
    pub credits: i64,
    pub price_atomic: i64,
}

/// How credits are sold.
#[derive(Debug, Clone, PartialEq)]
pub struct PurchaseSettings {
    pub chain_id: u64,
    /// The stablecoin's symbol in the chain's token list.
    pub token: String,
    /// Where payments go; purchases are off until it is configured.
    pub recipient: Option<String>,
    pub confirmations: u64,
    pub invoice_ttl: Duration,
    pub packages: Vec<Package>,
    /// The stablecoin's EIP-712 domain name and version (EIP-3009 authorizations are signed over it).
    pub token_name: String,
    pub token_version: String,
    /// How long an EIP-3009 authorization may stay valid (`maxTimeoutSeconds`).
    pub max_timeout_seconds: u64,
}

impl Default for PurchaseSettings {
    fn default() -> Self {
        let package = |sku: &str, credits, price_atomic| Package {
            sku: sku.into(),
            credits,
            price_atomic,
        };
        Self {
            chain_id: crate::chains::DEFAULT_CHAIN_ID,
            token: "USDC".into(),
            recipient: None,
            confirmations: 1,
            invoice_ttl: Duration::minutes(15),
            packages: vec![
                package("credits_100", 100, 2_000_000),
                package("credits_1000", 1_000, 18_000_000),
                package("credits_10000", 10_000, 160_000_000),
            ],
            token_name: "USD Coin".into(),
            token_version: "2".into(),
            max_timeout_seconds: 300,
        }
    }
}

/// What the chain says of a payment transaction.
#[derive(Debug, Clone, PartialEq)]
pub enum TransferCheck {
    /// It pays the invoice; mined in this block, which has this timestamp (Unix seconds).
    Paid {
        block_number: u64,
        block_timestamp: u64,
    },
    /// Not mined yet, or short of confirmations.
    Pending(String),
    /// It does not pay the invoice, and never will.
    Refused(ErrorCode, String),
}

/// A transfer the gateway expects.
#[derive(Debug, Clone, PartialEq)]
pub struct ExpectedTransfer<'a> {
    pub chain_id: u64,
    pub tx_hash: &'a str,
    pub token: &'a str,
    pub payer: &'a str,
    pub recipient: &'a str,
    /// What the payer must transfer to the recipient in this transaction, exactly (CONTRACT: one
    /// transfer pays one invoice; more or less is `PAYMENT_AMOUNT_MISMATCH`).
    pub amount_atomic: i64,
    pub confirmations: u64,
}

/// Checks payment transactions onchain.
#[async_trait]
pub trait PaymentVerifier: Send + Sync + 'static {
    async fn check_transfer(&self, expected: &ExpectedTransfer<'_>) -> Result<TransferCheck>;
    /// The chain's latest block number: an invoice records it when issued, and only a payment mined
    /// in a later block answers it (the chain's own order, not two clocks compared).
    async fn head_block(&self, chain_id: u64) -> Result<u64>;
}

/// The payment headers of a retry.
#[derive(Debug, Clone, Default)]
pub struct PaymentProof {
    pub receipt: Option<String>,
    pub invoice_id: Option<String>,
    /// The x402 v2 `PAYMENT-SIGNATURE` header (base64 JSON of a payment payload).
    pub payment_signature: Option<String>,
}

/// An EIP-3009 `transferWithAuthorization` authorization (x402 "exact" on EVM), as signed.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Authorization {
    pub from: String,
    pub to: String,
    pub value: String,
    pub valid_after: String,
    pub valid_before: String,
    /// 32 bytes, hex.
    pub nonce: String,
}

/// What a settlement needs to know of the token and the invoice.
#[derive(Debug, Clone)]
pub struct AuthorizationTerms<'a> {
    pub chain_id: u64,
    pub token: &'a str,
    pub token_name: &'a str,
    pub token_version: &'a str,
    pub recipient: &'a str,
    pub amount_atomic: i64,
    /// Idempotency of the settlement transaction.
    pub settlement_key: &'a str,
}

/// Verifies EIP-3009 authorizations the way the x402 reference facilitator does and submits them
/// from the gateway's settlement wallet.
#[async_trait]
pub trait AuthorizationSettler: Send + Sync + 'static {
    /// The wallet that submits authorizations (it pays the gas).
    fn address(&self) -> String;
    /// Verifies and settles; answers the mined settlement transaction's hash.
    async fn settle(
        &self,
        terms: &AuthorizationTerms<'_>,
        authorization: &Authorization,
        signature: &str,
    ) -> Result<String>;
}
