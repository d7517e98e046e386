//! Market reads (catalog family `market-data`): a token's USD price as the gateway's price layer
//! sees it (`get-token-price`: the same sources that price writes, a stale feed shown as stale) and
//! what a token is (`get-token-info`: name, symbol, decimals and total supply read onchain).

use std::sync::Arc;

use actiongate_api_types::ErrorCode;
use actiongate_core::catalog::Lane;
use actiongate_core::clock::{Clock, from_millis, rfc3339};
use actiongate_core::error::Error;
use actiongate_core::execution::{ExecutionContext, ExecutionOutcome, Provider, Reconciled};
use actiongate_core::prices::{Prices, TokenRef};
use async_trait::async_trait;
use serde_json::{Value, json};

use crate::amount::format_units;
use crate::bindings::IERC20;
use crate::client::{ChainClient, ChainClients};
use crate::plan::{Token, resolve_token, view};
use crate::sender::outcome_of;

const ACTIONS: [&str; 2] = ["get-token-price", "get-token-info"];

pub struct MarketReads {
    clients: ChainClients,
    prices: Arc<Prices>,
    clock: Arc<dyn Clock>,
}

impl MarketReads {
    pub fn new(clients: ChainClients, prices: Arc<Prices>, clock: Arc<dyn Clock>) -> Self {
        Self {
            clients,
            prices,
            clock,
        }
    }

    fn client(&self, chain_id: u64) -> Result<&ChainClient, Error> {
        self.clients.require(chain_id)
    }

    async fn run(&self, ctx: &ExecutionContext) -> Result<Value, Error> {
        let client = self.client(ctx.chain_id)?;
        let text = ctx
            .params
            .get("token")
            .and_then(Value::as_str)
            .ok_or_else(|| Error::new(ErrorCode::InvalidParams, "params.token is required."))?;
        match ctx.action.as_str() {
            "get-token-price" => self.price(client, text).await,
            _ => token_info(client, text).await,
        }
    }

    async fn price(&self, client: &ChainClient, text: &str) -> Result<Value, Error> {
        let token = TokenRef::resolve(text, &client.settings);
        let now = u64::try_from(self.clock.now().unix_timestamp()).unwrap_or(0);
        let read = self
            .prices
            .read(client.chain_id, &client.settings, &token, now)
            .await?;
        // The token as the chain knows it: the native coin is read as its wrapped token.
        let lookup = token.address.as_deref().unwrap_or(text);
        let onchain = resolve_token(client, "token", lookup).await?;
        let (address, decimals) = match &onchain {
            Token::Erc20 {
                address, decimals, ..
            } => (Some(address.to_string()), *decimals),
            Token::Native => (None, 18),
        };
        let updated_at = read
            .quote
            .updated_at
            .and_then(|s| i64::try_from(s).ok())
            .map(|s| rfc3339(from_millis(s.saturating_mul(1000))));
        Ok(json!({
            "token": token.name(),
            "address": address,
            "decimals": decimals,
            "priceUsd": read.quote.price.to_decimal_string(),
            "source": read.quote.source.as_str(),
            "updatedAt": updated_at,
            "stale": !read.issues.is_empty(),
            "parseIssues": read.issues,
        }))
    }
}

async fn token_info(client: &ChainClient, text: &str) -> Result<Value, Error> {
    let Token::Erc20 {
        address, decimals, ..
    } = resolve_token(client, "token", text).await?
    else {
        return Err(Error::new(
            ErrorCode::InvalidParams,
            "params.token: the native coin is not a token contract; ask for its wrapped token (WETH).",
        ));
    };
    let name = view(client, address, IERC20::nameCall {}).await?;
    let symbol = view(client, address, IERC20::symbolCall {}).await?;
    let supply = view(client, address, IERC20::totalSupplyCall {}).await?;
    Ok(json!({
        "token": text,
        "address": address.to_string(),
        "name": name,
        "symbol": symbol,
        "decimals": decimals,
        "totalSupply": format_units(supply, decimals),
    }))
}

#[async_trait]
impl Provider for MarketReads {
    fn lanes(&self) -> Vec<(&'static str, Lane)> {
        ACTIONS.iter().map(|a| (*a, Lane::ExecuteIntent)).collect()
    }

    fn chains(&self, _action: &str) -> Option<Vec<u64>> {
        Some(self.clients.iter().map(|c| c.chain_id).collect())
    }

    async fn execute(&self, ctx: &ExecutionContext) -> ExecutionOutcome {
        match self.run(ctx).await {
            Ok(data) => ExecutionOutcome {
                success: true,
                tx_hash: None,
                data: Some(data),
                error: None,
            },
            Err(e) => outcome_of(e),
        }
    }

    async fn reconcile(&self, _ctx: &ExecutionContext) -> Reconciled {
        // A read sends nothing: it runs again.
        Reconciled::NotSent
    }
}
