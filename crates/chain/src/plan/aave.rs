//! Lending on Aave v3: supplying an asset (an approval first when the allowance is short; native ETH
//! through the WrappedTokenGateway), and the reads of its markets and of a wallet's position. USD
//! figures come from the pool's own oracle (base currency USD, 8 decimals); rates are Aave's annual
//! rates in ray (1e27), answered as decimal fractions (APR, not compounded).

use actiongate_api_types::ErrorCode;
use actiongate_core::error::Error;
use alloy::primitives::{Address, U256};
use serde_json::{Value, json};

use super::{
    Plan, Token, address, approval, call, contract, invalid, listed, opt_str, param_str,
    resolve_token, units, view,
};
use crate::amount::format_units;
use crate::bindings::{IAaveDataProvider, IAaveOracle, IAavePool, IERC20, IWrappedTokenGateway};
use crate::client::ChainClient;

/// The names of Aave v3's contracts in `[chains.<id>.contracts]`.
pub const POOL: &str = "AavePool";
pub const DATA_PROVIDER: &str = "AavePoolDataProvider";
pub const ORACLE: &str = "AaveOracle";
pub const GATEWAY: &str = "AaveWrappedTokenGateway";

/// The oracle's base currency unit: USD with 8 decimals.
const USD_DECIMALS: u8 = 8;

/// `text` (a decimal string) cut to at most `places` decimals, without trailing zeros.
fn cut(text: &str, places: usize) -> String {
    let Some((whole, fraction)) = text.split_once('.') else {
        return text.to_owned();
    };
    let kept = fraction
        .get(..fraction.len().min(places))
        .unwrap_or_default()
        .trim_end_matches('0');
    if kept.is_empty() {
        whole.to_owned()
    } else {
        format!("{whole}.{kept}")
    }
}

/// An annual rate in ray as a decimal fraction (6 places).
fn rate(ray: U256) -> String {
    cut(&format_units(ray, 27), 6)
}

/// `amount` of a token with `decimals`, at `price` (USD, 8 decimals), in USD (2 places).
fn usd(amount: U256, decimals: u8, price: U256) -> String {
    let scale = U256::from(10u64).pow(U256::from(decimals));
    cut(
        &format_units(amount.saturating_mul(price) / scale, USD_DECIMALS),
        2,
    )
}

/// A reserve's symbol: from the chain's token list, else its contract.
async fn symbol_of(client: &ChainClient, asset: Address) -> Result<String, Error> {
    if let Some((symbol, _)) = listed(client, asset) {
        return Ok(symbol.clone());
    }
    view(client, asset, IERC20::symbolCall {}).await
}

/// Supplies `amount` of `asset` for `onBehalfOf` (the signer when omitted).
pub(super) async fn plan_supply(
    client: &ChainClient,
    params: &Value,
    signer: Address,
) -> Result<Plan, Error> {
    let pool = contract(client, POOL)?;
    let token = resolve_token(client, "asset", param_str(params, "asset")?).await?;
    let amount = units("amount", param_str(params, "amount")?, token.decimals())?;
    if amount.is_zero() {
        return Err(invalid("amount", "must be more than 0"));
    }
    let on_behalf = match opt_str(params, "onBehalfOf") {
        Some(a) => address("onBehalfOf", a)?,
        None => signer,
    };
    let reserve = match &token {
        Token::Native => super::weth(client)?,
        Token::Erc20 { address, .. } => *address,
    };
    let data_provider = contract(client, DATA_PROVIDER)?;
    let config = view(
        client,
        data_provider,
        IAaveDataProvider::getReserveConfigurationDataCall { asset: reserve },
    )
    .await?;
    if !config.isActive {
        return Err(invalid(
            "asset",
            format!(
                "{} is not an Aave reserve on chain {}",
                token.symbol(),
                client.chain_id
            ),
        ));
    }
    let paused = view(
        client,
        data_provider,
        IAaveDataProvider::getPausedCall { asset: reserve },
    )
    .await?;
    if config.isFrozen || paused {
        return Err(Error::new(
            ErrorCode::NotAvailable,
            format!(
                "Aave's {} reserve on chain {} is {}: it takes no supply now.",
                token.symbol(),
                client.chain_id,
                if paused { "paused" } else { "frozen" }
            ),
        ));
    }
    let human = format_units(amount, token.decimals());
    let description = format!("Supply {human} {} to Aave for {on_behalf}", token.symbol());
    let mut calls = Vec::new();
    match &token {
        Token::Native => calls.push(call(
            contract(client, GATEWAY)?,
            IWrappedTokenGateway::depositETHCall {
                pool,
                onBehalfOf: on_behalf,
                referralCode: 0,
            },
            amount,
            description,
        )),
        Token::Erc20 {
            address,
            decimals,
            symbol,
        } => {
            calls
                .extend(approval(client, *address, symbol, *decimals, signer, pool, amount).await?);
            calls.push(call(
                pool,
                IAavePool::supplyCall {
                    asset: *address,
                    amount,
                    onBehalfOf: on_behalf,
                    referralCode: 0,
                },
                U256::ZERO,
                description,
            ));
        }
    }
    Ok(Plan {
        calls,
        summary: json!({"asset": token.symbol(), "amount": human, "onBehalfOf": on_behalf}),
    })
}

/// Every reserve of the pool with its rates, totals in USD, risk parameters, caps and state.
pub(super) async fn markets(client: &ChainClient) -> Result<Value, Error> {
    let pool = contract(client, POOL)?;
    let data_provider = contract(client, DATA_PROVIDER)?;
    let oracle = contract(client, ORACLE)?;
    let assets = view(client, pool, IAavePool::getReservesListCall {}).await?;
    let mut reserves = Vec::with_capacity(assets.len());
    for asset in assets {
        let config = view(
            client,
            data_provider,
            IAaveDataProvider::getReserveConfigurationDataCall { asset },
        )
        .await?;
        let data = view(
            client,
            data_provider,
            IAaveDataProvider::getReserveDataCall { asset },
        )
        .await?;
        let caps = view(
            client,
            data_provider,
            IAaveDataProvider::getReserveCapsCall { asset },
        )
        .await?;
        let paused = view(
            client,
            data_provider,
            IAaveDataProvider::getPausedCall { asset },
        )
        .await?;
        let price = view(client, oracle, IAaveOracle::getAssetPriceCall { asset }).await?;
        let decimals = u8::try_from(config.decimals).unwrap_or(18);
        let borrowed = data.totalStableDebt.saturating_add(data.totalVariableDebt);
        reserves.push(json!({
            "asset": asset,
            "symbol": symbol_of(client, asset).await?,
            "decimals": decimals,
            "supplyApr": rate(data.liquidityRate),
            "borrowApr": rate(data.variableBorrowRate),
            "totalSuppliedUsd": usd(data.totalAToken, decimals, price),
            "totalBorrowedUsd": usd(borrowed, decimals, price),
            "priceUsd": cut(&format_units(price, USD_DECIMALS), 8),
            "ltvBps": config.ltv.saturating_to::<u64>(),
            "liquidationThresholdBps": config.liquidationThreshold.saturating_to::<u64>(),
            "supplyCap": caps.supplyCap.to_string(),
            "borrowCap": caps.borrowCap.to_string(),
            "borrowingEnabled": config.borrowingEnabled,
            "active": config.isActive,
            "frozen": config.isFrozen,
            "paused": paused,
        }));
    }
    Ok(
        json!({"chainId": client.chain_id, "provider": "aave-v3", "pool": pool, "markets": reserves}),
    )
}

/// `wallet`'s position: the pool's account data (USD from its oracle) and each reserve it supplies
/// or borrows.
pub(super) async fn position(client: &ChainClient, wallet: Address) -> Result<Value, Error> {
    let pool = contract(client, POOL)?;
    let data_provider = contract(client, DATA_PROVIDER)?;
    let account = view(
        client,
        pool,
        IAavePool::getUserAccountDataCall { user: wallet },
    )
    .await?;
    let assets = view(client, pool, IAavePool::getReservesListCall {}).await?;
    let mut reserves = Vec::new();
    for asset in assets {
        let held = view(
            client,
            data_provider,
            IAaveDataProvider::getUserReserveDataCall {
                asset,
                user: wallet,
            },
        )
        .await?;
        let borrowed = held
            .currentStableDebt
            .saturating_add(held.currentVariableDebt);
        if held.currentATokenBalance.is_zero() && borrowed.is_zero() {
            continue;
        }
        let config = view(
            client,
            data_provider,
            IAaveDataProvider::getReserveConfigurationDataCall { asset },
        )
        .await?;
        let decimals = u8::try_from(config.decimals).unwrap_or(18);
        reserves.push(json!({
            "asset": asset,
            "symbol": symbol_of(client, asset).await?,
            "supplied": format_units(held.currentATokenBalance, decimals),
            "borrowed": format_units(borrowed, decimals),
            "usedAsCollateral": held.usageAsCollateralEnabled,
        }));
    }
    // With no debt Aave answers the largest uint256: there is no health factor to speak of.
    let health =
        (!account.totalDebtBase.is_zero()).then(|| cut(&format_units(account.healthFactor, 18), 6));
    Ok(json!({
        "chainId": client.chain_id,
        "walletAddress": wallet,
        "provider": "aave-v3",
        "totalCollateralUsd": cut(&format_units(account.totalCollateralBase, USD_DECIMALS), 2),
        "totalDebtUsd": cut(&format_units(account.totalDebtBase, USD_DECIMALS), 2),
        "availableBorrowsUsd": cut(&format_units(account.availableBorrowsBase, USD_DECIMALS), 2),
        "healthFactor": health,
        "ltvBps": account.ltv.saturating_to::<u64>(),
        "liquidationThresholdBps": account.currentLiquidationThreshold.saturating_to::<u64>(),
        "reserves": reserves,
    }))
}

#[cfg(test)]
mod tests {
    use super::{cut, rate, usd};
    use alloy::primitives::U256;

    #[test]
    fn figures_are_cut_not_rounded_and_carry_no_trailing_zeros() {
        assert_eq!(cut("1312.5", 2), "1312.5");
        assert_eq!(cut("0.1034", 2), "0.1");
        assert_eq!(cut("0.0099", 2), "0");
        assert_eq!(cut("42", 2), "42");
        // 3.5 % a year in ray.
        assert_eq!(
            rate(U256::from(35u64) * U256::from(10u64).pow(U256::from(24u64))),
            "0.035"
        );
        // 1.5 WETH (18 decimals) at 3,000.12345678 USD.
        let amount = U256::from(15u64) * U256::from(10u64).pow(U256::from(17u64));
        assert_eq!(usd(amount, 18, U256::from(300_012_345_678u64)), "4500.18");
    }
}
