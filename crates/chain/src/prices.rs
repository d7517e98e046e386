//! The onchain reads of the core's price layer ([`PriceReads`]): Chainlink `AggregatorV3Interface`
//! feeds, ERC-4626 vaults and Uniswap V3 pools' time-weighted prices, through the chain clients.

use actiongate_api_types::ErrorCode;
use actiongate_core::error::{Error, Result};
use actiongate_core::prices::{FeedRound, PoolTwap, PositionSide, PriceReads};
use alloy::primitives::Address;
use async_trait::async_trait;

use crate::amount::format_units;
use crate::bindings::{AggregatorV3Interface, IERC20, IERC4626, IUniswapV3Pool};
use crate::client::{ChainClient, ChainClients};
use crate::plan::view;
use crate::uniswap::{mean_tick_pricing, sqrt_ratio_at_tick, whole_price};

/// [`PriceReads`] on the configured chains.
pub struct ChainPrices {
    clients: ChainClients,
}

impl ChainPrices {
    pub fn new(clients: ChainClients) -> Self {
        Self { clients }
    }

    fn client(&self, chain_id: u64) -> Result<&ChainClient, Error> {
        self.clients.require(chain_id)
    }
}

fn address(what: &str, text: &str) -> Result<Address> {
    text.parse()
        .map_err(|_| Error::internal(format!("{what} {text:?} is not an address")))
}

#[async_trait]
impl PriceReads for ChainPrices {
    async fn feed_round(&self, chain_id: u64, feed: &str) -> Result<FeedRound> {
        let client = self.client(chain_id)?;
        let feed = address("price feed", feed)?;
        let (decimals, round) = tokio::try_join!(
            view(client, feed, AggregatorV3Interface::decimalsCall {}),
            view(client, feed, AggregatorV3Interface::latestRoundDataCall {}),
        )?;
        let answer = i128::try_from(round.answer).map_err(|_| {
            Error::new(
                ErrorCode::PriceUnavailable,
                format!("The feed {feed} answers {}, out of range.", round.answer),
            )
        })?;
        let updated_at = u64::try_from(round.updatedAt).unwrap_or(u64::MAX);
        Ok(FeedRound {
            answer,
            decimals,
            updated_at,
        })
    }

    async fn vault_asset(&self, chain_id: u64, vault: &str) -> Result<String> {
        let client = self.client(chain_id)?;
        let asset = view(client, address("vault", vault)?, IERC4626::assetCall {}).await?;
        Ok(asset.to_string())
    }

    async fn vault_position(&self, chain_id: u64, vault: &str, holder: &str) -> Result<String> {
        let client = self.client(chain_id)?;
        let vault = address("vault", vault)?;
        let owner = address("holder", holder)?;
        let shares = view(client, vault, IERC4626::balanceOfCall { owner }).await?;
        let assets = view(client, vault, IERC4626::convertToAssetsCall { shares }).await?;
        let asset = view(client, vault, IERC4626::assetCall {}).await?;
        let decimals = view(client, asset, IERC20::decimalsCall {}).await?;
        Ok(format_units(assets, decimals))
    }

    async fn market_collateral(&self, chain_id: u64, market: &str) -> Result<String> {
        let client = self.client(chain_id)?;
        Ok(crate::plan::ctf::collateral_of(client, market)
            .await?
            .to_string())
    }

    async fn lending_position(
        &self,
        chain_id: u64,
        token: &str,
        owner: &str,
        side: PositionSide,
    ) -> Result<String> {
        let client = self.client(chain_id)?;
        let owner = address("owner", owner)?;
        crate::plan::aave::position_amount(client, token, owner, side).await
    }

    async fn pool_twap(
        &self,
        chain_id: u64,
        pool: &str,
        token: &str,
        secs: u32,
    ) -> Result<PoolTwap> {
        let client = self.client(chain_id)?;
        let pool = address("pool", pool)?;
        let token = address("token", token)?;
        let (token0, token1) = tokio::try_join!(
            view(client, pool, IUniswapV3Pool::token0Call {}),
            view(client, pool, IUniswapV3Pool::token1Call {}),
        )?;
        let other = match token {
            t if t == token0 => token1,
            t if t == token1 => token0,
            _ => {
                return Err(Error::new(
                    ErrorCode::PriceUnavailable,
                    format!("The pool {pool} does not trade {token}."),
                ));
            }
        };
        let observed = view(
            client,
            pool,
            IUniswapV3Pool::observeCall {
                secondsAgos: vec![secs, 0],
            },
        )
        .await
        .map_err(|e| {
            Error::new(
                ErrorCode::PriceUnavailable,
                format!(
                    "The pool {pool} has no price history reaching back {secs} s ({})",
                    e.message
                ),
            )
        })?;
        let cumulative = |i: usize| {
            observed
                .tickCumulatives
                .get(i)
                .and_then(|c| i64::try_from(*c).ok())
        };
        let (Some(then), Some(now)) = (cumulative(0), cumulative(1)) else {
            return Err(Error::new(
                ErrorCode::PriceUnavailable,
                format!("The pool {pool} answered observe with no tick accumulators."),
            ));
        };
        let tick = i32::try_from(mean_tick_pricing(now - then, secs, token == token0)).ok();
        let (base_decimals, other_decimals) = tokio::try_join!(
            view(client, token, IERC20::decimalsCall {}),
            view(client, other, IERC20::decimalsCall {}),
        )?;
        let ratio = tick
            .and_then(sqrt_ratio_at_tick)
            .and_then(|sqrt| whole_price(sqrt, token == token0, base_decimals, other_decimals))
            .ok_or_else(|| {
                Error::new(
                    ErrorCode::PriceUnavailable,
                    format!("The pool {pool}'s mean tick gives no price that fits."),
                )
            })?;
        Ok(PoolTwap {
            other: other.to_string().to_ascii_lowercase(),
            ratio,
        })
    }
}
