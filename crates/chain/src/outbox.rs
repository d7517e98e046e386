//! Hands a wallet's signed transactions to the node in the order of their nonces, several at once.
//!
//! An execution queues its first transaction while it still holds the wallet's turn (so first
//! transactions are queued in the reservations' order; an execution's later ones are queued once the
//! one before is answered, possibly behind later executions' nonces, which nodes hold until the gap
//! closes), lets the turn go, and then hands the queue over: whoever gets the
//! wallet's hand-over lock takes everything queued so far and sends it as one JSON-RPC batch, in
//! order, and each execution gets its own transaction's answer. While one batch is with the node the
//! next executions reserve, sign and queue behind it, so a node that mines what it holds when it
//! builds a block (anvil, a sequencer) gets several of the wallet's transactions a block instead of
//! one. A refused transaction does not stop the ones queued after it: its execution gives its nonce
//! back, and the nonce is filled (by its retry, another reservation, or a no-op) so that nothing
//! waits behind a gap (see the sender).

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
#[derive(Default)]
pub struct Outbox(Gather<Key, Bytes, Answer>);

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

/// Sends `batch` in order (one call when it holds one transaction) and answers each.
async fn send(client: &ChainClient, batch: Vec<Bytes>) -> Vec<Answer> {
    let params = batch.into_iter().map(|raw| (raw,)).collect();
    batch_calls::<_, B256>(client, "eth_sendRawTransaction", params)
        .await
        .into_iter()
        .map(|sent| sent.map(|_| ()))
        .collect()
}
