//! ERC-7710 on the MetaMask Delegation Framework (v1.3.0): the `Delegation` and `Caveat` types
//! exactly as the framework hashes (EIP-712, domain `DelegationManager` version `1`) and encodes them,
//! the caveat terms each enforcer reads, signature checks (ECDSA for a codeless delegator, ERC-1271
//! for a smart account), the onchain checks, and the `redeemDelegations` call that runs an action's
//! calls from the delegator's account (ERC-7579 single-call mode, the delegation chain ABI-encoded as
//! the permission context).

use std::collections::{BTreeMap, BTreeSet};

use actiongate_api_types::ErrorCode;
use actiongate_api_types::chain::UnsignedTransaction;
use actiongate_api_types::delegation::{
    Caveat, CaveatRequest, DecodedCaveat, Delegation, DelegationBalance, DelegationCreated,
    TokenBalance, TypedData, VerifyCheck,
};
use actiongate_core::chains::{ChainSettings, Chains};
use actiongate_core::delegations::{BuildDelegation, DelegationChain, Validated};
use actiongate_core::error::Error;
use alloy::primitives::{Address, B256, Bytes, U256, keccak256};
use alloy::providers::Provider;
use alloy::signers::Signature;
use alloy::sol;
use alloy::sol_types::{Eip712Domain, SolCall, SolStruct, SolValue, eip712_domain};
use async_trait::async_trait;
use serde_json::{Value, json};

use crate::amount::{format_units, parse_units};
use crate::bindings::IERC20;
use crate::client::{ChainClient, ChainClients};
use crate::plan::{Call, V2_ROUTER, V3_ROUTER, rpc_error};

/// The EIP-712 types the framework signs (no `args`, no `signature`: they are not signed).
pub mod eip712 {
    alloy::sol! {
        struct Caveat {
            address enforcer;
            bytes terms;
        }
        struct Delegation {
            address delegate;
            address delegator;
            bytes32 authority;
            Caveat[] caveats;
            uint256 salt;
        }
    }
}

sol! {
    /// The framework's `Caveat` and `Delegation` as the contracts take them.
    struct AbiCaveat {
        address enforcer;
        bytes terms;
        bytes args;
    }
    struct AbiDelegation {
        address delegate;
        address delegator;
        bytes32 authority;
        AbiCaveat[] caveats;
        uint256 salt;
        bytes signature;
    }

    interface IDelegationManager {
        function redeemDelegations(bytes[] calldata permissionContexts, bytes32[] calldata modes, bytes[] calldata executionCallDatas) external;
        function disableDelegation(AbiDelegation calldata delegation) external;
        function disabledDelegations(bytes32 delegationHash) external view returns (bool);
        function getDelegationHash(AbiDelegation calldata delegation) external pure returns (bytes32);
        function getDomainHash() external view returns (bytes32);
    }

    interface IERC1271 {
        function isValidSignature(bytes32 hash, bytes calldata signature) external view returns (bytes4);
    }

    interface ILimitedCallsEnforcer {
        function callCounts(address delegationManager, bytes32 delegationHash) external view returns (uint256);
    }

    interface IERC20TransferAmountEnforcer {
        function spentMap(address delegationManager, bytes32 delegationHash) external view returns (uint256);
    }
}

/// The ROOT authority: a delegation straight from its delegator.
pub const ROOT_AUTHORITY: B256 = B256::repeat_byte(0xff);
/// ERC-7579 mode: single call, default exec type.
pub const SINGLE_DEFAULT_MODE: B256 = B256::ZERO;
const ERC1271_MAGIC: [u8; 4] = [0x16, 0x26, 0xba, 0x7e];

/// The framework's published v1.3.0 deployment (the same addresses on Base and Base Sepolia).
pub const V1_3_0: &[(&str, &str)] = &[
    (
        "DelegationManager",
        "0xdb9B1e94B5b69Df7e401DDbedE43491141047dB3",
    ),
    (
        "AllowedMethodsEnforcer",
        "0x2c21fD0Cb9DC8445CB3fb0DC5E7Bb0Aca01842B5",
    ),
    (
        "AllowedTargetsEnforcer",
        "0x7F20f61b1f09b08D970938F6fa563634d65c4EeB",
    ),
    (
        "ERC20BalanceChangeEnforcer",
        "0xcdF6aB796408598Cea671d79506d7D48E97a5437",
    ),
    (
        "ERC20TransferAmountEnforcer",
        "0xf100b0819427117EcF76Ed94B358B1A5b5C6D2Fc",
    ),
    (
        "ERC20PeriodTransferEnforcer",
        "0x474e3Ae7E169e940607cC624Da8A15Eb120139aB",
    ),
    (
        "LimitedCallsEnforcer",
        "0x04658B29F6b82ed55274221a06Fc97D318E25416",
    ),
    (
        "TimestampEnforcer",
        "0x1046bb45C8d673d4ea75321280DB34899413c069",
    ),
    (
        "ValueLteEnforcer",
        "0x92Bf12322527cAA612fd31a0e810472BBB106A8F",
    ),
];
const DEFAULT_CHAINS: [u64; 2] = [8453, 84532];
/// The enforcers this gateway encodes and decodes.
const ENFORCERS: [&str; 8] = [
    "AllowedTargetsEnforcer",
    "AllowedMethodsEnforcer",
    "ValueLteEnforcer",
    "ERC20TransferAmountEnforcer",
    "ERC20PeriodTransferEnforcer",
    "ERC20BalanceChangeEnforcer",
    "TimestampEnforcer",
    "LimitedCallsEnforcer",
];

/// The framework's contracts on one chain.
#[derive(Debug, Clone, PartialEq)]
pub struct Framework {
    pub chain_id: u64,
    pub manager: Address,
    /// Enforcer address by name.
    pub enforcers: BTreeMap<&'static str, Address>,
}

impl Framework {
    /// From `[chains.<id>.contracts]`, else the published defaults on Base and Base Sepolia.
    pub fn of(chain_id: u64, settings: &ChainSettings) -> Option<Self> {
        let lookup = |name: &str| -> Option<Address> {
            match settings.contracts.get(name) {
                Some(a) => a.parse().ok(),
                None if DEFAULT_CHAINS.contains(&chain_id) => V1_3_0
                    .iter()
                    .find(|(n, _)| *n == name)
                    .and_then(|(_, a)| a.parse().ok()),
                None => None,
            }
        };
        let manager = lookup("DelegationManager")?;
        let enforcers = ENFORCERS
            .iter()
            .filter_map(|n| Some((*n, lookup(n)?)))
            .collect();
        Some(Self {
            chain_id,
            manager,
            enforcers,
        })
    }

    pub fn domain(&self) -> Eip712Domain {
        eip712_domain! {
            name: "DelegationManager",
            version: "1",
            chain_id: self.chain_id,
            verifying_contract: self.manager,
        }
    }

    fn enforcer(&self, name: &'static str) -> Result<Address, Error> {
        self.enforcers.get(name).copied().ok_or_else(|| {
            Error::new(
                ErrorCode::ChainNotConfigured,
                format!(
                    "{name} is not configured on chain {} ([chains.{}.contracts]).",
                    self.chain_id, self.chain_id
                ),
            )
        })
    }

    fn name_of(&self, enforcer: Address) -> Option<&'static str> {
        self.enforcers
            .iter()
            .find(|(_, a)| **a == enforcer)
            .map(|(n, _)| *n)
    }
}

fn invalid(message: impl Into<String>) -> Error {
    Error::new(ErrorCode::DelegationInvalid, message)
}

fn parse_address(field: &str, text: &str) -> Result<Address, Error> {
    text.parse()
        .map_err(|_| Error::invalid(format!("{field} {text:?} is not a 0x address")))
}

fn parse_hex(field: &str, text: &str) -> Result<Bytes, Error> {
    text.parse()
        .map_err(|_| invalid(format!("{field} is not 0x hex")))
}

/// A delegation from the wire, parsed.
#[derive(Debug, Clone)]
pub struct Parsed {
    pub delegate: Address,
    pub delegator: Address,
    pub authority: B256,
    pub caveats: Vec<(Address, Bytes, Bytes)>,
    pub salt: U256,
    pub signature: Bytes,
}

impl Parsed {
    pub fn from_wire(d: &Delegation) -> Result<Self, Error> {
        let caveats = d
            .caveats
            .iter()
            .enumerate()
            .map(|(i, c)| {
                Ok((
                    parse_address(&format!("caveats[{i}].enforcer"), &c.enforcer)?,
                    parse_hex(&format!("caveats[{i}].terms"), &c.terms)?,
                    parse_hex(&format!("caveats[{i}].args"), &c.args)?,
                ))
            })
            .collect::<Result<Vec<_>, Error>>()?;
        Ok(Self {
            delegate: parse_address("delegate", &d.delegate)?,
            delegator: parse_address("delegator", &d.delegator)?,
            authority: d
                .authority
                .parse()
                .map_err(|_| invalid("authority is not a 32-byte 0x hex"))?,
            caveats,
            salt: match d.salt.strip_prefix("0x") {
                Some(hex) => U256::from_str_radix(hex, 16),
                None => U256::from_str_radix(&d.salt, 10),
            }
            .map_err(|_| invalid("salt is not a uint256 (0x hex or decimal)"))?,
            signature: d
                .signature
                .as_deref()
                .map(|s| parse_hex("signature", s))
                .transpose()?
                .unwrap_or_default(),
        })
    }

    pub fn eip712(&self) -> eip712::Delegation {
        eip712::Delegation {
            delegate: self.delegate,
            delegator: self.delegator,
            authority: self.authority,
            caveats: self
                .caveats
                .iter()
                .map(|(e, t, _)| eip712::Caveat {
                    enforcer: *e,
                    terms: t.clone(),
                })
                .collect(),
            salt: self.salt,
        }
    }

    /// The framework's delegation hash (`getDelegationHash`: the EIP-712 struct hash).
    pub fn hash(&self) -> B256 {
        self.eip712().eip712_hash_struct()
    }

    /// The digest the delegator signs for `framework`'s chain.
    pub fn digest(&self, framework: &Framework) -> B256 {
        self.eip712().eip712_signing_hash(&framework.domain())
    }

    pub fn abi(&self) -> AbiDelegation {
        AbiDelegation {
            delegate: self.delegate,
            delegator: self.delegator,
            authority: self.authority,
            caveats: self
                .caveats
                .iter()
                .map(|(e, t, a)| AbiCaveat {
                    enforcer: *e,
                    terms: t.clone(),
                    args: a.clone(),
                })
                .collect(),
            salt: self.salt,
            signature: self.signature.clone(),
        }
    }

    /// The permission context of a redemption: the delegation chain (leaf first), ABI-encoded.
    pub fn permission_context(&self) -> Bytes {
        vec![self.abi()].abi_encode().into()
    }

    /// The end of its time window (TimestampEnforcer's "before" threshold), unix seconds.
    fn valid_until(&self, framework: &Framework) -> Option<u64> {
        let ts = framework.enforcers.get("TimestampEnforcer")?;
        self.caveats
            .iter()
            .filter(|(e, t, _)| e == ts && t.len() == 32)
            .filter_map(|(_, t, _)| {
                u64::try_from(u128::from_be_bytes(t[16..32].try_into().ok()?)).ok()
            })
            .filter(|b| *b != 0)
            .min()
    }
}

/// `redeemDelegations` running `call` from the delegator's account under `delegation`.
pub fn redeem_call(framework: &Framework, delegation: &Parsed, call: &Call) -> Call {
    let mut execution = Vec::with_capacity(52 + call.data.len());
    execution.extend_from_slice(call.to.as_slice());
    execution.extend_from_slice(&call.value.to_be_bytes::<32>());
    execution.extend_from_slice(&call.data);
    let data = IDelegationManager::redeemDelegationsCall {
        permissionContexts: vec![delegation.permission_context()],
        modes: vec![SINGLE_DEFAULT_MODE],
        executionCallDatas: vec![execution.into()],
    }
    .abi_encode();
    Call {
        to: framework.manager,
        data: data.into(),
        value: U256::ZERO,
        description: format!(
            "redeem the delegation of {}: {}",
            delegation.delegator, call.description
        ),
    }
}

// ------------------------------------------------------------------------------------------ caveats

fn selector(text: &str) -> Result<[u8; 4], Error> {
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

fn sel<C: SolCall>() -> [u8; 4] {
    C::SELECTOR
}

/// A token of the chain's list by symbol or address: (address, decimals, symbol).
fn listed_token(
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

fn token_amount(
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

fn action_scope(action: &str, settings: &ChainSettings) -> Result<Scope, Error> {
    use crate::bindings::{IERC4626, ISwapRouter02, IUniswapV2Router02, IWETH9};
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
        "swap-v3" => (
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
        "deposit-earn-position" | "withdraw-earn-position" => (
            [
                settings
                    .vaults
                    .values()
                    .filter_map(|a| a.parse().ok())
                    .collect::<Vec<_>>(),
                tokens,
            ]
            .concat(),
            vec![
                approve,
                sel::<IERC4626::depositCall>(),
                sel::<IERC4626::withdrawCall>(),
                sel::<IERC4626::redeemCall>(),
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
fn narrow<T: PartialEq>(derived: Option<Vec<T>>, asked: Option<Vec<T>>) -> Option<Vec<T>> {
    match (derived, asked) {
        (Some(d), Some(a)) => Some(d.into_iter().filter(|x| a.contains(x)).collect()),
        (d, a) => d.or(a),
    }
}

fn dedup<T: Ord + Clone>(v: Vec<T>) -> Vec<T> {
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
    match targets {
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
fn bind_delegator(caveats: &mut [Caveat], framework: &Framework, delegator: Address) {
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

/// Whether `terms` have the shape the named enforcer reads.
fn terms_fit(name: &str, t: &[u8]) -> bool {
    match name {
        "AllowedTargetsEnforcer" => !t.is_empty() && t.len().is_multiple_of(20),
        "AllowedMethodsEnforcer" => !t.is_empty() && t.len().is_multiple_of(4),
        "ValueLteEnforcer" | "LimitedCallsEnforcer" | "TimestampEnforcer" => t.len() == 32,
        "ERC20TransferAmountEnforcer" => t.len() == 52,
        "ERC20PeriodTransferEnforcer" => t.len() == 116,
        "ERC20BalanceChangeEnforcer" => t.len() == 73,
        _ => false,
    }
}

fn word(t: &[u8], i: usize) -> U256 {
    t.get(i..i + 32)
        .map(U256::from_be_slice)
        .unwrap_or_default()
}

fn token_json(settings: Option<&ChainSettings>, token: Address, amount: U256) -> Value {
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

fn typed_data(framework: &Framework, d: &Parsed) -> TypedData {
    TypedData {
        types: json!({
            "EIP712Domain": [
                {"name": "name", "type": "string"},
                {"name": "version", "type": "string"},
                {"name": "chainId", "type": "uint256"},
                {"name": "verifyingContract", "type": "address"},
            ],
            "Delegation": [
                {"name": "delegate", "type": "address"},
                {"name": "delegator", "type": "address"},
                {"name": "authority", "type": "bytes32"},
                {"name": "caveats", "type": "Caveat[]"},
                {"name": "salt", "type": "uint256"},
            ],
            "Caveat": [
                {"name": "enforcer", "type": "address"},
                {"name": "terms", "type": "bytes"},
            ],
        }),
        domain: json!({
            "name": "DelegationManager",
            "version": "1",
            "chainId": framework.chain_id,
            "verifyingContract": framework.manager.to_string(),
        }),
        primary_type: "Delegation".into(),
        message: json!({
            "delegate": d.delegate.to_string(),
            "delegator": d.delegator.to_string(),
            "authority": d.authority.to_string(),
            "caveats": d.caveats.iter().map(|(e, t, _)| json!({"enforcer": e.to_string(), "terms": t.to_string()})).collect::<Vec<_>>(),
            "salt": d.salt.to_string(),
        }),
    }
}

// ------------------------------------------------------------------------------ the chain side

/// The Delegation Framework on every configured chain (`DelegationChain` of the core).
pub struct FrameworkChains {
    chains: Chains,
    clients: ChainClients,
}

impl FrameworkChains {
    pub fn new(chains: Chains, clients: ChainClients) -> Self {
        Self { chains, clients }
    }

    pub fn framework(&self, chain_id: u64) -> Result<Framework, Error> {
        let settings = self.chains.get(chain_id).ok_or_else(|| {
            Error::new(
                ErrorCode::UnknownChain,
                format!("Chain {chain_id} is not one this gateway knows."),
            )
        })?;
        Framework::of(chain_id, settings)
            .ok_or_else(|| Error::new(ErrorCode::ChainNotConfigured, format!("Chain {chain_id} has no DelegationManager configured ([chains.{chain_id}.contracts]).")))
    }

    fn client(&self, chain_id: u64) -> Result<&ChainClient, Error> {
        self.clients
            .get(chain_id)
            .map(|c| c.as_ref())
            .ok_or_else(|| Error::new(ErrorCode::ChainNotConfigured, format!("Chain {chain_id} has no RPC URL here: its delegations cannot be read onchain.")))
    }

    /// The delegator's code, when the chain has an RPC URL to ask.
    async fn code_of(&self, chain_id: u64, delegator: Address) -> Result<Option<Bytes>, Error> {
        match self.clients.get(chain_id) {
            Some(client) => Ok(Some(
                client
                    .provider
                    .get_code_at(delegator)
                    .await
                    .map_err(|e| rpc_error(client, e))?,
            )),
            None => Ok(None),
        }
    }

    /// Whether `signature` is the delegator's over `digest`: ERC-1271 when it has code, else ECDSA.
    /// `code` is the delegator's code (`None`: the chain has no RPC URL).
    async fn signature_ok(
        &self,
        chain_id: u64,
        code: Option<&Bytes>,
        delegator: Address,
        digest: B256,
        signature: &Bytes,
    ) -> Result<(bool, &'static str), Error> {
        let ecdsa = Signature::try_from(signature.as_ref())
            .ok()
            .and_then(|s| s.recover_address_from_prehash(&digest).ok())
            == Some(delegator);
        match code {
            Some(code) if !code.is_empty() => {
                let client = self.client(chain_id)?;
                let call = IERC1271::isValidSignatureCall {
                    hash: digest,
                    signature: signature.clone(),
                };
                let req = alloy::rpc::types::TransactionRequest::default()
                    .to(delegator)
                    .input(call.abi_encode().into());
                let ok = match client.provider.call(req).await {
                    Ok(out) => IERC1271::isValidSignatureCall::abi_decode_returns(&out)
                        .is_ok_and(|m| m.0 == ERC1271_MAGIC),
                    Err(e) if e.as_error_resp().is_some() => false,
                    Err(e) => return Err(rpc_error(client, e)),
                };
                Ok((ok, "erc1271"))
            }
            Some(_) => Ok((ecdsa, "ecdsa")),
            None if ecdsa => Ok((true, "ecdsa")),
            None => Err(Error::new(
                ErrorCode::ChainNotConfigured,
                format!(
                    "The signature is not an ECDSA signature of {delegator}, and chain {chain_id} has no RPC URL to ask the account (ERC-1271)."
                ),
            )),
        }
    }

    async fn disabled(&self, chain_id: u64, hash: B256) -> Result<bool, Error> {
        is_disabled(self.client(chain_id)?, &self.framework(chain_id)?, hash).await
    }
}

/// Whether the chain's DelegationManager has the delegation disabled.
pub async fn is_disabled(
    client: &ChainClient,
    framework: &Framework,
    hash: B256,
) -> Result<bool, Error> {
    crate::plan::view(
        client,
        framework.manager,
        IDelegationManager::disabledDelegationsCall {
            delegationHash: hash,
        },
    )
    .await
}

#[async_trait]
impl DelegationChain for FrameworkChains {
    fn build(&self, req: &BuildDelegation) -> Result<DelegationCreated, Error> {
        let framework = self.framework(req.chain_id)?;
        let settings = self
            .chains
            .get(req.chain_id)
            .ok_or_else(|| Error::internal("a known chain has no settings"))?;
        let delegate = parse_address("delegate", &req.delegate)?;
        let delegator = parse_address("delegator", &req.delegator)?;
        if delegator == Address::ZERO || delegator == delegate {
            return Err(Error::invalid(
                "delegator must be the user's account, not zero and not the agent's own wallet",
            ));
        }
        let mut caveats = caveats_of(
            &framework,
            settings,
            req.action.as_deref(),
            &req.caveats,
            req.policy_native_cap_wei.as_deref(),
            req.now_secs,
        )?;
        bind_delegator(&mut caveats, &framework, delegator);
        let delegation = Delegation {
            delegate: delegate.to_string(),
            delegator: delegator.to_string(),
            authority: ROOT_AUTHORITY.to_string(),
            caveats,
            salt: B256::from(req.salt).to_string(),
            signature: None,
        };
        let parsed = Parsed::from_wire(&delegation)?;
        let caveats_decoded = parsed
            .caveats
            .iter()
            .map(|(e, t, _)| {
                let (kind, terms) = decode_caveat(&framework, Some(settings), *e, t);
                DecodedCaveat {
                    kind,
                    enforcer: e.to_string(),
                    terms,
                    used: None,
                }
            })
            .collect();
        Ok(DelegationCreated {
            delegation_hash: parsed.hash().to_string(),
            chain_id: req.chain_id,
            typed_data: typed_data(&framework, &parsed),
            delegation,
            caveats_decoded,
        })
    }

    async fn validate(
        &self,
        chain_id: u64,
        delegation: &Delegation,
        delegate: &str,
        now_secs: u64,
    ) -> Result<Validated, Error> {
        let framework = self.framework(chain_id)?;
        let d = Parsed::from_wire(delegation)?;
        if d.authority != ROOT_AUTHORITY {
            return Err(invalid(
                "Only a root delegation (authority 0xff…ff, straight from the delegator) is accepted here.",
            ));
        }
        if d.caveats.is_empty() {
            return Err(invalid(
                "A delegation without caveats grants every power of the account; it is not accepted.",
            ));
        }
        for (e, t, _) in &d.caveats {
            let Some(name) = framework.name_of(*e) else {
                return Err(invalid(format!(
                    "Enforcer {e} is not one of the framework's enforcers this gateway knows on chain {chain_id}."
                )));
            };
            if !terms_fit(name, t) {
                return Err(invalid(format!(
                    "The terms of the {name} caveat are not the shape that enforcer reads."
                )));
            }
        }
        let targets = framework.enforcers.get("AllowedTargetsEnforcer");
        if !d.caveats.iter().any(|(e, _, _)| Some(e) == targets) {
            return Err(invalid(
                "A delegation here names the contracts it may call (an AllowedTargetsEnforcer caveat).",
            ));
        }
        let agent: Address = delegate
            .parse()
            .map_err(|_| Error::internal("the agent's wallet address is not an address"))?;
        if d.delegate != agent {
            return Err(Error::new(
                ErrorCode::DelegationWrongDelegate,
                format!(
                    "The delegation is to {}, not to this agent's execution wallet {agent}.",
                    d.delegate
                ),
            ));
        }
        let expires = d.valid_until(&framework);
        if expires.is_some_and(|b| b <= now_secs) {
            return Err(Error::new(
                ErrorCode::DelegationExpired,
                "The delegation's time window has closed.",
            ));
        }
        if d.signature.is_empty() {
            return Err(Error::new(
                ErrorCode::DelegationSignatureInvalid,
                "The delegation carries no signature.",
            ));
        }
        let code = self.code_of(chain_id, d.delegator).await?;
        let (ok, kind) = self
            .signature_ok(
                chain_id,
                code.as_ref(),
                d.delegator,
                d.digest(&framework),
                &d.signature,
            )
            .await?;
        if !ok {
            // Signed for another chain's DelegationManager?
            for (&other, settings) in &self.chains.0 {
                let Some(fw) = Framework::of(other, settings).filter(|_| other != chain_id) else {
                    continue;
                };
                if matches!(
                    self.signature_ok(
                        chain_id,
                        code.as_ref(),
                        d.delegator,
                        d.digest(&fw),
                        &d.signature
                    )
                    .await,
                    Ok((true, _))
                ) {
                    return Err(Error::new(
                        ErrorCode::DelegationWrongChain,
                        format!(
                            "The delegation was signed for chain {other}'s DelegationManager, not chain {chain_id}'s."
                        ),
                    ));
                }
            }
            return Err(Error::new(
                ErrorCode::DelegationSignatureInvalid,
                format!(
                    "The signature is not {}'s signature of this delegation on chain {chain_id}.",
                    d.delegator
                ),
            ));
        }
        let hash = d.hash();
        if self.clients.get(chain_id).is_some() && self.disabled(chain_id, hash).await? {
            return Err(Error::new(
                ErrorCode::DelegationRevoked,
                "The delegator has disabled this delegation onchain.",
            ));
        }
        Ok(Validated {
            hash: hash.to_string(),
            delegator: d.delegator.to_string(),
            expires_at: expires,
            signature_kind: kind.into(),
        })
    }

    async fn verify(
        &self,
        chain_id: u64,
        delegation: &Delegation,
        now_secs: u64,
    ) -> Result<Vec<VerifyCheck>, Error> {
        let framework = self.framework(chain_id)?;
        let client = self.client(chain_id)?;
        let d = Parsed::from_wire(delegation)?;
        let check = |name: &str, ok: bool, detail: String| VerifyCheck {
            name: name.into(),
            ok,
            detail,
        };
        let mut checks = Vec::new();
        let manager_code = client
            .provider
            .get_code_at(framework.manager)
            .await
            .map_err(|e| rpc_error(client, e))?;
        checks.push(check(
            "delegationManager",
            !manager_code.is_empty(),
            format!(
                "DelegationManager {} on chain {chain_id}",
                framework.manager
            ),
        ));
        let code = client
            .provider
            .get_code_at(d.delegator)
            .await
            .map_err(|e| rpc_error(client, e))?;
        checks.push(check(
            "delegatorCode",
            !code.is_empty(),
            if code.is_empty() {
                format!(
                    "{} has no code: it cannot execute a redemption",
                    d.delegator
                )
            } else {
                format!("{} is a contract account", d.delegator)
            },
        ));
        let disabled = self.disabled(chain_id, d.hash()).await?;
        checks.push(check(
            "notDisabled",
            !disabled,
            if disabled {
                "disabledDelegations(hash) is true".into()
            } else {
                "disabledDelegations(hash) is false".into()
            },
        ));
        let (sig_ok, kind) = self
            .signature_ok(
                chain_id,
                Some(&code),
                d.delegator,
                d.digest(&framework),
                &d.signature,
            )
            .await?;
        checks.push(check(
            "signature",
            sig_ok,
            format!(
                "{kind} signature {}",
                if sig_ok { "valid" } else { "not valid" }
            ),
        ));
        let mut missing = Vec::new();
        for e in dedup(d.caveats.iter().map(|c| c.0).collect()) {
            if client
                .provider
                .get_code_at(e)
                .await
                .map_err(|err| rpc_error(client, err))?
                .is_empty()
            {
                missing.push(e.to_string());
            }
        }
        checks.push(check(
            "enforcersDeployed",
            missing.is_empty(),
            if missing.is_empty() {
                format!("{} enforcers have code", d.caveats.len())
            } else {
                format!("no code at {}", missing.join(", "))
            },
        ));
        let until = d.valid_until(&framework);
        checks.push(check(
            "timeWindow",
            until.is_none_or(|u| u > now_secs),
            until.map_or("no time window".into(), |u| {
                format!("valid until {u} (unix seconds)")
            }),
        ));
        Ok(checks)
    }

    async fn inspect(
        &self,
        chain_id: u64,
        delegation: &Delegation,
    ) -> Result<Vec<DecodedCaveat>, Error> {
        let framework = self.framework(chain_id)?;
        let settings = self.chains.get(chain_id);
        let d = Parsed::from_wire(delegation)?;
        let hash = d.hash();
        let client = self.clients.get(chain_id);
        let mut out = Vec::new();
        for (e, t, _) in &d.caveats {
            let (kind, terms) = decode_caveat(&framework, settings, *e, t);
            let used = match (kind.as_str(), client) {
                ("LimitedCallsEnforcer", Some(c)) => {
                    let n = crate::plan::view(
                        c,
                        *e,
                        ILimitedCallsEnforcer::callCountsCall {
                            delegationManager: framework.manager,
                            delegationHash: hash,
                        },
                    )
                    .await?;
                    Some(json!({"calls": n.to_string()}))
                }
                ("ERC20TransferAmountEnforcer", Some(c)) if t.len() == 52 => {
                    let spent = crate::plan::view(
                        c,
                        *e,
                        IERC20TransferAmountEnforcer::spentMapCall {
                            delegationManager: framework.manager,
                            delegationHash: hash,
                        },
                    )
                    .await?;
                    Some(
                        json!({"transferred": token_json(settings, Address::from_slice(&t[..20]), spent)}),
                    )
                }
                _ => None,
            };
            out.push(DecodedCaveat {
                kind,
                enforcer: e.to_string(),
                terms,
                used,
            });
        }
        Ok(out)
    }

    async fn balance(
        &self,
        chain_id: u64,
        delegation: &Delegation,
    ) -> Result<DelegationBalance, Error> {
        let framework = self.framework(chain_id)?;
        let client = self.client(chain_id)?;
        let settings = self.chains.get(chain_id);
        let d = Parsed::from_wire(delegation)?;
        let listed = |a: &Address| {
            settings.is_some_and(|s| {
                s.tokens
                    .values()
                    .any(|t| t.address.parse::<Address>().ok().as_ref() == Some(a))
            })
        };
        let mut tokens = Vec::new();
        for (e, t, _) in &d.caveats {
            match framework.name_of(*e) {
                Some("ERC20TransferAmountEnforcer" | "ERC20PeriodTransferEnforcer")
                    if t.len() >= 20 =>
                {
                    tokens.push(Address::from_slice(&t[..20]))
                }
                Some("ERC20BalanceChangeEnforcer") if t.len() == 73 => {
                    tokens.push(Address::from_slice(&t[1..21]))
                }
                Some("AllowedTargetsEnforcer") => tokens.extend(
                    t.chunks_exact(20)
                        .map(Address::from_slice)
                        .filter(|a| listed(a)),
                ),
                _ => {}
            }
        }
        let native = client
            .provider
            .get_balance(d.delegator)
            .await
            .map_err(|e| rpc_error(client, e))?;
        let mut out = Vec::new();
        for token in dedup(tokens) {
            let raw =
                crate::plan::view(client, token, IERC20::balanceOfCall { owner: d.delegator })
                    .await?;
            let v = token_json(settings, token, raw);
            out.push(TokenBalance {
                token: v["token"].as_str().unwrap_or_default().to_owned(),
                address: token.to_string(),
                raw: raw.to_string(),
                amount: v["amount"]
                    .as_str()
                    .map(str::to_owned)
                    .unwrap_or_else(|| raw.to_string()),
            });
        }
        Ok(DelegationBalance {
            delegation_hash: d.hash().to_string(),
            delegator: d.delegator.to_string(),
            chain_id,
            native: native.to_string(),
            tokens: out,
        })
    }

    fn revoke_tx(
        &self,
        chain_id: u64,
        delegation: &Delegation,
    ) -> Result<UnsignedTransaction, Error> {
        let framework = self.framework(chain_id)?;
        let d = Parsed::from_wire(delegation)?;
        Ok(UnsignedTransaction {
            to: framework.manager.to_string(),
            data: Bytes::from(
                IDelegationManager::disableDelegationCall {
                    delegation: d.abi(),
                }
                .abi_encode(),
            )
            .to_string(),
            value: "0x0".into(),
            gas: None,
            max_fee_per_gas: None,
            max_priority_fee_per_gas: None,
            nonce: None,
            description: format!(
                "{} disables delegation {} at the DelegationManager",
                d.delegator,
                d.hash()
            ),
        })
    }

    async fn is_disabled(&self, chain_id: u64, delegation_hash: &str) -> Result<bool, Error> {
        let hash: B256 = delegation_hash
            .parse()
            .map_err(|_| Error::invalid("delegationHash is not a 32-byte 0x hex"))?;
        self.disabled(chain_id, hash).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_typehash_is_the_frameworks() {
        // DELEGATION_TYPEHASH of the framework's EncoderLib.
        let expected = keccak256(
            "Delegation(address delegate,address delegator,bytes32 authority,Caveat[] caveats,uint256 salt)Caveat(address enforcer,bytes terms)",
        );
        let d = eip712::Delegation {
            delegate: Address::ZERO,
            delegator: Address::ZERO,
            authority: ROOT_AUTHORITY,
            caveats: vec![],
            salt: U256::ZERO,
        };
        assert_eq!(d.eip712_type_hash(), expected);
        assert_eq!(
            selector("approve(address,uint256)").ok(),
            Some([0x09, 0x5e, 0xa7, 0xb3])
        );
        assert_eq!(selector("0x095ea7b3").ok(), Some([0x09, 0x5e, 0xa7, 0xb3]));
        assert!(selector("approve").is_err());
    }
}
