//! What blocks the EVM venues now, read live at the pending block: the sending wallet's gas at the
//! current fee, the holder's balance of the token, the signer's allowance to the venue's spender
//! (build-tx), a paused token, a vault that takes no deposits, a configured contract with no code.

use actiongate_api_types::chain::UnsignedTransaction;
use actiongate_api_types::venues::{BlockingCode, BlockingReason, Fix};
use actiongate_core::catalog::Lane;
use actiongate_core::error::Error;
use actiongate_core::execution::VenueCheck;
use alloy::eips::BlockId;
use alloy::network::TransactionBuilder;
use alloy::primitives::{Address, U256};
use alloy::providers::Provider;
use alloy::rpc::types::TransactionRequest;
use alloy::sol_types::SolCall;

use super::aave;
use super::{
    Token, V2_ROUTER, V3_QUOTER, V3_ROUTER, contract, format_units, resolve_token, rpc_error,
    units, vault, vault_asset, view,
};
use crate::bindings::{IAaveDataProvider, IAavePool, IERC20, IERC4626, IPausable};
use crate::client::ChainClient;

/// An upper estimate of one execution's gas, by action (an approval included where the action may
/// need one); a fan-out adds the DelegationManager's redemption and the caveats' enforcers.
fn gas_budget(action: &str) -> u64 {
    match action {
        "transfer" => 80_000,
        "wrap-native" | "unwrap-native" => 70_000,
        "withdraw-earn-position" => 200_000,
        // An approval or a credit delegation, then the pool (through the gateway for ETH).
        "borrow" | "withdraw-lending" | "repay" => 450_000,
        _ => 300_000,
    }
}
const REDEMPTION_GAS: u64 = 200_000;

/// The prediction-market writes that trade (a resolved or ended market takes none).
const PREDICTION_TRADES: &[&str] = &[
    "buy-prediction-outcome",
    "sell-prediction-outcome",
    actiongate_core::orders::PLACE,
];

/// The contract that spends the holder's tokens for `action` (the one an approval is for), when
/// the action needs an approval.
fn spenders(client: &ChainClient, check: &VenueCheck<'_>, action: &str) -> Vec<Address> {
    let named = |name: &str| contract(client, name).ok().into_iter().collect::<Vec<_>>();
    match action {
        "swap" => named(V2_ROUTER),
        "swap-v3" | "fx-swap" => named(V3_ROUTER),
        "supply-lending" | "repay" => named(super::aave::POOL),
        super::across::BRIDGE => named(super::across::SPOKE),
        "deposit-earn-position" => match check.params.map(|p| vault(client, p)) {
            Some(Ok((_, v))) => vec![v],
            Some(Err(_)) => vec![],
            // The venue as a whole: its vaults of this token (filtered by their asset below).
            None => client
                .settings
                .vaults
                .values()
                .filter_map(|a| a.parse().ok())
                .collect(),
        },
        _ => vec![],
    }
}

fn reason(code: BlockingCode, message: String, text: String) -> BlockingReason {
    BlockingReason::new(
        code,
        message,
        Fix {
            text,
            ..Fix::default()
        },
    )
}

/// Whether `token` says it is paused. A token without `paused()` (the call reverts or answers
/// something else) is not pausable; a node that does not answer is an error, not a "no".
async fn paused(client: &ChainClient, token: Address) -> Result<bool, Error> {
    let tx = TransactionRequest::default()
        .with_to(token)
        .with_input(IPausable::pausedCall {}.abi_encode());
    match client.provider.call(tx).block(BlockId::pending()).await {
        Ok(out) => Ok(IPausable::pausedCall::abi_decode_returns(&out).unwrap_or(false)),
        Err(alloy::transports::RpcError::ErrorResp(_)) => Ok(false),
        Err(e) => Err(rpc_error(client, e)),
    }
}

/// The writes whose token comes into the wallet instead of leaving it.
const RECEIVES: &[&str] = &[
    "borrow",
    "withdraw-lending",
    "set-collateral",
    "withdraw-earn-position",
];

/// Aave's writes.
const LENDING: &[&str] = &[
    "supply-lending",
    "withdraw-lending",
    "borrow",
    "repay",
    "set-collateral",
];

/// What blocks Aave's writes of `token` now: a paused reserve (nothing moves), a frozen one (no
/// supply, no borrow), a supply or borrow cap the amount would pass, borrowing switched off, and a
/// borrow by a holder with no collateral.
async fn lending(
    client: &ChainClient,
    check: &VenueCheck<'_>,
    token: Token,
    amount: Option<U256>,
    holder: Option<Address>,
) -> Result<Vec<BlockingReason>, Error> {
    let mut reasons = Vec::new();
    let chain_id = client.chain_id;
    let has = |a: &str| check.actions.contains(&a);
    let reserve = match aave::reserve_of(client, token).await {
        Ok(r) => r,
        // Not a reserve: the action's own INVALID_PARAMS says so.
        Err(e) if e.code == actiongate_api_types::ErrorCode::InvalidParams => return Ok(reasons),
        Err(e) => return Err(e),
    };
    let symbol = reserve.symbol();
    if reserve.paused {
        reasons.push(reason(
            BlockingCode::VenuePaused,
            format!("Aave's {symbol} reserve on chain {chain_id} is paused: nothing is supplied, borrowed, repaid or withdrawn."),
            "Wait until Aave's guardians unpause it.".to_owned(),
        ));
        return Ok(reasons);
    }
    let (data, caps) = tokio::try_join!(
        view(
            client,
            contract(client, aave::DATA_PROVIDER)?,
            IAaveDataProvider::getReserveDataCall {
                asset: reserve.asset
            }
        ),
        view(
            client,
            contract(client, aave::DATA_PROVIDER)?,
            IAaveDataProvider::getReserveCapsCall {
                asset: reserve.asset
            }
        ),
    )?;
    let whole = U256::from(10u64).pow(U256::from(reserve.decimals()));
    let extra = amount.unwrap_or_default();
    if reserve.config.isFrozen && (has("supply-lending") || has("borrow")) {
        reasons.push(reason(
            BlockingCode::VenuePaused,
            format!("Aave's {symbol} reserve on chain {chain_id} is frozen: it takes no supply and lends nothing (repayments and withdrawals still run)."),
            "Use another reserve, or wait until Aave unfreezes it.".to_owned(),
        ));
    }
    if has("supply-lending") && !caps.supplyCap.is_zero() {
        let cap = caps.supplyCap.saturating_mul(whole);
        if data.totalAToken.saturating_add(extra) > cap {
            reasons.push(reason(
                BlockingCode::VenuePaused,
                format!(
                    "Aave's {symbol} reserve on chain {chain_id} holds {} of its supply cap of {}: {} more does not fit.",
                    reserve.human(data.totalAToken),
                    caps.supplyCap,
                    reserve.human(extra)
                ),
                "Supply less, or another asset.".to_owned(),
            ));
        }
    }
    if has("borrow") {
        if !reserve.config.borrowingEnabled {
            reasons.push(reason(
                BlockingCode::VenuePaused,
                format!("Aave's {symbol} reserve on chain {chain_id} does not lend."),
                "Borrow another asset.".to_owned(),
            ));
        }
        let borrowed = data.totalVariableDebt.saturating_add(data.totalStableDebt);
        if !caps.borrowCap.is_zero()
            && borrowed.saturating_add(extra) > caps.borrowCap.saturating_mul(whole)
        {
            reasons.push(reason(
                BlockingCode::VenuePaused,
                format!(
                    "Aave's {symbol} reserve on chain {chain_id} has lent {} of its borrow cap of {}: {} more does not fit.",
                    reserve.human(borrowed),
                    caps.borrowCap,
                    reserve.human(extra)
                ),
                "Borrow less, or another asset.".to_owned(),
            ));
        }
        if let Some(holder) = holder {
            let account = view(
                client,
                contract(client, aave::POOL)?,
                IAavePool::getUserAccountDataCall { user: holder },
            )
            .await?;
            if account.totalCollateralBase.is_zero() {
                reasons.push(reason(
                    BlockingCode::BalanceShort,
                    format!("{holder} has no collateral in Aave on chain {chain_id}: nothing can be borrowed against it."),
                    format!("Supply an asset Aave counts as collateral first (supply-lending), from {holder}."),
                ));
            }
        }
    }
    Ok(reasons)
}

/// What blocks `check` on `client`'s chain now.
pub async fn readiness(
    client: &ChainClient,
    check: &VenueCheck<'_>,
) -> Result<Vec<BlockingReason>, Error> {
    let mut reasons = Vec::new();
    let chain_id = client.chain_id;

    // A prediction market that is resolved or past its end takes no buy or sell.
    if let Some(p) = check.params
        && check.actions.iter().any(|a| PREDICTION_TRADES.contains(a))
        && let Some(why) = super::ctf::closed(client, p).await?
    {
        reasons.push(reason(
            BlockingCode::VenuePaused,
            why,
            "Trade another market (get-prediction-markets with status open); a resolved one redeems with redeem-prediction-positions.".to_owned(),
        ));
    }
    // A buy (or a buy order) needs its collateral in the holder's wallet.
    if let (Some(p), Some(holder)) = (
        check.params,
        check.holder.and_then(|h| h.parse::<Address>().ok()),
    ) {
        for action in check
            .actions
            .iter()
            .filter(|a| PREDICTION_TRADES.contains(a))
        {
            if let Some((has, needs, symbol)) =
                super::ctf::collateral_short(client, action, p, holder).await?
            {
                reasons.push(reason(
                    BlockingCode::BalanceShort,
                    format!("{holder} holds {has} {symbol} on chain {chain_id}, less than the {needs} {symbol} this buys with."),
                    format!("Send at least {needs} {symbol} to {holder} on chain {chain_id}, or buy less."),
                ));
            }
        }
    }

    // A bridge: its route configured, and the origin spoke taking deposits.
    if let Some(p) = check.params
        && check.actions.contains(&super::across::BRIDGE)
    {
        reasons.extend(
            super::across::blockers(client, p)
                .await?
                .into_iter()
                .map(|(code, message, fix)| reason(code, message, fix)),
        );
    }

    // The configured routers must be contracts.
    for name in [V2_ROUTER, V3_ROUTER, V3_QUOTER] {
        let needed = check.actions.iter().any(|a| match *a {
            "swap" => name == V2_ROUTER,
            "swap-v3" | "fx-swap" => name != V2_ROUTER,
            _ => false,
        });
        let Ok(at) = contract(client, name) else {
            continue;
        };
        if needed
            && client
                .provider
                .get_code_at(at)
                .await
                .map_err(|e| rpc_error(client, e))?
                .is_empty()
        {
            reasons.push(reason(
                BlockingCode::ChainNotConfigured,
                format!("Chain {chain_id}'s {name} is configured at {at}, where there is no contract."),
                format!("The operator sets [chains.{chain_id}.contracts] {name} to the deployed address."),
            ));
        }
    }

    // The token (from the query, or a vault's asset for a deposit into one vault).
    let token = match (check.token, check.params) {
        (Some(t), _) => Some(resolve_token(client, "token", t).await?),
        (None, Some(p)) if check.actions.contains(&"deposit-earn-position") => {
            match vault(client, p) {
                Ok((_, v)) => Some(vault_asset(client, v).await?),
                Err(_) => None,
            }
        }
        _ => None,
    };
    let amount = match (&token, check.amount) {
        (Some(t), Some(a)) if a != "max" => Some(units("amount", a, t.decimals())?),
        _ => None,
    };
    // Writes whose token comes in (a borrow, a withdrawal) need none of it in the wallet.
    let spends = check.actions.iter().any(|a| !RECEIVES.contains(a));
    let holder = check.holder.and_then(|h| h.parse::<Address>().ok());
    if let Some(token) = &token
        && check.actions.iter().any(|a| LENDING.contains(a))
    {
        reasons.extend(lending(client, check, token.clone(), amount, holder).await?);
    }

    // Gas: the sender pays every transaction (and the native amount it sends).
    if let Some(sender) = check.sender.and_then(|s| s.parse::<Address>().ok()) {
        let budget = check
            .actions
            .iter()
            .map(|a| gas_budget(a))
            .max()
            .unwrap_or(0)
            + if check.lane == Lane::ExecuteIntent {
                REDEMPTION_GAS
            } else {
                0
            };
        let (max_fee, _) = crate::sender::fees(client).await?;
        let gas = U256::from(budget) * U256::from(max_fee);
        let native = match (&token, amount, check.holder) {
            (Some(Token::Native), Some(a), Some(_)) if spends => a,
            _ => U256::ZERO,
        };
        let balance = client
            .provider
            .get_balance(sender)
            .block_id(BlockId::pending())
            .await
            .map_err(|e| rpc_error(client, e))?;
        if balance < gas {
            reasons.push(reason(
                BlockingCode::GasShort,
                format!(
                    "{sender} holds {} ETH on chain {chain_id}; one execution here needs up to {} ETH of gas at the current fee ({} gwei).",
                    format_units(balance, 18),
                    format_units(gas, 18),
                    format_units(U256::from(max_fee), 9)
                ),
                format!("Send at least {} ETH to {sender} on chain {chain_id}.", format_units(gas - balance, 18)),
            ));
        } else if balance < gas.saturating_add(native) {
            reasons.push(reason(
                BlockingCode::BalanceShort,
                format!(
                    "{sender} holds {} ETH on chain {chain_id}: not {} ETH and the gas.",
                    format_units(balance, 18),
                    format_units(native, 18)
                ),
                format!(
                    "Send at least {} ETH to {sender} on chain {chain_id}.",
                    format_units(gas.saturating_add(native) - balance, 18)
                ),
            ));
        }
    }

    let Some(token) = token else {
        return Ok(reasons);
    };
    let Token::Erc20 {
        address: token_at,
        decimals,
        symbol,
    } = &token
    else {
        return Ok(reasons);
    };

    // A paused token moves for nobody.
    if paused(client, *token_at).await? {
        reasons.push(reason(
            BlockingCode::VenuePaused,
            format!(
                "{symbol} ({token_at}) is paused on chain {chain_id}: no transfer of it succeeds."
            ),
            format!("Wait until {symbol}'s issuer unpauses it, or use another token."),
        ));
    }

    if let (Some(holder), Some(amount), true) = (holder, amount, spends) {
        let balance = view(client, *token_at, IERC20::balanceOfCall { owner: holder }).await?;
        if balance < amount {
            reasons.push(reason(
                BlockingCode::BalanceShort,
                format!(
                    "{holder} holds {} {symbol} on chain {chain_id}, less than {}.",
                    format_units(balance, *decimals),
                    format_units(amount, *decimals)
                ),
                format!(
                    "Send at least {} {symbol} to {holder} on chain {chain_id}.",
                    format_units(amount - balance, *decimals)
                ),
            ));
        }
    }

    // The venue's spenders of this token: approvals (build-tx) and vaults that take deposits.
    let mut seen: Vec<Address> = Vec::new();
    for action in &check.actions {
        for spender in spenders(client, check, action) {
            if seen.contains(&spender) {
                continue;
            }
            seen.push(spender);
            if *action == "deposit-earn-position" {
                let asset = view(client, spender, IERC4626::assetCall {}).await?;
                if asset != *token_at {
                    continue;
                }
                // The receiver of the shares: the action's, else the holder. A fan-out's
                // receivers are the delegators, each its own: not read here.
                let receiver = check
                    .params
                    .and_then(|p| p.get("receiver"))
                    .and_then(|r| r.as_str())
                    .and_then(|r| r.parse::<Address>().ok())
                    .or(holder);
                let Some(receiver) = receiver else {
                    continue;
                };
                let max = view(client, spender, IERC4626::maxDepositCall { receiver }).await?;
                if max.is_zero() || amount.is_some_and(|a| a > max) {
                    reasons.push(reason(
                        BlockingCode::VenuePaused,
                        format!(
                            "Vault {spender} takes at most {} {symbol} from {receiver} now.",
                            format_units(max, *decimals)
                        ),
                        "Deposit less, later, or into another vault.".to_owned(),
                    ));
                }
            }
            let (Lane::BuildTx, Some(holder), Some(amount)) = (check.lane, holder, amount) else {
                continue;
            };
            let allowance = view(
                client,
                *token_at,
                IERC20::allowanceCall {
                    owner: holder,
                    spender,
                },
            )
            .await?;
            if allowance < amount {
                let description = format!(
                    "Approve {spender} to spend {} {symbol}",
                    format_units(amount, *decimals)
                );
                reasons.push(BlockingReason::new(
                    BlockingCode::ApprovalRequired,
                    format!(
                        "{holder} allows {spender} {} {symbol} on chain {chain_id}, less than {}.",
                        format_units(allowance, *decimals),
                        format_units(amount, *decimals)
                    ),
                    Fix {
                        text: format!(
                            "{holder} signs this approval (build-tx of the action adds it first as well)."
                        ),
                        route: Some("POST /api/v1/agent/build-tx".into()),
                        action: None,
                        transaction: Some(UnsignedTransaction::call(
                            token_at.to_string(),
                            alloy::primitives::Bytes::from(
                                IERC20::approveCall { spender, amount }.abi_encode(),
                            )
                            .to_string(),
                            description,
                        )),
                    },
                ));
            }
        }
    }
    Ok(reasons)
}
