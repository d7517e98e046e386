//! FX between the two tokens of a configured pair (`[chains.<id>.fx-pairs]`): the oracle rate from
//! the gateway's price layer, the pool's executable quote (QuoterV2), and the swap through
//! SwapRouter02 whose least accepted output is the oracle's amount less `slippageBps`.

use actiongate_api_types::ErrorCode;
use actiongate_core::error::Error;
use actiongate_core::prices::{PriceRead, Prices, TokenRef};
use alloy::primitives::{Address, U256, U512, Uint};
use serde_json::{Value, json};

use super::{
    Plan, Token, V3_FACTORY, V3_QUOTER, V3_ROUTER, address, approval, call, contract, invalid,
    now_seconds, opt_u64, param_str, resolve_token, units, view,
};
use crate::amount::format_units;
use crate::bindings::{IQuoterV2, ISwapRouter02, IUniswapV3Factory, IUniswapV3Pool};
use crate::client::ChainClient;

/// A conversion asked for: the pair's pool and fee, the two tokens, the amount in.
pub(crate) struct Conversion {
    pub pool: Address,
    pub fee: Uint<24, 1>,
    pub from: (Address, u8, String),
    pub to: (Address, u8, String),
    pub amount_in: U256,
}

fn erc20(token: Token, field: &str) -> Result<(Address, u8, String), Error> {
    match token {
        Token::Erc20 {
            address,
            decimals,
            symbol,
        } => Ok((address, decimals, symbol)),
        Token::Native => Err(invalid(field, "the native coin is not an FX asset")),
    }
}

/// Reads the pair of `from`/`to` and the pool's fee.
pub(crate) async fn conversion(client: &ChainClient, params: &Value) -> Result<Conversion, Error> {
    let (from, to) = (param_str(params, "from")?, param_str(params, "to")?);
    let from = erc20(resolve_token(client, "from", from).await?, "from")?;
    let to = erc20(resolve_token(client, "to", to).await?, "to")?;
    let pair = client.settings.fx_pair(&from.2, &to.2).ok_or_else(|| {
        let pairs: Vec<String> = client
            .settings
            .fx_pairs
            .iter()
            .map(|p| format!("{}/{}", p.base, p.quote))
            .collect();
        invalid(
            "to",
            format!(
                "{}/{} is not an FX pair of chain {} (configured: {pairs:?})",
                from.2, to.2, client.chain_id
            ),
        )
    })?;
    let pool = address("pool", &pair.pool)
        .map_err(|_| Error::internal(format!("FX pool {:?} is not an address", pair.pool)))?;
    let (fee, token0, token1) = tokio::try_join!(
        view(client, pool, IUniswapV3Pool::feeCall {}),
        view(client, pool, IUniswapV3Pool::token0Call {}),
        view(client, pool, IUniswapV3Pool::token1Call {}),
    )?;
    let trades = |a: Address, b: Address| (token0, token1) == (a, b) || (token0, token1) == (b, a);
    // SwapRouter02 and QuoterV2 route through the factory's pool of (tokens, fee): where the factory
    // is configured, the configured pool must be that one.
    let factory_pool = match client.settings.contracts.contains_key(V3_FACTORY) {
        true => Some(
            view(
                client,
                contract(client, V3_FACTORY)?,
                IUniswapV3Factory::getPoolCall {
                    tokenA: from.0,
                    tokenB: to.0,
                    fee,
                },
            )
            .await?,
        ),
        false => None,
    };
    if !trades(from.0, to.0) || factory_pool.is_some_and(|p| p != pool) {
        return Err(Error::new(
            ErrorCode::ChainNotConfigured,
            format!(
                "The pool {pool} configured for {}/{} on chain {} is not the V3 factory's pool of the pair.",
                pair.base, pair.quote, client.chain_id
            ),
        ));
    }
    let amount_in = units("amount", param_str(params, "amount")?, from.1)?;
    Ok(Conversion {
        pool,
        fee,
        from,
        to,
        amount_in,
    })
}

/// What `amount_in` of `from` buys of `to` at the oracle rate, in `to`'s smallest units.
fn oracle_out(c: &Conversion, from: &PriceRead, to: &PriceRead) -> Option<U256> {
    let (pf, pt) = (from.quote.price, to.quote.price);
    let ten = |e: u32| U512::from(10u8).pow(U512::from(e));
    // out = in × (vf / 10^df) / (vt / 10^dt) × 10^dout / 10^din
    let num = U512::from(c.amount_in)
        .checked_mul(U512::from(pf.value))?
        .checked_mul(ten(u32::from(pt.decimals) + u32::from(c.to.1)))?;
    let den =
        U512::from(pt.value).checked_mul(ten(u32::from(pf.decimals) + u32::from(c.from.1)))?;
    U256::checked_from_limbs_slice(num.checked_div(den)?.as_limbs())
}

async fn prices_of(
    prices: &Prices,
    client: &ChainClient,
    c: &Conversion,
) -> Result<(PriceRead, PriceRead), Error> {
    let token = |t: &(Address, u8, String)| TokenRef::resolve(&t.0.to_string(), &client.settings);
    let now = now_seconds();
    let from = prices
        .read(client.chain_id, &client.settings, &token(&c.from), now)
        .await?;
    let to = prices
        .read(client.chain_id, &client.settings, &token(&c.to), now)
        .await?;
    Ok((from, to))
}

async fn pool_quote(client: &ChainClient, c: &Conversion) -> Result<U256, Error> {
    let quoter = contract(client, V3_QUOTER)?;
    let quote = IQuoterV2::quoteExactInputSingleCall {
        params: IQuoterV2::QuoteExactInputSingleParams {
            tokenIn: c.from.0,
            tokenOut: c.to.0,
            amountIn: c.amount_in,
            fee: c.fee,
            sqrtPriceLimitX96: Default::default(),
        },
    };
    Ok(view(client, quoter, quote).await?.amountOut)
}

/// A decimal rate `out / in` between whole tokens, to 8 decimals, for people.
fn rate(amount_in: U256, din: u8, out: U256, dout: u8) -> String {
    if amount_in.is_zero() {
        return "0".into();
    }
    let scaled = U512::from(out) * U512::from(10u8).pow(U512::from(u32::from(din) + 8))
        / (U512::from(amount_in) * U512::from(10u8).pow(U512::from(u32::from(dout))));
    format_units(
        U256::checked_from_limbs_slice(scaled.as_limbs()).unwrap_or(U256::MAX),
        8,
    )
}

/// `get-fx-quote`: the oracle's amount beside the pool's, and their difference in basis points
/// (positive: the pool pays less than the oracle rate).
pub async fn quote(client: &ChainClient, prices: &Prices, params: &Value) -> Result<Value, Error> {
    let c = conversion(client, params).await?;
    let (from, to) = prices_of(prices, client, &c).await?;
    let oracle = oracle_out(&c, &from, &to).ok_or_else(|| {
        Error::new(
            ErrorCode::PriceUnavailable,
            "The oracle's amount for this conversion does not fit.",
        )
    })?;
    let pool = pool_quote(client, &c).await?;
    let difference_bps = match oracle.is_zero() {
        true => 0i64,
        false => {
            let (hi, lo, sign) = match oracle >= pool {
                true => (oracle, pool, 1),
                false => (pool, oracle, -1),
            };
            let bps = (hi - lo) * U256::from(10_000u64) / oracle;
            sign * i64::try_from(bps).unwrap_or(i64::MAX)
        }
    };
    let issues: Vec<String> = from.issues.iter().chain(&to.issues).cloned().collect();
    Ok(json!({
        "from": c.from.2,
        "to": c.to.2,
        "amountIn": format_units(c.amount_in, c.from.1),
        "oracle": {
            "rate": rate(c.amount_in, c.from.1, oracle, c.to.1),
            "amountOut": format_units(oracle, c.to.1),
            "fromPriceUsd": from.quote.price.to_decimal_string(),
            "toPriceUsd": to.quote.price.to_decimal_string(),
            "sources": [from.quote.source.as_str(), to.quote.source.as_str()],
        },
        "pool": {
            "address": c.pool.to_checksum(None),
            "fee": c.fee.to::<u32>(),
            "rate": rate(c.amount_in, c.from.1, pool, c.to.1),
            "amountOut": format_units(pool, c.to.1),
        },
        "differenceBps": difference_bps,
        "stale": !issues.is_empty(),
        "parseIssues": issues,
    }))
}

/// `fx-swap`: an approval when the allowance is short, then `exactInputSingle` through the pair's
/// pool with `amountOutMinimum` the oracle's amount less `slippageBps` (a stale price refuses it).
pub(super) async fn plan_fx_swap(
    client: &ChainClient,
    prices: &Prices,
    params: &Value,
    signer: Address,
) -> Result<Plan, Error> {
    let router = contract(client, V3_ROUTER)?;
    let c = conversion(client, params).await?;
    let (from, to) = prices_of(prices, client, &c).await?;
    if let Some(issue) = from.issues.iter().chain(&to.issues).next() {
        return Err(Error::new(ErrorCode::PriceUnavailable, issue.clone()));
    }
    let slippage = opt_u64(params, "slippageBps")?.unwrap_or(50);
    if slippage > 1000 {
        return Err(invalid("slippageBps", "must be at most 1000"));
    }
    let oracle = oracle_out(&c, &from, &to).ok_or_else(|| {
        Error::new(
            ErrorCode::PriceUnavailable,
            "The oracle's amount for this conversion does not fit.",
        )
    })?;
    let min_out = oracle * U256::from(10_000 - slippage) / U256::from(10_000u64);
    let (from_sym, to_sym) = (&c.from.2, &c.to.2);
    let description = format!(
        "Convert {} {from_sym} into at least {} {to_sym} (the oracle rate's {} less {slippage} bps) through the FX pool {} to {signer}",
        format_units(c.amount_in, c.from.1),
        format_units(min_out, c.to.1),
        format_units(oracle, c.to.1),
        c.pool
    );
    let mut calls = Vec::new();
    calls.extend(
        approval(
            client,
            c.from.0,
            from_sym,
            c.from.1,
            signer,
            router,
            c.amount_in,
        )
        .await?,
    );
    calls.push(call(
        router,
        ISwapRouter02::exactInputSingleCall {
            params: ISwapRouter02::ExactInputSingleParams {
                tokenIn: c.from.0,
                tokenOut: c.to.0,
                fee: c.fee,
                recipient: signer,
                amountIn: c.amount_in,
                amountOutMinimum: min_out,
                sqrtPriceLimitX96: Default::default(),
            },
        },
        U256::ZERO,
        description,
    ));
    Ok(Plan {
        calls,
        summary: json!({
            "from": from_sym,
            "to": to_sym,
            "amountIn": format_units(c.amount_in, c.from.1),
            "oracleAmountOut": format_units(oracle, c.to.1),
            "amountOutMin": format_units(min_out, c.to.1),
            "pool": c.pool.to_checksum(None),
            "fee": c.fee.to::<u32>(),
            "recipient": signer,
        }),
    })
}
