//! Waiting for receipts by block. While executions wait for their transactions, one task per chain
//! reads each new block's receipts once (`eth_getBlockReceipts`) and wakes the executions whose
//! transactions it holds; an execution asks the node for its own receipt only when woken (or after
//! a fallback interval), not on every poll. So the node answers one call per block for every waiting
//! execution together, where each waiting execution used to ask once per poll (at N=1,000 on the
//! devnet: ~19 receipt lookups per execution, each taking the node's time from its mining).
//!
//! A woken execution takes its receipt's status from the block's receipts the watch read (the
//! node's own answer, `ReceiptWatch::seen`) and asks the node itself only when the watch has not
//! seen it. A missed wake-up (a block skipped, a node without `eth_getBlockReceipts`, a failed call)
//! costs latency, never correctness: the waiter looks itself after the fallback interval.
//!
//! A waiter that was not woken does not ask the node either when nothing can have been missed: the
//! watch has read every block since the waiter last knew its transactions unmined (its [`Mark`],
//! taken before it asked the node or handed them over), without a skip, without being turned off,
//! through the latest block at least once since, and fewer than `RECENT` hashes since (none read
//! can have left the recent ones). Then a block holding one of them would have woken it (or been
//! found among the recent hashes when it registered), and it sleeps again; it
//! still asks itself after `QUIET_FALLBACK_POLLS` polls at the latest (a block replaced by a reorg
//! after the watch read it is not read again). So a fan-out whose transactions wait many blocks in
//! the node's pool costs the node one lookup per waiter in `QUIET_FALLBACK_POLLS` polls at most.
//!
//! The watch also tells a waiter whether its wallet had a transaction mined lately (while any of
//! the wallet's executions wait): a transaction queued behind the wallet's others is not handed to
//! the node again while those are being mined.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use actiongate_core::error::Error;
use alloy::eips::BlockNumberOrTag;
use alloy::primitives::{Address, B256};
use alloy::providers::{DynProvider, Provider};
use alloy::rpc::types::TransactionReceipt;
use tokio::sync::Notify;

use crate::client::{ChainClient, batch_calls};
use crate::plan::rpc_error;

/// How many polls a waiter sleeps at most before it looks for its receipt itself, unless the
/// watch read every block since (see the module's docs).
const FALLBACK_POLLS: u32 = 10;
/// How many polls after its mark (when it last knew its transactions unmined) a waiter asks the
/// node again at its next fallback, whatever the watch read (so at most this plus
/// `FALLBACK_POLLS`).
const QUIET_FALLBACK_POLLS: u32 = 60;
/// A wallet had a transaction mined "lately" within this many polls (as many as a waiter waits
/// before handing its transaction over again: blocks coming at least that often keep it waiting
/// its turn).
const SENDER_MINING_POLLS: u32 = 20;
/// The most blocks read in one tick; further behind, the watch jumps ahead (the waiters of the
/// skipped blocks look for themselves after the fallback interval).
const MAX_BLOCKS_PER_TICK: u64 = 32;
/// Hashes of recently mined transactions kept, so that a waiter registering just after its
/// transaction's block was read is woken at once.
const RECENT: usize = 4096;
/// Block reads failing this many times in a row (a node or gateway that refuses the method in a way
/// not recognised, an outage) turn the watch off for `OFF_FOR`: waiters poll on their own meanwhile.
const FAILURES_BEFORE_OFF: u32 = 5;
const OFF_FOR: Duration = Duration::from_secs(600);

/// Whether the transaction `hash` is mined (`Some`, with its success) as the node answers now. The
/// lookups of executions that ask at the same time (a fan-out's waiters woken by one block) go to
/// the node as one JSON-RPC batch ([`crate::gather::Gather`]).
pub async fn status(client: &ChainClient, hash: B256) -> Result<Option<bool>, Error> {
    client
        .receipt_lookups
        .one((), hash, |hashes| async move {
            let lookup = |hashes: Vec<B256>| async move {
                let params = hashes.into_iter().map(|h| (h,)).collect();
                batch_calls::<_, Option<TransactionReceipt>>(
                    client,
                    "eth_getTransactionReceipt",
                    params,
                )
                .await
                .into_iter()
                .map(|r| {
                    r.map(|r| r.map(|r| r.status()))
                        .map_err(|e| rpc_error(client, e))
                })
                .collect::<Vec<_>>()
            };
            let answers = lookup(hashes.clone()).await;
            // A batch refused as a whole (a node that caps or refuses batches): each alone.
            if hashes.len() > 1 && answers.iter().all(Result::is_err) {
                let alone = hashes.into_iter().map(|h| lookup(vec![h]));
                return futures_util::future::join_all(alone)
                    .await
                    .into_iter()
                    .flatten()
                    .collect();
            }
            answers
        })
        .await
        .unwrap_or_else(|| {
            Err(Error::internal(
                "a receipt lookup was dropped before the node answered",
            ))
        })
}

/// One chain's receipt watch.
pub struct ReceiptWatch {
    provider: DynProvider,
    /// Taken out of logged errors (it may hold a key).
    rpc_url: Option<String>,
    poll: Duration,
    state: Mutex<State>,
}

/// Where the watch's reading stood when a waiter last knew its transactions unmined.
#[derive(Debug, Clone, Copy)]
pub struct Mark {
    gaps: u64,
    reads: u64,
    remembered: u64,
    at: tokio::time::Instant,
}

/// What a waiter does when [`ReceiptWatch::until_mined`] returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Waited {
    /// Look for the receipt: woken by a block holding one of the hashes, or the watch may have
    /// missed it, or the node was last asked long ago. Otherwise none of them is mined as far as
    /// the watch read.
    pub look: bool,
    /// The watch read one of the hashes in a block (woken, or found among the recent hashes), or
    /// was turned off.
    pub saw: bool,
    /// The sender had a transaction in a block the watch read within `SENDER_MINING_POLLS` polls.
    pub sender_mining: bool,
}

/// A wallet whose executions wait: how many, and when the watch last read one of its
/// transactions in a block.
#[derive(Default)]
struct Sender {
    waiters: usize,
    mined_at: Option<tokio::time::Instant>,
}

#[derive(Default)]
struct State {
    waiters: HashMap<B256, Vec<(u64, Arc<Notify>)>>,
    next_waiter: u64,
    running: bool,
    /// Bumped whenever the blocks read stop being one unbroken run: the first read, a jump ahead,
    /// the watch turned off.
    gaps: u64,
    /// Bumped each time the watch has read through the latest block.
    reads: u64,
    /// How many hashes were ever remembered among the recent ones (RECENT more since a mark: one
    /// read after it may be gone before its waiter registers again).
    remembered: u64,
    senders: HashMap<Address, Sender>,
    /// The next block to read, kept across the task's restarts (so a block mined while no one
    /// waited, just before a waiter came, is still read).
    next: Option<u64>,
    /// The node does not serve `eth_getBlockReceipts` (or its reads keep failing): until then,
    /// waiters poll on their own.
    off_until: Option<tokio::time::Instant>,
    recent: VecDeque<B256>,
    /// Each recent hash's receipt status as the block's receipts gave it (`None` when the node
    /// left it out).
    recent_set: HashMap<B256, Option<bool>>,
}

impl State {
    fn remember(&mut self, hash: B256, status: Option<bool>) {
        if self.recent_set.insert(hash, status).is_none() {
            self.remembered += 1;
            self.recent.push_back(hash);
            if self.recent.len() > RECENT
                && let Some(old) = self.recent.pop_front()
            {
                self.recent_set.remove(&old);
            }
        }
    }
}

/// A waiter's place under its hashes, given up when it stops waiting.
struct Registered<'a> {
    watch: &'a ReceiptWatch,
    id: u64,
    hashes: &'a [B256],
    sender: Option<Address>,
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        let mut state = self.watch.state();
        for hash in self.hashes {
            if let Some(list) = state.waiters.get_mut(hash) {
                list.retain(|(waiter, _)| *waiter != self.id);
                if list.is_empty() {
                    state.waiters.remove(hash);
                }
            }
        }
        if let Some(sender) = self.sender
            && let Some(seen) = state.senders.get_mut(&sender)
        {
            seen.waiters = seen.waiters.saturating_sub(1);
            if seen.waiters == 0 {
                state.senders.remove(&sender);
            }
        }
    }
}

impl ReceiptWatch {
    pub fn new(provider: DynProvider, rpc_url: Option<String>, poll: Duration) -> Arc<Self> {
        Arc::new(Self {
            provider,
            rpc_url,
            poll,
            state: Mutex::new(State::default()),
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The receipt status of `hash` (`Some(success)`) when a block the watch read lately holds it:
    /// the node's own answer, read with the block's receipts, so the woken waiter need not ask
    /// again.
    pub fn seen(&self, hash: &B256) -> Option<bool> {
        self.state().recent_set.get(hash).copied().flatten()
    }

    /// Where the watch's reading stands now: taken by a waiter just before it asks the node for its
    /// receipt or hands its transactions over.
    pub fn mark(&self) -> Mark {
        let state = self.state();
        Mark {
            gaps: state.gaps,
            reads: state.reads,
            remembered: state.remembered,
            at: tokio::time::Instant::now(),
        }
    }

    /// Sleeps until a block holding one of `hashes` has been read, or one fallback interval
    /// (`FALLBACK_POLLS` polls) has passed, whichever comes first, and says whether the caller
    /// should look up its receipt (see [`Waited`]; `mark`: when the caller last knew `hashes`
    /// unmined, `None` when it does not). Where the node serves no block receipts, sleeps one poll
    /// (looking up every poll). `sender`: whose transactions they are.
    pub async fn until_mined(
        self: &Arc<Self>,
        hashes: &[B256],
        sender: Option<Address>,
        mark: Option<Mark>,
    ) -> Waited {
        let registered = {
            let mut state = self.state();
            let off = state
                .off_until
                .is_some_and(|until| tokio::time::Instant::now() < until);
            if off || hashes.is_empty() {
                None
            } else if hashes.iter().any(|h| state.recent_set.contains_key(h)) {
                // Read mined already (just before this waiter came, or its wake-up's lookup found
                // nothing: a node behind the one the watch asked). Taken out, and looked up again
                // after one poll; a lookup that still finds nothing registers next time.
                for h in hashes {
                    state.recent_set.remove(h);
                }
                None
            } else {
                Some(self.register(&mut state, hashes, sender))
            }
        };
        let Some((id, woken)) = registered else {
            tokio::time::sleep(self.poll).await;
            return Waited {
                look: true,
                saw: !hashes.is_empty(),
                sender_mining: false,
            };
        };
        // Taken out of the waiters however this ends (also when the caller stops waiting), after
        // what the watch saw is read below.
        let _registered = Registered {
            watch: self,
            id,
            hashes,
            sender,
        };
        let woke = tokio::time::timeout(self.poll * FALLBACK_POLLS, woken.notified())
            .await
            .is_ok();
        let state = self.state();
        let sender_mining = sender
            .and_then(|s| state.senders.get(&s)?.mined_at)
            .is_some_and(|at| at.elapsed() < self.poll * SENDER_MINING_POLLS);
        // Nothing can have been missed: every block since the mark read in one run, through the
        // latest block by a tick that began after the mark (two reads through since it), and no
        // hash read since it can have left the recent ones.
        let read_since = mark.is_some_and(|m| {
            m.gaps == state.gaps
                && state.reads >= m.reads + 2
                && (state.remembered.saturating_sub(m.remembered) as usize) < RECENT
                && m.at.elapsed() < self.poll * QUIET_FALLBACK_POLLS
        });
        drop(state);
        Waited {
            look: woke || !read_since,
            saw: woke,
            sender_mining,
        }
    }

    /// Puts a waiter under each of its hashes, and starts the watch if it is not running.
    fn register(
        self: &Arc<Self>,
        state: &mut State,
        hashes: &[B256],
        sender: Option<Address>,
    ) -> (u64, Arc<Notify>) {
        let id = state.next_waiter;
        state.next_waiter += 1;
        if let Some(sender) = sender {
            state.senders.entry(sender).or_default().waiters += 1;
        }
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
        let mut failures = 0u32;
        loop {
            tokio::time::sleep(self.poll).await;
            let next = {
                let mut state = self.state();
                // Under the lock a registration takes: a waiter that came meanwhile finds the
                // watch running, or starts a new one.
                if state.waiters.is_empty() {
                    state.running = false;
                    return;
                }
                state.next
            };
            let latest = match self.provider.get_block_number().await {
                Ok(n) => n,
                Err(e) => {
                    tracing::debug!(error = %self.without_url(e), "reading the block number for receipts failed");
                    continue;
                }
            };
            let from = match next {
                // Too far behind (idle a long while, or a node racing ahead): the last blocks
                // only; the waiters of skipped blocks look for themselves after the fallback.
                Some(n) if latest >= n => n.max(latest.saturating_sub(MAX_BLOCKS_PER_TICK - 1)),
                // Nothing new: read through.
                Some(_) => {
                    self.state().reads += 1;
                    continue;
                }
                // The first read: the last few blocks (a waiter looked for its receipt just before
                // it came, and the transaction may have been mined since).
                None => latest.saturating_sub(2),
            };
            if next != Some(from) {
                self.state().gaps += 1;
            }
            let mut read_through = true;
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
                        failures = 0;
                        let mut state = self.state();
                        if !state.senders.is_empty() {
                            let now = tokio::time::Instant::now();
                            for r in &mined {
                                let sender: Option<Address> =
                                    r.get("from").and_then(|f| f.as_str()?.parse().ok());
                                if let Some(seen) = sender.and_then(|s| state.senders.get_mut(&s)) {
                                    seen.mined_at = Some(now);
                                }
                            }
                        }
                        let hashes = mined.iter().filter_map(|r| {
                            let hash = r.get("transactionHash")?.as_str()?.parse::<B256>().ok()?;
                            let status = match r.get("status").and_then(|s| s.as_str()) {
                                Some("0x1") => Some(true),
                                Some("0x0") => Some(false),
                                _ => None,
                            };
                            Some((hash, status))
                        });
                        for (hash, status) in hashes {
                            state.remember(hash, status);
                            if let Some(list) = state.waiters.remove(&hash) {
                                for (_, woken) in list {
                                    woken.notify_one();
                                }
                            }
                        }
                        state.next = Some(number + 1);
                    }
                    // Not there yet (a node behind its own head): read again next tick.
                    Ok(None) => {
                        read_through = false;
                        break;
                    }
                    Err(e) => {
                        failures += 1;
                        let refused = unsupported(&e);
                        if refused || failures >= FAILURES_BEFORE_OFF {
                            tracing::warn!(
                                error = %self.without_url(&e),
                                off_seconds = OFF_FOR.as_secs(),
                                "eth_getBlockReceipts is refused or keeps failing; each execution polls its own receipts for a while"
                            );
                            let mut state = self.state();
                            state.off_until = Some(tokio::time::Instant::now() + OFF_FOR);
                            state.running = false;
                            state.gaps += 1;
                            // Wake everyone: they poll on their own meanwhile.
                            for (_, list) in state.waiters.drain() {
                                for (_, woken) in list {
                                    woken.notify_one();
                                }
                            }
                            return;
                        }
                        tracing::debug!(error = %self.without_url(&e), block = number, "reading a block's receipts failed");
                        read_through = false;
                        break;
                    }
                }
            }
            if read_through {
                self.state().reads += 1;
            }
        }
    }

    fn without_url(&self, e: impl std::fmt::Display) -> String {
        crate::plan::without_url(self.rpc_url.as_deref(), e)
    }
}

/// The node does not know the method (JSON-RPC "method not found", or a provider's wording of it).
fn unsupported(e: &alloy::transports::TransportError) -> bool {
    e.as_error_resp().is_some_and(|r| {
        let m = r.message.to_ascii_lowercase();
        r.code == -32601
            || m.contains("method not found")
            || m.contains("not supported")
            || m.contains("unsupported")
            || m.contains("does not exist")
    })
}
