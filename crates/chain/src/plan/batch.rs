//! A fan-out's plan reads in batches. The users of a fan-out are planned side by side, and each
//! plan reads the chain (the delegation's state, the user's allowance, the swap's quote): within
//! [`gathered`], the view calls planned at the same time at the same block go to the node as one
//! `eth_simulateV1` of view calls ([`crate::gather::Gather`]), the same call asked by several
//! (one quote for identical swaps) once. A node prices one simulation of many calls far below as
//! many `eth_call`s (anvil: ~0.04 ms a call against ~0.5). A call that reverts in the batch is read
//! again alone, so its error is the node's own; a batch the node refuses as a whole is read call by
//! call.
//!
//! Outside a fan-out reads stay single `eth_call`s at the block itself: a simulated block lies one
//! block ahead, which code that reads the time (interest accrual, oracle staleness) would see.

use std::collections::HashMap;
use std::future::Future;

use actiongate_core::error::Error;
use alloy::eips::BlockId;
use alloy::network::TransactionBuilder;
use alloy::primitives::{Address, Bytes};
use alloy::providers::Provider;
use alloy::rpc::types::TransactionRequest;
use alloy::rpc::types::simulate::{SimBlock, SimulatePayload};

use super::rpc_error;
use crate::client::{ChainClient, MAX_BATCH_CALLS};
use crate::gather::Answers;

tokio::task_local! {
    static GATHERED: ();
}

/// Runs `f` with its plan reads and simulations gathered with those of other executions planned at
/// the same time (a fan-out's users).
pub async fn gathered<F: Future>(f: F) -> F::Output {
    GATHERED.scope((), f).await
}

/// Whether the running plan gathers its reads ([`gathered`]).
pub fn gathering() -> bool {
    GATHERED.try_with(|_| ()).is_ok()
}

/// The view call's answer at `block`: gathered with others when [`gathering`], else alone.
pub(super) async fn call(
    client: &ChainClient,
    block: BlockId,
    to: Address,
    input: Bytes,
) -> Result<Bytes, Error> {
    let key = match block {
        BlockId::Number(tag) if gathering() => tag,
        _ => return call_alone(client, block, to, input).await,
    };
    let gathered = client
        .views
        .one_each(key, (to, input.clone()), |batch, answers| {
            call_batch(client, block, batch, answers)
        })
        .await;
    match gathered {
        Some(answer) => answer,
        // Its batch was dropped before it answered (its caller gave up): read alone.
        None => call_alone(client, block, to, input).await,
    }
}

async fn call_alone(
    client: &ChainClient,
    block: BlockId,
    to: Address,
    input: Bytes,
) -> Result<Bytes, Error> {
    let tx = TransactionRequest::default().with_to(to).with_input(input);
    client
        .provider
        .call(tx)
        .block(block)
        .await
        .map_err(|e| rpc_error(client, e))
}

/// Answers each call of `batch` (by its index, in `answers`): identical calls once, in simulations
/// of at most [`MAX_BATCH_CALLS`] calls (a node refuses a request past its size limit whole) sent
/// side by side, each caller answered as soon as its simulation is (a plan goes on to its next read
/// or its check while the rest of the round is read); a call that reverts, or whose simulation the
/// node refuses, is read alone.
async fn call_batch(
    client: &ChainClient,
    block: BlockId,
    batch: Vec<(Address, Bytes)>,
    answers: Answers<Result<Bytes, Error>>,
) {
    let mut unique: Vec<(Address, Bytes)> = Vec::new();
    let mut callers: Vec<Vec<usize>> = Vec::new();
    let mut seen: HashMap<(Address, Bytes), usize> = HashMap::new();
    for (caller, c) in batch.into_iter().enumerate() {
        let at = *seen.entry(c.clone()).or_insert_with(|| {
            unique.push(c);
            callers.push(Vec::new());
            unique.len() - 1
        });
        callers[at].push(caller);
    }
    let (answers, callers) = (&answers, &callers);
    let answer = |at: usize, outcome: Result<Bytes, Error>| {
        for &caller in &callers[at] {
            answers.answer(caller, outcome.clone());
        }
    };
    let alone = |at: usize| {
        let (to, input) = unique[at].clone();
        async move { answer(at, call_alone(client, block, to, input).await) }
    };
    if unique.len() == 1 {
        alone(0).await;
        return;
    }
    futures_util::future::join_all(unique.chunks(MAX_BATCH_CALLS).enumerate().map(
        |(c, chunk)| async move {
            let first = c * MAX_BATCH_CALLS;
            let simulated = simulate_calls(client, block, chunk)
                .await
                .unwrap_or_else(|_| vec![None; chunk.len()]);
            let mut reverted = Vec::new();
            for (j, got) in simulated.into_iter().enumerate() {
                match got {
                    Some(out) => answer(first + j, Ok(out)),
                    None => reverted.push(first + j),
                }
            }
            futures_util::future::join_all(reverted.into_iter().map(alone)).await;
        },
    ))
    .await;
}

/// Every call's return data from one simulation of them at `block` (`None` for a call that
/// reverted), or the node's refusal of the whole.
async fn simulate_calls(
    client: &ChainClient,
    block: BlockId,
    calls: &[(Address, Bytes)],
) -> Result<Vec<Option<Bytes>>, Error> {
    let payload = SimulatePayload {
        block_state_calls: vec![SimBlock {
            block_overrides: None,
            state_overrides: None,
            calls: calls
                .iter()
                .map(|(to, input)| {
                    TransactionRequest::default()
                        .with_to(*to)
                        .with_input(input.clone())
                })
                .collect(),
        }],
        trace_transfers: false,
        validation: false,
        return_full_transactions: false,
    };
    let blocks = client
        .provider
        .simulate(&payload)
        .block_id(block)
        .await
        .map_err(|e| rpc_error(client, e))?;
    let results: Vec<Option<Bytes>> = blocks
        .into_iter()
        .flat_map(|b| b.calls)
        .map(|r| r.status.then_some(r.return_data))
        .collect();
    if results.len() != calls.len() {
        return Err(Error::internal(format!(
            "eth_simulateV1 answered {} results for {} calls",
            results.len(),
            calls.len()
        )));
    }
    Ok(results)
}
