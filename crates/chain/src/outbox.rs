//! Hands a wallet's signed transactions to the node in the order of their nonces, several at once.
//!
//! An execution queues its first transaction while it still holds the wallet's turn (so first
//! transactions are queued in the reservations' order; an execution's later ones are queued once
//! the one before is answered, possibly behind later executions' nonces, which nodes hold until the
//! gap closes), lets the turn go, and then hands the queue over: whoever gets the wallet's
//! hand-over lock takes everything queued so far and sends it in JSON-RPC batches (runs of up to
//! 64, each without its first transaction highest nonce first, then its first: see
//! [`next_run`]), and each execution gets its own transaction's answer as soon as its run's
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
//! the run before is mined (the node takes it in then instead of between blocks), and while its
//! first waits the run takes in what is queued after it, up to 64, so that what is queued meanwhile
//! goes with it.

use std::collections::VecDeque;
use std::time::Duration;

use actiongate_core::chains::HandOver;
use alloy::consensus::{Transaction as _, TxEnvelope};
use alloy::eips::eip2718::Decodable2718;
use alloy::primitives::{Address, B256, Bytes};
use alloy::providers::Provider as _;
use alloy::transports::{TransportError, TransportErrorKind};

use crate::client::{ChainClient, batch_calls};
use crate::gather::{Answers, Gather, More};

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
        self.0
            .run_each_more(
                (client.chain_id, wallet),
                ticket.0,
                |batch, answers, more| send(client, wallet, batch, answers, more),
            )
            .await
            .unwrap_or_else(|| {
                Err(TransportErrorKind::custom_str(
                    "the hand-over was dropped before the node answered",
                ))
            })
    }
}

/// The most transactions of a wallet handed over highest nonce first ([`next_run`]): the slots a
/// geth pool keeps for an account's transactions that wait on a lower nonce (`txpool.accountqueue`,
/// 64 by default), so none of a run is evicted while its first is on the way; one run's rest is one
/// JSON-RPC request ([`crate::client::MAX_BATCH_CALLS`]) unless it grows while its first waits.
const RUN: usize = crate::client::MAX_BATCH_CALLS;

/// The next run of `waiting` (queued in their nonces' order): its first, and up to [`RUN`] - 1
/// after it, the rest, which go to the node before it, highest nonce first. None of a run can be
/// mined before the whole run is with the node, so a node that mines as soon as a transaction is
/// executable (anvil's automine, a sequencer) mines a run in one block, where in nonce order it
/// mined the first alone while the rest arrived (a batch of 50 in 17 blocks on anvil, 16 of them
/// holding one transaction). The first goes in its own request because anvil, handed a whole run
/// last first in one request, mined the run and then up to 63 empty blocks after it, one for each
/// transaction that turned executable (an empty block costs it about what a full one does); its
/// first handed over after the rest, one block. A node that mines on a clock is indifferent; every
/// node holds a transaction above a gap until the gap closes, as it does for an execution's later
/// transactions queued behind other executions' nonces.
fn next_run<T>(waiting: &mut VecDeque<T>) -> Option<(T, Vec<T>)> {
    let first = waiting.pop_front()?;
    Some((first, last_first(waiting, RUN - 1)))
}

/// Up to `room` of the first of `waiting`, taken out, highest nonce first.
fn last_first<T>(waiting: &mut VecDeque<T>, room: usize) -> Vec<T> {
    let mut taken: Vec<T> = waiting.drain(..waiting.len().min(room)).collect();
    taken.reverse();
    taken
}

/// The longest a paced hand-over waits for the wallet's earlier transactions to be mined before it
/// hands the next run over anyway (one stuck below it must not hold the wallet's sends back).
const PACE_LIMIT: Duration = Duration::from_secs(2);

/// How often a paced hand-over asks whether they are.
const PACE_POLL: Duration = Duration::from_millis(2);

/// A transaction taken from the queue, and where its answer goes.
struct Queued {
    raw: Bytes,
    answers: Answers<Answer>,
    i: usize,
}

fn queued(batch: Vec<Bytes>, answers: Answers<Answer>) -> impl Iterator<Item = Queued> {
    batch.into_iter().enumerate().map(move |(i, raw)| Queued {
        raw,
        answers: answers.clone(),
        i,
    })
}

/// Hands `batch` over run by run ([`next_run`]) and answers each transaction as soon as
/// the node has answered its request: its execution goes on to wait for its receipt while the
/// later runs are handed over. (A batch of 633 answered at its end took 477 ms to hand over, and
/// its executions learnt that their transactions were mined only then, 600 of them in the last 60
/// ms of the fan-out.)
///
/// A run's rest goes first, even while the run before is mined: none of it is executable before
/// its own first is with the node, so it waits in the pool, and the node takes it in (decodes,
/// recovers, checks each) while it mines instead of between blocks. On a chain whose hand-over is
/// paced, the run's first then waits until every nonce of `wallet` below it is mined
/// ([`PACE_LIMIT`] at most), and meanwhile the run takes in what is queued after it (`more`), up
/// to [`RUN`], handed over as it comes: a fan-out's runs fill while the node mines the block
/// before. (Before, the turn's holder waited and then took the queue, and handed its first run's
/// rest over only then.)
async fn send(
    client: &ChainClient,
    wallet: Address,
    batch: Vec<Bytes>,
    answers: Answers<Answer>,
    more: More<'_, Key, Bytes, Answer>,
) {
    let paced = client.settings.hand_over == HandOver::Paced;
    let mut waiting: VecDeque<Queued> = queued(batch, answers).collect();
    while let Some((first, rest)) = next_run(&mut waiting) {
        let mut in_run = 1 + rest.len();
        hand(client, rest).await;
        if let Some(nonce) = nonce_of(&first.raw).filter(|_| paced) {
            let deadline = tokio::time::Instant::now() + PACE_LIMIT;
            loop {
                if in_run < RUN {
                    let (later, answers) = more.take();
                    waiting.extend(queued(later, answers));
                    let grown = last_first(&mut waiting, RUN - in_run);
                    in_run += grown.len();
                    hand(client, grown).await;
                }
                // A failed read ends the wait.
                match client.provider.get_transaction_count(wallet).latest().await {
                    Ok(mined) if mined < nonce && tokio::time::Instant::now() < deadline => {
                        tokio::time::sleep(PACE_POLL).await;
                    }
                    _ => break,
                }
            }
        }
        hand(client, vec![first]).await;
    }
}

/// Hands `request` to the node in one JSON-RPC batch, in its order, and answers each.
async fn hand(client: &ChainClient, request: Vec<Queued>) {
    if request.is_empty() {
        return;
    }
    let params = request.iter().map(|q| (q.raw.clone(),)).collect();
    let mut sent = batch_calls::<_, B256>(client, "eth_sendRawTransaction", params)
        .await
        .into_iter();
    for q in request {
        let answer = sent.next().map_or_else(
            || {
                Err(TransportErrorKind::custom_str(
                    "the node's batch answer left this transaction out",
                ))
            },
            |a| a.map(|_| ()),
        );
        q.answers.answer(q.i, answer);
    }
}

/// A signed transaction's nonce (`None` for bytes that do not decode: handed over unpaced).
fn nonce_of(raw: &[u8]) -> Option<u64> {
    let mut bytes = raw;
    TxEnvelope::decode_2718(&mut bytes)
        .ok()
        .map(|tx| tx.nonce())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_are_handed_over_last_first_then_their_first() {
        let runs = |len: usize| {
            let mut waiting: VecDeque<usize> = (0..len).collect();
            std::iter::from_fn(|| next_run(&mut waiting)).collect::<Vec<_>>()
        };
        assert_eq!(runs(0), vec![]);
        assert_eq!(runs(1), vec![(0, vec![])]);
        assert_eq!(runs(3), vec![(0, vec![2, 1])]);
        let rest: Vec<usize> = (1..RUN).rev().collect();
        assert_eq!(runs(RUN + 2), vec![(0, rest), (RUN, vec![RUN + 1])]);
        // Every transaction once.
        let mut all: Vec<usize> = runs(3 * RUN + 5)
            .into_iter()
            .flat_map(|(first, rest)| std::iter::once(first).chain(rest))
            .collect();
        all.sort_unstable();
        assert_eq!(all, (0..3 * RUN + 5).collect::<Vec<_>>());
        // A run that grows takes what fits, highest nonce first, and leaves the rest queued.
        let mut waiting: VecDeque<usize> = (10..15).collect();
        assert_eq!(last_first(&mut waiting, 3), vec![12, 11, 10]);
        assert_eq!(waiting, [13, 14]);
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
