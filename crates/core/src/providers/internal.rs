//! The `internal` provider's reads that need no chain: they answer from configured data
//! (`catalog/internal-data.toml`, or the file named by `internal-data-file`) and from the chains'
//! configuration (`get-fx-supported-assets`: the tokens of the chain's FX pairs).

use actiongate_api_types::ErrorCode;
use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::catalog::Lane;
use crate::chains::Chains;
use crate::execution::{ExecutionContext, ExecutionOutcome, Provider, Reconciled};

/// The data shipped in the repository.
pub const BUILTIN_DATA: &str = include_str!("../../../../catalog/internal-data.toml");

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InternalData {
    fx: FxData,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct FxData {
    assets: Vec<toml::Value>,
}

impl InternalData {
    pub fn parse(text: &str) -> Result<Self, toml::de::Error> {
        toml::from_str(text)
    }
}

/// Reads answered from configured data.
pub struct InternalReads {
    data: InternalData,
    chains: Chains,
}

impl InternalReads {
    pub fn new(data: InternalData, chains: Chains) -> Self {
        Self { data, chains }
    }

    /// The tokens of the chain's FX pairs, each with its peg where the data names one, and the pairs.
    fn fx_assets(&self, chain_id: u64) -> Value {
        let Some(chain) = self.chains.get(chain_id) else {
            return json!({"chainId": chain_id, "assets": [], "pairs": []});
        };
        let mut symbols: Vec<&str> = chain
            .fx_pairs
            .iter()
            .flat_map(|p| [p.base.as_str(), p.quote.as_str()])
            .collect();
        symbols.sort_unstable();
        symbols.dedup();
        let peg = |symbol: &str| {
            self.data
                .fx
                .assets
                .iter()
                .find(|a| a.get("symbol").and_then(toml::Value::as_str) == Some(symbol))
                .and_then(|a| a.get("peg"))
                .and_then(toml::Value::as_str)
                .map(str::to_owned)
        };
        let assets: Vec<Value> = symbols
            .iter()
            .filter_map(|s| chain.tokens.get(*s).map(|t| (s, t)))
            .map(|(s, t)| {
                json!({"symbol": s, "address": t.address, "decimals": t.decimals, "peg": peg(s)})
            })
            .collect();
        let pairs: Vec<Value> = chain
            .fx_pairs
            .iter()
            .map(|p| json!({"pair": format!("{}/{}", p.base, p.quote), "base": p.base, "quote": p.quote, "pool": p.pool}))
            .collect();
        json!({"chainId": chain_id, "assets": assets, "pairs": pairs})
    }

    fn answer(&self, ctx: &ExecutionContext) -> ExecutionOutcome {
        match ctx.action.as_str() {
            "get-fx-supported-assets" => ExecutionOutcome::read(self.fx_assets(ctx.chain_id)),
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
        vec![("get-fx-supported-assets", Lane::ExecuteIntent)]
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
            data.as_ref().is_ok_and(|d| !d.fx.assets.is_empty()),
            "{data:?}"
        );
    }
}
