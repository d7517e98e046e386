//! The catalog document of SPEC "Resources and their fields": catalog, provider family, action.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Response of `GET /api/v1/agent/actions/catalog`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CatalogDocument {
    /// ISO 8601 time the document was computed (at server start).
    pub generated_at: String,
    /// Always `action_catalog`.
    pub source: String,
    pub version: u32,
    pub provider_manifest_version: u32,
    pub provider_families: Vec<ProviderFamily>,
    pub actions: Vec<CatalogAction>,
}

/// A provider family: one venue or protocol integration.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProviderFamily {
    pub provider_id: String,
    /// One of internal, evmDex, vault, cex, bridge, earn, offchainPerp, prediction.
    pub provider_kind: String,
    /// Any of quote, execute, readOnly, fanoutSafe, buildTx.
    pub capabilities: Vec<String>,
    pub supported_chains: Vec<u64>,
    /// One of mixed, managed, byow.
    pub custody_mode: String,
    pub description: String,
    pub domain: String,
    pub category: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capital_profile_id: Option<String>,
}

/// One action of the catalog.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CatalogAction {
    /// Canonical name, kebab-case.
    pub action: String,
    /// Alternate spellings (snake_case, older names); each resolves to `action`.
    pub aliases: Vec<String>,
    pub description: String,
    pub required_params: Vec<String>,
    /// JSON Schema of params (`additionalProperties: false`).
    #[schema(value_type = Option<Object>)]
    pub params_schema: Option<serde_json::Value>,
    /// Max USD value for policy limits; 0 means read-only.
    pub max_amount_usd: Option<f64>,
    pub requires_subscription: bool,
    /// agentkit or internal.
    pub implementation: String,
    pub enabled: bool,
    pub supports_execute_intent: bool,
    pub supports_execute: bool,
    pub supports_build_tx: bool,
    pub provider_id: String,
    pub provider_kind: String,
    pub domain: String,
    pub category: String,
    pub supported_chains: Vec<u64>,
    pub custody_mode: String,
    /// explicit or inferred.
    pub metadata_source: String,
    pub risk_level: Option<String>,
    pub rails: Vec<String>,
    /// write, read_offchain, read_rpc, or null (free).
    pub billing_tier: Option<String>,
    /// snake_case internal name.
    pub agentkit_action: String,
    pub composition_categories: Vec<String>,
    pub composition_ready: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub editor_config: Option<EditorConfig>,
}

impl CatalogAction {
    /// Whether the action only reads (SPEC: `maxAmountUsd` 0 means read-only): the one
    /// read/write classification, served in the catalog and used by the core's checks, the chain
    /// layer (through the execution context) and the CLI (which asks for `--confirm-writes`).
    pub fn is_read(&self) -> bool {
        self.max_amount_usd == Some(0.0)
    }
}

/// How a composition editor presents an action.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EditorConfig {
    /// Any of fixed_usd, fixed_token, percent_of_upstream, max_notional.
    pub allowed_sizing_modes: Vec<String>,
    pub product_fields: Vec<String>,
    pub hidden_runtime_fields: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub option_source: Option<OptionSource>,
    /// Sizing mode to a template string.
    pub basis_copy: BTreeMap<String, String>,
}

/// Where an editor loads the options of a field from.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct OptionSource {
    #[serde(rename = "type")]
    pub kind: String,
    pub route: String,
}

/// `data` of `GET /api/v1/agent/actions`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ActionList {
    /// With an agent key: the actions its policy allows and that are enabled; else every action.
    pub actions: Vec<CatalogAction>,
    /// True when the list was filtered by an agent's policy.
    pub filtered_by_policy: bool,
}

/// One MCP tool as the plain-HTTP mirror lists it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct McpToolInfo {
    pub name: String,
    pub description: String,
    #[schema(value_type = Object)]
    pub input_schema: serde_json::Value,
    #[schema(value_type = Option<Object>)]
    pub output_schema: Option<serde_json::Value>,
    /// Whether the tool needs `Authorization: Bearer <agent key>`.
    pub requires_auth: bool,
}

/// `data` of `GET /mcp/tools`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct McpToolList {
    pub tools: Vec<McpToolInfo>,
}
