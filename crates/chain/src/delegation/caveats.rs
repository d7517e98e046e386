//! Caveats: the terms each enforcer reads, the caveats a policy's caps make (what an action may
//! call, which tokens and how much), and a caveat decoded back for a person to read.

use std::collections::BTreeSet;

use actiongate_api_types::ErrorCode;
use actiongate_api_types::delegation::{Caveat, CaveatRequest};
use actiongate_core::chains::ChainSettings;
use actiongate_core::error::Error;
use alloy::primitives::{Address, Bytes, U256, keccak256};
use alloy::sol_types::SolCall;
use serde_json::{Value, json};

use crate::amount::{format_units, parse_units};
use crate::bindings::IERC20;
use crate::delegation::{Framework, parse_address};
use crate::plan::{V2_ROUTER, V3_ROUTER};
use actiongate_core::delegations::TokenCap;

pub(crate) fn selector(text: &str) -> Result<[u8; 4], Error> {
    if let Some(hex) = text.strip_prefix("0x") {
        let bytes: Bytes = text
            .parse()
            .map_err(|_| Error::invalid(format!("method {hex:?} is not a 4-byte selector")))?;
        return bytes
            .as_ref()
            .try_into()
            .map_err(|_| Error::invalid(format!("method {text:?} is not a 4-byte selector")));
    }
    if !text.contains('(') || !text.ends_with(')') || text.contains(' ') {
        return Err(Error::invalid(format!(
            "method {text:?} is neither a 0x selector nor a signature such as approve(address,uint256)"
        )));
    }
    let hash = keccak256(text.as_bytes());
    Ok([hash[0], hash[1], hash[2], hash[3]])
}

pub(crate) fn sel<C: SolCall>() -> [u8; 4] {
    C::SELECTOR
}

/// A token of the chain's list by symbol or address: (address, decimals, symbol).
pub(crate) fn listed_token(
    settings: &ChainSettings,
    chain_id: u64,
    text: &str,
) -> Result<(Address, u8, String), Error> {
    let found = if text.starts_with("0x") {
        let addr = parse_address("token", text)?;
        settings
            .tokens
            .iter()
            .find(|(_, t)| t.address.parse::<Address>().ok() == Some(addr))
    } else {
        settings.tokens.get_key_value(&text.to_ascii_uppercase())
    };
    let (symbol, t) = found.ok_or_else(|| {
        Error::invalid(format!(
            "token {text:?} is not in chain {chain_id}'s token list"
        ))
    })?;
    let address = t
        .address
        .parse()
        .map_err(|_| Error::internal(format!("token {symbol} address is invalid")))?;
    Ok((address, t.decimals, symbol.clone()))
}

pub(crate) fn token_amount(
    settings: &ChainSettings,
    chain_id: u64,
    token: &str,
    amount: &str,
) -> Result<(Address, U256), Error> {
    let (address, decimals, _) = listed_token(settings, chain_id, token)?;
    let value = parse_units(amount, decimals)
        .map_err(|e| Error::invalid(format!("amount {amount:?} of {token} {e}")))?;
    Ok((address, value))
}

/// The contracts and functions an action calls on a chain, and whether a call may carry the native coin.
type Scope = (Vec<Address>, Vec<[u8; 4]>, bool);

pub(crate) fn action_scope(action: &str, settings: &ChainSettings) -> Result<Scope, Error> {
    use crate::bindings::{
        IAavePool, IERC4626, ISwapRouter02, IUniswapV2Router02, IWETH9, IWrappedTokenGateway,
    };
    let tokens: Vec<Address> = settings
        .tokens
        .values()
        .filter_map(|t| t.address.parse().ok())
        .collect();
    let contract = |name: &str| -> Result<Address, Error> {
        settings
            .contracts
            .get(name)
            .and_then(|a| a.parse().ok())
            .ok_or_else(|| {
                Error::new(
                    ErrorCode::ChainNotConfigured,
                    format!("{action} needs {name}, which this chain has not configured."),
                )
            })
    };
    let approve = sel::<IERC20::approveCall>();
    Ok(match action {
        "swap" => (
            [vec![contract(V2_ROUTER)?], tokens].concat(),
            vec![
                approve,
                sel::<IUniswapV2Router02::swapExactTokensForTokensCall>(),
                sel::<IUniswapV2Router02::swapExactTokensForETHCall>(),
                sel::<IUniswapV2Router02::swapExactETHForTokensCall>(),
            ],
            true,
        ),
        "swap-v3" | "fx-swap" => (
            [vec![contract(V3_ROUTER)?], tokens].concat(),
            vec![approve, sel::<ISwapRouter02::exactInputSingleCall>()],
            false,
        ),
        "transfer" => (tokens, vec![sel::<IERC20::transferCall>()], false),
        "wrap-native" | "unwrap-native" => {
            let weth = settings
                .tokens
                .get("WETH")
                .and_then(|t| t.address.parse().ok())
                .map_or_else(|| contract("WETH9"), Ok)?;
            (
                vec![weth],
                vec![sel::<IWETH9::depositCall>(), sel::<IWETH9::withdrawCall>()],
                action == "wrap-native",
            )
        }
        // The vaults, and Aave's pool where configured (an Aave opportunity routes to a supply or
        // a withdrawal there).
        "deposit-earn-position" | "withdraw-earn-position" => {
            let pool: Vec<Address> = settings
                .contracts
                .get(crate::plan::aave::POOL)
                .and_then(|a| a.parse().ok())
                .into_iter()
                .collect();
            let mut methods = vec![
                approve,
                sel::<IERC4626::depositCall>(),
                sel::<IERC4626::withdrawCall>(),
                sel::<IERC4626::redeemCall>(),
            ];
            if !pool.is_empty() {
                methods.push(sel::<IAavePool::supplyCall>());
                methods.push(sel::<IAavePool::withdrawCall>());
            }
            (
                [
                    settings
                        .vaults
                        .values()
                        .filter_map(|a| a.parse().ok())
                        .collect::<Vec<_>>(),
                    pool,
                    tokens,
                ]
                .concat(),
                methods,
                false,
            )
        }
        // The pool (and the WrappedTokenGateway, with the native coin, where configured) and the
        // listed tokens for the approval.
        "supply-lending" | "repay" => {
            let gateway: Vec<Address> = settings
                .contracts
                .get(crate::plan::aave::GATEWAY)
                .and_then(|a| a.parse().ok())
                .into_iter()
                .collect();
            let native = !gateway.is_empty();
            (
                [vec![contract(crate::plan::aave::POOL)?], gateway, tokens].concat(),
                match action {
                    "repay" => vec![
                        approve,
                        sel::<IAavePool::repayCall>(),
                        sel::<IWrappedTokenGateway::repayETHCall>(),
                    ],
                    _ => vec![
                        approve,
                        sel::<IAavePool::supplyCall>(),
                        sel::<IWrappedTokenGateway::depositETHCall>(),
                    ],
                },
                native,
            )
        }
        // The origin's Across spoke, and the listed tokens for the approval.
        crate::plan::across::BRIDGE => (
            [vec![contract(crate::plan::across::SPOKE)?], tokens].concat(),
            vec![
                approve,
                sel::<crate::bindings::IAcrossSpokePool::depositCall>(),
            ],
            false,
        ),
        other => {
            return Err(Error::invalid(format!(
                "{other} does not run under a delegation here; name allowedTargets and allowedMethods instead."
            )));
        }
    })
}

/// Asked-for lists narrow what the action needs; without an action they are the whole power.
pub(crate) fn narrow<T: PartialEq>(
    derived: Option<Vec<T>>,
    asked: Option<Vec<T>>,
) -> Option<Vec<T>> {
    match (derived, asked) {
        (Some(d), Some(a)) => Some(d.into_iter().filter(|x| a.contains(x)).collect()),
        (d, a) => d.or(a),
    }
}

pub(crate) fn dedup<T: Ord + Clone>(v: Vec<T>) -> Vec<T> {
    let mut seen = BTreeSet::new();
    v.into_iter().filter(|x| seen.insert(x.clone())).collect()
}

/// The caveats of a request, each encoded as its enforcer reads its terms.
pub fn caveats_of(
    framework: &Framework,
    settings: &ChainSettings,
    action: Option<&str>,
    req: &CaveatRequest,
    policy_native_cap_wei: Option<&str>,
    policy_token_caps: Option<&[TokenCap]>,
    now_secs: u64,
) -> Result<Vec<Caveat>, Error> {
    let chain_id = framework.chain_id;
    let scope = action.map(|a| action_scope(a, settings)).transpose()?;
    let asked_targets = req
        .allowed_targets
        .as_ref()
        .map(|t| {
            t.iter()
                .map(|a| parse_address("allowedTargets", a))
                .collect::<Result<Vec<_>, _>>()
        })
        .transpose()?;
    let asked_methods = req
        .allowed_methods
        .as_ref()
        .map(|m| m.iter().map(|s| selector(s)).collect::<Result<Vec<_>, _>>())
        .transpose()?;
    let targets = narrow(scope.as_ref().map(|s| s.0.clone()), asked_targets).map(dedup);
    let methods = narrow(scope.as_ref().map(|s| s.1.clone()), asked_methods).map(dedup);

    let mut out = Vec::new();
    let mut push = |name: &'static str, terms: Vec<u8>| -> Result<(), Error> {
        out.push(Caveat {
            enforcer: framework.enforcer(name)?.to_string(),
            terms: Bytes::from(terms).to_string(),
            args: "0x".into(),
        });
        Ok(())
    };
    match &targets {
        Some(t) if t.is_empty() => {
            return Err(Error::invalid(
                "caveats.allowedTargets leaves no contract the action calls.",
            ));
        }
        Some(t) => push(
            "AllowedTargetsEnforcer",
            t.iter().flat_map(|a| a.as_slice().to_vec()).collect(),
        )?,
        None => {
            return Err(Error::invalid(
                "A delegation here names the contracts it may call (an action, or caveats.allowedTargets).",
            ));
        }
    }
    match methods {
        Some(m) if m.is_empty() => {
            return Err(Error::invalid(
                "caveats.allowedMethods leaves no function the action calls.",
            ));
        }
        Some(m) => push("AllowedMethodsEnforcer", m.concat())?,
        None => {}
    }
    // An action that never sends the native coin gets a cap of zero; one that may, the policy's cap.
    let carries_value = scope.as_ref().is_some_and(|s| s.2);
    let max_value = match (&req.max_native_value, policy_native_cap_wei) {
        (Some(v), _) => v
            .parse::<U256>()
            .map_err(|_| Error::invalid("caveats.maxNativeValue is not a decimal number of wei"))?,
        (None, Some(cap)) if carries_value => cap
            .parse::<U256>()
            .map_err(|_| Error::internal("the policy's native cap is not a number"))?,
        (None, _) => U256::ZERO,
    };
    push("ValueLteEnforcer", max_value.to_be_bytes::<32>().to_vec())?;
    // A transfer moves at most the policy's per-action cap of each token it may call, per second
    // (a block's time: one redemption's worth), whatever is asked besides (asked caps only narrow).
    // A token the gateway could not price is left out, and the enforcer refuses its transfers.
    // (The deployed enforcer is told by the caveat's args which entry a redemption moves:
    // `redeem` sets them.)
    if action.is_some_and(caps_tokens) {
        let caps = policy_token_caps.unwrap_or_default();
        let allowed = targets.as_deref().unwrap_or_default();
        let mut terms = Vec::new();
        for cap in caps {
            let Ok(token) = cap.address.parse::<Address>() else {
                continue;
            };
            if allowed.contains(&token) {
                terms.extend_from_slice(token.as_slice());
                terms.extend_from_slice(&U256::from(cap.raw).to_be_bytes::<32>());
                terms.extend_from_slice(&U256::from(TRANSFER_CAP_PERIOD_SECS).to_be_bytes::<32>());
                terms.extend_from_slice(&U256::from(1u8).to_be_bytes::<32>());
            }
        }
        if terms.is_empty() {
            return Err(Error::new(
                ErrorCode::PriceUnavailable,
                format!(
                    "The gateway cannot price any token this transfer delegation may move on chain {chain_id}, so it cannot cap it at the policy's per-action cap; configure a price feed or a price."
                ),
            ));
        }
        push("MultiTokenPeriodEnforcer", terms)?;
    }
    // ERC20TransferAmount and ERC20PeriodTransfer admit only `transfer` calls on their token: with
    // any other action they would refuse every redemption (its approval included).
    if action.is_some_and(|a| a != "transfer")
        && (req.erc20_transfer_cap.is_some() || req.erc20_period_cap.is_some())
    {
        return Err(Error::invalid(
            "erc20TransferCap and erc20PeriodCap cap ERC-20 transfers; for this action use erc20SpendCaps.",
        ));
    }
    if let Some(cap) = &req.erc20_transfer_cap {
        let (token, amount) = token_amount(settings, chain_id, &cap.token, &cap.amount)?;
        push(
            "ERC20TransferAmountEnforcer",
            [token.as_slice(), &amount.to_be_bytes::<32>()].concat(),
        )?;
    }
    if let Some(cap) = &req.erc20_period_cap {
        let (token, amount) = token_amount(settings, chain_id, &cap.token, &cap.amount)?;
        if cap.period_seconds == 0 {
            return Err(Error::invalid(
                "caveats.erc20PeriodCap.periodSeconds must be above zero",
            ));
        }
        let start = cap.start_date.unwrap_or(now_secs).max(1);
        push(
            "ERC20PeriodTransferEnforcer",
            [
                token.as_slice(),
                &amount.to_be_bytes::<32>(),
                &U256::from(cap.period_seconds).to_be_bytes::<32>(),
                &U256::from(start).to_be_bytes::<32>(),
            ]
            .concat(),
        )?;
    }
    for cap in req.erc20_spend_caps.iter().flatten() {
        let (token, amount) = token_amount(settings, chain_id, &cap.token, &cap.amount)?;
        // changeType 1 = decrease: the delegator's balance may drop by at most `amount` per execution.
        // (v1.3.0 checks `after >= before - amount`: a cap above the delegator's balance at
        // redemption reverts with an arithmetic panic, so caps are asked for, never derived.)
        let delegator_placeholder = Address::ZERO;
        push(
            "ERC20BalanceChangeEnforcer",
            [
                &[1u8][..],
                token.as_slice(),
                delegator_placeholder.as_slice(),
                &amount.to_be_bytes::<32>(),
            ]
            .concat(),
        )?;
    }
    if req.valid_from.is_some() || req.valid_until.is_some() {
        let after = u128::from(req.valid_from.unwrap_or(0));
        let before = u128::from(req.valid_until.unwrap_or(0));
        if before != 0 && after >= before {
            return Err(Error::invalid(
                "caveats.validFrom must lie before validUntil",
            ));
        }
        push(
            "TimestampEnforcer",
            [after.to_be_bytes(), before.to_be_bytes()].concat(),
        )?;
    }
    if let Some(n) = req.max_calls {
        if n == 0 {
            return Err(Error::invalid("caveats.maxCalls must be above zero"));
        }
        push(
            "LimitedCallsEnforcer",
            U256::from(n).to_be_bytes::<32>().to_vec(),
        )?;
    }
    Ok(out)
}

/// Fills the delegator into the balance-change caveats (their recipient is the delegator).
pub(crate) fn bind_delegator(caveats: &mut [Caveat], framework: &Framework, delegator: Address) {
    let Some(bc) = framework.enforcers.get("ERC20BalanceChangeEnforcer") else {
        return;
    };
    for c in caveats
        .iter_mut()
        .filter(|c| c.enforcer.parse::<Address>().ok().as_ref() == Some(bc))
    {
        if let Ok(terms) = c.terms.parse::<Bytes>()
            && terms.len() == 73
        {
            let mut t = terms.to_vec();
            t[21..41].copy_from_slice(delegator.as_slice());
            c.terms = Bytes::from(t).to_string();
        }
    }
}

/// Whether a delegation for `action` carries a cap per token: MultiTokenPeriodEnforcer bounds
/// ERC-20 `transfer` calls (and bare native transfers) only, so a transfer does.
pub(crate) fn caps_tokens(action: &str) -> bool {
    action == "transfer"
}

/// The period of a transfer delegation's per-token cap: one second, so that the cap bounds what one
/// block (one redemption) moves.
pub const TRANSFER_CAP_PERIOD_SECS: u64 = 1;

/// Whether `terms` have the shape the named enforcer reads.
pub(crate) fn terms_fit(name: &str, t: &[u8]) -> bool {
    match name {
        "AllowedTargetsEnforcer" => !t.is_empty() && t.len().is_multiple_of(20),
        "AllowedMethodsEnforcer" => !t.is_empty() && t.len().is_multiple_of(4),
        "ValueLteEnforcer" | "LimitedCallsEnforcer" | "TimestampEnforcer" => t.len() == 32,
        "ERC20TransferAmountEnforcer" => t.len() == 52,
        "ERC20PeriodTransferEnforcer" => t.len() == 116,
        "MultiTokenPeriodEnforcer" => !t.is_empty() && t.len().is_multiple_of(116),
        "ERC20BalanceChangeEnforcer" => t.len() == 73,
        _ => false,
    }
}

pub(crate) fn word(t: &[u8], i: usize) -> U256 {
    t.get(i..i + 32)
        .map(U256::from_be_slice)
        .unwrap_or_default()
}

pub(crate) fn token_json(settings: Option<&ChainSettings>, token: Address, amount: U256) -> Value {
    let listed = settings.and_then(|s| {
        s.tokens
            .iter()
            .find(|(_, t)| t.address.parse::<Address>().ok() == Some(token))
    });
    match listed {
        Some((symbol, t)) => {
            json!({"token": symbol, "address": token.to_string(), "raw": amount.to_string(), "amount": format_units(amount, t.decimals)})
        }
        None => {
            json!({"token": token.to_string(), "address": token.to_string(), "raw": amount.to_string()})
        }
    }
}

/// Whether caveats that name targets or methods let `action` run on the chain: the contract it
/// calls (its router or vaults; a token for a transfer; WETH for wrapping) is among the allowed
/// targets, and its own method (not the approval before it) among the allowed methods. Caveats that
/// name neither allow every contract and method.
pub(crate) fn covers(
    framework: &Framework,
    settings: &ChainSettings,
    caveats: &[(Address, Bytes, Bytes)],
    action: &str,
) -> bool {
    let Ok((targets, selectors, _)) = action_scope(action, settings) else {
        return false;
    };
    let tokens: Vec<Address> = settings
        .tokens
        .values()
        .filter_map(|t| t.address.parse().ok())
        .collect();
    let own: Vec<Address> = match action {
        "transfer" | "wrap-native" | "unwrap-native" => targets,
        _ => targets
            .into_iter()
            .filter(|t| !tokens.contains(t))
            .collect(),
    };
    let approve = sel::<IERC20::approveCall>();
    let methods: Vec<[u8; 4]> = selectors.into_iter().filter(|s| *s != approve).collect();
    caveats
        .iter()
        .all(|(enforcer, t, _)| match framework.name_of(*enforcer) {
            Some(name @ "AllowedTargetsEnforcer") if terms_fit(name, t) => t
                .chunks_exact(20)
                .any(|c| own.contains(&Address::from_slice(c))),
            Some(name @ "AllowedMethodsEnforcer") if terms_fit(name, t) => t
                .chunks_exact(4)
                .any(|c| methods.iter().any(|m| m.as_slice() == c)),
            _ => true,
        })
}

/// A caveat's terms read back.
pub fn decode_caveat(
    framework: &Framework,
    settings: Option<&ChainSettings>,
    enforcer: Address,
    t: &[u8],
) -> (String, Value) {
    let Some(name) = framework.name_of(enforcer) else {
        return (
            "unknown".into(),
            json!({"raw": Bytes::copy_from_slice(t).to_string()}),
        );
    };
    let terms = match name {
        "AllowedTargetsEnforcer" if terms_fit(name, t) => {
            json!({"targets": t.chunks_exact(20).map(|c| Address::from_slice(c).to_string()).collect::<Vec<_>>()})
        }
        "AllowedMethodsEnforcer" if terms_fit(name, t) => {
            json!({"selectors": t.chunks_exact(4).map(|c| Bytes::copy_from_slice(c).to_string()).collect::<Vec<_>>()})
        }
        "ValueLteEnforcer" => json!({"maxValueWei": word(t, 0).to_string()}),
        "ERC20TransferAmountEnforcer" if t.len() == 52 => {
            json!({"cap": token_json(settings, Address::from_slice(&t[..20]), word(t, 20))})
        }
        "ERC20PeriodTransferEnforcer" if t.len() == 116 => json!({
            "perPeriod": token_json(settings, Address::from_slice(&t[..20]), word(t, 20)),
            "periodSeconds": word(t, 52).to_string(),
            "startDate": word(t, 84).to_string(),
        }),
        "MultiTokenPeriodEnforcer" if terms_fit(name, t) => json!({
            "perPeriod": t.chunks_exact(116).map(|c| json!({
                "cap": token_json(settings, Address::from_slice(&c[..20]), word(c, 20)),
                "periodSeconds": word(c, 52).to_string(),
                "startDate": word(c, 84).to_string(),
            })).collect::<Vec<_>>(),
        }),
        "ERC20BalanceChangeEnforcer" if t.len() == 73 => json!({
            "change": if t[0] == 1 { "decrease" } else { "increase" },
            "recipient": Address::from_slice(&t[21..41]).to_string(),
            "limit": token_json(settings, Address::from_slice(&t[1..21]), word(t, 41)),
        }),
        "TimestampEnforcer" if t.len() == 32 => json!({
            "validFrom": u128::from_be_bytes(t[..16].try_into().unwrap_or_default()).to_string(),
            "validUntil": u128::from_be_bytes(t[16..].try_into().unwrap_or_default()).to_string(),
        }),
        "LimitedCallsEnforcer" => json!({"maxCalls": word(t, 0).to_string()}),
        _ => json!({"raw": Bytes::copy_from_slice(t).to_string(), "malformed": true}),
    };
    (name.to_owned(), terms)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use actiongate_api_types::ErrorCode;
    use actiongate_core::chains::Token;

    use super::*;

    const USDC: &str = "0x00000000000000000000000000000000000000C1";
    const EURC: &str = "0x00000000000000000000000000000000000000E1";

    fn setup() -> (Framework, ChainSettings) {
        let token = |address: &str| Token {
            address: address.into(),
            decimals: 6,
        };
        let settings = ChainSettings {
            name: "test".into(),
            rpc_url: None,
            tokens: BTreeMap::from([("USDC".into(), token(USDC)), ("EURC".into(), token(EURC))]),
            contracts: BTreeMap::new(),
            vaults: BTreeMap::new(),
            price_feeds: BTreeMap::new(),
            price_pools: BTreeMap::new(),
            fx_pairs: vec![],
            prediction_questions: BTreeMap::new(),
            bridge_routes: BTreeMap::new(),
            fanout_check: Default::default(),
            hand_over: Default::default(),
        };
        let framework = Framework::of(84532, &settings).unwrap_or_else(|| panic!("defaults"));
        (framework, settings)
    }

    fn kinds(caveats: &[Caveat], framework: &Framework) -> Vec<&'static str> {
        caveats
            .iter()
            .filter_map(|c| framework.name_of(c.enforcer.parse().ok()?))
            .collect()
    }

    /// A delegation built for an action covers that action, not one that calls other contracts or
    /// methods; one without target or method caveats covers every action.
    #[test]
    fn a_delegation_covers_the_actions_its_caveats_allow() {
        let (framework, mut settings) = setup();
        settings.contracts.insert(
            V2_ROUTER.into(),
            "0x00000000000000000000000000000000000000A2".into(),
        );
        let wire = |caveats: &[Caveat]| -> Vec<(Address, Bytes, Bytes)> {
            caveats
                .iter()
                .map(|c| {
                    (
                        c.enforcer.parse().unwrap_or_default(),
                        c.terms.parse().unwrap_or_default(),
                        Bytes::new(),
                    )
                })
                .collect()
        };
        // A transfer delegation carries the policy's cap per token.
        let caps = [TokenCap {
            address: USDC.into(),
            raw: 1_000_000,
        }];
        let built = |action: &str| {
            caveats_of(
                &framework,
                &settings,
                Some(action),
                &CaveatRequest::default(),
                None,
                Some(&caps),
                0,
            )
            .unwrap_or_else(|e| panic!("{e:?}"))
        };
        let swap = wire(&built("swap"));
        assert!(covers(&framework, &settings, &swap, "swap"));
        // A swap delegation allows the tokens' approve, not their transfer.
        assert!(!covers(&framework, &settings, &swap, "transfer"));
        let transfer = wire(&built("transfer"));
        assert!(covers(&framework, &settings, &transfer, "transfer"));
        assert!(!covers(&framework, &settings, &transfer, "swap"));
        assert!(covers(&framework, &settings, &[], "swap"));
        // An action with no scope on this chain (no router configured) is covered by nothing.
        assert!(!covers(&framework, &settings, &[], "swap-v3"));
    }

    #[test]
    fn a_transfer_delegation_carries_the_policys_cap_per_token() {
        let (framework, settings) = setup();
        // Only USDC could be priced: 100 USDC.
        let caps = [TokenCap {
            address: USDC.into(),
            raw: 100_000_000,
        }];
        let req = CaveatRequest::default();
        let caveats = caveats_of(
            &framework,
            &settings,
            Some("transfer"),
            &req,
            None,
            Some(&caps),
            0,
        )
        .unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(
            kinds(&caveats, &framework),
            [
                "AllowedTargetsEnforcer",
                "AllowedMethodsEnforcer",
                "ValueLteEnforcer",
                "MultiTokenPeriodEnforcer"
            ]
        );
        let terms: Bytes = caveats[3].terms.parse().unwrap_or_default();
        let expected = [
            USDC.parse::<Address>().unwrap_or_default().as_slice(),
            &U256::from(100_000_000u64).to_be_bytes::<32>(),
            &U256::from(TRANSFER_CAP_PERIOD_SECS).to_be_bytes::<32>(),
            &U256::from(1u8).to_be_bytes::<32>(),
        ]
        .concat();
        assert_eq!(terms.to_vec(), expected, "EURC, unpriced, is left out");
        // Read back as people see it.
        let enforcer = caveats[3].enforcer.parse().unwrap_or_default();
        let (kind, decoded) = decode_caveat(&framework, Some(&settings), enforcer, &terms);
        assert_eq!(kind, "MultiTokenPeriodEnforcer");
        assert_eq!(
            decoded["perPeriod"][0]["cap"]["amount"],
            json!("100"),
            "{decoded}"
        );
        // Asked caps narrow, they do not replace it.
        let asked = CaveatRequest {
            erc20_transfer_cap: Some(actiongate_api_types::delegation::TokenCap {
                token: "USDC".into(),
                amount: "5".into(),
            }),
            ..CaveatRequest::default()
        };
        let caveats = caveats_of(
            &framework,
            &settings,
            Some("transfer"),
            &asked,
            None,
            Some(&caps),
            0,
        )
        .unwrap_or_else(|e| panic!("{e:?}"));
        let k = kinds(&caveats, &framework);
        assert!(
            k.contains(&"MultiTokenPeriodEnforcer") && k.contains(&"ERC20TransferAmountEnforcer"),
            "{k:?}"
        );
        // Nothing priced: no uncapped transfer delegation is built.
        let none = caveats_of(
            &framework,
            &settings,
            Some("transfer"),
            &req,
            None,
            Some(&[]),
            0,
        );
        assert_eq!(
            none.map_err(|e| e.code).err(),
            Some(ErrorCode::PriceUnavailable)
        );
        // A swap's calls are not transfers: no such caveat (its ERC-20 bound is asked for).
        let swap_settings = ChainSettings {
            contracts: BTreeMap::from([(
                V2_ROUTER.into(),
                "0x00000000000000000000000000000000000000AA".into(),
            )]),
            ..settings.clone()
        };
        let caveats = caveats_of(
            &framework,
            &swap_settings,
            Some("swap"),
            &req,
            None,
            Some(&caps),
            0,
        )
        .unwrap_or_else(|e| panic!("{e:?}"));
        assert!(!kinds(&caveats, &framework).contains(&"MultiTokenPeriodEnforcer"));
    }
}
