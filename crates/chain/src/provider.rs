//! The EVM provider family: token transfers, wrapping, Uniswap V2 swaps and ERC-4626 vaults, sent
//! from the agent's execution wallet (lane `execute`) or built for a wallet to sign (lane
//! `buildTx`); token balances and vault positions read for the agent (lane `executeIntent`). An
//! action runs only on chains whose contracts it needs are configured.

use std::sync::Arc;

use actiongate_api_types::ErrorCode;
use actiongate_api_types::chain::{BuildTxData, UnsignedTransaction};
use actiongate_core::catalog::Lane;
use actiongate_core::clock::Clock;
use actiongate_core::crypto::Keyring;
use actiongate_core::error::Error;
use actiongate_core::execution::{ExecutionContext, ExecutionOutcome, Provider, Reconciled};
use actiongate_core::store::Store;
use alloy::primitives::{Address, B256};
use alloy::signers::local::PrivateKeySigner;
use async_trait::async_trait;

use crate::client::{ChainClient, ChainClients};
use crate::plan::{READS, WRITES, plan, read, runs_on};
use crate::sender::{AfterSend, WalletSender, fees, outcome_of, pending_nonce, quantity, simulate};

/// The EVM provider.
pub struct EvmProvider {
    clients: ChainClients,
    store: Arc<dyn Store>,
    keyring: Keyring,
    sender: WalletSender,
}

impl EvmProvider {
    pub fn new(clients: ChainClients, store: Arc<dyn Store>, clock: Arc<dyn Clock>, keyring: Keyring, after_send: Option<AfterSend>) -> Self {
        let sender = WalletSender::new(store.clone(), clock, clients.options.clone(), after_send);
        Self { clients, store, keyring, sender }
    }

    fn client(&self, chain_id: u64, action: &str) -> Result<&Arc<ChainClient>, Error> {
        self.clients.get(chain_id).filter(|c| runs_on(action, c)).ok_or_else(|| {
            Error::new(ErrorCode::ChainNotConfigured, format!("{action} is not configured on chain {chain_id} here (RPC URL and contracts)."))
        })
    }

    /// The agent's execution wallet, opened with the master key for this one use.
    async fn signer(&self, ctx: &ExecutionContext) -> Result<PrivateKeySigner, Error> {
        let sealed = self
            .store
            .agent_wallet_sealed(&ctx.agent_id)
            .await?
            .ok_or_else(|| Error::internal(format!("agent {} has no wallet", ctx.agent_id)))?;
        let key = self.keyring.open_wallet_key(&sealed, &ctx.agent_id)?;
        let signer = PrivateKeySigner::from_bytes(&B256::from(*key)).map_err(|_| Error::internal("a sealed wallet key is not a secp256k1 key"))?;
        if !ctx.agent_address.is_empty() && ctx.agent_address.parse::<Address>().ok() != Some(signer.address()) {
            return Err(Error::internal(format!("agent {}'s wallet key does not match its address", ctx.agent_id)));
        }
        Ok(signer)
    }

    async fn run(&self, ctx: &ExecutionContext) -> Result<ExecutionOutcome, Error> {
        let client = self.client(ctx.chain_id, &ctx.action)?;
        if READS.contains(&ctx.action.as_str()) {
            let wallet: Address = ctx.subject.wallet_address.parse().map_err(|_| Error::internal("the execution's wallet is not an address"))?;
            return Ok(ExecutionOutcome::read(read(client, &ctx.action, &ctx.params, wallet).await?));
        }
        if ctx.lane != Lane::Execute {
            return Err(Error::new(ErrorCode::NotAvailable, format!("{} runs from the agent wallet (execute) or as unsigned transactions (build-tx) here.", ctx.action)));
        }
        let signer = self.signer(ctx).await?;
        let from = signer.address();
        Ok(self.sender.execute(client, &signer, &ctx.execution_key, || plan(client, &ctx.action, &ctx.params, from)).await)
    }
}

#[async_trait]
impl Provider for EvmProvider {
    fn lanes(&self) -> Vec<(&'static str, Lane)> {
        let writes = WRITES.iter().flat_map(|a| [(*a, Lane::Execute), (*a, Lane::BuildTx)]);
        writes.chain(READS.iter().map(|a| (*a, Lane::ExecuteIntent))).collect()
    }

    fn chains(&self, action: &str) -> Option<Vec<u64>> {
        Some(self.clients.iter().filter(|c| runs_on(action, c)).map(|c| c.chain_id).collect())
    }

    async fn execute(&self, ctx: &ExecutionContext) -> ExecutionOutcome {
        self.run(ctx).await.unwrap_or_else(outcome_of)
    }

    async fn reconcile(&self, ctx: &ExecutionContext) -> Reconciled {
        if READS.contains(&ctx.action.as_str()) || ctx.lane != Lane::Execute {
            return Reconciled::NotSent;
        }
        let found = async {
            let client = self.client(ctx.chain_id, &ctx.action)?;
            let signer = self.signer(ctx).await?;
            self.sender.reconcile(client, &signer, &ctx.execution_key).await
        };
        match found.await {
            Ok(None) => Reconciled::NotSent,
            Ok(Some(outcome)) => Reconciled::Done(outcome),
            // Signed transactions may exist; never run again on a guess.
            Err(e) => Reconciled::Done(outcome_of(e)),
        }
    }

    async fn build_tx(&self, ctx: &ExecutionContext, wallet: Option<&str>) -> Result<BuildTxData, Error> {
        let client = self.client(ctx.chain_id, &ctx.action)?;
        let Some(wallet) = wallet else {
            return Err(Error::invalid(format!(
                "walletAddress is required for {}: its transactions depend on the signer's balances and allowances, and each is simulated from it.",
                ctx.action
            )));
        };
        let from: Address = wallet.parse().map_err(|_| Error::invalid(format!("walletAddress {wallet:?} is not a 0x address")))?;
        let plan = plan(client, &ctx.action, &ctx.params, from).await?;
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
        Ok(BuildTxData { chain_id: ctx.chain_id, from: Some(from.to_string()), transactions })
    }
}
