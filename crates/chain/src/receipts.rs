//! Waiting for receipts by block. While executions wait for their transactions, one task per chain
//! reads each new block's receipts once (`eth_getBlockReceipts`) and wakes the executions whose
//! transactions it holds; an execution asks the node for its own receipt only when woken (or after
//! a fallback interval), not on every poll. So the node answers one call per block for every waiting
//! execution together, where each waiting execution used to ask once per poll (at N=1,000 on the
//! devnet: ~19 receipt lookups per execution, each taking the node's time from its mining).
//!
//! The wake-up is only a hint: the waiting execution still reads its receipt itself and that answer
//! is the truth. A missed hint (a block skipped, a node without `eth_getBlockReceipts`, a failed
//! call) costs latency, never correctness: the waiter looks again after the fallback interval.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use alloy::eips::BlockNumberOrTag;
use alloy::primitives::B256;
use alloy::providers::{DynProvider, Provider};
use tokio::sync::Notify;

/// How many polls a waiter sleeps at most before it looks for its receipt itself.
const FALLBACK_POLLS: u32 = 10;
/// The most blocks read in one tick; further behind, the watch jumps ahead (the waiters of the
/// skipped blocks look for themselves after the fallback interval).
const MAX_BLOCKS_PER_TICK: u64 = 32;
/// Hashes of recently mined transactions kept, so that a waiter registering just after its
/// transaction's block was read is woken at once.
const RECENT: usize = 4096;

/// One chain's receipt watch.
pub struct ReceiptWatch {
    provider: DynProvider,
    poll: Duration,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    waiters: HashMap<B256, Vec<(u64, Arc<Notify>)>>,
    next_waiter: u64,
    running: bool,
    /// The node does not serve `eth_getBlockReceipts`: waiters poll on their own.
    unsupported: bool,
    recent: VecDeque<B256>,
    recent_set: HashSet<B256>,
}

impl State {
    fn remember(&mut self, hash: B256) {
        if self.recent_set.insert(hash) {
            self.recent.push_back(hash);
            if self.recent.len() > RECENT
                && let Some(old) = self.recent.pop_front()
            {
                self.recent_set.remove(&old);
            }
        }
    }
}

impl ReceiptWatch {
    pub fn new(provider: DynProvider, poll: Duration) -> Arc<Self> {
        Arc::new(Self {
            provider,
            poll,
            state: Mutex::new(State::default()),
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Sleeps until a block holding one of `hashes` has been read, or one fallback interval
    /// (`FALLBACK_POLLS` polls) has passed, whichever comes first; then the caller looks up its
    /// receipt. Where the node serves no block receipts, sleeps one poll (looking up every poll).
    pub async fn until_mined(self: &Arc<Self>, hashes: &[B256]) {
        let registered = {
            let mut state = self.state();
            if state.unsupported {
                None
            } else if hashes.iter().any(|h| state.recent_set.contains(h)) {
                // Read mined just before this waiter came: it looks now. Taken out, so that a
                // lookup that still finds nothing (the block since replaced) waits next time.
                for h in hashes {
                    state.recent_set.remove(h);
                }
                return;
            } else {
                Some(self.register(&mut state, hashes))
            }
        };
        let Some((id, woken)) = registered else {
            tokio::time::sleep(self.poll).await;
            return;
        };
        let _ = tokio::time::timeout(self.poll * FALLBACK_POLLS, woken.notified()).await;
        let mut state = self.state();
        for hash in hashes {
            if let Some(list) = state.waiters.get_mut(hash) {
                list.retain(|(waiter, _)| *waiter != id);
                if list.is_empty() {
                    state.waiters.remove(hash);
                }
            }
        }
    }

    /// Puts a waiter under each of its hashes, and starts the watch if it is not running.
    fn register(self: &Arc<Self>, state: &mut State, hashes: &[B256]) -> (u64, Arc<Notify>) {
        let id = state.next_waiter;
        state.next_waiter += 1;
        // One wake-up per waiter, under each of its hashes: the first mined wakes it (a permit
        // is kept if it comes before the waiter sleeps).
        let woken = Arc::new(Notify::new());
        for hash in hashes {
            state
                .waiters
                .entry(*hash)
                .or_default()
                .push((id, woken.clone()));
        }
        if !state.running {
            state.running = true;
            let watch = self.clone();
            tokio::spawn(async move { watch.run().await });
        }
        (id, woken)
    }

    /// Reads every new block's receipts while anyone waits; ends when no one does.
    async fn run(self: Arc<Self>) {
        let mut next: Option<u64> = None;
        loop {
            tokio::time::sleep(self.poll).await;
            if self.state().waiters.is_empty() {
                let mut state = self.state();
                // Checked again under the lock a registration takes: a waiter that came meanwhile
                // finds the watch running, or starts a new one.
                if state.waiters.is_empty() {
                    state.running = false;
                    return;
                }
            }
            let latest = match self.provider.get_block_number().await {
                Ok(n) => n,
                Err(e) => {
                    tracing::debug!(error = %e, "reading the block number for receipts failed");
                    continue;
                }
            };
            let from = match next {
                Some(n) if latest >= n => n.max(latest.saturating_sub(MAX_BLOCKS_PER_TICK - 1)),
                Some(_) => continue,
                // The first tick reads the last few blocks: a waiter looked for its receipt just
                // before it came, and the transaction may have been mined since.
                None => latest.saturating_sub(2),
            };
            for number in from..=latest {
                let receipts: Result<Option<Vec<serde_json::Value>>, _> = self
                    .provider
                    .raw_request(
                        "eth_getBlockReceipts".into(),
                        (BlockNumberOrTag::Number(number),),
                    )
                    .await;
                match receipts {
                    Ok(Some(mined)) => {
                        let mut state = self.state();
                        let hashes = mined.iter().filter_map(|r| {
                            r.get("transactionHash")?.as_str()?.parse::<B256>().ok()
                        });
                        for hash in hashes {
                            state.remember(hash);
                            if let Some(list) = state.waiters.remove(&hash) {
                                for (_, woken) in list {
                                    woken.notify_one();
                                }
                            }
                        }
                        next = Some(number + 1);
                    }
                    // Not there yet (a node behind its own head): read again next tick.
                    Ok(None) => break,
                    Err(e) if unsupported(&e) => {
                        tracing::info!(
                            "the node does not serve eth_getBlockReceipts; each execution polls its own receipts"
                        );
                        let mut state = self.state();
                        state.unsupported = true;
                        state.running = false;
                        // Wake everyone: they poll on their own from now on.
                        for (_, list) in state.waiters.drain() {
                            for (_, woken) in list {
                                woken.notify_one();
                            }
                        }
                        return;
                    }
                    Err(e) => {
                        tracing::debug!(error = %e, block = number, "reading a block's receipts failed");
                        break;
                    }
                }
            }
        }
    }
}

/// The node does not know the method (JSON-RPC "method not found", or a provider's wording of it).
fn unsupported(e: &alloy::transports::TransportError) -> bool {
    e.as_error_resp().is_some_and(|r| {
        let m = r.message.to_ascii_lowercase();
        r.code == -32601
            || m.contains("method not found")
            || m.contains("not supported")
            || m.contains("does not exist")
    })
}
