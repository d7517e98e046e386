//! The EVM provider family: token transfers, wrapping, Uniswap V2 and V3 swaps and ERC-4626 vaults,
//! sent from the agent's execution wallet (lane `execute`), built for a wallet to sign (lane
//! `buildTx`), or run from each delegated user's smart account by redeeming the user's ERC-7710
//! delegation (lane `executeIntent`, fan-out); token balances and vault positions read for the agent
//! (lane `executeIntent`). An action runs only on chains whose contracts it needs are configured.

use std::collections::HashMap;
use std::sync::Arc;

use actiongate_api_types::ErrorCode;
use actiongate_api_types::chain::{BuildTxData, UnsignedTransaction};
use actiongate_api_types::venues::BlockingReason;
use actiongate_core::catalog::Lane;
use actiongate_core::clock::Clock;
use actiongate_core::crypto::Keyring;
use actiongate_core::error::Error;
use actiongate_core::execution::{
    ExecutionContext, ExecutionOutcome, HealthChange, HealthQuery, Provider, Reconciled, VenueCheck,
};
use actiongate_core::orders;
use actiongate_core::prices::Prices;
use actiongate_core::store::Store;
use alloy::primitives::{Address, B256};
use alloy::signers::local::PrivateKeySigner;
use async_trait::async_trait;
use serde_json::json;

use crate::client::{ChainClient, ChainClients};
use crate::delegation::{Framework, Parsed, is_disabled, redeem};
use crate::gather::Gather;
use crate::plan::across;
use crate::plan::ctf::{OrderFill, order_fill};
use crate::plan::{Plan, READS, WRITES, plan, read, readiness, runs_on};
use crate::sender::{SendHooks, WalletSender, fees, outcome_of, pending_nonce, quantity, simulate};

/// The EVM provider.
pub struct EvmProvider {
    clients: ChainClients,
    store: Arc<dyn Store>,
    keyring: Keyring,
    sender: WalletSender,
    prices: Arc<Prices>,
    /// An agent's sealed wallet key read once for the executions that ask at the same time (a
    /// fan-out's), which then go on together.
    sealed: Gather<String, (), Result<Option<Vec<u8>>, Error>>,
    /// Sealed wallet keys read lately, by agent: an agent keeps its wallet for life, so a fan-out's
    /// executions read the store once a minute, not each once (536 reads for 1,000 delegators).
    /// Only the sealed bytes are kept; a key is opened when used (`opened`).
    sealed_lately: std::sync::Mutex<HashMap<String, (tokio::time::Instant, Vec<u8>)>>,
    /// Wallet keys opened and still in use, by agent: the executions that run at the same time (a
    /// fan-out's) share one opening instead of each holding its own copy (each opening derives the
    /// key's public point with k256: a fifth of the gateway's samples in the 200 ms most of a
    /// fan-out of 1,000's executions started in), and none is kept once the last of them ends.
    opened: InUse<PrivateKeySigner>,
}

/// Values shared while in use, by key: whoever asks while another holds one gets that one; none is
/// kept once its last holder lets it go (only a weak reference stays, pruned as others are kept).
struct InUse<T>(std::sync::Mutex<HashMap<String, std::sync::Weak<T>>>);

impl<T> Default for InUse<T> {
    fn default() -> Self {
        Self(std::sync::Mutex::new(HashMap::new()))
    }
}

impl<T> InUse<T> {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<String, std::sync::Weak<T>>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// `key`'s value, while somebody holds it.
    fn get(&self, key: &str) -> Option<Arc<T>> {
        self.map().get(key).and_then(std::sync::Weak::upgrade)
    }

    /// Shares `value` under `key` for as long as somebody holds it.
    fn keep(&self, key: String, value: T) -> Arc<T> {
        let value = Arc::new(value);
        let mut map = self.map();
        map.retain(|_, held| held.strong_count() > 0);
        map.insert(key, Arc::downgrade(&value));
        value
    }
}

/// How long a sealed wallet key read from the store is used without reading it again.
const SEALED_FOR: std::time::Duration = std::time::Duration::from_secs(60);

impl EvmProvider {
    /// Takes up unmined gap fills on every chain ([`WalletSender::sweep_fills`]); a chain whose
    /// sweep fails is logged and the others go on. Answers how many were taken up.
    pub async fn sweep_fills(&self) -> usize {
        let mut swept = 0;
        for client in self.clients.iter() {
            match self.sender.sweep_fills(client).await {
                Ok(n) => swept += n,
                Err(e) => {
                    tracing::warn!(chain_id = client.chain_id, code = %e.code, "the gap fill sweep failed")
                }
            }
        }
        swept
    }

    pub fn new(
        clients: ChainClients,
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        keyring: Keyring,
        prices: Arc<Prices>,
        hooks: SendHooks,
    ) -> Self {
        let sender = WalletSender::new(store.clone(), clock, clients.options.clone(), hooks);
        Self {
            clients,
            store,
            keyring,
            sender,
            prices,
            sealed: Gather::new("wallets"),
            sealed_lately: Default::default(),
            opened: InUse::default(),
        }
    }

    fn client(&self, chain_id: u64, action: &str) -> Result<&Arc<ChainClient>, Error> {
        self.clients.get(chain_id).filter(|c| runs_on(action, c)).ok_or_else(|| {
            Error::new(ErrorCode::ChainNotConfigured, format!("{action} is not configured on chain {chain_id} here (RPC URL and contracts)."))
        })
    }

    fn sealed_lately(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<String, (tokio::time::Instant, Vec<u8>)>> {
        // Nothing panics while holding it; should something, the map is still whole.
        self.sealed_lately
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The agent's execution wallet, opened with the master key for this use (shared with the
    /// executions of the agent running meanwhile).
    async fn signer(&self, ctx: &ExecutionContext) -> Result<Arc<PrivateKeySigner>, Error> {
        if let Some(open) = self.opened.get(&ctx.agent_id) {
            return Ok(open);
        }
        let lately = self
            .sealed_lately()
            .get(&ctx.agent_id)
            .and_then(|(at, sealed)| (at.elapsed() < SEALED_FOR).then(|| sealed.clone()));
        let sealed = match lately {
            Some(sealed) => sealed,
            None => {
                let at = tokio::time::Instant::now();
                let sealed = self
                    .sealed
                    .one(ctx.agent_id.clone(), (), |asked| async move {
                        let read = self
                            .store
                            .agent_wallet_sealed(&ctx.agent_id)
                            .await
                            .map_err(Error::from);
                        asked.iter().map(|()| read.clone()).collect()
                    })
                    .await
                    .ok_or_else(|| Error::internal("a wallet read was dropped unanswered"))??
                    .ok_or_else(|| {
                        Error::internal(format!("agent {} has no wallet", ctx.agent_id))
                    })?;
                let mut lately = self.sealed_lately();
                lately.retain(|_, (read_at, _)| read_at.elapsed() < SEALED_FOR);
                lately.insert(ctx.agent_id.clone(), (at, sealed.clone()));
                sealed
            }
        };
        let key = self.keyring.open_wallet_key(&sealed, &ctx.agent_id)?;
        let signer = PrivateKeySigner::from_bytes(&B256::from(*key))
            .map_err(|_| Error::internal("a sealed wallet key is not a secp256k1 key"))?;
        if !ctx.agent_address.is_empty()
            && ctx.agent_address.parse::<Address>().ok() != Some(signer.address())
        {
            return Err(Error::internal(format!(
                "agent {}'s wallet key does not match its address",
                ctx.agent_id
            )));
        }
        Ok(self.opened.keep(ctx.agent_id.clone(), signer))
    }

    async fn run(&self, ctx: &ExecutionContext) -> Result<ExecutionOutcome, Error> {
        // A bridge's reads name their source chain (`fromChain`; the request's when omitted).
        let chain_id = match ctx.action.as_str() {
            "check-bridge-status" | "get-bridge-quote" => ctx
                .params
                .get("fromChain")
                .and_then(serde_json::Value::as_u64)
                .unwrap_or(ctx.chain_id),
            _ => ctx.chain_id,
        };
        if ctx.read && ctx.action == "get-bridge-tokens" {
            return Ok(ExecutionOutcome::read(
                across::routes(&self.clients, &ctx.params).await?,
            ));
        }
        let client = self.client(chain_id, &ctx.action)?;
        if ctx.read && ctx.action == "check-bridge-status" {
            return Ok(ExecutionOutcome::read(
                across::status(client, &self.clients, &ctx.params).await?,
            ));
        }
        if ctx.read {
            let wallet: Address = ctx
                .subject
                .wallet_address
                .parse()
                .map_err(|_| Error::internal("the execution's wallet is not an address"))?;
            return Ok(ExecutionOutcome::read(
                read(client, &ctx.action, &ctx.params, wallet).await?,
            ));
        }
        match ctx.lane {
            Lane::Execute if ctx.action == orders::PLACE => self.place_order(ctx, client).await,
            Lane::Execute => {
                let signer = self.signer(ctx).await?;
                let from = signer.address();
                let mut outcome = self
                    .sender
                    .execute(
                        client,
                        &signer,
                        from,
                        &ctx.execution_key,
                        ctx.lease.as_ref(),
                        || plan(client, &self.prices, &ctx.action, &ctx.params, from),
                    )
                    .await;
                with_deposit(&ctx.action, client, &mut outcome).await;
                Ok(outcome)
            }
            Lane::ExecuteIntent => {
                // A fan-out's users are planned side by side: their reads and simulations go to
                // the node together.
                let delegated = crate::plan::batch::gathered(self.delegated(ctx, client));
                let mut outcome = delegated.await?;
                with_deposit(&ctx.action, client, &mut outcome).await;
                Ok(outcome)
            }
            Lane::BuildTx => Err(Error::new(
                ErrorCode::NotAvailable,
                format!(
                    "{} is built with build-tx, not executed on that lane.",
                    ctx.action
                ),
            )),
        }
    }

    /// A prediction order from the agent's wallet ([`actiongate_core::orders`]): when the market
    /// meets its price now, the buy or sell that fills it (bounded to fill at or better than the
    /// price) goes through the wallet's sender under the order's execution key, like any write;
    /// when it does not, a held order (GTC, GTD) answers `held` and sends nothing, and a FOK or FAK
    /// order ends `ORDER_NOT_FILLED`.
    async fn place_order(
        &self,
        ctx: &ExecutionContext,
        client: &ChainClient,
    ) -> Result<ExecutionOutcome, Error> {
        let terms = orders::terms(&ctx.params)?;
        let held = terms.order_type.held();
        let waiting = |why: &str| {
            ExecutionOutcome::held(json!({
                "orderId": ctx.intent_id,
                "status": orders::OrderStatus::Open.as_str(),
                "waiting": why,
            }))
        };
        let signer = self.signer(ctx).await?;
        let from = signer.address();
        let fill = match order_fill(client, &ctx.params, from).await {
            // A held order outlives a node that does not answer: it is looked at again.
            Err(e) if held && crate::plan::ctf::transient(&e) => {
                tracing::warn!(
                    order_id = ctx.intent_id,
                    detail = e.detail.as_deref().unwrap_or(""),
                    "a held order's market could not be read; looking again"
                );
                return Ok(waiting("the market could not be read just now"));
            }
            other => other?,
        };
        let (action, params) = match fill {
            OrderFill::Now { action, params } => (action, params),
            OrderFill::Not(why) if held => return Ok(waiting(&why)),
            OrderFill::Not(why) => {
                return Ok(ExecutionOutcome::failed(
                    ErrorCode::OrderNotFilled,
                    format!(
                        "{} order {}: {why}; nothing was sent.",
                        terms.order_type.as_str(),
                        ctx.intent_id
                    ),
                ));
            }
        };
        let mut outcome = self
            .sender
            .execute(
                client,
                &signer,
                from,
                &ctx.execution_key,
                ctx.lease.as_ref(),
                || plan(client, &self.prices, action, &params, from),
            )
            .await;
        // The market moved between the look and the plan, which refused the bound before
        // anything was signed: a held order waits on.
        let refused_bound = !outcome.success
            && !outcome.pending
            && outcome.tx_hash.is_none()
            && outcome
                .error
                .as_ref()
                .is_some_and(|(code, _)| *code == ErrorCode::InvalidParams);
        if held && refused_bound {
            return Ok(waiting(
                "the market moved away from the price while the fill was planned",
            ));
        }
        if outcome.success
            && let Some(data) = outcome.data.as_mut()
        {
            data["orderId"] = json!(ctx.intent_id);
            data["status"] = json!(orders::OrderStatus::Filled.as_str());
            data["fill"] = json!({"action": action, "params": params});
        }
        Ok(outcome)
    }

    /// Fan-out: the action's calls run from the user's account as one `redeemDelegations`
    /// transaction (a redemption per call, all or none) sent by the agent wallet under the user's
    /// active delegation. Simulated first (the whole plan),
    /// so a caveat that refuses is this user's `DELEGATION_CAVEAT_REFUSED` and nothing is sent.
    async fn delegated(
        &self,
        ctx: &ExecutionContext,
        client: &ChainClient,
    ) -> Result<ExecutionOutcome, Error> {
        let framework = Framework::of(ctx.chain_id, &client.settings).ok_or_else(|| {
            Error::new(
                ErrorCode::ChainNotConfigured,
                format!(
                    "Chain {} has no DelegationManager configured.",
                    ctx.chain_id
                ),
            )
        })?;
        // The core resolved the delegation; the chain says whether it is still enabled.
        let grant = ctx
            .grant
            .as_ref()
            .ok_or_else(|| Error::internal("a fan-out execution without its grant"))?;
        let delegation = grant.delegation.as_ref().ok_or_else(|| {
            Error::new(
                ErrorCode::DelegationInvalid,
                format!("Delegation {} has no signed body here.", grant.hash),
            )
        })?;
        let parsed = Parsed::from_wire(delegation)?;
        let hash = parsed.hash();
        // The output goes to the delegator: the core refused other recipients before calling.
        let delegator = parsed.delegator;
        let signer = self.signer(ctx).await?;
        let outcome = self
            .sender
            .execute(
                client,
                &signer,
                delegator,
                &ctx.execution_key,
                ctx.lease.as_ref(),
                || async {
                    // Whether the delegator disabled the delegation onchain, read beside the plan's
                    // first reads (one round of a fan-out's gathered reads); a disabled one is the
                    // answer whatever the plan says, and nothing is sent.
                    let (disabled, p) = tokio::join!(
                        is_disabled(client, &framework, hash),
                        plan(client, &self.prices, &ctx.action, &ctx.params, delegator)
                    );
                    if disabled? {
                        return Err(Error::new(
                            ErrorCode::DelegationRevoked,
                            format!(
                                "{} disabled delegation {hash} onchain; skipped, nothing was sent.",
                                grant.delegator
                            ),
                        ));
                    }
                    let p = p?;
                    // The user's calls as one transaction of redemptions: all or none.
                    let calls = if p.calls.is_empty() {
                        Vec::new()
                    } else {
                        vec![redeem(&framework, &parsed, &p.calls)]
                    };
                    Ok(Plan {
                        calls,
                        summary: p.summary,
                    })
                },
            )
            .await;
        Ok(outcome)
    }
}

/// A bridge's execution result names its deposit, read from the mined deposit's receipt:
/// `data.bridge {depositId, fromChain, toChain, outputAmount, fillDeadline}` (other actions: as is).
async fn with_deposit(action: &str, client: &ChainClient, outcome: &mut ExecutionOutcome) {
    if action != across::BRIDGE {
        return;
    }
    let Some(hash) = outcome
        .tx_hash
        .as_deref()
        .filter(|_| outcome.success)
        .and_then(|h| h.parse::<B256>().ok())
    else {
        return;
    };
    match across::deposit_of_tx(client, hash).await {
        Ok(Some(d)) => {
            if let Some(data) = outcome.data.as_mut() {
                let output = data["plan"]["outputAmount"].clone();
                data["bridge"] = json!({
                    "bridge": across::PROVIDER,
                    "depositId": d.depositId.to_string(),
                    "fromChain": client.chain_id,
                    "toChain": u64::try_from(d.destinationChainId).unwrap_or(u64::MAX),
                    "outputAmount": output,
                    "fillDeadline": d.fillDeadline,
                });
            }
        }
        Ok(None) => {
            tracing::warn!(tx_hash = %hash, "a mined bridge deposit has no FundsDeposited event")
        }
        Err(e) => {
            tracing::warn!(tx_hash = %hash, error = %e.message, "the bridge deposit's receipt could not be read")
        }
    }
}

#[async_trait]
impl Provider for EvmProvider {
    fn lanes(&self) -> Vec<(&'static str, Lane)> {
        let writes = WRITES.iter().flat_map(|a| {
            [
                (*a, Lane::Execute),
                (*a, Lane::BuildTx),
                (*a, Lane::ExecuteIntent),
            ]
        });
        writes
            .chain(READS.iter().map(|a| (*a, Lane::ExecuteIntent)))
            .collect()
    }

    fn chains(&self, action: &str) -> Option<Vec<u64>> {
        Some(
            self.clients
                .iter()
                .filter(|c| runs_on(action, c))
                .map(|c| c.chain_id)
                .collect(),
        )
    }

    async fn execute(&self, ctx: &ExecutionContext) -> ExecutionOutcome {
        self.run(ctx).await.unwrap_or_else(outcome_of)
    }

    fn follows(&self, action: &str) -> bool {
        action == across::BRIDGE
    }

    /// A bridge's fill on its destination, read from both chains now (`check-bridge-status` of
    /// the deposit the execution recorded).
    async fn follow(
        &self,
        action: &str,
        chain_id: u64,
        data: &serde_json::Value,
    ) -> Result<Option<serde_json::Value>, Error> {
        let deposit = &data["bridge"]["depositId"];
        if action != across::BRIDGE || deposit.is_null() {
            return Ok(None);
        }
        let client = self.client(chain_id, action)?;
        // By the deposit's transaction (its receipt), not by its id (a log search of the whole
        // chain, which hosted nodes refuse); the id only when no transaction was recorded.
        let sent = data["transactions"].as_array().and_then(|t| t.last());
        let params = match sent {
            Some(tx) => json!({"fromChain": chain_id, "transactionHash": tx}),
            None => json!({"fromChain": chain_id, "depositId": deposit}),
        };
        across::status(client, &self.clients, &params)
            .await
            .map(Some)
    }

    async fn health_change(&self, q: &HealthQuery<'_>) -> Result<Option<HealthChange>, Error> {
        // An earn withdrawal from an Aave opportunity is a lending withdrawal.
        let routed = crate::plan::aave::as_lending(q.action, q.params);
        let (action, params) = match &routed {
            Some((a, p)) => (*a, p),
            None => (q.action, q.params),
        };
        if !crate::plan::aave::LOWERS_HEALTH.contains(&action) {
            return Ok(None);
        }
        let client = self.client(q.chain_id, action)?;
        let wallet = q
            .wallet
            .map(|w| {
                w.parse::<Address>()
                    .map_err(|_| Error::invalid(format!("walletAddress {w:?} is not a 0x address")))
            })
            .transpose()?;
        crate::plan::aave::health_change(client, action, params, wallet).await
    }

    async fn readiness(&self, check: &VenueCheck<'_>) -> Result<Vec<BlockingReason>, Error> {
        // A chain without a client is the core's CHAIN_NOT_CONFIGURED (the action's chains).
        let mut reasons = match self.clients.get(check.chain_id) {
            Some(client) => readiness(client, check).await?,
            None => return Ok(Vec::new()),
        };
        // A bridge's destination must be a chain this gateway reads (its fill is tracked there).
        let to = check
            .params
            .filter(|_| check.actions.contains(&across::BRIDGE))
            .and_then(|p| p.get("toChainId"))
            .and_then(serde_json::Value::as_u64);
        if let Some(to) = to
            && self.clients.get(to).is_none()
        {
            reasons.push(BlockingReason::new(
                actiongate_api_types::venues::BlockingCode::ChainNotConfigured,
                format!("Chain {to}, the bridge's destination, has no RPC URL here: its fill could not be tracked."),
                actiongate_api_types::venues::Fix {
                    text: format!("The operator sets [chains.{to}] rpc-url."),
                    ..actiongate_api_types::venues::Fix::default()
                },
            ));
        }
        Ok(reasons)
    }

    async fn reconcile(&self, ctx: &ExecutionContext) -> Reconciled {
        if ctx.read || ctx.lane == Lane::BuildTx {
            return Reconciled::NotSent;
        }
        let found = async {
            let client = self.client(ctx.chain_id, &ctx.action)?;
            let signer = self.signer(ctx).await?;
            let mut found = self
                .sender
                .reconcile(client, &signer, &ctx.execution_key, ctx.lease.as_ref())
                .await?;
            // A bridge found mined after a takeover names its deposit, as when it ran here.
            if let Some(outcome) = found.as_mut() {
                with_deposit(&ctx.action, client, outcome).await;
            }
            Ok::<_, Error>(found)
        };
        match found.await {
            Ok(None) => Reconciled::NotSent,
            Ok(Some(outcome)) => Reconciled::Done(outcome),
            // Signed transactions may exist; never run again on a guess.
            Err(e) => Reconciled::Done(outcome_of(e)),
        }
    }

    async fn build_tx(
        &self,
        ctx: &ExecutionContext,
        wallet: Option<&str>,
    ) -> Result<BuildTxData, Error> {
        let client = self.client(ctx.chain_id, &ctx.action)?;
        let Some(wallet) = wallet else {
            return Err(Error::invalid(format!(
                "walletAddress is required for {}: its transactions depend on the signer's balances and allowances, and each is simulated from it.",
                ctx.action
            )));
        };
        let from: Address = wallet
            .parse()
            .map_err(|_| Error::invalid(format!("walletAddress {wallet:?} is not a 0x address")))?;
        let plan = plan(client, &self.prices, &ctx.action, &ctx.params, from).await?;
        let gas = simulate(client, from, &plan.calls).await?;
        let (max_fee, priority) = fees(client).await?;
        let nonce = pending_nonce(client, from).await?;
        let transactions = plan
            .calls
            .iter()
            .zip(gas)
            .zip(nonce..)
            .map(|((c, gas), nonce)| UnsignedTransaction {
                to: c.to.to_string(),
                data: c.data.to_string(),
                value: quantity(c.value),
                gas: Some(quantity(gas)),
                max_fee_per_gas: Some(quantity(max_fee)),
                max_priority_fee_per_gas: Some(quantity(priority)),
                nonce: Some(quantity(nonce)),
                description: c.description.clone(),
            })
            .collect();
        Ok(BuildTxData {
            chain_id: ctx.chain_id,
            from: Some(from.to_string()),
            transactions,
        })
    }
}

#[cfg(test)]
mod tests {
    use actiongate_core::catalog::{BUILTIN_MANIFEST, Catalog, NothingImplemented};

    use std::sync::Arc;

    use super::{InUse, READS, WRITES};

    /// A value in use is shared; none is kept once its holders let it go.
    #[test]
    fn an_opened_key_is_shared_while_in_use_and_kept_by_nobody_after() {
        let opened: InUse<String> = InUse::default();
        assert!(opened.get("agent").is_none());
        let first = opened.keep("agent".into(), "key".into());
        let second = opened.get("agent").expect("shared while held");
        assert!(Arc::ptr_eq(&first, &second));
        assert!(opened.get("other").is_none(), "by key");
        drop((first, second));
        assert!(opened.get("agent").is_none(), "gone with its last holder");
        let again = opened.keep("agent".into(), "key".into());
        let _other = opened.keep("other".into(), "key".into());
        assert_eq!(opened.map().len(), 2);
        drop(again);
        let _third = opened.keep("third".into(), "key".into());
        assert_eq!(opened.map().len(), 2, "a key nobody holds is pruned");
    }

    /// What the EVM provider runs as a read or a write agrees with the catalog's classification.
    #[test]
    fn the_evm_reads_and_writes_are_the_catalogs() {
        let when = "2026-01-01T00:00:00Z".to_owned();
        let catalog = Catalog::from_manifest(BUILTIN_MANIFEST, when, &NothingImplemented)
            .expect("the built-in manifest loads");
        for a in READS {
            assert!(catalog.resolve(a).is_some_and(|s| s.is_read()), "{a}");
        }
        for a in WRITES {
            assert!(catalog.resolve(a).is_some_and(|s| !s.is_read()), "{a}");
        }
    }
}
