//! What each EVM action sends or reads. A write becomes a [`Plan`]: an ordered list of calls (an
//! approval the action needs comes first), built from onchain state read at the `pending` block, so
//! that a second plan of the same wallet sees the first one's transactions. Reads answer JSON.

pub mod aave;
pub mod across;
pub mod batch;
pub mod ctf;
mod fx;
mod readiness;
mod swap;

use fx::plan_fx_swap;
pub use fx::quote as fx_quote;
pub use readiness::readiness;
use std::time::{SystemTime, UNIX_EPOCH};
use swap::{plan_swap, plan_swap_v3};

use actiongate_api_types::ErrorCode;
use actiongate_core::error::Error;
use actiongate_core::prices::Prices;
use alloy::primitives::{Address, Bytes, U256};
use alloy::providers::Provider;
use alloy::sol_types::SolCall;
use serde_json::{Value, json};

use crate::amount::{format_units, parse_units};
use crate::bindings::{IERC20, IERC4626, IWETH9};
use crate::client::ChainClient;

/// The Uniswap V2 router's name in `[chains.<id>.contracts]`.
pub const V2_ROUTER: &str = "UniswapV2Router02";
/// The Uniswap V3 contracts' names in `[chains.<id>.contracts]`.
pub const V3_ROUTER: &str = "SwapRouter02";
pub const V3_QUOTER: &str = "QuoterV2";
pub const V3_FACTORY: &str = "UniswapV3Factory";
/// The provider id `deposit-earn-position` and its twins take for the configured ERC-4626 vaults.
pub const VAULT_PROVIDER: &str = "erc4626-vaults";

/// One call of a plan.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    pub to: Address,
    pub data: Bytes,
    pub value: U256,
    pub description: String,
}

/// The calls of one write, in order, and what they were planned from (quotes, resolved amounts).
#[derive(Debug, Clone)]
pub struct Plan {
    pub calls: Vec<Call>,
    pub summary: Value,
}

/// A token of the chain: the native coin or an ERC-20.
#[derive(Debug, Clone, PartialEq)]
pub enum Token {
    Native,
    Erc20 {
        address: Address,
        decimals: u8,
        symbol: String,
    },
}

impl Token {
    pub fn decimals(&self) -> u8 {
        match self {
            Token::Native => 18,
            Token::Erc20 { decimals, .. } => *decimals,
        }
    }

    pub fn symbol(&self) -> String {
        match self {
            Token::Native => "ETH".into(),
            Token::Erc20 { symbol, .. } => symbol.clone(),
        }
    }
}

fn invalid(field: &str, message: impl std::fmt::Display) -> Error {
    Error::new(
        ErrorCode::InvalidParams,
        format!("params.{field}: {message}"),
    )
}

/// `e` as text with the chain's RPC URL taken out (it may hold a key).
pub fn without_url(rpc_url: Option<&str>, e: impl std::fmt::Display) -> String {
    let mut detail = e.to_string();
    if let Some(url) = rpc_url {
        // As configured, and as the HTTP client prints it (parsed: lower-case host, no default port).
        let parsed = url
            .parse::<alloy::transports::http::reqwest::Url>()
            .map(|u| u.to_string())
            .unwrap_or_default();
        for form in [
            url,
            url.trim_end_matches('/'),
            parsed.as_str(),
            parsed.trim_end_matches('/'),
        ] {
            if !form.is_empty() {
                detail = detail.replace(form, "<rpc-url>");
            }
        }
    }
    detail
}

/// A failure to talk to the chain's node. The message never carries the RPC URL (it may hold a key).
pub fn rpc_error(client: &ChainClient, e: impl std::fmt::Display) -> Error {
    let detail = without_url(client.settings.rpc_url.as_deref(), e);
    let mut err = Error::new(
        ErrorCode::NotAvailable,
        format!(
            "The node of chain {} ({}) did not answer; try again shortly.",
            client.chain_id, client.settings.name
        ),
    );
    err.detail = Some(detail);
    err
}

fn param_str<'a>(params: &'a Value, field: &str) -> Result<&'a str, Error> {
    params
        .get(field)
        .and_then(Value::as_str)
        .ok_or_else(|| invalid(field, "is required"))
}

fn opt_str<'a>(params: &'a Value, field: &str) -> Option<&'a str> {
    params.get(field).and_then(Value::as_str)
}

fn opt_u64(params: &Value, field: &str) -> Result<Option<u64>, Error> {
    match params.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .map(Some)
            .ok_or_else(|| invalid(field, "must be a whole number")),
    }
}

fn address(field: &str, text: &str) -> Result<Address, Error> {
    text.parse::<Address>()
        .map_err(|_| invalid(field, format!("{text:?} is not a 0x address")))
}

fn contract(client: &ChainClient, name: &str) -> Result<Address, Error> {
    let text = client.settings.contracts.get(name).ok_or_else(|| {
        Error::new(
            ErrorCode::ChainNotConfigured,
            format!("Chain {} has no {name} configured.", client.chain_id),
        )
    })?;
    text.parse().map_err(|_| {
        Error::internal(format!(
            "chain {}: contract {name} address {text:?} is invalid",
            client.chain_id
        ))
    })
}

fn units(field: &str, text: &str, decimals: u8) -> Result<U256, Error> {
    parse_units(text, decimals).map_err(|e| invalid(field, e))
}

tokio::task_local! {
    /// The block an execution's plan reads at, chosen by the sender around its planning.
    static READ_AT: alloy::eips::BlockId;
}

/// The block plans and simulations read at: the sender's choice for the execution being planned
/// ([`reading_at`]), else the pending block.
pub fn read_block() -> alloy::eips::BlockId {
    READ_AT
        .try_with(|b| *b)
        .unwrap_or(alloy::eips::BlockId::pending())
}

/// Runs `f` with its plan reads at `block`.
pub async fn reading_at<F: Future>(block: alloy::eips::BlockId, f: F) -> F::Output {
    READ_AT.scope(block, f).await
}

/// Reads a view call at the block plans read at ([`read_block`]).
pub async fn view<C: SolCall>(
    client: &ChainClient,
    to: Address,
    call: C,
) -> Result<C::Return, Error> {
    let out = batch::call(client, read_block(), to, call.abi_encode().into()).await?;
    C::abi_decode_returns(&out).map_err(|e| {
        Error::new(
            ErrorCode::ExecutionReverted,
            format!(
                "{to} answered {} with data that does not decode: {e}",
                C::SIGNATURE
            ),
        )
    })
}

/// The chain's token-list entry (symbol, token) at `addr`.
fn listed(
    client: &ChainClient,
    addr: Address,
) -> Option<(&String, &actiongate_core::chains::Token)> {
    client
        .settings
        .tokens
        .iter()
        .find(|(_, t)| t.address.parse::<Address>().ok() == Some(addr))
}

/// Resolves a token parameter: a symbol of the chain's token list, `ETH` (the native coin), or a 0x
/// address (decimals from the list, else read onchain).
pub async fn resolve_token(client: &ChainClient, field: &str, text: &str) -> Result<Token, Error> {
    let tokens = &client.settings.tokens;
    if text.starts_with("0x") {
        let addr = address(field, text)?;
        if let Some((symbol, t)) = listed(client, addr) {
            return Ok(Token::Erc20 {
                address: addr,
                decimals: t.decimals,
                symbol: symbol.clone(),
            });
        }
        let decimals = view(client, addr, IERC20::decimalsCall {}).await?;
        return Ok(Token::Erc20 {
            address: addr,
            decimals,
            symbol: addr.to_string(),
        });
    }
    let symbol = text.to_ascii_uppercase();
    if let Some(t) = tokens.get(&symbol) {
        let address = t
            .address
            .parse()
            .map_err(|_| Error::internal(format!("token {symbol} address is invalid")))?;
        return Ok(Token::Erc20 {
            address,
            decimals: t.decimals,
            symbol,
        });
    }
    if symbol == "ETH" {
        return Ok(Token::Native);
    }
    let known: Vec<&String> = tokens.keys().collect();
    Err(invalid(
        field,
        format!(
            "{text:?} is not in chain {}'s token list {known:?} and is not a 0x address",
            client.chain_id
        ),
    ))
}

fn weth(client: &ChainClient) -> Result<Address, Error> {
    match client.settings.tokens.get("WETH") {
        Some(t) => t
            .address
            .parse()
            .map_err(|_| Error::internal("WETH address is invalid")),
        None => contract(client, "WETH9"),
    }
}

fn vault(client: &ChainClient, params: &Value) -> Result<(String, Address), Error> {
    let provider = param_str(params, "providerId")?;
    if provider != VAULT_PROVIDER {
        return Err(invalid(
            "providerId",
            format!(
                "{provider:?} is not an onchain vault provider here; use {VAULT_PROVIDER:?} (or {:?} with an opportunityId {:?})",
                aave::PROVIDER,
                format!("{}USDC", crate::earn::AAVE_PREFIX)
            ),
        ));
    }
    let id = param_str(params, "opportunityId")?;
    let text = client.settings.vaults.get(id).ok_or_else(|| {
        let known: Vec<&String> = client.settings.vaults.keys().collect();
        invalid(
            "opportunityId",
            format!(
                "{id:?} is not a vault of chain {} (known: {known:?})",
                client.chain_id
            ),
        )
    })?;
    Ok((
        id.to_owned(),
        text.parse()
            .map_err(|_| Error::internal(format!("vault {id} address is invalid")))?,
    ))
}

async fn vault_asset(client: &ChainClient, vault: Address) -> Result<Token, Error> {
    let asset = view(client, vault, IERC4626::assetCall {}).await?;
    resolve_token(client, "opportunityId", &asset.to_string()).await
}

fn call<C: SolCall>(to: Address, c: C, value: U256, description: String) -> Call {
    Call {
        to,
        data: c.abi_encode().into(),
        value,
        description,
    }
}

/// An approval of `amount` for `spender` when `owner`'s allowance is short.
async fn approval(
    client: &ChainClient,
    token: Address,
    symbol: &str,
    decimals: u8,
    owner: Address,
    spender: Address,
    amount: U256,
) -> Result<Option<Call>, Error> {
    let allowance = view(client, token, IERC20::allowanceCall { owner, spender }).await?;
    Ok((allowance < amount).then(|| {
        call(
            token,
            IERC20::approveCall { spender, amount },
            U256::ZERO,
            format!(
                "Approve {spender} to spend {} {symbol}",
                format_units(amount, decimals)
            ),
        )
    }))
}

/// The approval `token` needs for `spender` to spend `amount` of `owner`'s ([`approval`]; none for
/// the native coin).
async fn approval_of(
    client: &ChainClient,
    token: &Token,
    owner: Address,
    spender: Address,
    amount: U256,
) -> Result<Option<Call>, Error> {
    match token {
        Token::Native => Ok(None),
        Token::Erc20 {
            address,
            symbol,
            decimals,
        } => approval(client, *address, symbol, *decimals, owner, spender, amount).await,
    }
}

/// The time of the chain's block at `tag`: `Latest` the last mined one's, `Pending` the time a
/// block mined now would have (an idle chain's latest block is older).
async fn block_time(
    client: &ChainClient,
    tag: alloy::eips::BlockNumberOrTag,
) -> Result<u64, Error> {
    let block = client
        .provider
        .get_block_by_number(tag)
        .await
        .map_err(|e| rpc_error(client, e))?
        .ok_or_else(|| rpc_error(client, format!("no {tag} block")))?;
    Ok(block.header.timestamp)
}

fn now_seconds() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default()
}

/// The calls of a write action sent by `signer` (`prices`: the gateway's price layer, which bounds
/// an FX conversion).
pub async fn plan(
    client: &ChainClient,
    prices: &Prices,
    action: &str,
    params: &Value,
    signer: Address,
) -> Result<Plan, Error> {
    match action {
        "transfer" => {
            let token = resolve_token(client, "token", param_str(params, "token")?).await?;
            let to = address("to", param_str(params, "to")?)?;
            let amount = units("amount", param_str(params, "amount")?, token.decimals())?;
            let description = format!(
                "Send {} {} to {to}",
                format_units(amount, token.decimals()),
                token.symbol()
            );
            let c = match &token {
                Token::Native => Call {
                    to,
                    data: Bytes::new(),
                    value: amount,
                    description,
                },
                Token::Erc20 { address, .. } => call(
                    *address,
                    IERC20::transferCall { to, amount },
                    U256::ZERO,
                    description,
                ),
            };
            Ok(Plan {
                calls: vec![c],
                summary: json!({"token": token.symbol(), "to": to, "amount": format_units(amount, token.decimals())}),
            })
        }
        "wrap-native" | "unwrap-native" => {
            let weth = weth(client)?;
            let amount = units("amount", param_str(params, "amount")?, 18)?;
            let human = format_units(amount, 18);
            let c = if action == "wrap-native" {
                call(
                    weth,
                    IWETH9::depositCall {},
                    amount,
                    format!("Wrap {human} ETH into WETH"),
                )
            } else {
                call(
                    weth,
                    IWETH9::withdrawCall { wad: amount },
                    U256::ZERO,
                    format!("Unwrap {human} WETH into ETH"),
                )
            };
            Ok(Plan {
                calls: vec![c],
                summary: json!({"amount": human}),
            })
        }
        "swap" => plan_swap(client, params, signer).await,
        "supply-lending" => aave::plan_supply(client, params, signer).await,
        across::BRIDGE => across::plan_bridge(client, params, signer).await,
        "buy-prediction-outcome" => ctf::plan_buy(client, params, signer).await,
        "sell-prediction-outcome" => ctf::plan_sell(client, params, signer).await,
        "redeem-prediction-positions" => ctf::plan_redeem(client, params, signer).await,
        "withdraw-lending" => aave::plan_withdraw(client, params, signer).await,
        "borrow" => aave::plan_borrow(client, params, signer).await,
        "repay" => aave::plan_repay(client, params, signer).await,
        "set-collateral" => aave::plan_set_collateral(client, params, signer).await,
        "swap-v3" => plan_swap_v3(client, params, signer).await,
        "fx-swap" => plan_fx_swap(client, prices, params, signer).await,
        "deposit-earn-position" | "withdraw-earn-position"
            if aave::as_lending(action, params).is_some() =>
        {
            match aave::as_lending(action, params) {
                Some(("supply-lending", mapped)) => {
                    aave::plan_supply(client, &mapped, signer).await
                }
                Some((_, mapped)) => aave::plan_withdraw(client, &mapped, signer).await,
                None => Err(Error::internal("an Aave opportunity that maps to nothing")),
            }
        }
        "deposit-earn-position" => {
            let (id, vault) = vault(client, params)?;
            let asset = vault_asset(client, vault).await?;
            let Token::Erc20 {
                address: asset_addr,
                decimals,
                symbol,
            } = &asset
            else {
                return Err(Error::internal(
                    "a vault's asset resolved to the native coin",
                ));
            };
            let assets = units("amount", param_str(params, "amount")?, *decimals)?;
            let receiver = match opt_str(params, "receiver") {
                Some(r) => address("receiver", r)?,
                None => signer,
            };
            let mut calls = Vec::new();
            calls.extend(
                approval(
                    client,
                    *asset_addr,
                    symbol,
                    *decimals,
                    signer,
                    vault,
                    assets,
                )
                .await?,
            );
            calls.push(call(
                vault,
                IERC4626::depositCall { assets, receiver },
                U256::ZERO,
                format!(
                    "Deposit {} {symbol} into vault {id} for {receiver}",
                    format_units(assets, *decimals)
                ),
            ));
            Ok(Plan {
                calls,
                summary: json!({"vault": id, "asset": symbol, "amount": format_units(assets, *decimals), "receiver": receiver}),
            })
        }
        "withdraw-earn-position" => {
            let (id, vault) = vault(client, params)?;
            let asset = vault_asset(client, vault).await?;
            let receiver = match opt_str(params, "receiver") {
                Some(r) => address("receiver", r)?,
                None => signer,
            };
            let amount = param_str(params, "amount")?;
            let c = if amount == "max" {
                let shares = view(client, vault, IERC4626::balanceOfCall { owner: signer }).await?;
                if shares.is_zero() {
                    return Err(invalid(
                        "amount",
                        format!("{signer} holds no shares of vault {id}"),
                    ));
                }
                call(
                    vault,
                    IERC4626::redeemCall {
                        shares,
                        receiver,
                        owner: signer,
                    },
                    U256::ZERO,
                    format!("Redeem every share of vault {id} for {receiver}"),
                )
            } else {
                let assets = units("amount", amount, asset.decimals())?;
                call(
                    vault,
                    IERC4626::withdrawCall {
                        assets,
                        receiver,
                        owner: signer,
                    },
                    U256::ZERO,
                    format!(
                        "Withdraw {} {} from vault {id} to {receiver}",
                        format_units(assets, asset.decimals()),
                        asset.symbol()
                    ),
                )
            };
            Ok(Plan {
                calls: vec![c],
                summary: json!({"vault": id, "asset": asset.symbol(), "amount": amount, "receiver": receiver}),
            })
        }
        other => Err(Error::new(
            ErrorCode::NotAvailable,
            format!("{other} is not an EVM write of this build."),
        )),
    }
}

/// A read action, for `wallet` unless the params name another.
pub async fn read(
    client: &ChainClient,
    action: &str,
    params: &Value,
    wallet: Address,
) -> Result<Value, Error> {
    let who = match opt_str(params, "walletAddress") {
        Some(w) => address("walletAddress", w)?,
        None => wallet,
    };
    match action {
        "get-lending-markets" => aave::markets(client).await,
        "get-bridge-quote" => across::quote(client, params).await,
        "get-prediction-markets" => ctf::markets(client, params).await,
        "get-prediction-positions" => ctf::positions(client, who).await,
        "get-lending-position" => aave::position(client, who).await,
        "get-token-balance" => {
            let token = resolve_token(client, "token", param_str(params, "token")?).await?;
            let raw = match &token {
                Token::Native => client
                    .provider
                    .get_balance(who)
                    .await
                    .map_err(|e| rpc_error(client, e))?,
                Token::Erc20 { address, .. } => {
                    view(client, *address, IERC20::balanceOfCall { owner: who }).await?
                }
            };
            Ok(json!({
                "chainId": client.chain_id,
                "walletAddress": who,
                "token": token.symbol(),
                "decimals": token.decimals(),
                "balance": format_units(raw, token.decimals()),
                "raw": raw.to_string(),
            }))
        }
        "get-earn-position" => earn_position(client, params, who).await,
        other => Err(Error::new(
            ErrorCode::NotAvailable,
            format!("{other} is not an EVM read of this build."),
        )),
    }
}

/// `who`'s positions with an earn provider: shares of the configured vaults (`erc4626-vaults`),
/// supplies to Aave (`aave-v3`, opportunity ids `aave-v3:<asset>`), or both (`earn-router`).
async fn earn_position(client: &ChainClient, params: &Value, who: Address) -> Result<Value, Error> {
    let provider = param_str(params, "providerId")?;
    let known = [crate::earn::ROUTER, aave::PROVIDER, VAULT_PROVIDER];
    if !known.contains(&provider) {
        return Err(invalid(
            "providerId",
            format!("{provider:?} has no onchain positions here; use one of {known:?}"),
        ));
    }
    let vaults = provider != aave::PROVIDER;
    let lending = provider != VAULT_PROVIDER && aave::configured(client);
    let only = opt_str(params, "opportunityId");
    if let Some(id) = only {
        let is_vault = vaults && client.settings.vaults.contains_key(id);
        let is_reserve = lending && id.starts_with(crate::earn::AAVE_PREFIX);
        if !is_vault && !is_reserve {
            return Err(invalid(
                "opportunityId",
                format!(
                    "{id:?} is not an opportunity of {provider} on chain {}",
                    client.chain_id
                ),
            ));
        }
    }
    let mut positions = Vec::new();
    if vaults {
        for (id, text) in &client.settings.vaults {
            if only.is_some_and(|o| o != id) {
                continue;
            }
            let vault: Address = text
                .parse()
                .map_err(|_| Error::internal(format!("vault {id} address is invalid")))?;
            let asset = vault_asset(client, vault).await?;
            let shares = view(client, vault, IERC4626::balanceOfCall { owner: who }).await?;
            let assets = if shares.is_zero() {
                U256::ZERO
            } else {
                view(client, vault, IERC4626::convertToAssetsCall { shares }).await?
            };
            positions.push(json!({
                "opportunityId": id,
                "providerId": VAULT_PROVIDER,
                "vault": vault,
                "asset": asset.symbol(),
                "shares": shares.to_string(),
                "assets": format_units(assets, asset.decimals()),
                "assetsRaw": assets.to_string(),
            }));
        }
    }
    if lending {
        let held = aave::position(client, who).await?;
        for r in held["reserves"].as_array().into_iter().flatten() {
            let id = format!(
                "{}{}",
                crate::earn::AAVE_PREFIX,
                r["symbol"].as_str().unwrap_or_default()
            );
            if only.is_some_and(|o| !o.eq_ignore_ascii_case(&id)) || r["supplied"] == "0" {
                continue;
            }
            positions.push(json!({
                "opportunityId": id,
                "providerId": aave::PROVIDER,
                "pool": contract(client, aave::POOL)?,
                "asset": r["symbol"],
                "assets": r["supplied"],
                "usedAsCollateral": r["usedAsCollateral"],
            }));
        }
    }
    Ok(
        json!({"chainId": client.chain_id, "walletAddress": who, "providerId": provider, "positions": positions}),
    )
}

/// The actions this module plans or reads, and what a chain must have configured for each.
pub fn runs_on(action: &str, client: &ChainClient) -> bool {
    let s = &client.settings;
    match action {
        "transfer" | "get-token-balance" => true,
        "wrap-native" | "unwrap-native" => {
            s.tokens.contains_key("WETH") || s.contracts.contains_key("WETH9")
        }
        "swap" => {
            s.contracts.contains_key(V2_ROUTER)
                && (s.tokens.contains_key("WETH") || s.contracts.contains_key("WETH9"))
        }
        "swap-v3" => s.contracts.contains_key(V3_ROUTER) && s.contracts.contains_key(V3_QUOTER),
        "fx-swap" => {
            s.contracts.contains_key(V3_ROUTER)
                && s.contracts.contains_key(V3_QUOTER)
                && !s.fx_pairs.is_empty()
        }
        "deposit-earn-position" | "withdraw-earn-position" | "get-earn-position" => {
            !s.vaults.is_empty() || aave::configured(client)
        }
        "supply-lending"
        | "withdraw-lending"
        | "borrow"
        | "repay"
        | "set-collateral"
        | "get-lending-markets"
        | "get-lending-position" => aave::configured(client),
        "buy-prediction-outcome"
        | "sell-prediction-outcome"
        | "redeem-prediction-positions"
        | actiongate_core::orders::PLACE
        | "get-prediction-markets"
        | "get-prediction-positions" => ctf::configured(client),
        across::BRIDGE | "get-bridge-quote" | "check-bridge-status" | "get-bridge-tokens" => {
            across::configured(client)
        }
        _ => false,
    }
}

/// The EVM writes (lanes execute and buildTx) and reads (lane executeIntent, for the agent itself).
pub const WRITES: &[&str] = &[
    "transfer",
    "wrap-native",
    "unwrap-native",
    "swap",
    "swap-v3",
    "fx-swap",
    "deposit-earn-position",
    "withdraw-earn-position",
    "supply-lending",
    "withdraw-lending",
    "borrow",
    "repay",
    "set-collateral",
    "buy-prediction-outcome",
    "sell-prediction-outcome",
    "redeem-prediction-positions",
    actiongate_core::orders::PLACE,
    across::BRIDGE,
];
pub const READS: &[&str] = &[
    "get-token-balance",
    "get-earn-position",
    "get-lending-markets",
    "get-lending-position",
    "get-prediction-markets",
    "get-prediction-positions",
    "get-bridge-quote",
    "check-bridge-status",
    "get-bridge-tokens",
];
