//! Sending from a wallet the gateway holds, with a nonce manager persisted in the database.
//!
//! For one execution: the plan is made and simulated as a whole (`eth_simulateV1`, state carried from
//! call to call) under the lock of the account whose state it reads (the wallet itself, or the user a
//! fan-out acts for), held until its transactions are handed to the node, so that the next plan of
//! that account sees them; a call that would revert is refused and the wallet's nonce does not move.
//! Then, under the sending wallet's lock (held only that long, so that executions for different users
//! plan and wait side by side), one database transaction reserves its nonces, signs every
//! transaction at them and records the signed bytes (all or none) before the first is sent (the
//! executions that queued for the lock meanwhile all in that one transaction: one commit), and the
//! first is queued in the wallet's outbox ([`crate::outbox`]), which hands the wallet's queued
//! transactions to the node in nonce order, several in one JSON-RPC batch, while the next
//! executions reserve behind them. An execution's own transactions go one at a time, each answered
//! before the next (nothing after a refused one reaches the node). A refused transaction's nonce is
//! given back and reserved again first (by the execution's retry or another execution); when the
//! retry is refused too, the nonces given back below transactions already sent are filled with
//! no-op transfers, so that nothing of the wallet waits behind a gap. A transaction without a
//! receipt for a while is handed to the node again (a node may drop what it took).
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

use std::collections::HashMap;
use std::sync::Arc;

use actiongate_api_types::ErrorCode;
use actiongate_core::chains::FanoutCheck;
use actiongate_core::clock::{Clock, to_millis};
use actiongate_core::error::Error;
use actiongate_core::execution::ExecutionOutcome;
use actiongate_core::states::ChainTxState;
use actiongate_core::store::{
    ChainTxRecord, LeaseFence, MinedTx, NonceRequest, Reservation, ReserveItem, SignAt, SignedTx,
    Store, StoreError, StoreErrorKind,
};
use alloy::consensus::{SignableTransaction, TxEip1559, TxEnvelope};
use alloy::eips::eip2718::{Decodable2718, Encodable2718};
use alloy::eips::{BlockId, BlockNumberOrTag};
use alloy::network::TransactionBuilder;
use alloy::primitives::{Address, B256, Bytes, Signature, TxKind};
use alloy::providers::Provider;
use alloy::rpc::types::simulate::{SimBlock, SimCallResult, SimulatePayload};
use alloy::rpc::types::{BlockOverrides, Header, TransactionRequest};
use alloy::signers::local::PrivateKeySigner;
use serde_json::json;

use crate::client::{ChainClient, ChainOptions, MAX_BATCH_CALLS};
use crate::gather::{Answers, Gather, each_alone_on_failure};
use crate::locks::KeyedLocks;
use crate::outbox::{Outbox, Ticket};
use crate::plan::{Call, Plan, rpc_error};
use crate::receipts::Mark;
use crate::revert;

/// Gas limit headroom over the simulated gas use, in percent.
const GAS_HEADROOM_PERCENT: u64 = 30;
/// Executions answered `pending` by execution key: their account (chain, address) and since when.
type Stuck = HashMap<String, ((u64, Address), tokio::time::Instant)>;

/// How long an execution answered `pending` keeps its account's plans on the pending block when no
/// later look here sees it mined (another process may have taken it up).
const STUCK_FOR: std::time::Duration = std::time::Duration::from_secs(3600);
/// Polls without a receipt after which a transaction is handed to the node again (same bytes).
const REHAND_POLLS: u32 = 20;
/// How far ahead of the latest block the simulated block is dated.
const SIMULATED_BLOCK_AHEAD_SECONDS: u64 = 12;
/// At most this many calls in one simulated block of a gathered simulation (a block's gas limit
/// holds them; a user's calls are never split).
const SIMULATED_BLOCK_CALLS: usize = 32;

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

/// An execution at its wallet's turn: what its reservation signs.
struct Reserve {
    execution_key: String,
    fence: Option<LeaseFence>,
    count: u32,
    chain_nonce: u64,
    signer: PrivateKeySigner,
    calls: Vec<Call>,
    gas: Vec<u64>,
    fees: (u128, u128),
}

/// Its reservation and, for a new one, its first transaction's place in the outbox.
type Reserved = Result<(Reservation, Option<Ticket>), Error>;

/// Simulates `calls` from `from`, in order, with state carried between them; answers each call's gas
/// limit (its gas use plus headroom), or `EXECUTION_REVERTED` with the decoded reason. Within a
/// fan-out's plan ([`crate::plan::gathered`]) the simulations of its users that are planned at the
/// same time are checked together ([`Gather`]): by the node in `eth_simulateV1` requests of up to 64
/// calls, each user's calls in sequence, as they will be mined; or, as the chain's `fanout-check`
/// says, in the gateway's own EVM ([`crate::local`]). A user whose calls revert fails alone.
pub async fn simulate(
    client: &ChainClient,
    from: Address,
    calls: &[Call],
) -> Result<Vec<u64>, Error> {
    let block = crate::plan::read_block();
    let key = match block {
        BlockId::Number(tag) if crate::plan::batch::gathering() => tag,
        BlockId::Number(BlockNumberOrTag::Latest) if shadowed(client, block) => {
            let mut answers = shadow(client, block, vec![(from, calls.to_vec())]).await;
            return answers
                .pop()
                .unwrap_or_else(|| Err(Error::internal("a check answered nothing")));
        }
        _ => return simulate_alone(client, block, from, calls).await,
    };
    let gathered = client
        .simulations
        .one_each(key, (from, calls.to_vec()), |batch, answers| {
            check_batch(client, block, batch, answers)
        })
        .await;
    match gathered {
        Some(answer) => answer,
        // Its batch was dropped before it answered (its caller gave up): simulated alone.
        None => simulate_alone(client, block, from, calls).await,
    }
}

/// Whether the chain's checks at `block` run in both EVMs (`fanout-check = "shadow"`, at the
/// latest block: the local EVM reads no pending state).
fn shadowed(client: &ChainClient, block: BlockId) -> bool {
    client.settings.fanout_check == FanoutCheck::Shadow
        && block == BlockId::Number(BlockNumberOrTag::Latest)
}

/// A fan-out's gathered checks, where the chain's `fanout-check` says (the local EVM only at the
/// latest block), each answered in `answers` by its index in the batch.
async fn check_batch(
    client: &ChainClient,
    block: BlockId,
    batch: Vec<(Address, Vec<Call>)>,
    answers: Answers<Result<Vec<u64>, Error>>,
) {
    let latest = block == BlockId::Number(BlockNumberOrTag::Latest);
    let answered = match client.settings.fanout_check {
        FanoutCheck::Local if latest => return check_locally(client, block, batch, answers).await,
        FanoutCheck::Shadow if latest => shadow(client, block, batch).await,
        _ => simulate_batch(client, block, batch).await,
    };
    for (i, answer) in answered.into_iter().enumerate() {
        answers.answer(i, answer);
    }
}

/// The checks in the gateway's EVM, each user whose calls run answered as soon as its own check ends
/// (its reservation and send go on while the others are checked); a user it could not run (a state
/// read failed, or a transaction it does not run: value above the sender's balance, a sender with
/// code) checked by the node, once the local checks end; and so is a user it refused.
///
/// A refusal is the node's to make: the local EVM reads the node's state a piece at a time, and a
/// node can answer pieces of one block's state from different states (anvil 1.7 answers a read at
/// its latest block with the state of the block it is mining when the two cross: a pair's reserves
/// and its token balance from two blocks, a swap that reverts on neither refused with
/// `UniswapV2: K`). A wrong "runs" costs the agent a reverted transaction's gas at most (the chain
/// runs it on its own state); a wrong refusal fails an owner's execution that would have gone
/// through. Refusals are few, so confirming each costs the node little; each is compared as
/// `shadow` compares ([`compare`]): one the node overturns is counted `disagreed` and logged.
async fn check_locally(
    client: &ChainClient,
    block: BlockId,
    batch: Vec<(Address, Vec<Call>)>,
    answers: Answers<Result<Vec<u64>, Error>>,
) {
    let (header, time) = match simulated_block(client).await {
        Ok(at) => at,
        Err(e) => {
            for i in 0..batch.len() {
                answers.answer(i, Err(e.clone()));
            }
            return;
        }
    };
    let early = answers.clone();
    let on_answer: crate::local::OnAnswer = Arc::new(move |i, checked| {
        if let Ok(Ok(gas)) = checked {
            early.answer(i, Ok(gas.clone()));
        }
    });
    let local = client
        .local
        .check(&header, time, &batch, Some(on_answer))
        .await;
    let (to_node, unchecked_reason) = to_confirm(local, batch);
    if let Some(reason) = unchecked_reason {
        // One line a batch (a node that stopped answering state reads fails them all).
        tracing::warn!(
            chain_id = client.chain_id,
            users = to_node.iter().filter(|(.., refused)| refused.is_none()).count(),
            %reason,
            "local checks could not run; the node checks them"
        );
    }
    if to_node.is_empty() {
        return;
    }
    let users = to_node.iter().map(|(_, user, _)| user.clone()).collect();
    let node = simulate_batch(client, block, users).await;
    for ((i, (from, calls), refused), node) in to_node.into_iter().zip(node) {
        match refused {
            None => actiongate_core::metrics::local_check(client.chain_id, "unchecked"),
            Some(refusal) => compare(client, from, &calls, &node, &Ok(Err(refusal))),
        }
        answers.answer(i, node);
    }
}

/// A user the node checks: its index in the batch, its calls, and the local EVM's refusal (`None`:
/// the local EVM could not run it).
type ToNode = (usize, (Address, Vec<Call>), Option<Error>);

/// Of a batch's local checks, the users the node checks, and the first reason a check could not
/// run. The users whose calls ran are answered already.
fn to_confirm(
    local: Vec<crate::local::Checked>,
    batch: Vec<(Address, Vec<Call>)>,
) -> (Vec<ToNode>, Option<String>) {
    let mut to_node = Vec::new();
    let mut first_reason = None;
    for (i, (answer, user)) in local.into_iter().zip(batch).enumerate() {
        match answer {
            Ok(Ok(_)) => {}
            Ok(Err(refusal)) => to_node.push((i, user, Some(refusal))),
            Err(reason) => {
                first_reason.get_or_insert(reason);
                to_node.push((i, user, None));
            }
        }
    }
    (to_node, first_reason)
}

/// The checks by the node and in the gateway's EVM side by side: the node's answers, each local
/// one that disagrees logged and counted (`shadow`).
async fn shadow(
    client: &ChainClient,
    block: BlockId,
    batch: Vec<(Address, Vec<Call>)>,
) -> Vec<Result<Vec<u64>, Error>> {
    let local = async {
        match simulated_block(client).await {
            Ok((header, time)) => client.local.check(&header, time, &batch, None).await,
            Err(e) => batch.iter().map(|_| Err(e.to_string())).collect(),
        }
    };
    let (node, local) = tokio::join!(simulate_batch(client, block, batch.clone()), local);
    for ((node, local), (from, calls)) in node.iter().zip(local).zip(&batch) {
        compare(client, *from, calls, node, &local);
    }
    node
}

/// The local check's answer for `from`'s `calls` against the node's, counted in
/// `actiongate_local_checks_total` and, unless they agree, logged with both: `unchecked` when
/// either could not answer (a node that did not answer is no verdict on the transaction),
/// `agreed` or `disagreed` ([`crate::local::agree`]).
fn compare(
    client: &ChainClient,
    from: Address,
    calls: &[Call],
    node: &Result<Vec<u64>, Error>,
    local: &crate::local::Checked,
) {
    let node_silent = matches!(node, Err(e) if e.code == ErrorCode::NotAvailable);
    let result = match local {
        Err(_) => "unchecked",
        Ok(_) if node_silent => "unchecked",
        Ok(local) if crate::local::agree(node, local) => "agreed",
        Ok(_) => "disagreed",
    };
    actiongate_core::metrics::local_check(client.chain_id, result);
    if result != "agreed" {
        let first = calls.first().map(|c| c.description.as_str()).unwrap_or("");
        tracing::warn!(
            chain_id = client.chain_id,
            %from,
            calls = calls.len(),
            first,
            node = ?node,
            local = ?local,
            "the local check's answer is not the node's ({result})"
        );
    }
}

async fn simulate_alone(
    client: &ChainClient,
    block: BlockId,
    from: Address,
    calls: &[Call],
) -> Result<Vec<u64>, Error> {
    let mut answers = simulate_groups(client, block, &[(from, calls)]).await?;
    answers
        .pop()
        .unwrap_or_else(|| Err(Error::internal("eth_simulateV1 answered no block")))
}

/// A batch of simulations in requests of at most [`MAX_BATCH_CALLS`] calls (a group never split; a
/// node refuses a request past its size limit whole), side by side; when the node refuses one as a
/// whole (one group's call is invalid rather than reverting), each of its groups alone, so that
/// each gets its own answer.
async fn simulate_batch(
    client: &ChainClient,
    block: BlockId,
    batch: Vec<(Address, Vec<Call>)>,
) -> Vec<Result<Vec<u64>, Error>> {
    let mut requests: Vec<Vec<(Address, &[Call])>> = Vec::new();
    let mut in_request = usize::MAX;
    for (from, calls) in &batch {
        if in_request.saturating_add(calls.len()) > MAX_BATCH_CALLS {
            requests.push(Vec::new());
            in_request = 0;
        }
        if let Some(r) = requests.last_mut() {
            r.push((*from, calls.as_slice()));
        }
        in_request += calls.len();
    }
    let answered = futures_util::future::join_all(requests.iter().map(|groups| async move {
        if groups.len() > 1
            && let Ok(answers) = simulate_groups(client, block, groups).await
        {
            return answers;
        }
        futures_util::future::join_all(
            groups
                .iter()
                .map(|(from, calls)| simulate_alone(client, block, *from, calls)),
        )
        .await
    }))
    .await;
    answered.into_iter().flatten().collect()
}

/// The latest block and the date of the block a check simulates: a few seconds ahead, as the
/// block that will include the transactions is, so that code that branches on elapsed time (a
/// Uniswap V2 pair's price accumulators) takes the path, and uses the gas, it will take onchain.
async fn simulated_block(client: &ChainClient) -> Result<(Header, u64), Error> {
    let latest = client
        .provider
        .get_block_by_number(BlockNumberOrTag::Latest)
        .await
        .map_err(|e| rpc_error(client, e))?
        .map(|b| b.header)
        .ok_or_else(|| Error::internal("the node has no latest block"))?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default();
    let time = latest.timestamp.max(now) + SIMULATED_BLOCK_AHEAD_SECONDS;
    Ok((latest, time))
}

/// Simulates each group's calls from its sender, the groups one after the other in simulated
/// blocks of at most [`SIMULATED_BLOCK_CALLS`] calls (a group never split), and answers each
/// group's gas limits or its first call's revert.
async fn simulate_groups(
    client: &ChainClient,
    block: BlockId,
    groups: &[(Address, &[Call])],
) -> Result<Vec<Result<Vec<u64>, Error>>, Error> {
    let (_, time) = simulated_block(client).await?;
    let mut blocks: Vec<SimBlock> = Vec::new();
    let mut in_block = usize::MAX;
    for (from, calls) in groups {
        if in_block.saturating_add(calls.len()) > SIMULATED_BLOCK_CALLS {
            blocks.push(SimBlock {
                block_overrides: Some(BlockOverrides {
                    time: Some(time + blocks.len() as u64),
                    ..Default::default()
                }),
                state_overrides: None,
                calls: Vec::new(),
            });
            in_block = 0;
        }
        if let Some(b) = blocks.last_mut() {
            b.calls.extend(calls.iter().map(|c| {
                TransactionRequest::default()
                    .with_from(*from)
                    .with_to(c.to)
                    .with_input(c.data.clone())
                    .with_value(c.value)
            }));
        }
        in_block += calls.len();
    }
    let payload = SimulatePayload {
        block_state_calls: blocks,
        trace_transfers: false,
        validation: false,
        return_full_transactions: false,
    };
    let simulated = client
        .provider
        .simulate(&payload)
        .block_id(block)
        .await
        .map_err(|e| rpc_error(client, e))?;
    let mut results = simulated.into_iter().flat_map(|b| b.calls);
    let expected: usize = groups.iter().map(|(_, c)| c.len()).sum();
    let mut answers = Vec::with_capacity(groups.len());
    for (_, calls) in groups {
        let got: Vec<_> = results.by_ref().take(calls.len()).collect();
        if got.len() != calls.len() {
            return Err(Error::internal(format!(
                "eth_simulateV1 answered fewer results than the {expected} calls it was given"
            )));
        }
        answers.push(gas_limits(calls, got.into_iter().map(Simulated::of)));
    }
    Ok(answers)
}

/// A simulated call's outcome, from the node's check or the gateway's own EVM.
#[derive(Debug)]
pub(crate) enum Simulated {
    /// It ran, and needed this much gas before refunds.
    Ran { gas: u64 },
    /// It reverted (or halted), with its revert data and the message it came with.
    Reverted {
        data: Option<Bytes>,
        message: String,
    },
}

impl Simulated {
    fn of(result: SimCallResult) -> Self {
        if !result.status {
            let (data, message) = match result.error {
                Some(e) => (e.data.or(Some(result.return_data)), e.message),
                None => (Some(result.return_data), String::new()),
            };
            return Self::Reverted { data, message };
        }
        // The gas a call needs before refunds, not what it costs after them.
        Self::Ran {
            gas: result.max_used_gas.unwrap_or_default().max(result.gas_used),
        }
    }
}

/// Each call's gas limit from its simulated outcome, or the first revert's error: one rule for
/// the node's check and the local one.
pub(crate) fn gas_limits(
    calls: &[Call],
    outcomes: impl IntoIterator<Item = Simulated>,
) -> Result<Vec<u64>, Error> {
    let mut gas = Vec::with_capacity(calls.len());
    for (call, outcome) in calls.iter().zip(outcomes) {
        match outcome {
            Simulated::Reverted { data, message } => {
                let reason = revert::reason(data.as_ref(), &message);
                return Err(Error::new(
                    revert::code(data.as_ref(), &reason),
                    format!("{} would revert: {reason}", call.description),
                ));
            }
            Simulated::Ran { gas: needed } => {
                gas.push(needed.max(21_000) * (100 + GAS_HEADROOM_PERCENT) / 100);
            }
        }
    }
    Ok(gas)
}

/// Current EIP-1559 fees of the chain (read at most once a poll interval: `head`).
pub async fn fees(client: &ChainClient) -> Result<(u128, u128), Error> {
    client
        .head
        .fees
        .get(|| async {
            let est = client
                .provider
                .estimate_eip1559_fees()
                .await
                .map_err(|e| rpc_error(client, e))?;
            Ok((est.max_fee_per_gas, est.max_priority_fee_per_gas))
        })
        .await
}

/// The wallet's next nonce as the node sees it (pending transactions included).
pub async fn pending_nonce(client: &ChainClient, wallet: Address) -> Result<u64, Error> {
    nonce_at(client, wallet, BlockId::pending()).await
}

/// The floor under the wallet's stored nonce reservations: its mined count (shared for a poll
/// interval: `head`), or on the retry after the node refused a transaction its pending count, read
/// now. A count read a moment early is a lower floor: never a nonce used twice, at worst a nonce
/// given back that a transaction sent from elsewhere has taken is reserved again, the node refuses
/// it, and the retry reads the pending count.
async fn nonce_floor(client: &ChainClient, wallet: Address, pending: bool) -> Result<u64, Error> {
    if pending {
        return pending_nonce(client, wallet).await;
    }
    client
        .head
        .mined_count(wallet, || nonce_at(client, wallet, BlockId::latest()))
        .await
}

/// The wallet's transaction count at `block`.
async fn nonce_at(client: &ChainClient, wallet: Address, block: BlockId) -> Result<u64, Error> {
    client
        .provider
        .get_transaction_count(wallet)
        .block_id(block)
        .await
        .map_err(|e| rpc_error(client, e))
}

/// Signs `tx` with libsecp256k1 (the C library revm's ecrecover uses too): RFC 6979 nonces and a
/// low S, so the very signature k256 (alloy's signer) makes, in about a third of its time. A
/// fan-out signs each execution's transactions inside its reservation's write, one after another.
fn sign(signer: &PrivateKeySigner, tx: TxEip1559) -> Result<(B256, Vec<u8>), Error> {
    let mut secret = signer.to_bytes();
    let key = secp256k1::SecretKey::from_byte_array(secret.0);
    zeroize::Zeroize::zeroize(&mut secret.0);
    let mut key =
        key.map_err(|_| Error::internal("signing: the wallet key is not a valid secret key"))?;
    let message = secp256k1::Message::from_digest(tx.signature_hash().0);
    let (recovery, compact) = secp256k1::SECP256K1
        .sign_ecdsa_recoverable(message, &key)
        .serialize_compact();
    key.non_secure_erase();
    let signature = Signature::from_bytes_and_parity(&compact, i32::from(recovery) != 0);
    let envelope = TxEnvelope::Eip1559(tx.into_signed(signature));
    Ok((*envelope.tx_hash(), envelope.encoded_2718()))
}

/// Signs `call` at `nonce` with `gas_limit` and `fees` (max fee, priority fee), for the record.
fn sign_call(
    signer: &PrivateKeySigner,
    chain_id: u64,
    nonce: u64,
    gas_limit: u64,
    (max_fee, priority): (u128, u128),
    call: &Call,
) -> Result<SignedTx, StoreError> {
    let tx = TxEip1559 {
        chain_id,
        nonce,
        gas_limit,
        max_fee_per_gas: max_fee,
        max_priority_fee_per_gas: priority,
        to: TxKind::Call(call.to),
        value: call.value,
        access_list: Default::default(),
        input: call.data.clone(),
    };
    sign(signer, tx)
        .map(|(hash, raw)| SignedTx {
            nonce,
            tx_hash: hex_hash(&hash),
            raw_tx: raw,
        })
        .map_err(|e| StoreError::new(StoreErrorKind::Other, e.message))
}

/// Every signing of a row (its current hash, then the ones it replaced), each with its hash parsed.
fn signings(row: &ChainTxRecord) -> impl Iterator<Item = (&String, B256)> {
    row.tx_hash
        .iter()
        .chain(row.prior_hashes.iter())
        .filter_map(|h| h.parse::<B256>().ok().map(|parsed| (h, parsed)))
}

fn hex_hash(h: &B256) -> String {
    format!("{h:#x}")
}

/// Was this refusal the node's final word on the transaction (it is not in its pool)? Not when the
/// node has it already, nor when it refuses a nonce above its next one (a node that keeps no
/// future transactions; the nonces below are on their way, so the same bytes are handed over
/// again while it waits).
fn rejected(e: &alloy::transports::TransportError) -> bool {
    e.as_error_resp().is_some_and(|r| {
        let m = r.message.to_ascii_lowercase();
        !(m.contains("already known")
            || m.contains("already imported")
            || m.contains("known transaction")
            || m.contains("nonce too high")
            || m.contains("nonce gap"))
    })
}

/// Sends from wallets the gateway holds; one lock per wallet in this process.
pub struct WalletSender {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    options: ChainOptions,
    /// One plan at a time per account whose state it reads, until its transactions are sent.
    accounts: KeyedLocks<(u64, Address)>,
    /// One reservation at a time per sending wallet, so that nonces are queued for the node in order.
    wallets: KeyedLocks<(u64, Address)>,
    /// Executions waiting for their wallet's turn, reserved and signed together (one commit).
    reservations: Gather<(u64, Address), Reserve, Reserved>,
    /// Receipts found by executions of a wallet at the same time, recorded in one write.
    mined_records: Gather<(u64, String), Vec<MinedTx>, Result<(), String>>,
    /// Signed transactions on their way to the node, in nonce order, several at once.
    outbox: Outbox,
    /// Accounts with transactions this process sent and has not seen mined: their plans read the
    /// pending block (which holds those), every other plan the latest (a node may build the
    /// pending block for each call; anvil does, from every transaction in its pool).
    flights: Flights,
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
            reservations: Gather::new("reservations"),
            mined_records: Gather::new("mined"),
            outbox: Outbox::default(),
            flights: Flights::new(STUCK_FOR),
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
        let mut given_back = 0;
        let sent = self
            .send(
                client,
                signer,
                account,
                execution_key,
                fence,
                &make_plan,
                &mut given_back,
            )
            .await;
        // Whatever the end (a failure, a retry with fewer transactions, a lost lease): nonces given
        // back below sent ones are filled (none when the retry or another execution took them).
        if given_back > 0 {
            self.fill_gaps(client, signer, execution_key, given_back, fence)
                .await;
        }
        match sent {
            Ok(Some((rows, summary, delivered, flying))) => {
                let outcome = self
                    .wait(client, signer, rows, Some(summary), fence, delivered)
                    .await;
                if outcome.pending {
                    flying.keep(execution_key);
                }
                outcome
            }
            Ok(None) => lease_lost(execution_key),
            Err(e) => outcome_of(e),
        }
    }

    /// Plans, simulates, reserves, signs, records and sends; `None` when the lease was lost before
    /// anything was recorded (nothing sent; the reserved nonces are the lease holder's to resolve).
    /// `given_back`: how many nonces it gave back after the node refused a transaction.
    #[allow(clippy::too_many_arguments)]
    async fn send<F, Fut>(
        &self,
        client: &ChainClient,
        signer: &PrivateKeySigner,
        account: Address,
        execution_key: &str,
        fence: Option<&LeaseFence>,
        make_plan: &F,
        given_back: &mut u32,
    ) -> Result<Option<Sent<'_>>, Error>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<Plan, Error>>,
    {
        let wallet = signer.address();
        // One retry: a nonce the node says is taken (the wallet was used elsewhere) is given back and
        // the plan is sent again at fresh nonces.
        for attempt in 0..2 {
            let _account = self.accounts.lock((client.chain_id, account)).await;
            // The pending block only when this process sent something of the account that is
            // not mined yet (the plan must see it); else the latest, cheaper for a node to read.
            let read_at = if self.flights.flying((client.chain_id, account)) {
                BlockId::pending()
            } else {
                BlockId::latest()
            };
            let plan = crate::plan::reading_at(read_at, make_plan()).await?;
            // The simulation, the fees and the node's nonce are read side by side, before the
            // wallet's turn: the nonce is only a floor under the stored reservations (a lower one
            // read a moment early changes nothing), so the turn holds no node round trip but the
            // sends; the mined count first, the pending one on the retry after a refusal (a
            // transaction sent from the wallet elsewhere may hold the next nonce). The simulation's
            // refusal is the answer when there is one.
            let (gas, fees, chain_nonce) = tokio::join!(
                crate::plan::reading_at(read_at, simulate(client, wallet, &plan.calls)),
                fees(client),
                nonce_floor(client, wallet, attempt > 0),
            );
            let (gas, (max_fee, priority), chain_nonce) = (gas?, fees?, chain_nonce?);
            let count = u32::try_from(plan.calls.len()).map_err(Error::internal)?;
            let job = || Reserve {
                execution_key: execution_key.to_owned(),
                fence: fence.cloned(),
                count,
                chain_nonce,
                signer: signer.clone(),
                calls: plan.calls.clone(),
                gas: gas.clone(),
                fees: (max_fee, priority),
            };
            // Where the receipt watch stands before anything of this attempt can reach the node
            // (another execution's turn may hand its first transaction over once it is queued).
            let unmined = client.receipts.mark();
            // The executions that wait for the wallet's turn meanwhile are reserved, signed and
            // recorded together when it comes, and their first transactions queued in the
            // outbox in their nonces' order.
            let key = (client.chain_id, wallet);
            let reserved = self
                .reservations
                .one(key, job(), |jobs| self.reserve(client, wallet, jobs))
                .await;
            let (reservation, ticket) = match reserved {
                Some(answer) => answer?,
                // Its batch was dropped before it answered (its caller gave up), committed or
                // not: reserved again alone, which answers the rows it has if it committed.
                None => self
                    .reserve(client, wallet, vec![job()])
                    .await
                    .pop()
                    .unwrap_or_else(|| Err(Error::internal("a reservation answered nothing")))?,
            };
            let rows = match reservation {
                Reservation::New(rows) => rows,
                // Signed already (by another process running the same execution): never sign
                // again at those nonces; wait for what was sent (handing it to the node again
                // first).
                Reservation::Existing(rows) => {
                    let flying = self.flights.fly((client.chain_id, account));
                    return Ok(Some((rows, plan.summary, None, flying)));
                }
                // The lease is another worker's now: send nothing, touch nothing.
                Reservation::LeaseLost => return Ok(None),
            };
            // In flight from here until its wait ends: the account's next plan reads the pending
            // block.
            let flying = self.flights.fly((client.chain_id, account));
            let (refused, delivered) = self
                .hand_over(client, wallet, &rows, ticket, unmined)
                .await?;
            let Some(reason) = refused else {
                return Ok(Some((rows, plan.summary, delivered, flying)));
            };
            let sent_first = rows.first().and_then(|r| r.tx_hash.clone());
            let rows = self.store.execution_txs(execution_key).await?;
            // The node refused a transaction: it and the ones after it are not in its pool. Nothing
            // of this execution was mined if the first was refused; give the nonces back (they are
            // reserved again first, by the retry or another execution) and retry.
            if rows.first().and_then(|r| r.tx_hash.clone()) == sent_first
                && !self.any_known(client, &rows).await
            {
                self.store.void_txs(execution_key, true, self.now()).await?;
                *given_back = (*given_back).max(count);
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
            return Ok(Some((rows, plan.summary, None, flying)));
        }
        Err(Error::new(
            ErrorCode::NotAvailable,
            "The node refused the transaction twice.",
        ))
    }

    /// Reserves, signs and records `jobs` under the wallet's turn in one database transaction (each
    /// alone when the batch fails, so that a failing one fails alone), and queues each new
    /// reservation's first transaction in the outbox, in their nonces' order, before the turn goes
    /// on: while those are with the node the next executions reserve and queue behind them.
    async fn reserve(
        &self,
        client: &ChainClient,
        wallet: Address,
        jobs: Vec<Reserve>,
    ) -> Vec<Reserved> {
        let _turn = self.wallets.lock((client.chain_id, wallet)).await;
        if let Some(hook) = &self.hooks.before_reserve {
            for job in &jobs {
                hook(&job.execution_key).await;
            }
        }
        let wallet_text = wallet.to_string();
        let now = self.now();
        // Signed at the nonces the reservation picks, inside its transaction: one write holds
        // the reservations and the signed bytes (all or none), before anything is sent.
        let signs: Vec<_> = jobs
            .iter()
            .map(|job| {
                move |nonces: &[u64]| -> Result<Vec<SignedTx>, StoreError> {
                    nonces
                        .iter()
                        .zip(&job.calls)
                        .zip(&job.gas)
                        .map(|((nonce, call), gas_limit)| {
                            sign_call(
                                &job.signer,
                                client.chain_id,
                                *nonce,
                                *gas_limit,
                                job.fees,
                                call,
                            )
                        })
                        .collect()
                }
            })
            .collect();
        let items: Vec<ReserveItem<'_>> = jobs
            .iter()
            .zip(&signs)
            .map(|(job, sign)| ReserveItem {
                request: NonceRequest {
                    chain_id: client.chain_id,
                    wallet: &wallet_text,
                    execution_key: &job.execution_key,
                    count: job.count,
                    chain_nonce: job.chain_nonce,
                    now,
                    gaps_only: false,
                },
                fence: job.fence.as_ref(),
                sign: Some(sign as &SignAt<'_>),
            })
            .collect();
        let reservations = each_alone_on_failure(
            items,
            |items: Vec<ReserveItem<'_>>| async move {
                self.store
                    .reserve_signed_batch(&items)
                    .await
                    .map_err(Error::from)
            },
            || Error::internal("a reservation answered nothing"),
        )
        .await;
        reservations
            .into_iter()
            .map(|r| {
                let reservation = r?;
                let ticket = match &reservation {
                    Reservation::New(rows) => rows
                        .first()
                        .and_then(|r| r.raw_tx.as_deref())
                        .map(|raw| self.outbox.queue(client.chain_id, wallet, raw)),
                    _ => None,
                };
                Ok((reservation, ticket))
            })
            .collect()
    }

    /// Hands an execution's transactions to the node through the wallet's outbox, one at a time,
    /// each answered before the next is queued: nothing after a refused transaction of the
    /// execution reaches the node. `first`: the first transaction's ticket, queued under the
    /// wallet's turn. Answers the node's refusal, if any, and, when the node took every one,
    /// `unmined`: where the receipt watch stood before the first was queued (none of them mined
    /// then).
    async fn hand_over(
        &self,
        client: &ChainClient,
        wallet: Address,
        rows: &[ChainTxRecord],
        mut first: Option<Ticket>,
        unmined: Mark,
    ) -> Result<(Option<String>, Option<Mark>), Error> {
        let mut delivered = true;
        for row in rows {
            let (Some(raw_tx), Some(tx_hash)) = (&row.raw_tx, &row.tx_hash) else {
                return Err(Error::internal("a reserved transaction was not signed"));
            };
            let ticket = first
                .take()
                .unwrap_or_else(|| self.outbox.queue(client.chain_id, wallet, raw_tx));
            match self.outbox.hand_over(client, wallet, ticket).await {
                Ok(()) => {}
                Err(e) if rejected(&e) => return Ok((Some(e.to_string()), None)),
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
        Ok((None, delivered.then_some(unmined)))
    }

    /// Fills nonces of the wallet given back below transactions already signed (a gap the node
    /// would hold those behind) with no-op transfers to the wallet itself, and waits for them.
    /// Best effort: a failure is logged, and the transactions behind the gap are re-sent and bumped
    /// by whoever waits for them.
    async fn fill_gaps(
        &self,
        client: &ChainClient,
        signer: &PrivateKeySigner,
        execution_key: &str,
        count: u32,
        fence: Option<&LeaseFence>,
    ) {
        let wallet = signer.address();
        let filled = async {
            let (chain_nonce, (max_fee, priority)) =
                tokio::try_join!(nonce_at(client, wallet, BlockId::latest()), fees(client))?;
            let key = actiongate_core::store::fill_key(execution_key, self.now());
            // Nothing called, nothing moved: 0 to the wallet itself.
            let noop = Call {
                to: wallet,
                data: Default::default(),
                value: Default::default(),
                description: "a no-op filling a nonce given back".into(),
            };
            let sign_at = |nonces: &[u64]| -> Result<Vec<SignedTx>, StoreError> {
                nonces
                    .iter()
                    .map(|nonce| {
                        sign_call(
                            signer,
                            client.chain_id,
                            *nonce,
                            21_000,
                            (max_fee, priority),
                            &noop,
                        )
                    })
                    .collect()
            };
            let wallet_text = wallet.to_string();
            let request = NonceRequest {
                chain_id: client.chain_id,
                wallet: &wallet_text,
                execution_key: &key,
                count,
                chain_nonce,
                now: self.now(),
                gaps_only: true,
            };
            let unmined = client.receipts.mark();
            let turn = self.wallets.lock((client.chain_id, wallet)).await;
            let rows = match self
                .store
                .reserve_signed(request, fence, Some(&sign_at))
                .await?
            {
                Reservation::New(rows) | Reservation::Existing(rows) => rows,
                Reservation::LeaseLost => Vec::new(),
            };
            if rows.is_empty() {
                return Ok(0);
            }
            let ticket = rows
                .first()
                .and_then(|r| r.raw_tx.as_deref())
                .map(|raw| self.outbox.queue(client.chain_id, wallet, raw));
            drop(turn);
            let (refused, delivered) = self
                .hand_over(client, wallet, &rows, ticket, unmined)
                .await?;
            if let Some(reason) = refused {
                // Refused as well: its nonces go back for the next reservation (as before a fill).
                self.store.void_txs(&key, true, self.now()).await?;
                return Err(Error::new(ErrorCode::NotAvailable, reason));
            }
            let filled = rows.len();
            let outcome = self
                .wait(client, signer, rows, None, fence, delivered)
                .await;
            if outcome.pending {
                return Err(Error::new(ErrorCode::NotAvailable, "not mined yet"));
            }
            Ok::<_, Error>(filled)
        };
        match filled.await {
            Ok(0) => {}
            Ok(filled) => tracing::warn!(
                chain_id = client.chain_id,
                filled,
                "nonces given back below sent transactions were filled with no-op transfers"
            ),
            Err(e) => tracing::warn!(
                chain_id = client.chain_id,
                error = %e.detail.clone().unwrap_or(e.message.clone()),
                "filling nonces given back failed; the transactions above them wait until they are filled"
            ),
        }
    }

    /// Takes up the gap fills of any wallet of `client`'s chain still signed and unmined two bump
    /// intervals after their last signing (one signed just before a crash and never sent, one the
    /// node dropped, one its own wait gave up on): each claimed for one process for a bump interval,
    /// its receipt looked up and recorded when mined, else the same bytes handed to the node again
    /// (harmless while the node still holds them), so that the wallet's later transactions do not
    /// wait behind its nonce. Not re-signed with higher fees: that needs the wallet's key, which the
    /// execution that made the fill held. A fill whose fees fell below the chain's stays unmined.
    /// Answers how many were taken up; a fill that cannot be looked at is logged and left for the
    /// next sweep.
    pub async fn sweep_fills(&self, client: &ChainClient) -> Result<usize, Error> {
        let bump = i64::try_from(self.options.bump_after.as_millis()).unwrap_or(i64::MAX);
        let now = self.now();
        let keys = self
            .store
            .claim_unmined_fills(
                client.chain_id,
                now.saturating_sub(bump.saturating_mul(2)),
                now,
                now.saturating_add(bump),
            )
            .await?;
        for key in &keys {
            if let Err(e) = self.sweep_fill(client, key).await {
                tracing::warn!(chain_id = client.chain_id, code = %e.code, error = %e.detail.unwrap_or(e.message), "taking up an unmined gap fill failed; the next sweep looks again");
            }
        }
        Ok(keys.len())
    }

    async fn sweep_fill(&self, client: &ChainClient, key: &str) -> Result<(), Error> {
        let rows = self.store.execution_txs(key).await?;
        let mut mined = Vec::new();
        let mut failed = None;
        for row in rows.iter().filter(|r| r.state == ChainTxState::Signed) {
            match self.mined(client, row, true).await {
                Ok(Some((hash, status))) => mined.push(MinedTx {
                    nonce: row.nonce,
                    tx_hash: hash,
                    status: i64::from(status),
                }),
                Ok(None) => {
                    let Some(raw) = &row.raw_tx else { continue };
                    // "already known" while the node holds it: nothing to say.
                    if let Err(e) = client.provider.send_raw_transaction(raw).await {
                        tracing::debug!(chain_id = client.chain_id, nonce = row.nonce, error = %rpc_error(client, e).detail.unwrap_or_default(), "re-sending an unmined gap fill was refused");
                    }
                }
                Err(e) => failed = Some(e),
            }
        }
        if let Some(wallet) = rows.first().map(|r| r.wallet.clone()) {
            self.record_mined(client.chain_id, &wallet, &mut mined)
                .await;
        }
        failed.map_or(Ok(()), Err)
    }

    /// Records the receipts found so far (a failure is logged: the receipt is found again by
    /// the next look at the execution).
    async fn record_mined(&self, chain_id: u64, wallet: &str, mined: &mut Vec<MinedTx>) {
        if mined.is_empty() {
            return;
        }
        // With the receipts other executions of the wallet found at the same time: one write.
        let recorded = self
            .mined_records
            .one(
                (chain_id, wallet.to_owned()),
                std::mem::take(mined),
                |found| async move {
                    let all: Vec<MinedTx> = found.iter().flatten().cloned().collect();
                    let written = self
                        .store
                        .record_mined_txs(chain_id, wallet, &all, self.now())
                        .await
                        .map_err(|e| e.to_string());
                    found.iter().map(|_| written.clone()).collect()
                },
            )
            .await;
        match recorded {
            Some(Ok(())) => {}
            Some(Err(e)) => tracing::error!(error = %e, "recording receipts failed"),
            None => tracing::error!("recording receipts was dropped before it answered"),
        }
    }

    async fn any_known(&self, client: &ChainClient, rows: &[ChainTxRecord]) -> bool {
        for row in rows {
            for (_, h) in signings(row) {
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
        let outcome = self.wait(client, signer, rows, None, fence, None).await;
        if !outcome.pending {
            self.flights.landed(execution_key);
        }
        Ok(Some(outcome))
    }

    /// Waits for every transaction of an execution, re-sending the signed bytes and bumping fees
    /// while one stays unmined; ends when all are mined. Past the receipt timeout it answers
    /// `pending` with the unmined transaction's hash: the nonce stays this execution's, and the next
    /// look at it (`reconcile`) goes on re-sending and bumping. `delivered`: the node took every
    /// transaction just now (where the receipt watch stood before), so they are not handed to it
    /// again before they are due, and the first is not looked up before the watch could see it.
    ///
    /// Between lookups it sleeps on the receipt watch
    /// ([`crate::receipts::ReceiptWatch::until_mined`]), and asks the node only when woken by a
    /// block holding the transaction, when the watch may have missed it, or when it last asked
    /// long ago. A transaction is handed over again after `REHAND_POLLS` polls without a receipt,
    /// unless the wallet's transactions are being mined (it waits its turn behind them).
    async fn wait(
        &self,
        client: &ChainClient,
        signer: &PrivateKeySigner,
        mut rows: Vec<ChainTxRecord>,
        summary: Option<serde_json::Value>,
        fence: Option<&LeaseFence>,
        delivered: Option<Mark>,
    ) -> ExecutionOutcome {
        let started = tokio::time::Instant::now();
        let mut hashes = Vec::new();
        // Receipts found and not yet recorded: written together, before any wait for the next
        // receipt and before answering (one write for an execution whose transactions are mined
        // by the time it looks).
        let mut mined = Vec::new();
        let wallet = rows.first().map(|r| r.wallet.clone()).unwrap_or_default();
        let sender = wallet.parse::<Address>().ok();
        for (i, row) in rows.iter_mut().enumerate() {
            let mut resent = delivered.is_some();
            let mut handed = tokio::time::Instant::now();
            // When this row was last known unmined. The first row just handed over cannot be
            // mined before the watch reads a block (the later ones may be by the time they are
            // looked at): the node is not asked until then.
            let mut unmined = if i == 0 { delivered } else { None };
            let mut ask = unmined.is_none();
            let (mut sender_mining, mut watch_saw) = (false, false);
            loop {
                let asking = ask.then(|| client.receipts.mark());
                match self.mined(client, row, ask).await {
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
                    // Not mined as the node answers now. Unless the watch saw it mined (a node
                    // behind the one the watch asked; that block is not read again): then it is
                    // looked up at every fallback until found.
                    Ok(None) if ask => unmined = asking.filter(|_| !watch_saw),
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
                // Handed over again when no receipt came for a while: a node may drop what it
                // took (anvil does, under load), and then nothing behind it is mined either. Not
                // while the wallet's transactions are being mined: this one waits its turn.
                let due = handed.elapsed() >= client.poll * REHAND_POLLS && !sender_mining;
                if !resent || stale || due {
                    handed = tokio::time::Instant::now();
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
                let signed: Vec<B256> = signings(row).map(|(_, h)| h).collect();
                let waited = client.receipts.until_mined(&signed, sender, unmined).await;
                (ask, sender_mining, watch_saw) = (waited.look, waited.sender_mining, waited.saw);
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

    /// The receipt of any signing of a row: (hash, success). `ask`: ask the node when neither the
    /// record nor the receipt watch has it.
    async fn mined(
        &self,
        client: &ChainClient,
        row: &ChainTxRecord,
        ask: bool,
    ) -> Result<Option<(String, bool)>, Error> {
        if let (Some(status), Some(hash)) = (row.receipt_status, &row.tx_hash) {
            return Ok(Some((hash.clone(), status == 1)));
        }
        // Read with its block's receipts by the watch, else asked of the node.
        for (hash, h) in signings(row) {
            if let Some(status) = client.receipts.seen(&h) {
                return Ok(Some((hash.clone(), status)));
            }
        }
        if !ask {
            return Ok(None);
        }
        for (hash, h) in signings(row) {
            if let Some(status) = crate::receipts::status(client, h).await? {
                return Ok(Some((hash.clone(), status)));
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

/// What an execution sent: its rows, its plan's summary, whether the node took every transaction
/// just now (and where the receipt watch stood before), and its place among the account's
/// executions in flight.
type Sent<'a> = (
    Vec<ChainTxRecord>,
    serde_json::Value,
    Option<Mark>,
    InFlight<'a>,
);

/// Accounts with executions in flight (sent, not seen mined), counted per account; an execution
/// answered `pending` stays counted by its key until a later look sees it mined, or `stuck_for`.
struct Flights {
    counts: std::sync::Mutex<HashMap<(u64, Address), usize>>,
    stuck: std::sync::Mutex<Stuck>,
    stuck_for: std::time::Duration,
}

impl Flights {
    fn new(stuck_for: std::time::Duration) -> Self {
        Self {
            counts: Default::default(),
            stuck: Default::default(),
            stuck_for,
        }
    }

    fn counts(&self) -> std::sync::MutexGuard<'_, HashMap<(u64, Address), usize>> {
        // Nothing panics while holding these; should something, the maps are still whole.
        self.counts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn stuck(&self) -> std::sync::MutexGuard<'_, Stuck> {
        self.stuck
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Has this process an execution of the account `key` in flight?
    fn flying(&self, key: (u64, Address)) -> bool {
        self.counts().contains_key(&key)
    }

    /// Counts an execution of `key`'s account in flight until the guard is dropped (or kept).
    fn fly(&self, key: (u64, Address)) -> InFlight<'_> {
        *self.counts().entry(key).or_default() += 1;
        InFlight { flights: self, key }
    }

    /// One execution of `key`'s account is no longer in flight.
    fn land(&self, key: (u64, Address)) {
        let mut counts = self.counts();
        if let Some(n) = counts.get_mut(&key) {
            *n -= 1;
            if *n == 0 {
                counts.remove(&key);
            }
        }
    }

    /// An execution answered `pending` earlier was seen mined (or ended) here.
    fn landed(&self, execution_key: &str) {
        let gone = self.stuck().remove(execution_key);
        if let Some((key, _)) = gone {
            self.land(key);
        }
    }
}

/// An execution of an account in flight (sent, its wait not ended); forgotten when dropped.
struct InFlight<'a> {
    flights: &'a Flights,
    key: (u64, Address),
}

impl InFlight<'_> {
    /// The execution was answered `pending`: its account stays in flight (this guard's count is
    /// kept) until [`Flights::landed`], or `stuck_for` has passed.
    fn keep(self, execution_key: &str) {
        let now = tokio::time::Instant::now();
        let flights = self.flights;
        let mut expired = Vec::new();
        let counted = {
            let mut stuck = flights.stuck();
            stuck.retain(|_, (key, since)| {
                let keep = now.duration_since(*since) < flights.stuck_for;
                if !keep {
                    expired.push(*key);
                }
                keep
            });
            // Counted already by an earlier look: this guard's count goes (on drop, below).
            let counted = stuck.contains_key(execution_key);
            if !counted {
                stuck.insert(execution_key.to_owned(), (self.key, now));
            }
            counted
        };
        for key in expired {
            flights.land(key);
        }
        if !counted {
            std::mem::forget(self);
        }
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.flights.land(self.key);
    }
}

/// A refusal before anything was sent, as an execution outcome.
pub fn outcome_of(e: Error) -> ExecutionOutcome {
    // The node failed us (what an operator watches for): the node's own words, without its URL.
    if e.code == ErrorCode::NotAvailable {
        tracing::warn!(error = %e.detail.as_deref().unwrap_or(&e.message), "an execution stopped on the node's failure");
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    const ACCOUNT: (u64, Address) = (84532, Address::repeat_byte(7));

    /// A local refusal goes to the node with the users the local EVM could not run; a user whose
    /// calls ran does not (it was answered when its run ended).
    #[test]
    fn the_node_confirms_local_refusals_and_checks_what_the_local_evm_could_not_run() {
        let user = |b: u8| (Address::repeat_byte(b), Vec::new());
        let refusal = Error::new(
            ErrorCode::ExecutionReverted,
            "swap would revert: UniswapV2: K",
        );
        let (to_node, reason) = to_confirm(
            vec![
                Ok(Ok(vec![21_000])),
                Ok(Err(refusal)),
                Err("a state read failed".into()),
                Ok(Ok(vec![30_000])),
                Err("the node answered no state".into()),
            ],
            (1..=5).map(user).collect(),
        );
        let sent: Vec<_> = to_node
            .iter()
            .map(|(i, (from, _), refused)| (*i, *from, refused.as_ref().map(|e| e.code)))
            .collect();
        assert_eq!(
            sent,
            vec![
                (
                    1,
                    Address::repeat_byte(2),
                    Some(ErrorCode::ExecutionReverted)
                ),
                (2, Address::repeat_byte(3), None),
                (4, Address::repeat_byte(5), None),
            ]
        );
        assert_eq!(reason.as_deref(), Some("a state read failed"));
    }

    #[test]
    fn transactions_are_signed_as_alloys_signer_signs_them() {
        use alloy::network::TxSignerSync;
        for seed in 1u8..=24 {
            let signer = PrivateKeySigner::from_bytes(&B256::repeat_byte(seed)).expect("a key");
            let call = Call {
                to: Address::repeat_byte(seed.wrapping_mul(3)),
                value: alloy::primitives::U256::from(seed) << 70,
                data: Bytes::from(vec![seed; usize::from(seed) * 5]),
                description: String::new(),
            };
            let signed = sign_call(
                &signer,
                84532,
                u64::from(seed) * 1_000,
                426_500,
                (2_000_000_014, 1_000_000_000),
                &call,
            )
            .expect("signed");
            let mut tx = TxEip1559 {
                chain_id: 84532,
                nonce: u64::from(seed) * 1_000,
                gas_limit: 426_500,
                max_fee_per_gas: 2_000_000_014,
                max_priority_fee_per_gas: 1_000_000_000,
                to: TxKind::Call(call.to),
                value: call.value,
                access_list: Default::default(),
                input: call.data.clone(),
            };
            let signature = signer.sign_transaction_sync(&mut tx).expect("k256 signed");
            let expected = TxEnvelope::Eip1559(tx.into_signed(signature));
            assert_eq!(
                signed.raw_tx,
                expected.encoded_2718(),
                "the same bytes as alloy's signer (seed {seed})"
            );
            assert_eq!(signed.tx_hash, hex_hash(expected.tx_hash()));
            let decoded = TxEnvelope::decode_2718(&mut signed.raw_tx.as_slice()).expect("decodes");
            let decoded = decoded.as_eip1559().expect("an EIP-1559 transaction");
            let from = decoded
                .signature()
                .recover_address_from_prehash(&decoded.signature_hash())
                .expect("recovers");
            assert_eq!(from, signer.address());
        }
    }

    #[test]
    fn an_account_is_in_flight_while_an_execution_of_it_is() {
        let flights = Flights::new(STUCK_FOR);
        assert!(!flights.flying(ACCOUNT));
        let first = flights.fly(ACCOUNT);
        let second = flights.fly(ACCOUNT);
        drop(first);
        assert!(flights.flying(ACCOUNT), "one still flies");
        drop(second);
        assert!(!flights.flying(ACCOUNT));
    }

    #[test]
    fn a_pending_execution_keeps_its_account_in_flight_until_it_lands() {
        let flights = Flights::new(STUCK_FOR);
        flights.fly(ACCOUNT).keep("intent-1:0");
        assert!(flights.flying(ACCOUNT), "kept past its wait");
        // A second look that is pending again does not count it twice.
        flights.fly(ACCOUNT).keep("intent-1:0");
        flights.landed("intent-1:0");
        assert!(!flights.flying(ACCOUNT), "landed once, gone");
        flights.landed("intent-1:0");
        assert!(!flights.flying(ACCOUNT));
    }

    #[test]
    fn a_kept_execution_nobody_lands_expires() {
        let flights = Flights::new(std::time::Duration::ZERO);
        flights.fly(ACCOUNT).keep("intent-1:0");
        // Another execution kept later sweeps the expired one out.
        let other = (84532, Address::repeat_byte(8));
        flights.fly(other).keep("intent-2:0");
        assert!(!flights.flying(ACCOUNT));
    }
}
