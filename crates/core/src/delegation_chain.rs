//! The delegation port: what the core asks of the Delegation Framework on a chain (build,
//! validate, verify, inspect, balances, revoke, disabled checks). `actiongate-chain` implements it;
//! the use cases are in [`crate::delegations`].

use actiongate_api_types::chain::UnsignedTransaction;
use actiongate_api_types::delegation::{
    CaveatRequest, DecodedCaveat, Delegation, DelegationBalance, DelegationCreated, VerifyCheck,
};
use async_trait::async_trait;

use crate::error::Result;

/// What `create` asks the chain layer to build.
#[derive(Debug, Clone)]
pub struct BuildDelegation {
    pub chain_id: u64,
    /// The agent's execution wallet.
    pub delegate: String,
    pub delegator: String,
    /// Canonical action name whose contracts and functions the caveats allow.
    pub action: Option<String>,
    pub caveats: CaveatRequest,
    /// The policy's per-action cap in wei: the native value cap of an action that sends the native
    /// coin, unless `caveats.maxNativeValue` says otherwise.
    pub policy_native_cap_wei: Option<String>,
    /// The policy's per-action cap in each listed token the gateway can price (smallest units):
    /// what one ERC-20 transfer may move, whatever caps are asked for besides. `None` when the
    /// action has no cap (a read); empty when it has one but no token could be priced.
    pub policy_token_caps: Option<Vec<TokenCap>>,
    pub salt: [u8; 32],
    /// The gateway clock's now, unix seconds (the default start of a periodic cap).
    pub now_secs: u64,
}

/// A cap in one token: its address and an amount in its smallest units.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenCap {
    pub address: String,
    pub raw: u128,
}

/// A signed delegation that passed every check of `activate`.
#[derive(Debug, Clone, PartialEq)]
pub struct Validated {
    pub hash: String,
    /// Checksummed.
    pub delegator: String,
    /// Unix seconds, from its time window caveat.
    pub expires_at: Option<u64>,
    /// `ecdsa` or `erc1271`.
    pub signature_kind: String,
}

/// The framework's encoding, hashing, signatures and onchain reads.
#[async_trait]
pub trait DelegationChain: Send + Sync + 'static {
    /// Builds the unsigned delegation and its typed data.
    fn build(&self, req: &BuildDelegation) -> Result<DelegationCreated>;
    /// Whether a delegation for `action` carries a cap per token (the framework can bound each
    /// token that action moves); the core prices the chain's tokens for it only then.
    fn caps_tokens(&self, action: &str) -> bool;
    /// Checks a signed delegation for `chain_id` and `delegate`: shape, authority, enforcers, time
    /// window, and the delegator's signature (ECDSA, or ERC-1271 onchain for a smart account).
    async fn validate(
        &self,
        chain_id: u64,
        delegation: &Delegation,
        delegate: &str,
        now_secs: u64,
    ) -> Result<Validated>;
    /// The onchain checks of `verify`; the one named `notDisabled` tells a revocation.
    async fn verify(
        &self,
        chain_id: u64,
        delegation: &Delegation,
        now_secs: u64,
    ) -> Result<Vec<VerifyCheck>>;
    /// The caveats decoded, with what was used of them where the enforcer keeps count.
    async fn inspect(&self, chain_id: u64, delegation: &Delegation) -> Result<Vec<DecodedCaveat>>;
    /// What the delegator holds of the native coin and of the tokens the caveats name.
    async fn balance(&self, chain_id: u64, delegation: &Delegation) -> Result<DelegationBalance>;
    /// The `disableDelegation` call the delegator account makes.
    fn revoke_tx(&self, chain_id: u64, delegation: &Delegation) -> Result<UnsignedTransaction>;
    /// Whether a delegation lets the agent call what `action` calls on the chain: its allowed
    /// targets (if it names any) include the contract the action calls, and its allowed methods (if
    /// it names any) the action's method. Decoded from the delegation alone; no chain read.
    fn covers(&self, chain_id: u64, delegation: &Delegation, action: &str) -> bool;
    /// Whether the DelegationManager has the delegation disabled.
    async fn is_disabled(&self, chain_id: u64, delegation_hash: &str) -> Result<bool>;
}
