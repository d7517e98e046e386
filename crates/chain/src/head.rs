//! Reads of a chain's head that every execution makes and that change only with the next block,
//! shared by the executions of one process for a poll interval (50 ms on a local node, 1 s
//! elsewhere): the fee estimate (`eth_feeHistory`: a max fee of twice the next base fee plus the
//! tip, so an estimate one Base block old still covers the base fee's move) and each wallet's mined
//! transaction count (only a floor under the stored nonce reservations). One request refreshes the
//! fees while the others wait for it, so a fan-out's executions cost the node one fee read per
//! interval instead of one each.
//!
//! What is never shared: plans' reads (balances, allowances, quotes), simulations and the block
//! they are dated from (a devnet's clock may jump between two of them), the pending nonce read on
//! a retry after the node refused a transaction, and the mined count a gap fill reads.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Mutex;
use std::time::Duration;

use actiongate_core::Error;
use alloy::primitives::Address;
use tokio::time::Instant;

/// A value read from the node, shared until it is older than the interval. The first caller past
/// the interval reads it again; callers that queued meanwhile take that read's outcome, a failure
/// included (one request, not one each, also while the node is failing). A failure is not kept for
/// later callers.
pub struct Fresh<T, E = Error> {
    ttl: Duration,
    /// Reads finished so far: a caller that saw fewer before queuing takes the last outcome.
    reads: std::sync::atomic::AtomicU64,
    cell: tokio::sync::Mutex<Option<Read<T, E>>>,
}

struct Read<T, E> {
    /// When the read was asked for (its value is at least this old).
    at: Instant,
    number: u64,
    outcome: Result<T, E>,
}

impl<T: Clone, E: Clone> Fresh<T, E> {
    pub fn new(ttl: Duration) -> Self {
        Self {
            ttl,
            reads: std::sync::atomic::AtomicU64::new(0),
            cell: tokio::sync::Mutex::new(None),
        }
    }

    /// The shared value, or `read`'s when it is older than the interval.
    pub async fn get<Fut>(&self, read: impl FnOnce() -> Fut) -> Result<T, E>
    where
        Fut: Future<Output = Result<T, E>>,
    {
        use std::sync::atomic::Ordering;
        let seen = self.reads.load(Ordering::Acquire);
        let mut cell = self.cell.lock().await;
        if let Some(last) = &*cell {
            // A read finished while this caller waited for it: its outcome is this caller's too.
            if last.number > seen {
                return last.outcome.clone();
            }
            if let Ok(value) = &last.outcome
                && last.at.elapsed() < self.ttl
            {
                return Ok(value.clone());
            }
        }
        let at = Instant::now();
        let outcome = read().await;
        let number = self.reads.fetch_add(1, Ordering::AcqRel) + 1;
        *cell = Some(Read {
            at,
            number,
            outcome: outcome.clone(),
        });
        outcome
    }
}

/// The head reads of one chain.
pub struct Head {
    /// (max fee per gas, max priority fee per gas).
    pub fees: Fresh<(u128, u128)>,
    /// Each wallet's transaction count at the latest block, when read.
    mined: Mutex<HashMap<Address, (Instant, u64)>>,
    ttl: Duration,
}

impl Head {
    pub fn new(ttl: Duration) -> Self {
        Self {
            fees: Fresh::new(ttl),
            mined: Mutex::new(HashMap::new()),
            ttl,
        }
    }

    /// `wallet`'s mined transaction count, read by `read` unless it was read within the interval.
    /// Reads of one wallet that cross are not merged (the executions of a fan-out that miss at the
    /// same moment each read): the count is a floor under the stored reservations, and the higher
    /// of two crossing reads is kept.
    pub async fn mined_count<E, Fut>(
        &self,
        wallet: Address,
        read: impl FnOnce() -> Fut,
    ) -> Result<u64, E>
    where
        Fut: Future<Output = Result<u64, E>>,
    {
        if let Some(count) = self
            .counts()
            .get(&wallet)
            .and_then(|(at, count)| (at.elapsed() < self.ttl).then_some(*count))
        {
            return Ok(count);
        }
        let at = Instant::now();
        let count = read().await?;
        let mut counts = self.counts();
        // Only the fresh ones stay: the map holds the wallets of the last interval.
        counts.retain(|_, (read_at, _)| read_at.elapsed() < self.ttl);
        let entry = counts.entry(wallet).or_insert((at, count));
        *entry = (entry.0.max(at), entry.1.max(count));
        Ok(entry.1)
    }

    fn counts(&self) -> std::sync::MutexGuard<'_, HashMap<Address, (Instant, u64)>> {
        self.mined
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;

    // Real time: an interval long enough that no pause of the machine ends it where it must not,
    // and sleeps past a short one where it must end.
    const LONG: Duration = Duration::from_secs(30);
    const SHORT: Duration = Duration::from_millis(20);

    /// A slow node's read answering `outcome`, counted.
    fn slow(
        reads: &Arc<AtomicU32>,
        outcome: Result<u64, String>,
    ) -> impl FnOnce() -> std::pin::Pin<Box<dyn Future<Output = Result<u64, String>> + Send>> + use<>
    {
        let reads = reads.clone();
        move || {
            Box::pin(async move {
                reads.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(10)).await;
                outcome
            })
        }
    }

    async fn eight_callers(
        fresh: &Arc<Fresh<u64, String>>,
        reads: &Arc<AtomicU32>,
        outcome: Result<u64, String>,
    ) -> Vec<Result<u64, String>> {
        let callers: Vec<_> = (0..8)
            .map(|_| {
                let fresh = fresh.clone();
                let read = slow(reads, outcome.clone());
                tokio::spawn(async move { fresh.get(read).await })
            })
            .collect();
        let mut outcomes = Vec::new();
        for c in callers {
            outcomes.push(c.await.unwrap_or_else(|e| Err(e.to_string())));
        }
        outcomes
    }

    #[tokio::test]
    async fn one_read_serves_every_caller_of_the_interval() {
        let reads = Arc::new(AtomicU32::new(0));
        let fresh = Arc::new(Fresh::new(LONG));
        let outcomes = eight_callers(&fresh, &reads, Ok(7)).await;
        assert_eq!(outcomes, vec![Ok(7); 8]);
        assert_eq!(
            reads.load(Ordering::SeqCst),
            1,
            "one read for eight callers"
        );
        assert_eq!(fresh.get(slow(&reads, Ok(8))).await, Ok(7), "still fresh");

        let fresh = Fresh::new(SHORT);
        assert_eq!(fresh.get(slow(&reads, Ok(9))).await, Ok(9));
        tokio::time::sleep(SHORT * 3).await;
        assert_eq!(
            fresh.get(slow(&reads, Ok(10))).await,
            Ok(10),
            "read again after the interval"
        );
    }

    #[tokio::test]
    async fn a_failed_read_answers_the_callers_that_waited_for_it_and_is_not_kept() {
        let reads = Arc::new(AtomicU32::new(0));
        let fresh = Arc::new(Fresh::new(LONG));
        let outcomes = eight_callers(&fresh, &reads, Err("down".into())).await;
        assert_eq!(outcomes, vec![Err("down".to_owned()); 8]);
        assert_eq!(
            reads.load(Ordering::SeqCst),
            1,
            "the callers queued behind a failing read do not each read again"
        );
        assert_eq!(
            fresh.get(slow(&reads, Ok(11))).await,
            Ok(11),
            "a later caller reads again"
        );
        assert_eq!(reads.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_wallets_mined_count_is_kept_per_wallet_for_the_interval() {
        let (a, b) = (Address::repeat_byte(1), Address::repeat_byte(2));
        let count = |n: u64| move || async move { Ok::<_, String>(n) };
        let head = Head::new(LONG);
        assert_eq!(head.mined_count(a, count(5)).await, Ok(5));
        assert_eq!(head.mined_count(a, count(6)).await, Ok(5), "kept");
        assert_eq!(head.mined_count(b, count(1)).await, Ok(1), "per wallet");
        let head = Head::new(SHORT);
        assert_eq!(head.mined_count(a, count(5)).await, Ok(5));
        tokio::time::sleep(SHORT * 3).await;
        assert_eq!(head.mined_count(a, count(8)).await, Ok(8), "read again");
    }
}
