//! Hands a wallet's signed transactions to the node in the order of their nonces, several at once.
//!
//! An execution queues its first transaction while it still holds the wallet's turn (so first
//! transactions are queued in the reservations' order; an execution's later ones are queued once the
//! one before is answered, possibly behind later executions' nonces, which nodes hold until the gap
//! closes), lets the turn go, and then hands the queue over: whoever gets the
//! wallet's hand-over lock takes everything queued so far and sends it in JSON-RPC batches (runs of
//! up to 64, each without its first transaction highest nonce first, then its first: see
//! [`hand_over_order`]), and each execution gets its own transaction's answer. While one batch is
//! with the node the next executions reserve, sign and queue behind it, so a node that mines what
//! it holds when it builds a block (anvil, a sequencer) gets several of the wallet's transactions a
//! block instead of one. A refused transaction does not stop the ones queued after it: its
//! execution gives its nonce back, and the nonce is filled (by its retry, another reservation, or a
//! no-op) so that nothing waits behind a gap (see the sender).

use alloy::primitives::{Address, B256, Bytes};
use alloy::transports::{TransportError, TransportErrorKind};

use crate::client::{ChainClient, batch_calls};
use crate::gather::Gather;

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
            .run((client.chain_id, wallet), ticket.0, |batch| {
                send(client, batch)
            })
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

/// The requests a batch goes to the node in, each a list of the batch's indexes: each run of up to
/// [`RUN`] queued transactions (queued in their nonces' order) as two requests, the run without its
/// first transaction last first, then its first alone once the node has answered the rest. None of
/// a run can be mined before the whole run is with the node, so a node that mines as soon as a
/// transaction is executable (anvil's automine, a sequencer) mines a run in one block, where in
/// nonce order it mined the first alone while the rest arrived (a batch of 50 in 17 blocks on
/// anvil, 16 of them holding one transaction). The first goes in its own request because anvil,
/// handed a whole run last first in one request, mined the run and then up to 63 empty blocks
/// after it, one for each transaction that turned executable (an empty block costs it about what a
/// full one does); its first handed over after the rest, one block. A node that mines on a clock is
/// indifferent; every node holds a transaction above a gap until the gap closes, as it does for an
/// execution's later transactions queued behind other executions' nonces.
fn hand_over_order(len: usize) -> Vec<Vec<usize>> {
    let queued: Vec<usize> = (0..len).collect();
    queued
        .chunks(RUN)
        .flat_map(|run| match run.split_first() {
            Some((first, rest)) if !rest.is_empty() => {
                vec![rest.iter().rev().copied().collect(), vec![*first]]
            }
            _ => vec![run.to_vec()],
        })
        .collect()
}

/// Hands `batch` over in [`hand_over_order`]'s requests, one after the other, and answers each
/// transaction in the batch's own order.
async fn send(client: &ChainClient, batch: Vec<Bytes>) -> Vec<Answer> {
    let mut batch: Vec<Option<Bytes>> = batch.into_iter().map(Some).collect();
    let mut answers: Vec<Option<Answer>> = batch.iter().map(|_| None).collect();
    for request in hand_over_order(batch.len()) {
        let params = request
            .iter()
            .filter_map(|&i| batch.get_mut(i).and_then(Option::take))
            .map(|raw| (raw,))
            .collect();
        let sent = batch_calls::<_, B256>(client, "eth_sendRawTransaction", params).await;
        for (i, answer) in request.into_iter().zip(sent) {
            if let Some(slot) = answers.get_mut(i) {
                *slot = Some(answer.map(|_| ()));
            }
        }
    }
    answers
        .into_iter()
        .map(|a| {
            a.unwrap_or_else(|| {
                Err(TransportErrorKind::custom_str(
                    "the node's batch answer left this transaction out",
                ))
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_are_handed_over_last_first_then_their_first() {
        assert_eq!(hand_over_order(0), Vec::<Vec<usize>>::new());
        assert_eq!(hand_over_order(1), vec![vec![0]]);
        assert_eq!(hand_over_order(3), vec![vec![2, 1], vec![0]]);
        let order = hand_over_order(RUN + 2);
        let rest: Vec<usize> = (1..RUN).rev().collect();
        assert_eq!(order, vec![rest, vec![0], vec![RUN + 1], vec![RUN]]);
        // Every transaction once.
        let mut all: Vec<usize> = hand_over_order(3 * RUN + 5).concat();
        all.sort_unstable();
        assert_eq!(all, (0..3 * RUN + 5).collect::<Vec<_>>());
    }
}
