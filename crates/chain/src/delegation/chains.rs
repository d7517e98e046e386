//! The chain side: the Delegation Framework on every configured chain, as the core's
//! `DelegationChain` (validate, verify, inspect, balances, revoke, disabled checks).

use actiongate_api_types::ErrorCode;
use actiongate_api_types::chain::UnsignedTransaction;
use actiongate_api_types::delegation::{
    DecodedCaveat, Delegation, DelegationBalance, DelegationCreated, TokenBalance, VerifyCheck,
};
use actiongate_core::chains::Chains;
use actiongate_core::delegations::{BuildDelegation, DelegationChain, Validated};
use actiongate_core::error::Error;
use alloy::primitives::{Address, B256, Bytes};
use alloy::providers::Provider;
use alloy::signers::Signature;
use alloy::sol_types::SolCall;
use async_trait::async_trait;
use serde_json::json;

use crate::bindings::IERC20;
use crate::client::{ChainClient, ChainClients};
use crate::delegation::{
    ERC1271_MAGIC, Framework, IDelegationManager, IERC20TransferAmountEnforcer, IERC1271,
    ILimitedCallsEnforcer, Parsed, ROOT_AUTHORITY, bind_delegator, caps_tokens, caveats_of, covers,
    decode_caveat, dedup, invalid, parse_address, terms_fit, token_json, typed_data,
};
use crate::plan::rpc_error;

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
        let settings = self.chains.known(chain_id)?;
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
    // At the latest block: only the delegator disables a delegation, never a transaction of ours
    // that might be pending (and a node may build its pending block for each call).
    let read = crate::plan::view(
        client,
        framework.manager,
        IDelegationManager::disabledDelegationsCall {
            delegationHash: hash,
        },
    );
    crate::plan::reading_at(alloy::eips::BlockId::latest(), read).await
}

#[async_trait]
impl DelegationChain for FrameworkChains {
    fn caps_tokens(&self, action: &str) -> bool {
        caps_tokens(action)
    }

    fn covers(&self, chain_id: u64, delegation: &Delegation, action: &str) -> bool {
        let (Ok(framework), Some(settings)) = (self.framework(chain_id), self.chains.get(chain_id))
        else {
            return false;
        };
        Parsed::from_wire(delegation)
            .is_ok_and(|d| covers(&framework, settings, &d.caveats, action))
    }

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
            req.policy_token_caps.as_deref(),
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
                Some("MultiTokenPeriodEnforcer") => {
                    tokens.extend(t.chunks_exact(116).map(|c| Address::from_slice(&c[..20])))
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
        Ok(UnsignedTransaction::call(
            framework.manager.to_string(),
            Bytes::from(
                IDelegationManager::disableDelegationCall {
                    delegation: d.abi(),
                }
                .abi_encode(),
            )
            .to_string(),
            format!(
                "{} disables delegation {} at the DelegationManager",
                d.delegator,
                d.hash()
            ),
        ))
    }

    async fn is_disabled(&self, chain_id: u64, delegation_hash: &str) -> Result<bool, Error> {
        let hash: B256 = delegation_hash
            .parse()
            .map_err(|_| Error::invalid("delegationHash is not a 32-byte 0x hex"))?;
        self.disabled(chain_id, hash).await
    }
}
