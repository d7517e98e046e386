//! The onchain reads of the core's price layer ([`PriceReads`]): Chainlink `AggregatorV3Interface`
//! feeds and ERC-4626 vaults, through the chain clients.

use actiongate_api_types::ErrorCode;
use actiongate_core::error::{Error, Result};
use actiongate_core::prices::{FeedRound, PriceReads};
use alloy::primitives::Address;
use async_trait::async_trait;

use crate::amount::format_units;
use crate::bindings::{AggregatorV3Interface, IERC20, IERC4626};
use crate::client::{ChainClient, ChainClients};
use crate::plan::view;

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
}
