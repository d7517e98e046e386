//! Reads of a chain's head that every execution makes and that change only with the next block,
//! shared by the executions of one process for a poll interval (50 ms on a local node, 1 s
//! elsewhere): the fee estimate (`eth_feeHistory`: a max fee of twice the next base fee plus the
//! tip, so an estimate one Base block old still covers the base fee's move) and each wallet's mined
//! transaction count (only a floor under the stored nonce reservations). One request refreshes
//! each while the others wait for it, so a fan-out's executions cost the node one fee read and one
//! count read per interval instead of one each.
//!
//! What is never shared: plans' reads (balances, allowances, quotes), simulations and the block
//! they are dated from (a devnet's clock may jump between two of them), the pending nonce read on
//! a retry after the node refused a transaction, and the mined count a gap fill reads.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
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

/// A wallet's shared count, with when it was last asked for.
type Asked = (Instant, Arc<Fresh<u64>>);

/// The head reads of one chain.
pub struct Head {
    /// (max fee per gas, max priority fee per gas).
    pub fees: Fresh<(u128, u128)>,
    /// Each wallet's transaction count at the latest block, shared as `fees` is, with when it was
    /// last asked for (the wallets of the last interval stay).
    mined: Mutex<HashMap<Address, Asked>>,
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
    /// One read at a time per wallet: the executions of a fan-out that miss at the same moment
    /// take the one read's answer (a thousand of them asked the node a thousand times).
    pub async fn mined_count<Fut>(
        &self,
        wallet: Address,
        read: impl FnOnce() -> Fut,
    ) -> Result<u64, Error>
    where
        Fut: Future<Output = Result<u64, Error>>,
    {
        let fresh = {
            let mut wallets = self
                .mined
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let now = Instant::now();
            // Only the wallets asked for within the interval, or being read, stay.
            wallets.retain(|_, (asked, fresh)| {
                now.duration_since(*asked) < self.ttl || Arc::strong_count(fresh) > 1
            });
            let (asked, fresh) = wallets
                .entry(wallet)
                .or_insert_with(|| (now, Arc::new(Fresh::new(self.ttl))));
            *asked = now;
            fresh.clone()
        };
        fresh.get(read).await
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
        let count = |n: u64| move || async move { Ok::<_, Error>(n) };
        let head = Head::new(LONG);
        assert_eq!(head.mined_count(a, count(5)).await.ok(), Some(5));
        assert_eq!(head.mined_count(a, count(6)).await.ok(), Some(5), "kept");
        assert_eq!(
            head.mined_count(b, count(1)).await.ok(),
            Some(1),
            "per wallet"
        );
        let head = Head::new(SHORT);
        assert_eq!(head.mined_count(a, count(5)).await.ok(), Some(5));
        tokio::time::sleep(SHORT * 3).await;
        assert_eq!(
            head.mined_count(a, count(8)).await.ok(),
            Some(8),
            "read again"
        );
    }

    #[tokio::test]
    async fn callers_that_miss_a_wallets_count_together_share_one_read() {
        let (a, b) = (Address::repeat_byte(1), Address::repeat_byte(2));
        let reads = Arc::new(AtomicU32::new(0));
        let head = Arc::new(Head::new(LONG));
        let callers: Vec<_> = (0..16u64)
            .map(|i| {
                let (head, reads) = (head.clone(), reads.clone());
                let wallet = if i % 2 == 0 { a } else { b };
                tokio::spawn(async move {
                    head.mined_count(wallet, || async move {
                        reads.fetch_add(1, Ordering::SeqCst);
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        Ok::<_, Error>(if wallet == a { 40 } else { 7 })
                    })
                    .await
                    .ok()
                })
            })
            .collect();
        let mut counts = Vec::new();
        for c in callers {
            counts.push(c.await.ok().flatten());
        }
        let expected: Vec<_> = (0..16)
            .map(|i| Some(if i % 2 == 0 { 40 } else { 7 }))
            .collect();
        assert_eq!(counts, expected);
        assert_eq!(
            reads.load(Ordering::SeqCst),
            2,
            "one read a wallet for sixteen callers"
        );
    }
}
