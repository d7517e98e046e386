//! Build-tx (CONTRACT "Build-tx"): unsigned transactions for a wallet to sign locally (Model B).

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Body of `POST /api/v1/agent/build-tx`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BuildTxRequest {
    /// The agent API key.
    pub agent_api_key: String,
    /// Catalog action name; kebab-case canonical, any alias accepted.
    pub action: String,
    /// Action-specific, per the action's paramsSchema (a swap takes `recipient` for its output).
    #[schema(value_type = Object)]
    pub params: serde_json::Value,
    /// The chain the transactions are for.
    pub chain_id: u64,
    /// The signer. Required for actions whose transactions depend on the signer's balances and
    /// allowances (every EVM write): the approval is added only when the allowance is short, nonce
    /// and fees are filled, and each transaction is simulated from this address.
    #[serde(default)]
    pub wallet_address: Option<String>,
    /// USD estimate used for the per-action amount limit.
    #[serde(default)]
    pub estimated_amount_usd: Option<f64>,
}

/// One unsigned transaction. Bytes and quantities are hex strings, as in JSON-RPC.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct UnsignedTransaction {
    pub to: String,
    pub data: String,
    pub value: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gas: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_fee_per_gas: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_priority_fee_per_gas: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nonce: Option<String>,
    /// What the transaction does, for a person.
    pub description: String,
}

impl UnsignedTransaction {
    /// A call without value for a wallet to sign, its gas, fees and nonce left to the wallet.
    pub fn call(to: String, data: String, description: String) -> Self {
        Self {
            to,
            data,
            value: "0x0".into(),
            gas: None,
            max_fee_per_gas: None,
            max_priority_fee_per_gas: None,
            nonce: None,
            description,
        }
    }
}

/// `data` of `POST /api/v1/agent/build-tx`: an ordered list (an approval the action needs comes first).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BuildTxData {
    pub chain_id: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    pub transactions: Vec<UnsignedTransaction>,
}
