//! The `internal` provider's reads that need no chain: they answer from configured data
//! (`catalog/internal-data.toml`, or the file named by `internal-data-file`).

use std::collections::BTreeMap;

use actiongate_api_types::ErrorCode;
use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::catalog::Lane;
use crate::execution::{ExecutionContext, ExecutionOutcome, Provider, Reconciled};

/// The data shipped in the repository.
pub const BUILTIN_DATA: &str = include_str!("../../../../catalog/internal-data.toml");

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InternalData {
    fx: FxData,
    bridge: BridgeData,
    earn_providers: BTreeMap<String, toml::Value>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct FxData {
    assets: Vec<toml::Value>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct BridgeData {
    routes: Vec<toml::Value>,
}

impl InternalData {
    pub fn parse(text: &str) -> Result<Self, toml::de::Error> {
        toml::from_str(text)
    }
}

/// Reads answered from configured data.
pub struct InternalReads {
    data: InternalData,
}

impl InternalReads {
    pub fn new(data: InternalData) -> Self {
        Self { data }
    }

    fn answer(&self, ctx: &ExecutionContext) -> ExecutionOutcome {
        let to_json = |v: &toml::Value| serde_json::to_value(v).unwrap_or(Value::Null);
        match ctx.action.as_str() {
            "get-fx-supported-assets" => ExecutionOutcome::read(
                json!({ "assets": self.data.fx.assets.iter().map(to_json).collect::<Vec<_>>() }),
            ),
            "get-bridge-tokens" => {
                let from = ctx.params.get("fromChain").and_then(Value::as_u64);
                let to = ctx.params.get("toChain").and_then(Value::as_u64);
                let routes: Vec<Value> = self
                    .data
                    .bridge
                    .routes
                    .iter()
                    .map(to_json)
                    .filter(|r| from.is_none_or(|f| r["fromChain"].as_u64() == Some(f)))
                    .filter(|r| to.is_none_or(|t| r["toChain"].as_u64() == Some(t)))
                    .collect();
                ExecutionOutcome::read(json!({ "routes": routes }))
            }
            "get-earn-provider" => {
                let id = ctx
                    .params
                    .get("providerId")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                match self.data.earn_providers.get(id) {
                    Some(p) => {
                        let mut v = to_json(p);
                        if let Some(obj) = v.as_object_mut() {
                            obj.insert("providerId".into(), json!(id));
                        }
                        ExecutionOutcome::read(v)
                    }
                    None => ExecutionOutcome::failed(
                        ErrorCode::NotFound,
                        format!(
                            "No earn provider {id:?}; known: {}.",
                            self.data
                                .earn_providers
                                .keys()
                                .cloned()
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    ),
                }
            }
            other => ExecutionOutcome::failed(
                ErrorCode::NotAvailable,
                format!("{other} is not an internal read."),
            ),
        }
    }
}

#[async_trait]
impl Provider for InternalReads {
    fn lanes(&self) -> Vec<(&'static str, Lane)> {
        vec![
            ("get-fx-supported-assets", Lane::ExecuteIntent),
            ("get-bridge-tokens", Lane::ExecuteIntent),
            ("get-earn-provider", Lane::ExecuteIntent),
        ]
    }

    async fn execute(&self, ctx: &ExecutionContext) -> ExecutionOutcome {
        self.answer(ctx)
    }

    /// Reads send nothing: running one again is safe.
    async fn reconcile(&self, _ctx: &ExecutionContext) -> Reconciled {
        Reconciled::NotSent
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_data_parses() {
        let data = InternalData::parse(BUILTIN_DATA).map_err(|e| e.to_string());
        assert!(
            data.as_ref()
                .is_ok_and(|d| !d.fx.assets.is_empty() && !d.bridge.routes.is_empty()),
            "{data:?}"
        );
    }
}
