//! Natural batching: callers queue requests under a key, and whoever gets the key's turn next
//! takes everything queued so far and runs it as one batch; each caller gets its own answer. While
//! one batch is with the node the next callers queue behind it, so a lone caller waits for nothing
//! but its own request and one yield to the scheduler (which lets the callers woken with it queue
//! first), and under load the batches grow with it (no timer, no size to tune). The
//! chain layer's outbox hands a wallet's transactions to the node this way, and a fan-out's plan
//! reads, simulations and receipt lookups go to the node this way (`actiongate_chain::plan::batch`,
//! `actiongate_chain::sender::simulate`); the runner gathers a fan-out's execution writes.

use std::collections::HashMap;
use std::future::Future;
use std::hash::Hash;
use std::sync::{Mutex, MutexGuard, PoisonError};

use tokio::sync::oneshot;

use crate::locks::KeyedLocks;

/// A queued request's answer, once its batch has run.
pub struct Ticket<Resp>(oneshot::Receiver<Resp>);

/// The requests queued under each key, each with where its answer goes.
type Queues<K, Req, Resp> = HashMap<K, Vec<(Req, oneshot::Sender<Resp>)>>;

/// Requests queued by key, run in batches.
pub struct Gather<K, Req, Resp> {
    queued: Mutex<Queues<K, Req, Resp>>,
    /// One batch at a time per key: the holder takes everything queued.
    turns: KeyedLocks<K>,
    /// What its batches are, for the batch-size metric ([`crate::metrics::GATHERED_BATCH_SIZE`]).
    kind: &'static str,
}

impl<K, Req, Resp> Gather<K, Req, Resp> {
    /// Batches of `kind` (a fixed word: `outbox`, `reservations`, …, the metric's label).
    pub fn new(kind: &'static str) -> Self {
        Self {
            queued: Mutex::new(HashMap::new()),
            turns: KeyedLocks::default(),
            kind,
        }
    }
}

impl<K, Req, Resp> Default for Gather<K, Req, Resp> {
    fn default() -> Self {
        Self::new("other")
    }
}

impl<K: Eq + Hash + Clone, Req, Resp> Gather<K, Req, Resp> {
    fn queued(&self) -> MutexGuard<'_, Queues<K, Req, Resp>> {
        // Nothing panics while holding it; should something, the map is still whole.
        self.queued.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues `request` under `key`; [`Gather::run`] runs it (in this caller's batch or an earlier
    /// caller's).
    pub fn queue(&self, key: K, request: Req) -> Ticket<Resp> {
        let (answer, ticket) = oneshot::channel();
        self.queued()
            .entry(key)
            .or_default()
            .push((request, answer));
        Ticket(ticket)
    }

    /// Waits for `key`'s turn and runs everything queued under it with `batch`, which answers each
    /// request in order, and answers `ticket`'s; or answers at once when an earlier turn's batch
    /// took this ticket's request along and answered it while this caller waited. `None` when its batch answered fewer requests than it was given or was dropped
    /// before answering (its caller's future dropped mid-batch): the request's outcome is unknown.
    pub async fn run<F, Fut>(&self, key: K, ticket: Ticket<Resp>, batch: F) -> Option<Resp>
    where
        F: FnOnce(Vec<Req>) -> Fut,
        Fut: Future<Output = Vec<Resp>>,
    {
        self.run_each(key, ticket, |requests, answers| async move {
            for (i, response) in batch(requests).await.into_iter().enumerate() {
                answers.answer(i, response);
            }
        })
        .await
    }

    /// [`Gather::run`] with a batch that answers each request as soon as it has its answer
    /// ([`Answers::answer`], by the request's index in the batch): a caller answered mid-batch
    /// goes on while the rest of the batch runs (the turn's holder, which runs it, when it ends).
    /// A request the batch does not answer gets `None`.
    pub async fn run_each<F, Fut>(&self, key: K, ticket: Ticket<Resp>, batch: F) -> Option<Resp>
    where
        F: FnOnce(Vec<Req>, Answers<Resp>) -> Fut,
        Fut: Future<Output = ()>,
    {
        self.take_turn(key, ticket, |requests, answers, _| batch(requests, answers))
            .await
    }

    /// [`Gather::run_each`] whose batch may take more while it runs: what is queued under the key
    /// meanwhile, through [`More`] (the turn's holder alone takes the queue, so nothing is taken
    /// twice), each answered in its own [`Answers`].
    pub async fn run_each_more<'g, F, Fut>(
        &'g self,
        key: K,
        ticket: Ticket<Resp>,
        batch: F,
    ) -> Option<Resp>
    where
        F: FnOnce(Vec<Req>, Answers<Resp>, More<'g, K, Req, Resp>) -> Fut,
        Fut: Future<Output = ()>,
    {
        self.take_turn(key, ticket, batch).await
    }

    async fn take_turn<'g, F, Fut>(
        &'g self,
        key: K,
        mut ticket: Ticket<Resp>,
        batch: F,
    ) -> Option<Resp>
    where
        F: FnOnce(Vec<Req>, Answers<Resp>, More<'g, K, Req, Resp>) -> Fut,
        Fut: Future<Output = ()>,
    {
        {
            // Answered by an earlier turn's batch while waiting for a turn: done, without one. A
            // caller that waited for its turn all the same held up everyone queued behind it for
            // the batch the turn before it ran (whatever arrived meanwhile, often one request): at
            // 1,000 executions at once the plan reads went in 2,000 batches of one, one after the
            // other.
            let _turn = tokio::select! {
                biased;
                answer = &mut ticket.0 => return answer.ok(),
                turn = self.turns.lock(key.clone()) => turn,
            };
            // Callers woken by the same event as this one (a fan-out's executions answered by one
            // batch upstream) queue before the batch is taken: one yield to the scheduler, so that
            // they go together instead of this one alone and the rest in the next batch.
            tokio::task::yield_now().await;
            let taken = self.queued().remove(&key).unwrap_or_default();
            if !taken.is_empty() {
                let size = taken.len();
                crate::metrics::gathered(self.kind, size);
                let started = std::time::Instant::now();
                let (requests, answers) = split(taken);
                let more = More {
                    gather: self,
                    key: key.clone(),
                };
                batch(requests, answers, more).await;
                // When each batch ran and for how long (a fan-out's timeline, at trace level).
                tracing::trace!(
                    kind = self.kind,
                    size,
                    ms = started.elapsed().as_secs_f64() * 1e3,
                    "a gathered batch ran"
                );
            }
        }
        ticket.0.await.ok()
    }

    /// Queues `request` and runs it ([`Gather::queue`], [`Gather::run`]).
    pub async fn one<F, Fut>(&self, key: K, request: Req, batch: F) -> Option<Resp>
    where
        F: FnOnce(Vec<Req>) -> Fut,
        Fut: Future<Output = Vec<Resp>>,
    {
        let ticket = self.queue(key.clone(), request);
        self.run(key, ticket, batch).await
    }

    /// Queues `request` and runs it, answered as soon as its batch has its answer
    /// ([`Gather::run_each`]).
    pub async fn one_each<F, Fut>(&self, key: K, request: Req, batch: F) -> Option<Resp>
    where
        F: FnOnce(Vec<Req>, Answers<Resp>) -> Fut,
        Fut: Future<Output = ()>,
    {
        let ticket = self.queue(key.clone(), request);
        self.run_each(key, ticket, batch).await
    }
}

/// A running batch's way to what was queued under its key after it was taken
/// ([`Gather::run_each_more`]).
pub struct More<'g, K, Req, Resp> {
    gather: &'g Gather<K, Req, Resp>,
    key: K,
}

impl<K: Eq + Hash + Clone, Req, Resp> More<'_, K, Req, Resp> {
    /// Takes what is queued under the key now (often nothing), answered in its own [`Answers`].
    pub fn take(&self) -> (Vec<Req>, Answers<Resp>) {
        split(self.gather.queued().remove(&self.key).unwrap_or_default())
    }
}

/// Requests taken from a queue, and where their answers go.
fn split<Req, Resp>(taken: Vec<(Req, oneshot::Sender<Resp>)>) -> (Vec<Req>, Answers<Resp>) {
    let (requests, answers): (Vec<Req>, Vec<_>) = taken.into_iter().unzip();
    let answers = Answers(std::sync::Arc::new(
        answers.into_iter().map(|a| Mutex::new(Some(a))).collect(),
    ));
    (requests, answers)
}

/// Where a batch's answers go, by each request's index in the batch: each request answered once
/// (a second answer is dropped), from any task or thread (cloned into each).
pub struct Answers<Resp>(std::sync::Arc<Vec<Mutex<Option<oneshot::Sender<Resp>>>>>);

impl<Resp> Clone for Answers<Resp> {
    fn clone(&self) -> Self {
        Self(self.0.clone())
    }
}

impl<Resp> Answers<Resp> {
    /// Answers the batch's `i`th request (its caller goes on), unless it was answered already.
    pub fn answer(&self, i: usize, response: Resp) {
        let sender = self
            .0
            .get(i)
            .and_then(|slot| slot.lock().unwrap_or_else(PoisonError::into_inner).take());
        if let Some(sender) = sender {
            let _ = sender.send(response);
        }
    }
}

/// Runs `run` over all of `requests` as one batch (one transaction, one node request) and, when it
/// fails as a whole, over each request alone, so that a failing request fails alone and the others
/// go on. `run` answers one response per request, in order; a request run alone that it answers
/// nothing for gets `missing()`.
pub async fn each_alone_on_failure<Req, Resp, E, F, Fut>(
    requests: Vec<Req>,
    run: F,
    missing: impl Fn() -> E,
) -> Vec<Result<Resp, E>>
where
    Req: Clone,
    F: Fn(Vec<Req>) -> Fut,
    Fut: Future<Output = Result<Vec<Resp>, E>>,
{
    let whole = if requests.len() == 1 {
        run(requests).await
    } else {
        match run(requests.clone()).await {
            Ok(all) => Ok(all),
            Err(_) => {
                let mut each = Vec::with_capacity(requests.len());
                for request in requests {
                    each.push(match run(vec![request]).await {
                        Ok(one) => one.into_iter().next().ok_or_else(&missing),
                        Err(e) => Err(e),
                    });
                }
                return each;
            }
        }
    };
    match whole {
        Ok(all) => all.into_iter().map(Ok).collect(),
        Err(e) => vec![Err(e)],
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::Gather;

    /// A batch that answers a request mid-batch lets its caller go on while the batch still runs.
    #[tokio::test]
    async fn a_caller_answered_mid_batch_goes_on_before_the_batch_ends() {
        let gather: Arc<Gather<u8, u32, u32>> = Arc::default();
        // Queued before the holder takes the turn: the holder's batch takes it along (index 0).
        let waiting = gather.queue(0, 2);
        let (release, hold) = tokio::sync::oneshot::channel::<()>();
        let (running, started) = tokio::sync::oneshot::channel::<()>();
        let holder = {
            let gather = gather.clone();
            tokio::spawn(async move {
                gather
                    .one_each(0, 1, |reqs, answers| async move {
                        assert_eq!(reqs, vec![2, 1]);
                        answers.answer(0, 20);
                        answers.answer(0, 21); // a second answer is dropped
                        let _ = running.send(());
                        let _ = hold.await;
                        answers.answer(1, 10);
                    })
                    .await
            })
        };
        started.await.unwrap();
        let early = gather
            .run_each(0, waiting, |_, _| async {
                unreachable!("answered by the holder's batch")
            })
            .await;
        assert_eq!(
            early,
            Some(20),
            "answered while the holder's batch is still held"
        );
        assert!(!holder.is_finished());
        let _ = release.send(());
        assert_eq!(holder.await.unwrap(), Some(10));
    }

    /// Callers that queue while a batch runs go out together in the next one, each answered its own.
    #[tokio::test]
    async fn callers_queued_during_a_batch_run_together_in_the_next() {
        let gather: Arc<Gather<u8, u32, u32>> = Arc::default();
        let batches = Arc::new(std::sync::Mutex::new(Vec::<Vec<u32>>::new()));
        let (release, hold) = tokio::sync::oneshot::channel::<()>();
        let (running, started) = tokio::sync::oneshot::channel::<()>();
        let first = {
            let (gather, batches) = (gather.clone(), batches.clone());
            tokio::spawn(async move {
                gather
                    .one(0, 1, |reqs| async move {
                        let _ = running.send(());
                        let _ = hold.await;
                        batches.lock().unwrap().push(reqs.clone());
                        reqs.into_iter().map(|r| r * 10).collect()
                    })
                    .await
            })
        };
        // The first batch holds the turn until released; three more queue behind it.
        started.await.unwrap();
        let mut later = Vec::new();
        for r in 2..=4u32 {
            let (gather, batches) = (gather.clone(), batches.clone());
            later.push(tokio::spawn(async move {
                gather
                    .one(0, r, |reqs| async move {
                        batches.lock().unwrap().push(reqs.clone());
                        reqs.into_iter().map(|r| r * 10).collect()
                    })
                    .await
            }));
        }
        while gather.queued().get(&0).map_or(0, Vec::len) < 3 {
            tokio::task::yield_now().await;
        }
        let _ = release.send(());
        assert_eq!(first.await.unwrap(), Some(10));
        for (r, h) in (2..=4u32).zip(later) {
            assert_eq!(h.await.unwrap(), Some(r * 10));
        }
        assert_eq!(*batches.lock().unwrap(), vec![vec![1], vec![2, 3, 4]]);
    }

    /// A running batch (`run_each_more`) takes what was queued under its key after it was taken,
    /// once, and answers it: the callers of those requests return without a turn of their own.
    #[tokio::test]
    async fn a_running_batch_takes_what_is_queued_meanwhile() {
        let gather: Arc<Gather<u8, u32, u32>> = Arc::default();
        let (release, hold) = tokio::sync::oneshot::channel::<()>();
        let (running, runs) = tokio::sync::oneshot::channel::<Vec<u32>>();
        let ticket = gather.queue(0, 1);
        let holder = {
            let gather = gather.clone();
            tokio::spawn(async move {
                gather
                    .run_each_more(0, ticket, |reqs, answers, more| async move {
                        let _ = running.send(reqs.clone());
                        for (i, r) in reqs.into_iter().enumerate() {
                            answers.answer(i, r * 10);
                        }
                        let _ = hold.await;
                        let (later, answers) = more.take();
                        assert_eq!(later, vec![2, 3]);
                        for (i, r) in later.into_iter().enumerate() {
                            answers.answer(i, r * 10);
                        }
                        assert!(more.take().0.is_empty(), "each taken once");
                    })
                    .await
            })
        };
        assert_eq!(runs.await.unwrap(), vec![1], "the batch as taken");
        let later: Vec<_> = (2..=3u32).map(|r| gather.queue(0, r)).collect();
        let _ = release.send(());
        assert_eq!(holder.await.unwrap(), Some(10));
        for (r, ticket) in (2..=3u32).zip(later) {
            let answer = gather
                .run_each(0, ticket, |_, _| async {
                    unreachable!("answered by the holder's batch")
                })
                .await;
            assert_eq!(answer, Some(r * 10));
        }
    }

    /// A caller whose request an earlier turn's batch answered returns at once, without a turn of
    /// its own: it is not held up behind a batch of requests that came after it (here the next
    /// request of a caller answered before it, whose batch does not end until released).
    #[tokio::test]
    async fn a_caller_answered_by_an_earlier_batch_does_not_wait_for_a_turn() {
        let gather: Arc<Gather<u8, u32, u32>> = Arc::default();
        let release_first = Arc::new(tokio::sync::Notify::new());
        let release_later = Arc::new(tokio::sync::Notify::new());
        let first_running = Arc::new(std::sync::atomic::AtomicBool::new(false));
        // Each request answered times ten; a batch holding 1 ends once `release_first` is told, one
        // holding 4 once `release_later` is.
        let batch = {
            let (first, later, running) = (
                release_first.clone(),
                release_later.clone(),
                first_running.clone(),
            );
            move |reqs: Vec<u32>| {
                let (first, later, running) = (first.clone(), later.clone(), running.clone());
                async move {
                    if reqs.contains(&1) {
                        running.store(true, Ordering::SeqCst);
                        first.notified().await;
                    }
                    if reqs.contains(&4) {
                        later.notified().await;
                    }
                    reqs.into_iter().map(|r| r * 10).collect::<Vec<_>>()
                }
            }
        };
        let queued = |n: usize| {
            let gather = gather.clone();
            async move {
                while gather.queued().get(&0).map_or(0, Vec::len) < n {
                    tokio::task::yield_now().await;
                }
            }
        };
        let first = {
            let (gather, batch) = (gather.clone(), batch.clone());
            tokio::spawn(async move { gather.one(0, 1, batch).await })
        };
        while !first_running.load(Ordering::SeqCst) {
            tokio::task::yield_now().await;
        }
        // Behind the first batch: a caller that, once answered, asks again (4); then two more.
        let second = {
            let (gather, batch) = (gather.clone(), batch.clone());
            tokio::spawn(async move {
                let answered = gather.one(0, 2, batch.clone()).await;
                (answered, gather.one(0, 4, batch).await)
            })
        };
        queued(1).await;
        let behind: Vec<_> = [5u32, 3]
            .into_iter()
            .enumerate()
            .map(|(i, r)| {
                let (gather, batch) = (gather.clone(), batch.clone());
                let caller = tokio::spawn(async move { gather.one(0, r, batch).await });
                (i, r, caller)
            })
            .collect();
        let mut waiting = Vec::new();
        for (i, r, caller) in behind {
            queued(2 + i).await;
            waiting.push((r, caller));
        }
        release_first.notify_one();
        for (r, caller) in waiting {
            let answered = tokio::time::timeout(std::time::Duration::from_secs(10), caller)
                .await
                .expect("a caller answered by an earlier batch waited for a later one");
            assert_eq!(answered.unwrap(), Some(r * 10));
        }
        release_later.notify_one();
        assert_eq!(first.await.unwrap(), Some(10));
        assert_eq!(second.await.unwrap(), (Some(20), Some(40)));
    }

    /// Callers woken by one event (a fan-out's executions answered by one batch upstream) go as one
    /// batch, not the first alone and the rest after it.
    #[tokio::test]
    async fn callers_woken_together_go_in_one_batch() {
        let gather: Arc<Gather<u8, u32, u32>> = Arc::default();
        let batches = Arc::new(std::sync::Mutex::new(Vec::<Vec<u32>>::new()));
        let go = Arc::new(tokio::sync::Notify::new());
        let waiting = Arc::new(AtomicUsize::new(0));
        let callers: Vec<_> = (1..=5u32)
            .map(|r| {
                let (gather, batches, go, waiting) =
                    (gather.clone(), batches.clone(), go.clone(), waiting.clone());
                tokio::spawn(async move {
                    let woken = go.notified();
                    waiting.fetch_add(1, Ordering::SeqCst);
                    woken.await;
                    gather
                        .one(0, r, |reqs| async move {
                            batches.lock().unwrap().push(reqs.clone());
                            reqs.into_iter().map(|r| r * 10).collect()
                        })
                        .await
                })
            })
            .collect();
        while waiting.load(Ordering::SeqCst) < 5 {
            tokio::task::yield_now().await;
        }
        go.notify_waiters();
        for (r, caller) in (1..=5u32).zip(callers) {
            assert_eq!(caller.await.unwrap(), Some(r * 10));
        }
        assert_eq!(*batches.lock().unwrap(), vec![vec![1, 2, 3, 4, 5]]);
    }

    /// A batch that fails as a whole is run request by request: only the failing one fails.
    #[tokio::test]
    async fn a_failing_batch_is_run_each_alone() {
        let runs = std::sync::Mutex::new(Vec::new());
        let run = |reqs: Vec<u32>| {
            runs.lock().unwrap().push(reqs.clone());
            async move {
                if reqs.contains(&2) {
                    Err(format!("{reqs:?} refused"))
                } else {
                    Ok(reqs.into_iter().map(|r| r * 10).collect())
                }
            }
        };
        let missing = || "nothing".to_owned();
        let answers = super::each_alone_on_failure(vec![1, 2, 3], run, missing).await;
        assert_eq!(answers, vec![Ok(10), Err("[2] refused".to_owned()), Ok(30)]);
        assert_eq!(
            *runs.lock().unwrap(),
            vec![vec![1, 2, 3], vec![1], vec![2], vec![3]]
        );
        let answers = super::each_alone_on_failure(vec![1, 3], run, missing).await;
        assert_eq!(answers, vec![Ok(10), Ok(30)]);
    }

    /// A batch that answers fewer requests than it was given leaves the rest `None`, not waiting.
    #[tokio::test]
    async fn a_short_answer_leaves_the_rest_unknown() {
        let gather: Gather<u8, u32, u32> = Gather::default();
        let runs = AtomicUsize::new(0);
        let a = gather.queue(0, 1);
        let b = gather.queue(0, 2);
        let batch = |reqs: Vec<u32>| {
            runs.fetch_add(1, Ordering::Relaxed);
            async move { reqs.into_iter().take(1).collect() }
        };
        assert_eq!(gather.run(0, a, batch).await, Some(1));
        assert_eq!(gather.run(0, b, |_| async { Vec::new() }).await, None);
        assert_eq!(runs.load(Ordering::Relaxed), 1);
    }
}
