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

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use alloy::primitives::{Address, B256, Bytes};
use alloy::providers::Provider;
use alloy::rpc::client::BatchRequest;
use alloy::transports::{TransportError, TransportErrorKind};
use tokio::sync::oneshot;

use crate::client::ChainClient;
use crate::locks::KeyedLocks;

type Key = (u64, Address);
type Answer = oneshot::Sender<Result<(), TransportError>>;

/// A queued transaction's answer from the node, once handed over.
pub struct Ticket(oneshot::Receiver<Result<(), TransportError>>);

/// Signed transactions on their way to the node, by wallet.
#[derive(Default)]
pub struct Outbox {
    queued: Mutex<HashMap<Key, Vec<(Bytes, Answer)>>>,
    /// One hand-over at a time per wallet: the holder takes everything queued.
    handing: KeyedLocks<Key>,
}

impl Outbox {
    fn queued(&self) -> MutexGuard<'_, HashMap<Key, Vec<(Bytes, Answer)>>> {
        // Nothing panics while holding it; should something, the map is still whole.
        self.queued.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues a signed transaction of `wallet` (an execution's first one while holding the
    /// wallet's turn, so that those go out in nonce order).
    pub fn queue(&self, chain_id: u64, wallet: Address, raw: &[u8]) -> Ticket {
        let (answer, ticket) = oneshot::channel();
        self.queued()
            .entry((chain_id, wallet))
            .or_default()
            .push((Bytes::copy_from_slice(raw), answer));
        Ticket(ticket)
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
        let key = (client.chain_id, wallet);
        {
            let _handing = self.handing.lock(key).await;
            let batch = self.queued().remove(&key).unwrap_or_default();
            send(client, batch).await;
        }
        ticket.0.await.unwrap_or_else(|_| {
            Err(TransportErrorKind::custom_str(
                "the hand-over was dropped before the node answered",
            ))
        })
    }
}

/// Sends `batch` in order (one call when it holds one transaction) and answers each.
async fn send(client: &ChainClient, batch: Vec<(Bytes, Answer)>) {
    if batch.len() <= 1 {
        for (raw, answer) in batch {
            let sent = client.provider.send_raw_transaction(&raw).await;
            let _ = answer.send(sent.map(|_| ()));
        }
        return;
    }
    let mut request = BatchRequest::new(client.provider.client());
    let mut waiting = Vec::with_capacity(batch.len());
    for (raw, answer) in batch {
        match request.add_call::<_, B256>("eth_sendRawTransaction", &(raw,)) {
            Ok(waiter) => waiting.push((waiter, answer)),
            Err(e) => {
                let _ = answer.send(Err(e));
            }
        }
    }
    if let Err(e) = request.send().await {
        let failure = e.to_string();
        for (_, answer) in waiting {
            let _ = answer.send(Err(TransportErrorKind::custom_str(&failure)));
        }
        return;
    }
    for (waiter, answer) in waiting {
        let _ = answer.send(waiter.await.map(|_| ()));
    }
}
