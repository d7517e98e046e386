//! Market reads (catalog family `market-data`): a token's USD price as the gateway's price layer
//! sees it (`get-token-price`: the same sources that price writes, a stale feed shown as stale) and
//! what a token is (`get-token-info`: name, symbol, decimals and total supply read onchain), an FX
//! conversion's oracle rate beside its pool's quote (`get-fx-quote`), and a chain's markets
//! (`get-chain-market-overview`).

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
use crate::bindings::{AggregatorV3Interface, IERC20, IUniswapV3Pool};
use crate::client::{ChainClient, ChainClients};
use crate::plan::{Token, fx_quote, resolve_token, view};
use crate::sender::outcome_of;
use crate::uniswap::whole_price;
use actiongate_core::prices::token_key;
use alloy::primitives::{Address, U256};

const ACTIONS: [&str; 4] = [
    "get-token-price",
    "get-token-info",
    "get-fx-quote",
    "get-chain-market-overview",
];

/// The most round reads `change24hPct` makes (a bisection over a phase's rounds needs at most 64).
const MAX_ROUND_READS: u32 = 64;

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
        match ctx.action.as_str() {
            "get-fx-quote" => return fx_quote(client, &self.prices, &ctx.params).await,
            "get-chain-market-overview" => {
                let chain = ctx.params.get("chainId").and_then(Value::as_u64);
                let client = self.client(chain.unwrap_or(ctx.chain_id))?;
                return self.overview(client, &ctx.params).await;
            }
            _ => {}
        }
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

impl MarketReads {
    /// `get-chain-market-overview`: each token of the chain's list with the gateway's price and, where
    /// its feed keeps a day of rounds, the change over 24 hours; each configured pool (FX pairs and
    /// price pools) with its spot price and liquidity.
    async fn overview(&self, client: &ChainClient, params: &Value) -> Result<Value, Error> {
        let limit = params
            .get("limit")
            .and_then(Value::as_u64)
            .map_or(20, |l| l.clamp(1, 100));
        let now = u64::try_from(self.clock.now().unix_timestamp()).unwrap_or(0);
        let settings = &client.settings;
        let mut tokens = Vec::new();
        for (symbol, token) in settings
            .tokens
            .iter()
            .take(usize::try_from(limit).unwrap_or(20))
        {
            let t = TokenRef::resolve(symbol, settings);
            let mut entry =
                json!({"symbol": symbol, "address": token.address, "decimals": token.decimals});
            match self.prices.read(client.chain_id, settings, &t, now).await {
                Ok(read) => {
                    entry["priceUsd"] = json!(read.quote.price.to_decimal_string());
                    entry["source"] = json!(read.quote.source.as_str());
                    entry["stale"] = json!(!read.issues.is_empty());
                    entry["parseIssues"] = json!(read.issues);
                }
                Err(e) => {
                    entry["priceUsd"] = Value::Null;
                    entry["stale"] = json!(false);
                    entry["parseIssues"] = json!([e.message]);
                }
            }
            let feed = settings.price_feeds.get(&token_key(symbol));
            entry["change24hPct"] = match feed {
                Some(f) => change_24h(client, &f.address, now)
                    .await
                    .map_or(Value::Null, |c| json!(c)),
                None => Value::Null,
            };
            tokens.push(entry);
        }
        let mut pools: Vec<(String, &str)> = settings
            .fx_pairs
            .iter()
            .map(|p| (p.pool.to_ascii_lowercase(), "fx"))
            .collect();
        for p in settings.price_pools.values() {
            if !pools
                .iter()
                .any(|(a, _)| a.eq_ignore_ascii_case(&p.address))
            {
                pools.push((p.address.to_ascii_lowercase(), "price"));
            }
        }
        let mut described = Vec::new();
        for (pool, role) in pools {
            described.push(pool_state(client, &pool, role).await?);
        }
        Ok(
            json!({"chainId": client.chain_id, "name": settings.name, "tokens": tokens, "pools": described}),
        )
    }
}

/// A pool's tokens, fee, spot price (token0 in token1, whole units) and active liquidity.
async fn pool_state(client: &ChainClient, pool: &str, role: &str) -> Result<Value, Error> {
    let address: Address = pool
        .parse()
        .map_err(|_| Error::internal(format!("pool {pool:?} is not an address")))?;
    let (token0, token1, fee, slot0, liquidity) = tokio::try_join!(
        view(client, address, IUniswapV3Pool::token0Call {}),
        view(client, address, IUniswapV3Pool::token1Call {}),
        view(client, address, IUniswapV3Pool::feeCall {}),
        view(client, address, IUniswapV3Pool::slot0Call {}),
        view(client, address, IUniswapV3Pool::liquidityCall {}),
    )?;
    let (a0, a1) = (token0.to_string(), token1.to_string());
    let (t0, t1) = tokio::try_join!(
        resolve_token(client, "pool", &a0),
        resolve_token(client, "pool", &a1),
    )?;
    let (
        Token::Erc20 {
            symbol: s0,
            decimals: d0,
            ..
        },
        Token::Erc20 {
            symbol: s1,
            decimals: d1,
            ..
        },
    ) = (&t0, &t1)
    else {
        return Err(Error::internal("a pool token resolved to the native coin"));
    };
    let price =
        whole_price(U256::from(slot0.sqrtPriceX96), true, *d0, *d1).map(|p| p.to_decimal_string());
    Ok(json!({
        "pool": address.to_checksum(None),
        "role": role,
        "token0": s0,
        "token1": s1,
        "fee": fee.to::<u32>(),
        "tick": slot0.tick.as_i32(),
        "price": price,
        "priceOf": format!("{s1} per {s0}"),
        "liquidity": liquidity.to_string(),
    }))
}

/// The feed's percentage change since its last round at least 24 hours old, to two decimals;
/// `None` when the feed's current phase does not reach back a day or a round cannot be read.
/// A proxy's round id carries its phase in the bits above 64 (`phaseId << 64 | round`); within a
/// phase rounds are numbered from 1 and their times only grow, so the round is found by bisection
/// (at most [`MAX_ROUND_READS`] reads).
async fn change_24h(client: &ChainClient, feed: &str, now: u64) -> Option<String> {
    type RoundId = alloy::primitives::Uint<80, 2>;
    let feed: Address = feed.parse().ok()?;
    let latest = view(client, feed, AggregatorV3Interface::latestRoundDataCall {})
        .await
        .ok()?;
    let day_ago = now.checked_sub(86_400)?;
    let phase = latest.roundId >> 64;
    let id = |r: u64| (phase << 64) | RoundId::from(r);
    let read = |r: u64| async move {
        let round = view(
            client,
            feed,
            AggregatorV3Interface::getRoundDataCall { roundId: id(r) },
        )
        .await
        .ok()?;
        Some((u64::try_from(round.updatedAt).ok()?, round.answer))
    };
    // The last round at or before `day_ago`, in 1..current.
    let current = latest.roundId.as_limbs()[0];
    let (mut lo, mut hi) = (1u64, current.checked_sub(1)?);
    let (first_at, _) = read(lo).await?;
    if hi < lo || first_at > day_ago {
        return None;
    }
    for _ in 0..MAX_ROUND_READS {
        if lo >= hi {
            break;
        }
        let mid = lo + (hi - lo).div_ceil(2);
        match read(mid).await?.0 <= day_ago {
            true => lo = mid,
            false => hi = mid - 1,
        }
    }
    if lo != hi {
        return None;
    }
    let (_, then) = read(lo).await?;
    let (then, now) = (
        i128::try_from(then).ok()?,
        i128::try_from(latest.answer).ok()?,
    );
    if then <= 0 {
        return None;
    }
    let basis = (now - then).checked_mul(10_000)? / then;
    let sign = if basis < 0 { "-" } else { "" };
    let abs = basis.unsigned_abs();
    Some(format!("{sign}{}.{:02}", abs / 100, abs % 100))
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

    fn chains(&self, action: &str) -> Option<Vec<u64>> {
        let fx = action == "get-fx-quote";
        Some(
            self.clients
                .iter()
                .filter(|c| {
                    !fx || (!c.settings.fx_pairs.is_empty()
                        && c.settings.contracts.contains_key(crate::plan::V3_QUOTER))
                })
                .map(|c| c.chain_id)
                .collect(),
        )
    }

    async fn execute(&self, ctx: &ExecutionContext) -> ExecutionOutcome {
        match self.run(ctx).await {
            Ok(data) => ExecutionOutcome::read(data),
            Err(e) => outcome_of(e),
        }
    }

    async fn reconcile(&self, _ctx: &ExecutionContext) -> Reconciled {
        // A read sends nothing: it runs again.
        Reconciled::NotSent
    }
}
