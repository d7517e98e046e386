//! Lending on Aave v3: supplying an asset (an approval first when the allowance is short; native ETH
//! through the WrappedTokenGateway), and the reads of its markets and of a wallet's position. USD
//! figures come from the pool's own oracle (base currency USD, 8 decimals); rates are Aave's annual
//! rates in ray (1e27), answered as decimal fractions (APR, not compounded).

use actiongate_api_types::ErrorCode;
use actiongate_core::error::Error;
use actiongate_core::execution::HealthChange;
use actiongate_core::prices::PositionSide;
use alloy::primitives::{Address, U256};
use serde_json::{Value, json};

use super::{
    Plan, Token, address, approval, call, contract, invalid, listed, opt_str, param_str,
    resolve_token, units, view,
};
use crate::amount::format_units;
use crate::bindings::{
    IAaveDataProvider, IAaveDebtToken, IAaveOracle, IAavePool, IERC20, IWrappedTokenGateway,
};
use crate::client::ChainClient;

/// The names of Aave v3's contracts in `[chains.<id>.contracts]`.
pub const POOL: &str = "AavePool";
pub const DATA_PROVIDER: &str = "AavePoolDataProvider";
pub const ORACLE: &str = "AaveOracle";
pub const GATEWAY: &str = "AaveWrappedTokenGateway";

/// The provider id of the family.
pub const PROVIDER: &str = "aave-v3";

/// Whether the chain has the pool, its data provider and its oracle configured.
pub fn configured(client: &ChainClient) -> bool {
    [POOL, DATA_PROVIDER, ORACLE]
        .iter()
        .all(|c| client.settings.contracts.contains_key(*c))
}

/// The Aave action an earn write with an Aave `opportunityId` (`aave-v3:<asset>`) stands for, with
/// its params: a deposit supplies for the receiver, a withdrawal withdraws to it.
pub fn as_lending(action: &str, params: &Value) -> Option<(&'static str, Value)> {
    let provider = opt_str(params, "providerId")?;
    let asset = opt_str(params, "opportunityId")?.strip_prefix(crate::earn::AAVE_PREFIX)?;
    if provider != PROVIDER {
        return None;
    }
    let amount = params.get("amount").cloned().unwrap_or(Value::Null);
    let receiver = params.get("receiver").cloned();
    let (name, party) = match action {
        "deposit-earn-position" => ("supply-lending", "onBehalfOf"),
        "withdraw-earn-position" => ("withdraw-lending", "to"),
        _ => return None,
    };
    let mut mapped = json!({"asset": asset, "amount": amount});
    if let Some(r) = receiver {
        mapped[party] = r;
    }
    Some((name, mapped))
}

/// The oracle's base currency unit: USD with 8 decimals.
const USD_DECIMALS: u8 = 8;

/// `text` (a decimal string) cut to at most `places` decimals, without trailing zeros.
pub(super) fn cut(text: &str, places: usize) -> String {
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

/// A reserve of the pool, as the `asset` param names it.
pub(super) struct Reserve {
    /// The token as given: the native coin for ETH.
    pub(super) token: Token,
    /// The reserve's asset (WETH for ETH).
    pub(super) asset: Address,
    pub(super) config: IAaveDataProvider::getReserveConfigurationDataReturn,
    pub(super) paused: bool,
}

impl Reserve {
    pub(super) fn symbol(&self) -> String {
        self.token.symbol()
    }

    pub(super) fn decimals(&self) -> u8 {
        self.token.decimals()
    }

    pub(super) fn human(&self, amount: U256) -> String {
        format_units(amount, self.decimals())
    }

    /// The refusal of a withdrawal or a collateral switch by `who`, who supplies none of it.
    fn nothing_supplied(&self, who: Address, chain_id: u64) -> Error {
        invalid(
            "asset",
            format!(
                "{who} supplies no {} to Aave on chain {chain_id}",
                self.symbol()
            ),
        )
    }

    /// Refuses a reserve that takes no `what` now (a paused one takes nothing; a frozen one takes
    /// no supply and lends nothing, but lets positions be repaid and withdrawn).
    fn open_for(&self, what: &str, frozen_too: bool, chain_id: u64) -> Result<(), Error> {
        if self.paused || (frozen_too && self.config.isFrozen) {
            return Err(Error::new(
                ErrorCode::NotAvailable,
                format!(
                    "Aave's {} reserve on chain {chain_id} is {}: it takes no {what} now.",
                    self.symbol(),
                    if self.paused { "paused" } else { "frozen" }
                ),
            ));
        }
        Ok(())
    }
}

async fn reserve(client: &ChainClient, params: &Value) -> Result<Reserve, Error> {
    let token = resolve_token(client, "asset", param_str(params, "asset")?).await?;
    reserve_of(client, token).await
}

/// The pool's reserve of `token` (WETH's for the native coin); not one: `INVALID_PARAMS`.
pub(super) async fn reserve_of(client: &ChainClient, token: Token) -> Result<Reserve, Error> {
    let asset = match &token {
        Token::Native => super::weth(client)?,
        Token::Erc20 { address, .. } => *address,
    };
    let data_provider = contract(client, DATA_PROVIDER)?;
    let (config, paused) = tokio::try_join!(
        view(
            client,
            data_provider,
            IAaveDataProvider::getReserveConfigurationDataCall { asset },
        ),
        view(
            client,
            data_provider,
            IAaveDataProvider::getPausedCall { asset }
        ),
    )?;
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
    Ok(Reserve {
        token,
        asset,
        config,
        paused,
    })
}

/// The `amount` param in the reserve's units: `None` for `max`.
fn amount_of(params: &Value, reserve: &Reserve) -> Result<Option<U256>, Error> {
    let text = param_str(params, "amount")?;
    if text == "max" {
        return Ok(None);
    }
    let amount = units("amount", text, reserve.decimals())?;
    if amount.is_zero() {
        return Err(invalid("amount", "must be more than 0"));
    }
    Ok(Some(amount))
}

/// The address param `field`, else `default`.
fn party(params: &Value, field: &str, default: Address) -> Result<Address, Error> {
    match opt_str(params, field) {
        Some(a) => address(field, a),
        None => Ok(default),
    }
}

/// What `user` holds of the reserve: its aToken balance, its debt (variable and stable), and
/// whether the supply counts as collateral.
pub(super) async fn held(
    client: &ChainClient,
    asset: Address,
    user: Address,
) -> Result<IAaveDataProvider::getUserReserveDataReturn, Error> {
    view(
        client,
        contract(client, DATA_PROVIDER)?,
        IAaveDataProvider::getUserReserveDataCall { asset, user },
    )
    .await
}

/// An amount with room for the interest that accrues between the plan and the block (0.1 %):
/// what a `max` repayment approves and offers, of which the pool takes only the debt.
fn with_interest_margin(amount: U256) -> U256 {
    amount
        .saturating_add(amount / U256::from(1000u64))
        .saturating_add(U256::from(1u64))
}

/// Supplies `amount` of `asset` for `onBehalfOf` (the signer when omitted).
pub(super) async fn plan_supply(
    client: &ChainClient,
    params: &Value,
    signer: Address,
) -> Result<Plan, Error> {
    let pool = contract(client, POOL)?;
    let reserve = reserve(client, params).await?;
    let Some(amount) = amount_of(params, &reserve)? else {
        return Err(invalid("amount", "must be a decimal amount"));
    };
    let on_behalf = party(params, "onBehalfOf", signer)?;
    reserve.open_for("supply", true, client.chain_id)?;
    let human = reserve.human(amount);
    let description = format!(
        "Supply {human} {} to Aave for {on_behalf}",
        reserve.symbol()
    );
    let mut calls = Vec::new();
    match &reserve.token {
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
        summary: json!({"asset": reserve.symbol(), "amount": human, "onBehalfOf": on_behalf}),
    })
}

/// Withdraws `amount` (or `max`: the whole supply) of `asset` from the signer's supply to `to`
/// (the signer when omitted). Native ETH through the gateway, which first takes the aWETH.
pub(super) async fn plan_withdraw(
    client: &ChainClient,
    params: &Value,
    signer: Address,
) -> Result<Plan, Error> {
    let pool = contract(client, POOL)?;
    let reserve = reserve(client, params).await?;
    let asked = amount_of(params, &reserve)?;
    let to = party(params, "to", signer)?;
    reserve.open_for("withdrawal", false, client.chain_id)?;
    let supplied = held(client, reserve.asset, signer)
        .await?
        .currentATokenBalance;
    if supplied.is_zero() {
        return Err(reserve.nothing_supplied(signer, client.chain_id));
    }
    if let Some(a) = asked
        && a > supplied
    {
        return Err(invalid(
            "amount",
            format!(
                "{} {} is more than the {} {signer} supplies",
                reserve.human(a),
                reserve.symbol(),
                reserve.human(supplied)
            ),
        ));
    }
    // `max` is the pool's whole-balance amount, so interest accrued until the block goes too.
    let amount = asked.unwrap_or(U256::MAX);
    let human = asked.map_or_else(
        || format!("all ({} now)", reserve.human(supplied)),
        |a| reserve.human(a),
    );
    let description = format!("Withdraw {human} {} from Aave to {to}", reserve.symbol());
    let mut calls = Vec::new();
    match &reserve.token {
        Token::Native => {
            let gateway = contract(client, GATEWAY)?;
            let a_token = view(
                client,
                contract(client, DATA_PROVIDER)?,
                IAaveDataProvider::getReserveTokensAddressesCall {
                    asset: reserve.asset,
                },
            )
            .await?
            .aTokenAddress;
            let pulled = asked.unwrap_or_else(|| with_interest_margin(supplied));
            calls.extend(approval(client, a_token, "aWETH", 18, signer, gateway, pulled).await?);
            calls.push(call(
                gateway,
                IWrappedTokenGateway::withdrawETHCall { pool, amount, to },
                U256::ZERO,
                description,
            ));
        }
        Token::Erc20 { address, .. } => calls.push(call(
            pool,
            IAavePool::withdrawCall {
                asset: *address,
                amount,
                to,
            },
            U256::ZERO,
            description,
        )),
    }
    Ok(Plan {
        calls,
        summary: json!({"asset": reserve.symbol(), "amount": asked.map_or("max".to_owned(), |a| reserve.human(a)), "to": to}),
    })
}

/// Borrows `amount` of `asset` at the variable rate, the debt on `onBehalfOf` (the signer when
/// omitted; another account must have delegated the credit to the signer). Native ETH through the
/// gateway, to which the signer delegates that much credit first.
pub(super) async fn plan_borrow(
    client: &ChainClient,
    params: &Value,
    signer: Address,
) -> Result<Plan, Error> {
    let pool = contract(client, POOL)?;
    let reserve = reserve(client, params).await?;
    let Some(amount) = amount_of(params, &reserve)? else {
        return Err(invalid("amount", "must be a decimal amount"));
    };
    let on_behalf = party(params, "onBehalfOf", signer)?;
    reserve.open_for("borrowing", true, client.chain_id)?;
    if !reserve.config.borrowingEnabled {
        return Err(Error::new(
            ErrorCode::NotAvailable,
            format!(
                "Aave's {} reserve on chain {} does not lend.",
                reserve.symbol(),
                client.chain_id
            ),
        ));
    }
    let debt_token = view(
        client,
        contract(client, DATA_PROVIDER)?,
        IAaveDataProvider::getReserveTokensAddressesCall {
            asset: reserve.asset,
        },
    )
    .await?
    .variableDebtTokenAddress;
    let human = reserve.human(amount);
    let description = format!(
        "Borrow {human} {} from Aave at the variable rate, owed by {on_behalf}",
        reserve.symbol()
    );
    let mut calls = Vec::new();
    match &reserve.token {
        Token::Native => {
            if on_behalf != signer {
                return Err(invalid(
                    "onBehalfOf",
                    "ETH is borrowed through the WrappedTokenGateway for the signer only; borrow WETH for another account",
                ));
            }
            let gateway = contract(client, GATEWAY)?;
            let allowed = view(
                client,
                debt_token,
                IAaveDebtToken::borrowAllowanceCall {
                    fromUser: signer,
                    toUser: gateway,
                },
            )
            .await?;
            if allowed < amount {
                calls.push(call(
                    debt_token,
                    IAaveDebtToken::approveDelegationCall {
                        delegatee: gateway,
                        amount,
                    },
                    U256::ZERO,
                    format!("Let {gateway} borrow {human} WETH against {signer}'s collateral"),
                ));
            }
            calls.push(call(
                gateway,
                IWrappedTokenGateway::borrowETHCall {
                    pool,
                    amount,
                    interestRateMode: U256::from(VARIABLE_RATE),
                    referralCode: 0,
                },
                U256::ZERO,
                description,
            ));
        }
        Token::Erc20 { address, .. } => {
            if on_behalf != signer {
                let allowed = view(
                    client,
                    debt_token,
                    IAaveDebtToken::borrowAllowanceCall {
                        fromUser: on_behalf,
                        toUser: signer,
                    },
                )
                .await?;
                if allowed < amount {
                    return Err(invalid(
                        "onBehalfOf",
                        format!(
                            "{on_behalf} lets {signer} borrow {} {} of its credit, less than {human}",
                            reserve.human(allowed),
                            reserve.symbol()
                        ),
                    ));
                }
            }
            calls.push(call(
                pool,
                IAavePool::borrowCall {
                    asset: *address,
                    amount,
                    interestRateMode: U256::from(VARIABLE_RATE),
                    referralCode: 0,
                    onBehalfOf: on_behalf,
                },
                U256::ZERO,
                description,
            ));
        }
    }
    Ok(Plan {
        calls,
        summary: json!({"asset": reserve.symbol(), "amount": human, "onBehalfOf": on_behalf, "rateMode": "variable"}),
    })
}

/// Repays `amount` (or `max`: the whole variable debt) of `asset` owed by `onBehalfOf` (the signer
/// when omitted). The pool takes at most the debt, so `max` offers the debt with a margin for the
/// interest that accrues until the block. Native ETH through the gateway, which refunds the rest.
pub(super) async fn plan_repay(
    client: &ChainClient,
    params: &Value,
    signer: Address,
) -> Result<Plan, Error> {
    let pool = contract(client, POOL)?;
    let reserve = reserve(client, params).await?;
    let asked = amount_of(params, &reserve)?;
    let on_behalf = party(params, "onBehalfOf", signer)?;
    reserve.open_for("repayment", false, client.chain_id)?;
    let debt = held(client, reserve.asset, on_behalf)
        .await?
        .currentVariableDebt;
    if debt.is_zero() {
        return Err(invalid(
            "asset",
            format!(
                "{on_behalf} owes no {} to Aave on chain {}",
                reserve.symbol(),
                client.chain_id
            ),
        ));
    }
    let amount = asked.unwrap_or_else(|| with_interest_margin(debt));
    let human = asked.map_or_else(
        || format!("all ({} now)", reserve.human(debt)),
        |a| reserve.human(a),
    );
    let description = format!(
        "Repay {human} {} of {on_behalf}'s Aave debt",
        reserve.symbol()
    );
    let mut calls = Vec::new();
    match &reserve.token {
        Token::Native => calls.push(call(
            contract(client, GATEWAY)?,
            IWrappedTokenGateway::repayETHCall {
                pool,
                amount,
                rateMode: U256::from(VARIABLE_RATE),
                onBehalfOf: on_behalf,
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
                IAavePool::repayCall {
                    asset: *address,
                    amount,
                    interestRateMode: U256::from(VARIABLE_RATE),
                    onBehalfOf: on_behalf,
                },
                U256::ZERO,
                description,
            ));
        }
    }
    Ok(Plan {
        calls,
        summary: json!({"asset": reserve.symbol(), "amount": asked.map_or("max".to_owned(), |a| reserve.human(a)), "debt": reserve.human(debt), "onBehalfOf": on_behalf}),
    })
}

/// Counts the signer's supply of `asset` as collateral, or stops counting it.
pub(super) async fn plan_set_collateral(
    client: &ChainClient,
    params: &Value,
    signer: Address,
) -> Result<Plan, Error> {
    let pool = contract(client, POOL)?;
    let reserve = reserve(client, params).await?;
    let enabled = params
        .get("enabled")
        .and_then(Value::as_bool)
        .ok_or_else(|| invalid("enabled", "must be true or false"))?;
    reserve.open_for("change", false, client.chain_id)?;
    let mine = held(client, reserve.asset, signer).await?;
    if mine.currentATokenBalance.is_zero() {
        return Err(reserve.nothing_supplied(signer, client.chain_id));
    }
    if enabled && reserve.config.liquidationThreshold.is_zero() {
        return Err(invalid(
            "asset",
            format!(
                "Aave does not count {} as collateral on chain {}",
                reserve.symbol(),
                client.chain_id
            ),
        ));
    }
    let verb = if enabled { "Count" } else { "Stop counting" };
    let calls = vec![call(
        pool,
        IAavePool::setUserUseReserveAsCollateralCall {
            asset: reserve.asset,
            useAsCollateral: enabled,
        },
        U256::ZERO,
        format!(
            "{verb} {signer}'s {} supply as Aave collateral",
            reserve.symbol()
        ),
    )];
    Ok(Plan {
        calls,
        summary: json!({"asset": reserve.symbol(), "enabled": enabled, "wasEnabled": mine.usageAsCollateralEnabled}),
    })
}

/// The writes that may lower a position's health factor (set-collateral when it switches off).
pub const LOWERS_HEALTH: &[&str] = &["borrow", "withdraw-lending", "set-collateral"];

/// Aave's variable interest rate mode.
const VARIABLE_RATE: u64 = 2;

/// How a borrow, a withdrawal or switching a supply off as collateral changes `wallet`'s (or
/// `onBehalfOf`'s, for a borrow) position: weighted collateral and debt in the oracle's base
/// currency, before and after. `None` for a write that cannot lower the health factor.
pub async fn health_change(
    client: &ChainClient,
    action: &str,
    params: &Value,
    wallet: Option<Address>,
) -> Result<Option<HealthChange>, Error> {
    let lowers = match action {
        "borrow" | "withdraw-lending" => true,
        "set-collateral" => params.get("enabled").and_then(Value::as_bool) == Some(false),
        _ => false,
    };
    if !lowers {
        return Ok(None);
    }
    let Some(wallet) = wallet else {
        return Err(Error::invalid(format!(
            "{action} lowers a lending position's health factor, which the policy bounds: it runs for one known wallet (walletAddress on build-tx), not as a fan-out."
        )));
    };
    let pool = contract(client, POOL)?;
    let reserve = reserve(client, params).await?;
    let owner = match action {
        "borrow" => party(params, "onBehalfOf", wallet)?,
        _ => wallet,
    };
    let (account, mine, price) = tokio::try_join!(
        view(
            client,
            pool,
            IAavePool::getUserAccountDataCall { user: owner }
        ),
        held(client, reserve.asset, owner),
        view(
            client,
            contract(client, ORACLE)?,
            IAaveOracle::getAssetPriceCall {
                asset: reserve.asset
            }
        ),
    )?;
    let scale = U256::from(10u64).pow(U256::from(reserve.decimals()));
    let base = |amount: U256| amount.saturating_mul(price) / scale;
    let bps = U256::from(10_000u64);
    let weighted_before = account
        .totalCollateralBase
        .saturating_mul(account.currentLiquidationThreshold)
        / bps;
    let (mut weighted_after, mut debt_after) = (weighted_before, account.totalDebtBase);
    match action {
        "borrow" => {
            let amount = amount_of(params, &reserve)?.unwrap_or_default();
            debt_after = debt_after.saturating_add(base(amount));
        }
        _ => {
            let amount = match action {
                "withdraw-lending" => amount_of(params, &reserve)?
                    .unwrap_or(mine.currentATokenBalance)
                    .min(mine.currentATokenBalance),
                _ => mine.currentATokenBalance,
            };
            if mine.usageAsCollateralEnabled {
                let lost = base(amount).saturating_mul(reserve.config.liquidationThreshold) / bps;
                weighted_after = weighted_after.saturating_sub(lost);
            }
        }
    }
    let fit = |v: U256| u128::try_from(v).unwrap_or(u128::MAX);
    Ok(Some(HealthChange {
        owner: owner.to_string(),
        weighted_collateral_before: fit(weighted_before),
        debt_before: fit(account.totalDebtBase),
        weighted_collateral_after: fit(weighted_after),
        debt_after: fit(debt_after),
    }))
}

/// What `owner` supplies or owes of the reserve `asset` names, in token units.
pub async fn position_amount(
    client: &ChainClient,
    asset: &str,
    owner: Address,
    side: PositionSide,
) -> Result<String, Error> {
    let reserve = reserve(client, &json!({ "asset": asset })).await?;
    let mine = held(client, reserve.asset, owner).await?;
    let raw = match side {
        PositionSide::Supplied => mine.currentATokenBalance,
        PositionSide::Debt => mine
            .currentVariableDebt
            .saturating_add(mine.currentStableDebt),
    };
    Ok(reserve.human(raw))
}

/// Every reserve of the pool with its rates, totals in USD, risk parameters, caps and state.
pub async fn markets(client: &ChainClient) -> Result<Value, Error> {
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
