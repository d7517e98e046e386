//! Prediction markets on Gnosis Conditional Tokens with fixed-product market makers (family
//! `ctf-amm`): markets discovered from the factory's creation events (questions from
//! `[chains.<id>.prediction-questions]`), each outcome's marginal price from the market maker's
//! outcome balances, buys and sells quoted by the market maker itself (`calcBuyAmount`,
//! `calcSellAmount`) and bounded by a slippage, positions read as ERC-1155 balances, and redemption
//! once the oracle has reported.

use actiongate_api_types::ErrorCode;
use actiongate_core::error::Error;
use alloy::primitives::{Address, B256, U256};
use alloy::providers::Provider;
use alloy::rpc::types::Filter;
use alloy::sol_types::SolEvent;
use serde_json::{Value, json};

use super::{Plan, address, approval, call, contract, invalid, opt_u64, param_str, units, view};
use crate::amount::format_units;
use crate::bindings::{IConditionalTokens, IERC20, IFPMMFactory, IFixedProductMarketMaker};
use crate::client::ChainClient;

/// The contracts' names in `[chains.<id>.contracts]`.
pub const CONDITIONAL_TOKENS: &str = "ConditionalTokens";
pub const FACTORY: &str = "FPMMFactory";
/// The provider id of the family.
pub const PROVIDER: &str = actiongate_core::orders::VENUE;

/// The default slippage of a buy or a sell when neither bound nor `slippageBps` is given.
const DEFAULT_SLIPPAGE_BPS: u64 = 100;

/// Whether the chain has the Conditional Tokens contract and the market maker factory configured.
pub fn configured(client: &ChainClient) -> bool {
    [CONDITIONAL_TOKENS, FACTORY]
        .iter()
        .all(|c| client.settings.contracts.contains_key(*c))
}

/// One market maker of the factory, as its creation event and the configured question say.
struct Market {
    address: Address,
    condition: B256,
    collateral: Address,
}

/// Every market the factory created for the configured Conditional Tokens contract.
async fn markets_of(client: &ChainClient) -> Result<Vec<Market>, Error> {
    let factory = contract(client, FACTORY)?;
    let ct = contract(client, CONDITIONAL_TOKENS)?;
    let filter = Filter::new()
        .address(factory)
        .event_signature(IFPMMFactory::FixedProductMarketMakerCreation::SIGNATURE_HASH)
        .from_block(0u64);
    let logs = client
        .provider
        .get_logs(&filter)
        .await
        .map_err(|e| super::rpc_error(client, e))?;
    let mut out = Vec::new();
    for log in logs {
        let Ok(event) = IFPMMFactory::FixedProductMarketMakerCreation::decode_log(&log.inner)
        else {
            continue;
        };
        let e = event.data;
        // One binary or categorical condition per market, on our Conditional Tokens contract.
        if e.conditionalTokens != ct || e.conditionIds.len() != 1 {
            continue;
        }
        out.push(Market {
            address: e.fixedProductMarketMaker,
            condition: e.conditionIds[0],
            collateral: e.collateralToken,
        });
    }
    Ok(out)
}

/// The market the `marketId` param names (one of the factory's).
async fn market(client: &ChainClient, params: &Value) -> Result<Market, Error> {
    let id = address("marketId", param_str(params, "marketId")?)?;
    markets_of(client)
        .await?
        .into_iter()
        .find(|m| m.address == id)
        .ok_or_else(|| {
            invalid(
                "marketId",
                format!(
                    "{id} is not a market of chain {}'s market maker factory",
                    client.chain_id
                ),
            )
        })
}

/// What a market is now: its outcomes' position ids, the market maker's balances of them, its
/// resolution.
struct State {
    outcomes: usize,
    positions: Vec<U256>,
    pool: Vec<U256>,
    denominator: U256,
    numerators: Vec<U256>,
    decimals: u8,
    symbol: String,
}

async fn state(client: &ChainClient, m: &Market) -> Result<State, Error> {
    let ct = contract(client, CONDITIONAL_TOKENS)?;
    let slots = view(
        client,
        ct,
        IConditionalTokens::getOutcomeSlotCountCall {
            conditionId: m.condition,
        },
    )
    .await?;
    let outcomes = usize::try_from(slots).unwrap_or(0).min(256);
    let mut positions = Vec::with_capacity(outcomes);
    let mut numerators = Vec::with_capacity(outcomes);
    for i in 0..outcomes {
        let collection = view(
            client,
            ct,
            IConditionalTokens::getCollectionIdCall {
                parentCollectionId: B256::ZERO,
                conditionId: m.condition,
                indexSet: U256::from(1u64) << i,
            },
        )
        .await?;
        positions.push(
            view(
                client,
                ct,
                IConditionalTokens::getPositionIdCall {
                    collateralToken: m.collateral,
                    collectionId: collection,
                },
            )
            .await?,
        );
        numerators.push(
            view(
                client,
                ct,
                IConditionalTokens::payoutNumeratorsCall {
                    conditionId: m.condition,
                    index: U256::from(i),
                },
            )
            .await?,
        );
    }
    let pool = view(
        client,
        ct,
        IConditionalTokens::balanceOfBatchCall {
            owners: vec![m.address; outcomes],
            ids: positions.clone(),
        },
    )
    .await?;
    let denominator = view(
        client,
        ct,
        IConditionalTokens::payoutDenominatorCall {
            conditionId: m.condition,
        },
    )
    .await?;
    let decimals = view(client, m.collateral, IERC20::decimalsCall {}).await?;
    let symbol = match super::listed(client, m.collateral) {
        Some((s, _)) => s.clone(),
        None => view(client, m.collateral, IERC20::symbolCall {}).await?,
    };
    Ok(State {
        outcomes,
        positions,
        pool,
        denominator,
        numerators,
        decimals,
        symbol,
    })
}

impl State {
    /// Each outcome's marginal price, from the market maker's balances: an outcome is dearer the
    /// fewer of its tokens the market maker holds (`∏_{j≠i} b_j / Σ_k ∏_{j≠k} b_j`), in 1e18.
    fn prices(&self) -> Vec<U256> {
        let others = |i: usize| {
            self.pool
                .iter()
                .enumerate()
                .filter(|(j, _)| *j != i)
                .fold(U256::from(1u64), |acc, (_, b)| acc.saturating_mul(*b))
        };
        let weights: Vec<U256> = (0..self.outcomes).map(others).collect();
        let total = weights
            .iter()
            .fold(U256::ZERO, |acc, w| acc.saturating_add(*w));
        let one = U256::from(10u64).pow(U256::from(18u64));
        weights
            .iter()
            .map(|w| match total.is_zero() {
                true => U256::ZERO,
                false => w.saturating_mul(one) / total,
            })
            .collect()
    }

    fn resolved(&self) -> bool {
        !self.denominator.is_zero()
    }
}

/// A decimal of 1e18 fixed point, cut to 6 places.
fn fraction(v: U256) -> String {
    super::aave::cut(&format_units(v, 18), 6)
}

/// The configured question of a condition: `(question, outcomes, endsAt)`.
fn question_of(
    client: &ChainClient,
    condition: B256,
) -> Option<&actiongate_core::chains::Question> {
    client
        .settings
        .prediction_questions
        .iter()
        .find(|(id, _)| id.parse::<B256>().ok() == Some(condition))
        .map(|(_, q)| q)
}

/// Whether the configured end of the market has passed (at `now`, seconds).
fn ended(client: &ChainClient, condition: B256, now: u64) -> bool {
    question_of(client, condition)
        .and_then(|q| q.ends_at)
        .is_some_and(|end| end <= now)
}

/// The chain's latest block time.
async fn now_on(client: &ChainClient) -> Result<u64, Error> {
    super::block_time(client, alloy::eips::BlockNumberOrTag::Latest).await
}

/// The collateral traded on a market so far: every buy's investment and every sell's return.
async fn volume(client: &ChainClient, market: Address) -> Result<U256, Error> {
    let filter = Filter::new()
        .address(market)
        .event_signature(vec![
            IFixedProductMarketMaker::FPMMBuy::SIGNATURE_HASH,
            IFixedProductMarketMaker::FPMMSell::SIGNATURE_HASH,
        ])
        .from_block(0u64);
    let logs = client
        .provider
        .get_logs(&filter)
        .await
        .map_err(|e| super::rpc_error(client, e))?;
    let mut total = U256::ZERO;
    for log in logs {
        if let Ok(b) = IFixedProductMarketMaker::FPMMBuy::decode_log(&log.inner) {
            total = total.saturating_add(b.data.investmentAmount);
        } else if let Ok(s) = IFixedProductMarketMaker::FPMMSell::decode_log(&log.inner) {
            total = total.saturating_add(s.data.returnAmount);
        }
    }
    Ok(total)
}

/// `get-prediction-markets {status?, limit?}`: every market of the factory with its question,
/// outcomes, prices, liquidity and volume (in the collateral, a USD stablecoin here), end and
/// resolution.
pub async fn markets(client: &ChainClient, params: &Value) -> Result<Value, Error> {
    let status = super::opt_str(params, "status");
    if let Some(s) = status
        && !["open", "resolved"].contains(&s)
    {
        return Err(invalid("status", "must be open or resolved"));
    }
    let limit = opt_u64(params, "limit")?.unwrap_or(20).clamp(1, 100);
    let now = now_on(client).await?;
    let mut out = Vec::new();
    for m in markets_of(client).await? {
        let s = state(client, &m).await?;
        let open = !s.resolved() && !ended(client, m.condition, now);
        if status == Some("open") && !open || status == Some("resolved") && !s.resolved() {
            continue;
        }
        let prices = s.prices();
        let one = U256::from(10u64).pow(U256::from(18u64));
        let liquidity = s.pool.iter().zip(&prices).fold(U256::ZERO, |acc, (b, p)| {
            acc.saturating_add(b.saturating_mul(*p) / one)
        });
        let q = question_of(client, m.condition);
        let outcomes: Vec<String> = match q {
            Some(q) if q.outcomes.len() == s.outcomes => q.outcomes.clone(),
            _ => (0..s.outcomes).map(|i| format!("Outcome {i}")).collect(),
        };
        let payouts: Option<Vec<String>> = s.resolved().then(|| {
            s.numerators
                .iter()
                .map(|n| fraction(n.saturating_mul(one) / s.denominator))
                .collect()
        });
        out.push(json!({
            "marketId": m.address,
            "conditionId": m.condition,
            "question": q.map(|q| q.question.clone()),
            "outcomes": outcomes,
            "prices": prices.iter().map(|p| fraction(*p)).collect::<Vec<_>>(),
            "collateral": s.symbol,
            "liquidityUsd": super::aave::cut(&format_units(liquidity, s.decimals), 2),
            "volumeUsd": super::aave::cut(&format_units(volume(client, m.address).await?, s.decimals), 2),
            "endsAt": q.and_then(|q| q.ends_at).map(rfc3339),
            "open": open,
            "resolved": s.resolved(),
            "payouts": payouts,
        }));
        if out.len() as u64 >= limit {
            break;
        }
    }
    Ok(json!({"chainId": client.chain_id, "provider": PROVIDER, "markets": out}))
}

fn rfc3339(secs: u64) -> String {
    let millis = i64::try_from(secs)
        .unwrap_or(i64::MAX / 1000)
        .saturating_mul(1000);
    actiongate_core::clock::rfc3339(actiongate_core::clock::from_millis(millis))
}

/// `get-prediction-positions`: `wallet`'s outcome tokens in every market, with their current
/// value at the marginal price and what redeems once the market is resolved.
pub async fn positions(client: &ChainClient, wallet: Address) -> Result<Value, Error> {
    let ct = contract(client, CONDITIONAL_TOKENS)?;
    let one = U256::from(10u64).pow(U256::from(18u64));
    let mut out = Vec::new();
    for m in markets_of(client).await? {
        let s = state(client, &m).await?;
        let held = view(
            client,
            ct,
            IConditionalTokens::balanceOfBatchCall {
                owners: vec![wallet; s.outcomes],
                ids: s.positions.clone(),
            },
        )
        .await?;
        let prices = s.prices();
        let q = question_of(client, m.condition);
        for (i, shares) in held.iter().enumerate() {
            if shares.is_zero() {
                continue;
            }
            let price = prices.get(i).copied().unwrap_or_default();
            let redeemable = match s.resolved() {
                true => {
                    shares.saturating_mul(s.numerators.get(i).copied().unwrap_or_default())
                        / s.denominator
                }
                false => U256::ZERO,
            };
            out.push(json!({
                "marketId": m.address,
                "conditionId": m.condition,
                "question": q.map(|q| q.question.clone()),
                "outcomeIndex": i,
                "outcome": q.and_then(|q| q.outcomes.get(i).cloned()),
                "shares": format_units(*shares, s.decimals),
                "price": fraction(price),
                "value": format_units(shares.saturating_mul(price) / one, s.decimals),
                "redeemable": format_units(redeemable, s.decimals),
                "resolved": s.resolved(),
            }));
        }
    }
    Ok(
        json!({"chainId": client.chain_id, "walletAddress": wallet, "provider": PROVIDER, "positions": out}),
    )
}

/// The `outcomeIndex` param, one of the market's.
fn outcome_of(params: &Value, s: &State) -> Result<usize, Error> {
    let i =
        opt_u64(params, "outcomeIndex")?.ok_or_else(|| invalid("outcomeIndex", "is required"))?;
    let i = usize::try_from(i).unwrap_or(usize::MAX);
    if i >= s.outcomes {
        return Err(invalid(
            "outcomeIndex",
            format!("must be below {} (the market's outcomes)", s.outcomes),
        ));
    }
    Ok(i)
}

/// The slippage bound in basis points (`slippageBps`, at most 5,000; 100 by default).
fn slippage(params: &Value) -> Result<u64, Error> {
    let bps = opt_u64(params, "slippageBps")?.unwrap_or(DEFAULT_SLIPPAGE_BPS);
    if bps > 5_000 {
        return Err(invalid("slippageBps", "must be at most 5000"));
    }
    Ok(bps)
}

/// Refuses a market that takes no new trade: resolved, or past its configured end.
async fn open_for_trading(client: &ChainClient, m: &Market, s: &State) -> Result<(), Error> {
    let why = if s.resolved() {
        Some("it is resolved (its oracle has reported the outcome): redeem the positions instead")
    } else if ended(client, m.condition, now_on(client).await?) {
        Some("it is past its end")
    } else {
        None
    };
    match why {
        Some(why) => Err(Error::new(
            ErrorCode::NotAvailable,
            format!("Market {} takes no new trade: {why}.", m.address),
        )),
        None => Ok(()),
    }
}

/// The market, its state and the outcome a buy or a sell names, once the market takes trades.
async fn tradable(client: &ChainClient, params: &Value) -> Result<(Market, State, usize), Error> {
    let m = market(client, params).await?;
    let s = state(client, &m).await?;
    let i = outcome_of(params, &s)?;
    open_for_trading(client, &m, &s).await?;
    Ok((m, s, i))
}

/// `buy-prediction-outcome {marketId, outcomeIndex, amount, minShares? | slippageBps?}`: an
/// approval of the collateral when short, then `buy` with the least outcome tokens accepted.
pub(super) async fn plan_buy(
    client: &ChainClient,
    params: &Value,
    signer: Address,
) -> Result<Plan, Error> {
    let (m, s, i) = tradable(client, params).await?;
    let amount = units("amount", param_str(params, "amount")?, s.decimals)?;
    if amount.is_zero() {
        return Err(invalid("amount", "must be more than 0"));
    }
    let quote = view(
        client,
        m.address,
        IFixedProductMarketMaker::calcBuyAmountCall {
            investmentAmount: amount,
            outcomeIndex: U256::from(i),
        },
    )
    .await?;
    let least = match super::opt_str(params, "minShares") {
        Some(text) => units("minShares", text, s.decimals)?,
        None => {
            quote.saturating_mul(U256::from(10_000 - slippage(params)?)) / U256::from(10_000u64)
        }
    };
    if quote < least {
        return Err(invalid(
            "minShares",
            format!(
                "the market gives {} shares for {} {} now, fewer than {}",
                format_units(quote, s.decimals),
                format_units(amount, s.decimals),
                s.symbol,
                format_units(least, s.decimals)
            ),
        ));
    }
    let mut calls = Vec::new();
    calls.extend(
        approval(
            client,
            m.collateral,
            &s.symbol,
            s.decimals,
            signer,
            m.address,
            amount,
        )
        .await?,
    );
    calls.push(call(
        m.address,
        IFixedProductMarketMaker::buyCall {
            investmentAmount: amount,
            outcomeIndex: U256::from(i),
            minOutcomeTokensToBuy: least,
        },
        U256::ZERO,
        format!(
            "Buy outcome {i} of market {} for {} {} (at least {} shares)",
            m.address,
            format_units(amount, s.decimals),
            s.symbol,
            format_units(least, s.decimals)
        ),
    ));
    Ok(Plan {
        calls,
        summary: json!({"marketId": m.address, "outcomeIndex": i, "amount": format_units(amount, s.decimals),
                        "quotedShares": format_units(quote, s.decimals), "minShares": format_units(least, s.decimals)}),
    })
}

/// `sell-prediction-outcome {marketId, outcomeIndex, returnAmount, maxShares? | slippageBps?}`: the
/// market maker's operator approval when missing, then `sell` for the collateral asked with the
/// most outcome tokens given.
pub(super) async fn plan_sell(
    client: &ChainClient,
    params: &Value,
    signer: Address,
) -> Result<Plan, Error> {
    let ct = contract(client, CONDITIONAL_TOKENS)?;
    let (m, s, i) = tradable(client, params).await?;
    let back = units(
        "returnAmount",
        param_str(params, "returnAmount")?,
        s.decimals,
    )?;
    if back.is_zero() {
        return Err(invalid("returnAmount", "must be more than 0"));
    }
    let quote = view(
        client,
        m.address,
        IFixedProductMarketMaker::calcSellAmountCall {
            returnAmount: back,
            outcomeIndex: U256::from(i),
        },
    )
    .await?;
    let most = match super::opt_str(params, "maxShares") {
        Some(text) => units("maxShares", text, s.decimals)?,
        None => {
            quote.saturating_mul(U256::from(10_000 + slippage(params)?)) / U256::from(10_000u64)
        }
    };
    if quote > most {
        return Err(invalid(
            "maxShares",
            format!(
                "the market takes {} shares for {} {} now, more than {}",
                format_units(quote, s.decimals),
                format_units(back, s.decimals),
                s.symbol,
                format_units(most, s.decimals)
            ),
        ));
    }
    let held = view(
        client,
        ct,
        IConditionalTokens::balanceOfCall {
            owner: signer,
            id: s.positions[i],
        },
    )
    .await?;
    if held < quote {
        return Err(invalid(
            "returnAmount",
            format!(
                "{signer} holds {} shares of outcome {i}; {} {} takes {}",
                format_units(held, s.decimals),
                format_units(back, s.decimals),
                s.symbol,
                format_units(quote, s.decimals)
            ),
        ));
    }
    let mut calls = Vec::new();
    let approved = view(
        client,
        ct,
        IConditionalTokens::isApprovedForAllCall {
            owner: signer,
            operator: m.address,
        },
    )
    .await?;
    if !approved {
        calls.push(call(
            ct,
            IConditionalTokens::setApprovalForAllCall {
                operator: m.address,
                approved: true,
            },
            U256::ZERO,
            format!("Let market {} take {signer}'s outcome tokens", m.address),
        ));
    }
    calls.push(call(
        m.address,
        IFixedProductMarketMaker::sellCall {
            returnAmount: back,
            outcomeIndex: U256::from(i),
            maxOutcomeTokensToSell: most,
        },
        U256::ZERO,
        format!(
            "Sell outcome {i} of market {} for {} {} (at most {} shares)",
            m.address,
            format_units(back, s.decimals),
            s.symbol,
            format_units(most, s.decimals)
        ),
    ));
    Ok(Plan {
        calls,
        summary: json!({"marketId": m.address, "outcomeIndex": i, "returnAmount": format_units(back, s.decimals),
                        "quotedShares": format_units(quote, s.decimals), "maxShares": format_units(most, s.decimals)}),
    })
}

/// `redeem-prediction-positions {marketId}`: once the oracle has reported, every outcome token the
/// signer holds of the market's condition for its share of the collateral.
pub(super) async fn plan_redeem(
    client: &ChainClient,
    params: &Value,
    signer: Address,
) -> Result<Plan, Error> {
    let ct = contract(client, CONDITIONAL_TOKENS)?;
    let m = market(client, params).await?;
    let s = state(client, &m).await?;
    if !s.resolved() {
        return Err(Error::new(
            ErrorCode::NotAvailable,
            format!(
                "Market {} is not resolved yet: its oracle has not reported.",
                m.address
            ),
        ));
    }
    let held = view(
        client,
        ct,
        IConditionalTokens::balanceOfBatchCall {
            owners: vec![signer; s.outcomes],
            ids: s.positions.clone(),
        },
    )
    .await?;
    if held.iter().all(U256::is_zero) {
        return Err(invalid(
            "marketId",
            format!("{signer} holds no outcome tokens of market {}", m.address),
        ));
    }
    let payout = held
        .iter()
        .zip(&s.numerators)
        .fold(U256::ZERO, |acc, (h, n)| {
            acc.saturating_add(h.saturating_mul(*n))
        })
        / s.denominator;
    let index_sets: Vec<U256> = (0..s.outcomes).map(|i| U256::from(1u64) << i).collect();
    let calls = vec![call(
        ct,
        IConditionalTokens::redeemPositionsCall {
            collateralToken: m.collateral,
            parentCollectionId: B256::ZERO,
            conditionId: m.condition,
            indexSets: index_sets,
        },
        U256::ZERO,
        format!(
            "Redeem {signer}'s outcome tokens of market {} for {} {}",
            m.address,
            format_units(payout, s.decimals),
            s.symbol
        ),
    )];
    Ok(Plan {
        calls,
        summary: json!({"marketId": m.address, "payout": format_units(payout, s.decimals)}),
    })
}

/// The collateral token of the market `marketId` names (what its buys and sells are priced in).
pub async fn collateral_of(client: &ChainClient, market_id: &str) -> Result<Address, Error> {
    let m = market(client, &json!({ "marketId": market_id })).await?;
    Ok(m.collateral)
}

/// Why the market the params name takes no new trade now (resolved, or past its end); `None` when
/// it does, or when the params name no market of the factory (the action says so itself).
pub async fn closed(client: &ChainClient, params: &Value) -> Result<Option<String>, Error> {
    let Ok(m) = market(client, params).await else {
        return Ok(None);
    };
    let s = state(client, &m).await?;
    Ok(match open_for_trading(client, &m, &s).await {
        Ok(()) => None,
        Err(e) if e.code == ErrorCode::NotAvailable => Some(e.message),
        Err(e) => return Err(e),
    })
}

/// Whether an error is the node not answering (worth a later look), not the chain's answer (a
/// revert is the chain's answer).
pub fn transient(e: &Error) -> bool {
    e.code == ErrorCode::NotAvailable && e.detail.as_deref().is_some_and(|d| !d.contains("revert"))
}

/// How an order (`place-prediction-order`) fills against the market maker now.
#[derive(Debug, Clone, PartialEq)]
pub enum OrderFill {
    /// The market meets the order's price for this much: the buy or the sell to send, bounded so
    /// that it fills at or better than the price.
    Now { action: &'static str, params: Value },
    /// It meets it for nothing now (why, for the order's holder).
    Not(String),
}

/// The rational price `units / 10^6` of an order.
fn order_price(params: &Value) -> Result<U256, Error> {
    let text = actiongate_core::orders::price_text(params)?;
    units(
        "price",
        &text,
        actiongate_core::orders::PRICE_DECIMALS as u8,
    )
}

const PRICE_ONE: u64 = 1_000_000;

/// What an order `{marketId, outcomeIndex, side, price, size, orderType}` fills now: whole (FOK,
/// GTC, GTD: all `size` shares at an average price at or better than `price`, or nothing), or the
/// most that does (FAK, found by bisection over the market maker's own quotes). A buy spends at
/// most `size × price` of the collateral for at least as many shares as that buys at `price`; a
/// sell gives at most `size` shares for at least `size × price`.
pub async fn order_fill(
    client: &ChainClient,
    params: &Value,
    signer: Address,
) -> Result<OrderFill, Error> {
    let terms = actiongate_core::orders::terms(params)?;
    let buy = match param_str(params, "side")? {
        "buy" => true,
        "sell" => false,
        other => return Err(invalid("side", format!("{other:?} is not buy or sell"))),
    };
    let (m, s, i) = tradable(client, params).await?;
    let price = order_price(params)?;
    let one = U256::from(PRICE_ONE);
    let size = units("size", param_str(params, "size")?, s.decimals)?;
    let notional = size.saturating_mul(price) / one;
    if notional.is_zero() {
        return Err(invalid(
            "size",
            "times price is less than one unit of the collateral",
        ));
    }
    let outcome = U256::from(i);
    let shown = |v: U256| format_units(v, s.decimals);
    let held = match buy {
        true => U256::ZERO,
        false => {
            let ct = contract(client, CONDITIONAL_TOKENS)?;
            view(
                client,
                ct,
                IConditionalTokens::balanceOfCall {
                    owner: signer,
                    id: s.positions[i],
                },
            )
            .await?
        }
    };
    // Whether `x` of the collateral fills at or better than the price: the shares a buy of `x`
    // gets are worth at least `x` at the price; the shares a sell of `x` takes are worth at most
    // `x` at it, and the signer holds them.
    // A quote the market maker refuses (a sell beyond its pool reverts) does not fill; a node that
    // does not answer is an error, not "nothing fills".
    let fills = |x: U256| async move {
        let quoted = match buy {
            true => view(
                client,
                m.address,
                IFixedProductMarketMaker::calcBuyAmountCall {
                    investmentAmount: x,
                    outcomeIndex: outcome,
                },
            )
            .await
            .map(|shares| shares.saturating_mul(price) >= x.saturating_mul(one)),
            false => view(
                client,
                m.address,
                IFixedProductMarketMaker::calcSellAmountCall {
                    returnAmount: x,
                    outcomeIndex: outcome,
                },
            )
            .await
            .map(|shares| shares.saturating_mul(price) <= x.saturating_mul(one) && shares <= held),
        };
        match quoted {
            Err(e) if transient(&e) => Err(e),
            other => Ok(other.unwrap_or(false)),
        }
    };
    let amount = if fills(notional).await? {
        notional
    } else if terms.order_type.whole() {
        return Ok(OrderFill::Not(format!(
            "the market does not {} {} shares of outcome {i} at {} {} or better now",
            if buy { "sell" } else { "buy" },
            shown(size),
            format_units(price, 6),
            s.symbol
        )));
    } else {
        // The most that fills: the average price worsens as the amount grows.
        let (mut lo, mut hi) = (U256::ZERO, notional);
        while hi - lo > U256::from(1u64) {
            let mid = (lo + hi) / U256::from(2u64);
            if fills(mid).await? {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        lo
    };
    // The shares at the price: the fewest a buy takes (rounded up, so its average price is never
    // above the limit), the most a sell gives (rounded down, so never below it).
    let shares = match buy {
        true => amount.saturating_mul(one).div_ceil(price),
        false => amount.saturating_mul(one) / price,
    };
    if amount.is_zero() || shares.is_zero() {
        return Ok(OrderFill::Not(format!(
            "nothing of outcome {i} {} at {} {} or better now",
            if buy { "sells" } else { "buys" },
            format_units(price, 6),
            s.symbol
        )));
    }
    let mut params = json!({"marketId": m.address.to_string(), "outcomeIndex": i});
    let action = if buy {
        params["amount"] = json!(shown(amount));
        params["minShares"] = json!(shown(shares));
        "buy-prediction-outcome"
    } else {
        params["returnAmount"] = json!(shown(amount));
        params["maxShares"] = json!(shown(shares.min(size)));
        "sell-prediction-outcome"
    };
    Ok(OrderFill::Now { action, params })
}

/// What a buy of the market the params name needs of the collateral that `holder` lacks now:
/// (holder's balance, what it needs, symbol), `None` when it has it or the params name no
/// buy of a market of the factory.
pub async fn collateral_short(
    client: &ChainClient,
    action: &str,
    params: &Value,
    holder: Address,
) -> Result<Option<(String, String, String)>, Error> {
    let needed_text = match action {
        "buy-prediction-outcome" => super::opt_str(params, "amount").map(str::to_owned),
        actiongate_core::orders::PLACE if super::opt_str(params, "side") == Some("buy") => {
            actiongate_core::orders::notional(params).ok()
        }
        _ => None,
    };
    let Some(needed_text) = needed_text else {
        return Ok(None);
    };
    let Ok(m) = market(client, params).await else {
        return Ok(None);
    };
    let s = state(client, &m).await?;
    let Ok(needed) = units("amount", &needed_text, s.decimals) else {
        return Ok(None);
    };
    let balance = view(
        client,
        m.collateral,
        IERC20::balanceOfCall { owner: holder },
    )
    .await?;
    Ok((balance < needed).then(|| {
        (
            format_units(balance, s.decimals),
            format_units(needed, s.decimals),
            s.symbol.clone(),
        )
    }))
}
