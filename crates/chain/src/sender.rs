//! Sending from a wallet the gateway holds, with a nonce manager persisted in the database.
//!
//! For one execution: the plan is made and simulated as a whole (`eth_simulateV1`, state carried from
//! call to call) under the lock of the account whose state it reads (the wallet itself, or the user a
//! fan-out acts for), held until its transactions are handed to the node, so that the next plan of
//! that account sees them; a call that would revert is refused and the wallet's nonce does not move.
//! Then, under the sending wallet's lock (held only that long, so that executions for different users
//! plan and wait side by side and send one after another), one database transaction reserves its
//! nonces, signs every transaction at them and records the signed bytes (all or none) before the
//! first is sent.
//! After a crash an execution is therefore in one of two states, each with one safe next step:
//! nothing reserved (run it), or signed (it may have been sent: re-send the same bytes, which cannot
//! pay twice, and wait for the receipt); rows reserved but unsigned (left by an older version) are
//! given back. A transaction that stays unmined is re-signed at the same nonce with higher fees.
//!
//! A signed transaction is never given up on: past the receipt wait the execution is answered
//! `pending` with its hash, not failed, and whoever takes the execution up again (the intent runner,
//! on any process, under the intent's lease; an x402 retry) re-sends and bumps it until it is mined.
//! An execution run under an intent's lease reserves and records what it signs only while the lease
//! holds, in the same database transaction (`reserve_signed` and `record_signed_txs` with the
//! fence): a worker that lost its lease sends nothing.

use std::sync::Arc;

use actiongate_api_types::ErrorCode;
use actiongate_core::clock::{Clock, to_millis};
use actiongate_core::error::Error;
use actiongate_core::execution::ExecutionOutcome;
use actiongate_core::states::ChainTxState;
use actiongate_core::store::{
    ChainTxRecord, LeaseFence, MinedTx, NonceRequest, Reservation, SignedTx, Store, StoreError,
    StoreErrorKind,
};
use alloy::consensus::{SignableTransaction, TxEip1559, TxEnvelope};
use alloy::eips::eip2718::{Decodable2718, Encodable2718};
use alloy::eips::{BlockId, BlockNumberOrTag};
use alloy::network::{TransactionBuilder, TxSignerSync};
use alloy::primitives::{Address, B256, TxKind};
use alloy::providers::Provider;
use alloy::rpc::types::simulate::{SimBlock, SimulatePayload};
use alloy::rpc::types::{BlockOverrides, TransactionRequest};
use alloy::signers::local::PrivateKeySigner;
use serde_json::json;

use crate::client::{ChainClient, ChainOptions};
use crate::locks::KeyedLocks;
use crate::plan::{Call, Plan, rpc_error};
use crate::revert;

/// Gas limit headroom over the simulated gas use, in percent.
const GAS_HEADROOM_PERCENT: u64 = 30;
/// How far ahead of the latest block the simulated block is dated.
const SIMULATED_BLOCK_AHEAD_SECONDS: u64 = 12;

/// Runs right after a transaction is handed to the node and before anything is recorded (tests use
/// it to kill the process in that window).
pub type AfterSend = Arc<dyn Fn() + Send + Sync>;

/// Runs once an execution has the wallet's turn, right before its nonces are reserved and its
/// transactions signed, with the execution key (tests take the intent's lease away in that window).
pub type BeforeReserve =
    Arc<dyn Fn(&str) -> std::pin::Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync>;

/// Fault-injection points of the sender, for tests; none in a real deployment.
#[derive(Clone, Default)]
pub struct SendHooks {
    pub before_reserve: Option<BeforeReserve>,
    pub after_send: Option<AfterSend>,
}

/// Simulates `calls` from `from`, in order, with state carried between them; answers each call's gas
/// limit (its gas use plus headroom), or `EXECUTION_REVERTED` with the decoded reason.
pub async fn simulate(
    client: &ChainClient,
    from: Address,
    calls: &[Call],
) -> Result<Vec<u64>, Error> {
    let requests: Vec<TransactionRequest> = calls
        .iter()
        .map(|c| {
            TransactionRequest::default()
                .with_from(from)
                .with_to(c.to)
                .with_input(c.data.clone())
                .with_value(c.value)
        })
        .collect();
    // The simulated block lies a few seconds ahead, as the block that will include the transactions
    // does: code that branches on elapsed time (a Uniswap V2 pair's price accumulators) takes the
    // path, and uses the gas, it will take onchain.
    let latest = client
        .provider
        .get_block_by_number(BlockNumberOrTag::Latest)
        .await
        .map_err(|e| rpc_error(client, e))?
        .map(|b| b.header.timestamp)
        .unwrap_or_default();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default();
    let overrides = BlockOverrides {
        time: Some(latest.max(now) + SIMULATED_BLOCK_AHEAD_SECONDS),
        ..Default::default()
    };
    let payload = SimulatePayload {
        block_state_calls: vec![SimBlock {
            block_overrides: Some(overrides),
            state_overrides: None,
            calls: requests,
        }],
        trace_transfers: false,
        validation: false,
        return_full_transactions: false,
    };
    let blocks = client
        .provider
        .simulate(&payload)
        .block_id(BlockId::pending())
        .await
        .map_err(|e| rpc_error(client, e))?;
    let results = blocks
        .into_iter()
        .next()
        .map(|b| b.calls)
        .unwrap_or_default();
    if results.len() != calls.len() {
        return Err(Error::internal(format!(
            "eth_simulateV1 answered {} results for {} calls",
            results.len(),
            calls.len()
        )));
    }
    let mut gas = Vec::with_capacity(calls.len());
    for (call, result) in calls.iter().zip(results) {
        if !result.status {
            let (data, message) = match &result.error {
                Some(e) => (
                    e.data.as_ref().or(Some(&result.return_data)),
                    e.message.as_str(),
                ),
                None => (Some(&result.return_data), ""),
            };
            let reason = revert::reason(data, message);
            return Err(Error::new(
                revert::code(data, &reason),
                format!("{} would revert: {reason}", call.description),
            ));
        }
        // The gas a call needs before refunds, not what it costs after them.
        let needed = result
            .max_used_gas
            .unwrap_or_default()
            .max(result.gas_used)
            .max(21_000);
        gas.push(needed * (100 + GAS_HEADROOM_PERCENT) / 100);
    }
    Ok(gas)
}

/// Current EIP-1559 fees of the chain.
pub async fn fees(client: &ChainClient) -> Result<(u128, u128), Error> {
    let est = client
        .provider
        .estimate_eip1559_fees()
        .await
        .map_err(|e| rpc_error(client, e))?;
    Ok((est.max_fee_per_gas, est.max_priority_fee_per_gas))
}

/// The wallet's next nonce as the node sees it (pending transactions included).
pub async fn pending_nonce(client: &ChainClient, wallet: Address) -> Result<u64, Error> {
    client
        .provider
        .get_transaction_count(wallet)
        .pending()
        .await
        .map_err(|e| rpc_error(client, e))
}

fn sign(signer: &PrivateKeySigner, mut tx: TxEip1559) -> Result<(B256, Vec<u8>), Error> {
    let signature = signer
        .sign_transaction_sync(&mut tx)
        .map_err(|e| Error::internal(format!("signing: {e}")))?;
    let envelope = TxEnvelope::Eip1559(tx.into_signed(signature));
    Ok((*envelope.tx_hash(), envelope.encoded_2718()))
}

fn hex_hash(h: &B256) -> String {
    format!("{h:#x}")
}

/// Was this refusal the node's final word on the transaction (it is not in its pool)?
fn rejected(e: &alloy::transports::TransportError) -> bool {
    e.as_error_resp().is_some_and(|r| {
        let m = r.message.to_ascii_lowercase();
        !(m.contains("already known")
            || m.contains("already imported")
            || m.contains("known transaction"))
    })
}

/// Sends from wallets the gateway holds; one lock per wallet in this process.
pub struct WalletSender {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    options: ChainOptions,
    /// One plan at a time per account whose state it reads, until its transactions are sent.
    accounts: KeyedLocks<(u64, Address)>,
    /// One reservation-to-send at a time per sending wallet, so that nonces go out in order.
    wallets: KeyedLocks<(u64, Address)>,
    hooks: SendHooks,
}

impl WalletSender {
    pub fn new(
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        options: ChainOptions,
        hooks: SendHooks,
    ) -> Self {
        Self {
            store,
            clock,
            options,
            accounts: KeyedLocks::default(),
            wallets: KeyedLocks::default(),
            hooks,
        }
    }

    fn now(&self) -> i64 {
        to_millis(self.clock.now())
    }

    /// Plans (with `make_plan`, under `account`'s lock, so it sees that account's earlier
    /// transactions: `account` is the one whose state the plan reads, the signer's own address for
    /// its own calls), simulates, reserves, signs, records and sends one execution, then waits for
    /// its receipts. A refused simulation sends nothing and reserves nothing.
    pub async fn execute<F, Fut>(
        &self,
        client: &ChainClient,
        signer: &PrivateKeySigner,
        account: Address,
        execution_key: &str,
        fence: Option<&LeaseFence>,
        make_plan: F,
    ) -> ExecutionOutcome
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<Plan, Error>>,
    {
        match self
            .send(client, signer, account, execution_key, fence, &make_plan)
            .await
        {
            Ok(Some((rows, summary, delivered))) => {
                self.wait(client, signer, rows, Some(summary), fence, delivered)
                    .await
            }
            Ok(None) => lease_lost(execution_key),
            Err(e) => outcome_of(e),
        }
    }

    /// Plans, simulates, reserves, signs, records and sends; `None` when the lease was lost before
    /// anything was recorded (nothing sent; the reserved nonces are the lease holder's to resolve).
    async fn send<F, Fut>(
        &self,
        client: &ChainClient,
        signer: &PrivateKeySigner,
        account: Address,
        execution_key: &str,
        fence: Option<&LeaseFence>,
        make_plan: &F,
    ) -> Result<Option<(Vec<ChainTxRecord>, serde_json::Value, bool)>, Error>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<Plan, Error>>,
    {
        let wallet = signer.address();
        let wallet_text = wallet.to_string();
        // One retry: a nonce the node says is taken (the wallet was used elsewhere) is given back and
        // the plan is sent again at fresh nonces.
        for attempt in 0..2 {
            let _account = self.accounts.lock((client.chain_id, account)).await;
            let plan = make_plan().await?;
            // The simulation, the fees and the node's nonce are read side by side, before the
            // wallet's turn: the nonce is only a floor under the stored reservations (a lower one
            // read a moment early changes nothing), so the turn holds no node round trip but the
            // sends. The simulation's refusal is the answer when there is one.
            let (gas, fees, chain_nonce) = tokio::join!(
                simulate(client, wallet, &plan.calls),
                fees(client),
                pending_nonce(client, wallet),
            );
            let (gas, (max_fee, priority), chain_nonce) = (gas?, fees?, chain_nonce?);
            let wallet_turn = self.wallets.lock((client.chain_id, wallet)).await;
            let count = u32::try_from(plan.calls.len()).map_err(Error::internal)?;
            if let Some(hook) = &self.hooks.before_reserve {
                hook(execution_key).await;
            }
            // Signed at the nonces the reservation picks, inside its transaction: one write holds
            // the reservation and the signed bytes (all or none), before anything is sent.
            let sign_at = |nonces: &[u64]| -> Result<Vec<SignedTx>, StoreError> {
                nonces
                    .iter()
                    .zip(&plan.calls)
                    .zip(&gas)
                    .map(|((nonce, call), gas_limit)| {
                        let tx = TxEip1559 {
                            chain_id: client.chain_id,
                            nonce: *nonce,
                            gas_limit: *gas_limit,
                            max_fee_per_gas: max_fee,
                            max_priority_fee_per_gas: priority,
                            to: TxKind::Call(call.to),
                            value: call.value,
                            access_list: Default::default(),
                            input: call.data.clone(),
                        };
                        sign(signer, tx)
                            .map(|(hash, raw)| SignedTx {
                                nonce: *nonce,
                                tx_hash: hex_hash(&hash),
                                raw_tx: raw,
                            })
                            .map_err(|e| StoreError::new(StoreErrorKind::Other, e.message))
                    })
                    .collect()
            };
            let request = NonceRequest {
                chain_id: client.chain_id,
                wallet: &wallet_text,
                execution_key,
                count,
                chain_nonce,
                now: self.now(),
            };
            let rows = match self
                .store
                .reserve_signed(request, fence, Some(&sign_at))
                .await?
            {
                Reservation::New(rows) => rows,
                // Signed already (by another process running the same execution): never sign
                // again at those nonces; wait for what was sent (handing it to the node again
                // first).
                Reservation::Existing(rows) => return Ok(Some((rows, plan.summary, false))),
                // The lease is another worker's now: send nothing, touch nothing.
                Reservation::LeaseLost => return Ok(None),
            };
            let mut refused = None;
            let mut delivered = true;
            // One at a time, each answered before the next: nothing after a refused transaction
            // reaches the node (a batch could not promise that).
            for row in &rows {
                let (Some(raw_tx), Some(tx_hash)) = (&row.raw_tx, &row.tx_hash) else {
                    return Err(Error::internal("a reserved transaction was not signed"));
                };
                match client.provider.send_raw_transaction(raw_tx).await {
                    Ok(_) => {}
                    Err(e) if rejected(&e) => {
                        delivered = false;
                        refused = Some(e.to_string());
                        break;
                    }
                    // A transport failure: the node may have it; waiting re-sends the same bytes.
                    Err(e) => {
                        delivered = false;
                        tracing::warn!(chain_id = client.chain_id, tx_hash, error = %rpc_error(client, &e).detail.unwrap_or_default(), "sending a transaction failed; it will be re-sent")
                    }
                }
                if let Some(hook) = &self.hooks.after_send {
                    hook();
                }
            }
            let Some(reason) = refused else {
                // Handed over in order: the next execution's turn need not wait for anything else.
                drop(wallet_turn);
                return Ok(Some((rows, plan.summary, delivered)));
            };
            let sent_first = rows.first().and_then(|r| r.tx_hash.clone());
            let rows = self.store.execution_txs(execution_key).await?;
            // The node refused a transaction: it and the ones after it are not in its pool. Nothing
            // of this execution was mined if the first was refused; give the nonces back and retry.
            if rows.first().and_then(|r| r.tx_hash.clone()) == sent_first
                && !self.any_known(client, &rows).await
            {
                self.store.void_txs(execution_key, true, self.now()).await?;
                tracing::warn!(
                    chain_id = client.chain_id,
                    attempt,
                    reason,
                    "the node refused a transaction; nonces given back"
                );
                if attempt == 0 {
                    continue;
                }
                return Err(Error::new(
                    ErrorCode::NotAvailable,
                    format!("The node refused the transaction: {reason}"),
                ));
            }
            return Ok(Some((rows, plan.summary, false)));
        }
        Err(Error::new(
            ErrorCode::NotAvailable,
            "The node refused the transaction twice.",
        ))
    }

    /// Records the receipts found so far (a failure is logged: the receipt is found again by
    /// the next look at the execution).
    async fn record_mined(&self, chain_id: u64, wallet: &str, mined: &mut Vec<MinedTx>) {
        if mined.is_empty() {
            return;
        }
        if let Err(e) = self
            .store
            .record_mined_txs(chain_id, wallet, mined, self.now())
            .await
        {
            tracing::error!(error = %e, "recording receipts failed");
        }
        mined.clear();
    }

    async fn any_known(&self, client: &ChainClient, rows: &[ChainTxRecord]) -> bool {
        for row in rows {
            for h in row
                .tx_hash
                .iter()
                .chain(row.prior_hashes.iter())
                .filter_map(|h| h.parse::<B256>().ok())
            {
                if matches!(
                    client.provider.get_transaction_by_hash(h).await,
                    Ok(Some(_)) | Err(_)
                ) {
                    return true;
                }
            }
        }
        false
    }

    /// Finds an execution that was started and not recorded as ended. `None`: nothing was sent
    /// (its reserved nonces, if any, are given back), so it may run now.
    pub async fn reconcile(
        &self,
        client: &ChainClient,
        signer: &PrivateKeySigner,
        execution_key: &str,
        fence: Option<&LeaseFence>,
    ) -> Result<Option<ExecutionOutcome>, Error> {
        let rows = self.store.execution_txs(execution_key).await?;
        if rows.iter().all(|r| r.state == ChainTxState::Reserved) {
            if !rows.is_empty() {
                self.store
                    .void_txs(execution_key, false, self.now())
                    .await?;
            }
            return Ok(None);
        }
        tracing::info!(
            execution_key,
            transactions = rows.len(),
            "resuming an execution's signed transactions"
        );
        Ok(Some(
            self.wait(client, signer, rows, None, fence, false).await,
        ))
    }

    /// Waits for every transaction of an execution, re-sending the signed bytes and bumping fees
    /// while one stays unmined; ends when all are mined. Past the receipt timeout it answers
    /// `pending` with the unmined transaction's hash: the nonce stays this execution's, and the next
    /// look at it (`reconcile`) goes on re-sending and bumping. `delivered`: the node took every
    /// transaction just now, so they are not handed to it again before they are due a bump.
    async fn wait(
        &self,
        client: &ChainClient,
        signer: &PrivateKeySigner,
        mut rows: Vec<ChainTxRecord>,
        summary: Option<serde_json::Value>,
        fence: Option<&LeaseFence>,
        delivered: bool,
    ) -> ExecutionOutcome {
        let started = tokio::time::Instant::now();
        let mut hashes = Vec::new();
        // Receipts found and not yet recorded: written together, before any wait for the next
        // receipt and before answering (one write for an execution whose transactions are mined
        // by the time it looks).
        let mut mined = Vec::new();
        let wallet = rows.first().map(|r| r.wallet.clone()).unwrap_or_default();
        for row in &mut rows {
            let mut resent = delivered;
            loop {
                match self.mined(client, row).await {
                    Ok(Some((hash, status))) => {
                        hashes.push(hash.clone());
                        mined.push(MinedTx {
                            nonce: row.nonce,
                            tx_hash: hash.clone(),
                            status: i64::from(status),
                        });
                        if !status {
                            self.record_mined(client.chain_id, &wallet, &mut mined)
                                .await;
                            let mut o = ExecutionOutcome::failed(
                                ErrorCode::ExecutionReverted,
                                format!("Transaction {hash} was mined and reverted."),
                            );
                            o.tx_hash = Some(hash);
                            o.data = Some(json!({"transactions": hashes, "plan": summary}));
                            return o;
                        }
                        break;
                    }
                    Ok(None) => {}
                    Err(e) => {
                        tracing::warn!(error = %e.detail.clone().unwrap_or_default(), "receipt lookup failed; retrying")
                    }
                }
                self.record_mined(client.chain_id, &wallet, &mut mined)
                    .await;
                // How long ago it was last signed, by the record (so a wait that is taken up again,
                // on this process or another, bumps on time).
                let bump_after =
                    i64::try_from(self.options.bump_after.as_millis()).unwrap_or(i64::MAX);
                let stale = self.now().saturating_sub(row.updated_at) > bump_after;
                if !resent || stale {
                    match self.push(client, signer, row, stale, fence).await {
                        Ok(true) => {}
                        Ok(false) => return lease_lost(&row.execution_key),
                        Err(e) => {
                            tracing::warn!(error = %e.detail.clone().unwrap_or(e.message.clone()), nonce = row.nonce, "re-sending a transaction failed")
                        }
                    }
                    resent = true;
                }
                if started.elapsed() > self.options.receipt_timeout {
                    tracing::info!(
                        chain_id = client.chain_id,
                        nonce = row.nonce,
                        tx_hash = row.tx_hash.as_deref().unwrap_or(""),
                        waited_seconds = self.options.receipt_timeout.as_secs(),
                        "a transaction is not mined yet; it stays pending and is taken up again"
                    );
                    return ExecutionOutcome::pending(row.tx_hash.clone());
                }
                // Until the watch reads a block holding the transaction (or a fallback interval).
                let signed: Vec<B256> = row
                    .tx_hash
                    .iter()
                    .chain(row.prior_hashes.iter())
                    .filter_map(|h| h.parse().ok())
                    .collect();
                client.receipts.until_mined(&signed).await;
            }
        }
        self.record_mined(client.chain_id, &wallet, &mut mined)
            .await;
        ExecutionOutcome {
            success: true,
            tx_hash: hashes.last().cloned(),
            data: Some(json!({"transactions": hashes, "plan": summary})),
            error: None,
            pending: false,
            held: false,
        }
    }

    /// The receipt of any signing of a row: (hash, success).
    async fn mined(
        &self,
        client: &ChainClient,
        row: &ChainTxRecord,
    ) -> Result<Option<(String, bool)>, Error> {
        if let (Some(status), Some(hash)) = (row.receipt_status, &row.tx_hash) {
            return Ok(Some((hash.clone(), status == 1)));
        }
        for hash in row.tx_hash.iter().chain(row.prior_hashes.iter()) {
            let Ok(h) = hash.parse::<B256>() else {
                continue;
            };
            if let Some(receipt) = client
                .provider
                .get_transaction_receipt(h)
                .await
                .map_err(|e| rpc_error(client, e))?
            {
                return Ok(Some((hash.clone(), receipt.status())));
            }
        }
        Ok(None)
    }

    /// Hands a row's transaction to the node again: the same bytes the first time; later, when it
    /// has stayed unmined, re-signed at the same nonce with fees raised by at least 12.5 % (recorded
    /// first, under the fence); false when the lease was lost (nothing re-signed or sent).
    async fn push(
        &self,
        client: &ChainClient,
        signer: &PrivateKeySigner,
        row: &mut ChainTxRecord,
        bump: bool,
        fence: Option<&LeaseFence>,
    ) -> Result<bool, Error> {
        let Some(raw) = row.raw_tx.clone() else {
            return Ok(true);
        };
        if bump {
            let envelope = TxEnvelope::decode_2718(&mut raw.as_slice())
                .map_err(|e| Error::internal(format!("stored transaction: {e}")))?;
            let Some(signed) = envelope.as_eip1559() else {
                return Ok(true);
            };
            let mut tx = signed.tx().clone();
            let (max_fee, priority) = fees(client).await?;
            tx.max_priority_fee_per_gas = priority.max(tx.max_priority_fee_per_gas * 9 / 8 + 1);
            tx.max_fee_per_gas = max_fee
                .max(tx.max_fee_per_gas * 9 / 8 + 1)
                .max(tx.max_priority_fee_per_gas);
            let (hash, bytes) = sign(signer, tx)?;
            let signed = SignedTx {
                nonce: row.nonce,
                tx_hash: hex_hash(&hash),
                raw_tx: bytes.clone(),
            };
            if !self
                .store
                .record_signed_txs(
                    client.chain_id,
                    &row.wallet,
                    &row.execution_key,
                    &[signed],
                    fence,
                    self.now(),
                )
                .await?
            {
                return Ok(false);
            }
            if let Some(old) = row.tx_hash.replace(hex_hash(&hash)) {
                row.prior_hashes.push(old);
            }
            row.raw_tx = Some(bytes);
            row.updated_at = self.now();
            tracing::info!(
                chain_id = client.chain_id,
                nonce = row.nonce,
                tx_hash = row.tx_hash.as_deref().unwrap_or(""),
                "re-signed a stuck transaction with higher fees"
            );
        }
        let bytes = row.raw_tx.clone().unwrap_or_default();
        match client.provider.send_raw_transaction(&bytes).await {
            Ok(_) => Ok(true),
            Err(e) if e.as_error_resp().is_some() => {
                // "already known" or "nonce too low" (mined meanwhile): the receipt lookup decides.
                tracing::debug!(error = %e, "the node did not take a re-sent transaction");
                Ok(true)
            }
            Err(e) => Err(rpc_error(client, e)),
        }
    }
}

/// A refusal before anything was sent, as an execution outcome.
pub fn outcome_of(e: Error) -> ExecutionOutcome {
    ExecutionOutcome::from(e)
}

/// The intent's lease is another worker's: this one stops, records nothing, and leaves the execution
/// (not ended) to the lease's holder.
fn lease_lost(execution_key: &str) -> ExecutionOutcome {
    tracing::warn!(
        execution_key,
        "the intent's lease is another worker's; nothing more is sent from here"
    );
    ExecutionOutcome::pending(None)
}

/// Renders a quantity as JSON-RPC hex.
pub fn quantity(v: impl std::fmt::LowerHex) -> String {
    format!("{v:#x}")
}
