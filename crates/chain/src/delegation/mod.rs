//! ERC-7710 on the MetaMask Delegation Framework (v1.3.0): the `Delegation` and `Caveat` types
//! exactly as the framework hashes (EIP-712, domain `DelegationManager` version `1`) and encodes them,
//! the caveat terms each enforcer reads, signature checks (ECDSA for a codeless delegator, ERC-1271
//! for a smart account), the onchain checks, and the `redeemDelegations` call that runs an action's
//! calls from the delegator's account (ERC-7579 single-call mode, the delegation chain ABI-encoded as
//! the permission context).

use std::collections::BTreeMap;

use actiongate_api_types::ErrorCode;
use actiongate_api_types::delegation::{Delegation, TypedData};
use actiongate_core::chains::ChainSettings;
use actiongate_core::error::Error;
use alloy::primitives::{Address, B256, Bytes, U256};
use alloy::sol;
use alloy::sol_types::{Eip712Domain, SolCall, SolStruct, SolValue, eip712_domain};
use serde_json::json;

use crate::plan::Call;

mod caveats;
mod chains;

pub use caveats::*;
pub use chains::*;

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
pub(crate) const ERC1271_MAGIC: [u8; 4] = [0x16, 0x26, 0xba, 0x7e];

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
        "MultiTokenPeriodEnforcer",
        "0xFB2f1a9BD76d3701B730E5d69C3219D42D80eBb7",
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
pub(crate) const DEFAULT_CHAINS: [u64; 2] = [8453, 84532];
/// The enforcers this gateway encodes and decodes.
pub(crate) const ENFORCERS: [&str; 9] = [
    "AllowedTargetsEnforcer",
    "AllowedMethodsEnforcer",
    "ValueLteEnforcer",
    "ERC20TransferAmountEnforcer",
    "ERC20PeriodTransferEnforcer",
    "MultiTokenPeriodEnforcer",
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

pub(crate) fn invalid(message: impl Into<String>) -> Error {
    Error::new(ErrorCode::DelegationInvalid, message)
}

pub(crate) fn parse_address(field: &str, text: &str) -> Result<Address, Error> {
    text.parse()
        .map_err(|_| Error::invalid(format!("{field} {text:?} is not a 0x address")))
}

pub(crate) fn parse_hex(field: &str, text: &str) -> Result<Bytes, Error> {
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

/// One `redeemDelegations` running `calls` in order from the delegator's account under
/// `delegation`: a redemption for each call (each in the single-call mode every caveat enforcer
/// accepts, its caveats' hooks run around its own call), all in one transaction, so that they
/// succeed or revert together (an approval is never left behind by a swap that reverted), and a
/// user's execution takes one nonce of the agent wallet and one block.
pub fn redeem(framework: &Framework, delegation: &Parsed, calls: &[Call]) -> Call {
    let mut contexts = Vec::with_capacity(calls.len());
    let mut executions = Vec::with_capacity(calls.len());
    for call in calls {
        // A MultiTokenPeriodEnforcer caveat is told at redemption which of its tokens this call
        // moves: its args are the index (a uint256) of the call's token in its terms (args are not
        // signed), so each redemption carries its own.
        let mut delegation = delegation.clone();
        let moved = match call.data.is_empty() {
            true => Address::ZERO,
            false => call.to,
        };
        for (enforcer, terms, args) in &mut delegation.caveats {
            if framework.name_of(*enforcer) == Some("MultiTokenPeriodEnforcer") {
                // A token without an entry points at the first, whose token differs: the enforcer
                // refuses it with its own reason (a caveat's refusal), not an undecodable revert.
                let i = terms
                    .chunks_exact(116)
                    .position(|c| c[..20] == moved.as_slice()[..])
                    .unwrap_or(0);
                *args = Bytes::from(U256::from(i).to_be_bytes::<32>().to_vec());
            }
        }
        let mut execution = Vec::with_capacity(52 + call.data.len());
        execution.extend_from_slice(call.to.as_slice());
        execution.extend_from_slice(&call.value.to_be_bytes::<32>());
        execution.extend_from_slice(&call.data);
        contexts.push(delegation.permission_context());
        executions.push(execution.into());
    }
    let data = IDelegationManager::redeemDelegationsCall {
        modes: vec![SINGLE_DEFAULT_MODE; contexts.len()],
        permissionContexts: contexts,
        executionCallDatas: executions,
    }
    .abi_encode();
    let what: Vec<&str> = calls.iter().map(|c| c.description.as_str()).collect();
    Call {
        to: framework.manager,
        data: data.into(),
        value: U256::ZERO,
        description: format!(
            "redeem the delegation of {}: {}",
            delegation.delegator,
            what.join(", then ")
        ),
    }
}

// ------------------------------------------------------------------------------------------ caveats

pub(crate) fn typed_data(framework: &Framework, d: &Parsed) -> TypedData {
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

#[cfg(test)]
mod tests {
    use alloy::primitives::keccak256;

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
