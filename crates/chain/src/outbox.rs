//! Hands a wallet's signed transactions to the node in the order of their nonces, several at once.
//!
//! An execution queues its first transaction while it still holds the wallet's turn (so first
//! transactions are queued in the reservations' order; an execution's later ones are queued once
//! the one before is answered, possibly behind later executions' nonces, which nodes hold until the
//! gap closes), lets the turn go, and then hands the queue over: whoever gets the wallet's
//! hand-over lock takes everything queued so far and sends it in JSON-RPC batches (runs of up to
//! 64, each without its first transaction highest nonce first, then its first: see
//! [`hand_over_order`]), and each execution gets its own transaction's answer as soon as its run's
//! request is answered (it goes on to wait for its receipt while later runs are handed over). While
//! one batch is with the node the next executions reserve, sign and queue behind it, so a node that
//! mines what it holds when it builds a block (anvil, a sequencer) gets several of the wallet's
//! transactions a block instead of one. A refused transaction does not stop the ones queued after
//! it: its execution gives its nonce back, and the nonce is filled (by its retry, another
//! reservation, or a no-op) so that nothing waits behind a gap (see the sender).
//!
//! On a chain whose `hand-over` is `paced` (a node that mines each transaction as it arrives), a
//! wallet's next run's first waits until its earlier transactions are mined, so that nothing of the
//! wallet's turns executable in the node's pool while a block of its transactions is being mined
//! ([`HandOver::Paced`]); the run's rest, not executable before its first, goes to the node while
//! the run before is mined (the node takes it in then instead of between blocks). The hand-over's
//! holder waits before it takes the queue, so that what is queued while it waits goes with it.

use std::time::Duration;

use actiongate_core::chains::HandOver;
use alloy::consensus::{Transaction as _, TxEnvelope};
use alloy::eips::eip2718::Decodable2718;
use alloy::primitives::{Address, B256, Bytes};
use alloy::providers::Provider as _;
use alloy::transports::{TransportError, TransportErrorKind};

use crate::client::{ChainClient, batch_calls};
use crate::gather::{Answers, Gather};

type Key = (u64, Address);
type Answer = Result<(), TransportError>;

/// A queued transaction's answer from the node, once handed over.
pub struct Ticket(crate::gather::Ticket<Answer>);

/// Signed transactions on their way to the node, by wallet: one hand-over at a time per wallet,
/// the holder takes everything queued.
pub struct Outbox(Gather<Key, Bytes, Answer>);

impl Default for Outbox {
    fn default() -> Self {
        Self(Gather::new("outbox"))
    }
}

impl Outbox {
    /// Queues a signed transaction of `wallet` (an execution's first one while holding the
    /// wallet's turn, so that those go out in nonce order).
    pub fn queue(&self, chain_id: u64, wallet: Address, raw: &[u8]) -> Ticket {
        Ticket(
            self.0
                .queue((chain_id, wallet), Bytes::copy_from_slice(raw)),
        )
    }

    /// Hands the wallet's queue to the node (unless another caller is doing it, in which case this
    /// one waits and hands over what was queued meanwhile) and answers the node's answer to
    /// `ticket`'s transaction: `Ok` when the node took it (or already had it, as the node words it),
    /// its refusal, or a transport failure (the node may have it).
    pub async fn hand_over(
        &self,
        client: &ChainClient,
        wallet: Address,
        ticket: Ticket,
    ) -> Result<(), TransportError> {
        // Paced: the turn's holder waits for the block before the oldest queued transaction
        // before it takes the queue, so that what is queued meanwhile goes in its runs instead of
        // waiting for the next turn (a fan-out's first runs were of 1, 1, 29 and 31 transactions,
        // each taken before its wait of 50-150 ms: docs/benchmarks.md).
        self.0
            .run_each_when(
                (client.chain_id, wallet),
                ticket.0,
                |oldest| pace(client, wallet, oldest),
                |batch, answers| send(client, wallet, batch, answers),
            )
            .await
            .unwrap_or_else(|| {
                Err(TransportErrorKind::custom_str(
                    "the hand-over was dropped before the node answered",
                ))
            })
    }
}

/// The most transactions of a wallet handed over highest nonce first ([`hand_over_order`]): the
/// slots a geth pool keeps for an account's transactions that wait on a lower nonce
/// (`txpool.accountqueue`, 64 by default), so none of a run is evicted while its first is on the
/// way; one run is one JSON-RPC request ([`crate::client::MAX_BATCH_CALLS`]).
const RUN: usize = crate::client::MAX_BATCH_CALLS;

/// A run of queued transactions (indexes in the batch, queued in their nonces' order): its first,
/// and the rest, which go to the node before it, highest nonce first.
#[derive(Debug, PartialEq, Eq)]
struct Run {
    first: usize,
    rest: Vec<usize>,
}

/// The runs a batch goes to the node in: each run of up to [`RUN`] queued transactions (queued in
/// their nonces' order) as two requests, the run without its first transaction last first, then
/// its first alone once the node has answered the rest. None of a run can be mined before the
/// whole run is with the node, so a node that mines as soon as a transaction is executable (anvil's
/// automine, a sequencer) mines a run in one block, where in nonce order it mined the first alone
/// while the rest arrived (a batch of 50 in 17 blocks on anvil, 16 of them holding one
/// transaction). The first goes in its own request because anvil, handed a whole run last first in
/// one request, mined the run and then up to 63 empty blocks after it, one for each transaction
/// that turned executable (an empty block costs it about what a full one does); its first handed
/// over after the rest, one block. A node that mines on a clock is indifferent; every node holds a
/// transaction above a gap until the gap closes, as it does for an execution's later transactions
/// queued behind other executions' nonces.
fn hand_over_order(len: usize) -> Vec<Run> {
    let queued: Vec<usize> = (0..len).collect();
    queued
        .chunks(RUN)
        .filter_map(|run| {
            let (first, rest) = run.split_first()?;
            Some(Run {
                first: *first,
                rest: rest.iter().rev().copied().collect(),
            })
        })
        .collect()
}

/// The longest a paced hand-over waits for the wallet's earlier transactions to be mined before it
/// hands the next run over anyway (one stuck below it must not hold the wallet's sends back).
const PACE_LIMIT: Duration = Duration::from_secs(2);

/// How often a paced hand-over asks whether they are.
const PACE_POLL: Duration = Duration::from_millis(2);

/// Hands `batch` over run by run ([`hand_over_order`]) and answers each transaction (by its index
/// in the batch) as soon as the node has answered its request: its execution goes on to wait for
/// its receipt while the batch's later runs are handed over. On a chain whose hand-over is paced,
/// each run after the first waits until every nonce of `wallet` below its first is mined
/// ([`PACE_LIMIT`] at most; the first run's wait came before the batch was taken, in
/// [`Outbox::hand_over`]):
/// a batch of 633 took 477 ms to hand over, and its executions, all answered at its end, learnt
/// that their transactions were mined only then, 600 of them in the last 60 ms of the fan-out.
async fn send(client: &ChainClient, wallet: Address, batch: Vec<Bytes>, answers: Answers<Answer>) {
    let mut batch: Vec<Option<Bytes>> = batch.into_iter().map(Some).collect();
    for (n, run) in hand_over_order(batch.len()).into_iter().enumerate() {
        // The rest first, even while the run before is mined: none of it is executable before its
        // own first is with the node, so it waits in the pool, and the node takes it in (decodes,
        // recovers, checks each) while it mines instead of between blocks. The first then waits
        // for the run before to be mined (it is still in `batch`).
        hand(client, &mut batch, run.rest, &answers).await;
        if n > 0 {
            pace(
                client,
                wallet,
                batch.get(run.first).and_then(Option::as_ref),
            )
            .await;
        }
        hand(client, &mut batch, vec![run.first], &answers).await;
    }
}

/// Hands the transactions at `request` (indexes in `batch`, taken out of it) to the node in one
/// JSON-RPC batch and answers each.
async fn hand(
    client: &ChainClient,
    batch: &mut [Option<Bytes>],
    request: Vec<usize>,
    answers: &Answers<Answer>,
) {
    if request.is_empty() {
        return;
    }
    let params = request
        .iter()
        .filter_map(|&i| batch.get_mut(i).and_then(Option::take))
        .map(|raw| (raw,))
        .collect();
    let mut sent = batch_calls::<_, B256>(client, "eth_sendRawTransaction", params)
        .await
        .into_iter();
    for i in request {
        let answer = sent.next().map_or_else(
            || {
                Err(TransportErrorKind::custom_str(
                    "the node's batch answer left this transaction out",
                ))
            },
            |a| a.map(|_| ()),
        );
        answers.answer(i, answer);
    }
}

/// On a chain whose hand-over is paced, until every nonce of `wallet` below `first`'s is mined
/// ([`mined_below`]); at once elsewhere, or for bytes that do not decode. (The nonce is read before
/// the wait, which holds nothing of `first`.)
fn pace<'a>(
    client: &'a ChainClient,
    wallet: Address,
    first: Option<&Bytes>,
) -> impl Future<Output = ()> + use<'a> {
    let below = first
        .filter(|_| client.settings.hand_over == HandOver::Paced)
        .and_then(|raw| nonce_of(raw));
    async move {
        if let Some(nonce) = below {
            mined_below(client, wallet, nonce).await;
        }
    }
}

/// A signed transaction's nonce (`None` for bytes that do not decode: handed over unpaced).
fn nonce_of(raw: &[u8]) -> Option<u64> {
    let mut bytes = raw;
    TxEnvelope::decode_2718(&mut bytes)
        .ok()
        .map(|tx| tx.nonce())
}

/// Until the node has mined every nonce of `wallet` below `nonce`, [`PACE_LIMIT`] at most; a
/// failed read ends the wait.
async fn mined_below(client: &ChainClient, wallet: Address, nonce: u64) {
    let deadline = tokio::time::Instant::now() + PACE_LIMIT;
    loop {
        match client.provider.get_transaction_count(wallet).latest().await {
            Ok(mined) if mined < nonce && tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(PACE_POLL).await;
            }
            _ => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_are_handed_over_last_first_then_their_first() {
        let run = |first: usize, rest: Vec<usize>| Run { first, rest };
        assert_eq!(hand_over_order(0), Vec::<Run>::new());
        assert_eq!(hand_over_order(1), vec![run(0, vec![])]);
        assert_eq!(hand_over_order(3), vec![run(0, vec![2, 1])]);
        let rest: Vec<usize> = (1..RUN).rev().collect();
        assert_eq!(
            hand_over_order(RUN + 2),
            vec![run(0, rest), run(RUN, vec![RUN + 1])]
        );
        // Every transaction once.
        let mut all: Vec<usize> = hand_over_order(3 * RUN + 5)
            .into_iter()
            .flat_map(|r| std::iter::once(r.first).chain(r.rest))
            .collect();
        all.sort_unstable();
        assert_eq!(all, (0..3 * RUN + 5).collect::<Vec<_>>());
    }

    #[test]
    fn a_signed_transactions_nonce_is_read_from_its_bytes() {
        use alloy::consensus::{SignableTransaction, TxEip1559};
        use alloy::eips::eip2718::Encodable2718;
        use alloy::network::TxSignerSync;
        use alloy::signers::local::PrivateKeySigner;

        let signer = PrivateKeySigner::random();
        let mut tx = TxEip1559 {
            chain_id: 84532,
            nonce: 417,
            gas_limit: 21_000,
            ..Default::default()
        };
        let signature = signer.sign_transaction_sync(&mut tx).unwrap();
        let raw = TxEnvelope::from(tx.into_signed(signature)).encoded_2718();
        assert_eq!(nonce_of(&raw), Some(417));
        assert_eq!(nonce_of(b"not a transaction"), None);
    }
}
