//! The durable intent runner. Accepted intents are rows; workers lease them (PostgreSQL:
//! `FOR UPDATE SKIP LOCKED`; SQLite: one writer), renew the lease while they work, and take over an
//! intent whose lease ended because its process died. Every (intent, user) execution is recorded as
//! started before it is attempted and as ended after; one found started-but-not-ended is reconciled
//! by its provider through its deterministic execution key, so it runs at most once.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use actiongate_api_types::ErrorCode;
use actiongate_api_types::delegation::Delegation;
use tokio::sync::{Notify, watch};

use crate::acceptance::{foreign_recipient, foreign_recipient_refusal, recipients};
use crate::catalog::{Catalog, Lane};
use crate::clock::{Clock, to_millis};
use crate::error::{Error, Result};
use crate::execution::{ExecutionContext, ExecutionOutcome, Grant, Reconciled, Registry, Subject};
use crate::gather::{Gather, each_alone_on_failure};
use crate::states::{DelegationStatus, ExecutionState, IntentStatus};
use crate::store::{
    DelegationRecord, ExecutionEnd, ExecutionFinish, ExecutionRecord, IntentRecord, LeaseFence,
    OrderEnd, Store, StoreError,
};

/// A store that answered nothing for a write asked of it alone.
fn unanswered() -> StoreError {
    StoreError::new(
        crate::store::StoreErrorKind::Other,
        "the store answered nothing for a write",
    )
}

/// Aborts a task when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// How many intents a worker leases at once.
const BATCH: u32 = 32;
/// How many handed-over reads run and are recorded together.
const HANDED_BATCH: usize = 256;
/// How soon an intent whose execution is sent and not mined yet is looked at again (by whichever
/// process claims it then): its provider re-sends, bumps and waits again.
const PENDING_RECHECK: time::Duration = time::Duration::seconds(2);
/// How soon a held order whose limit the market did not meet is looked at again (by whichever
/// process claims it then): the runner is the orders' watcher.
const HELD_RECHECK: time::Duration = time::Duration::seconds(1);

fn finish_of(outcome: ExecutionOutcome) -> ExecutionFinish {
    ExecutionFinish {
        success: outcome.success,
        tx_hash: outcome.tx_hash,
        error_code: outcome.error.as_ref().map(|(c, _)| c.as_str().to_owned()),
        error_message: outcome.error.map(|(_, m)| m),
        data: outcome.data.map(|d| d.to_string()),
        leg_open: false,
    }
}

/// How many of a fan-out's grants one store read looks up ([`IntentRunner::grant`]): those read
/// together go on together.
const GRANTS_PER_READ: usize = 128;

/// Runs intents.
pub struct IntentRunner {
    store: Arc<dyn Store>,
    registry: Arc<Registry>,
    catalog: Arc<Catalog>,
    clock: Arc<dyn Clock>,
    owner: String,
    lease: time::Duration,
    poll: Duration,
    /// How many executions of one intent run at once.
    fanout_concurrency: usize,
    wake: Notify,
    /// Told whenever this process ends intents ([`IntentRunner::intent_ended`]).
    ended: Notify,
    /// Reads this process accepted already leased to itself, run without a claim (see
    /// [`IntentRunner::hand`]); taken by the task [`IntentRunner::spawn`] starts.
    handed: std::sync::Mutex<
        Option<tokio::sync::mpsc::UnboundedReceiver<(IntentRecord, ExecutionRecord)>>,
    >,
    hand: tokio::sync::mpsc::UnboundedSender<(IntentRecord, ExecutionRecord)>,
    /// Whether workers run here (a process without workers leaves its intents to others).
    running: std::sync::atomic::AtomicBool,
    /// A fan-out's executions started and ended together are written together, by intent: one
    /// transaction (one commit) for those that reach the step at the same time
    /// ([`crate::gather::Gather`]).
    starts: Gather<String, u32, std::result::Result<bool, StoreError>>,
    ends: Gather<String, ExecutionEnd, std::result::Result<bool, StoreError>>,
    /// A fan-out's executions that look up their grants at the same time (by agent and chain) are
    /// answered together, so that they go on to the chain together and their reads are gathered.
    grants:
        Gather<(String, u64), String, std::result::Result<Option<DelegationRecord>, StoreError>>,
}

impl IntentRunner {
    pub fn new(
        store: Arc<dyn Store>,
        registry: Arc<Registry>,
        catalog: Arc<Catalog>,
        clock: Arc<dyn Clock>,
        lease: time::Duration,
        fanout_concurrency: usize,
    ) -> Self {
        let (hand, handed) = tokio::sync::mpsc::unbounded_channel();
        Self {
            store,
            registry,
            catalog,
            clock,
            owner: format!("runner-{}-{}", std::process::id(), uuid::Uuid::new_v4()),
            lease,
            poll: Duration::from_millis(250),
            fanout_concurrency: fanout_concurrency.max(1),
            wake: Notify::new(),
            ended: Notify::new(),
            handed: std::sync::Mutex::new(Some(handed)),
            hand,
            running: std::sync::atomic::AtomicBool::new(false),
            starts: Gather::new("starts"),
            ends: Gather::new("ends"),
            grants: Gather::new("grants"),
        }
    }

    /// This process's lease owner id.
    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// Tells an idle worker that there is work.
    pub fn wake(&self) {
        self.wake.notify_one();
    }

    /// Completes when this process next ends an intent (any intent: a waiter looks again at the
    /// one it waits for). Enable it before looking, so that an end in between is not missed.
    pub fn intent_ended(&self) -> tokio::sync::futures::Notified<'_> {
        self.ended.notified()
    }

    /// Tells waiters that an intent ended here outside the runner (an approval rejected or expired).
    pub(crate) fn intent_was_ended(&self) {
        self.ended.notify_waiters();
    }

    /// The lease a read accepted by this process takes at once, when this process runs intents: it
    /// is then given to [`IntentRunner::hand`] and runs without a claim. Should the process die
    /// first, the lease runs out and any process claims the read as usual.
    pub fn read_lease(&self) -> Option<(String, i64)> {
        self.running
            .load(std::sync::atomic::Ordering::Acquire)
            .then(|| (self.owner.clone(), self.lease_until()))
    }

    /// Runs a read accepted with [`IntentRunner::read_lease`], with its one (pending) execution.
    pub fn hand(&self, intent: IntentRecord, execution: ExecutionRecord) {
        if self.hand.send((intent, execution)).is_err() {
            // The reads task has ended (shutting down): the lease runs out and the read is claimed.
            tracing::debug!("read handed over after the runner stopped");
        }
    }

    /// Starts `workers` workers, and the task that runs handed-over reads; each stops taking new
    /// intents once `stop` turns true and ends after the intent in hand.
    pub fn spawn(
        self: &Arc<Self>,
        workers: usize,
        stop: watch::Receiver<bool>,
    ) -> Vec<tokio::task::JoinHandle<()>> {
        let handed = self
            .handed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        let mut tasks = Vec::new();
        if let (Some(mut handed), true) = (handed, workers > 0) {
            self.running
                .store(true, std::sync::atomic::Ordering::Release);
            let runner = self.clone();
            let mut stop = stop.clone();
            tasks.push(tokio::spawn(async move {
                loop {
                    let first = tokio::select! {
                        first = handed.recv() => first,
                        _ = stop.changed() => None,
                    };
                    let Some(first) = first else { break };
                    let mut reads = vec![first];
                    while reads.len() < HANDED_BATCH {
                        match handed.try_recv() {
                            Ok(read) => reads.push(read),
                            Err(_) => break,
                        }
                    }
                    let executions = reads.iter().map(|(i, e)| (i.id.clone(), vec![e.clone()])).collect();
                    let reads: Vec<IntentRecord> = reads.into_iter().map(|(i, _)| i).collect();
                    if let Err(e) = runner.run_reads(&reads, executions).await {
                        // Their leases run out and a worker claims them.
                        tracing::error!(code = %e.code, detail = e.detail.as_deref().unwrap_or(""), "handed-over reads failed");
                    }
                    if *stop.borrow() {
                        break;
                    }
                }
                runner.running.store(false, std::sync::atomic::Ordering::Release);
            }));
        }
        tasks.extend((0..workers)
            .map(|_| {
                let runner = self.clone();
                let mut stop = stop.clone();
                tokio::spawn(async move {
                    while !*stop.borrow() {
                        match runner.run_once().await {
                            Ok(true) => continue,
                            Ok(false) => {}
                            Err(e) => tracing::error!(code = %e.code, detail = e.detail.as_deref().unwrap_or(""), "runner step failed"),
                        }
                        tokio::select! {
                            () = runner.wake.notified() => {}
                            () = tokio::time::sleep(runner.poll) => {}
                            _ = stop.changed() => {}
                        }
                    }
                })
            }));
        tasks
    }

    fn lease_until(&self) -> i64 {
        to_millis(self.clock.now() + self.lease)
    }

    /// Leases a batch of intents and runs them; false when there was none. Reads (side-effect free)
    /// are run together and recorded and settled in one transaction; anything else one by one, each
    /// execution marked started before it is attempted.
    pub async fn run_once(&self) -> Result<bool> {
        let now = to_millis(self.clock.now());
        let claimed = self
            .store
            .claim_intents(&self.owner, now, self.lease_until(), BATCH)
            .await?;
        if claimed.is_empty() {
            return Ok(false);
        }
        let (reads, others): (Vec<IntentRecord>, Vec<IntentRecord>) =
            claimed.into_iter().partition(|i| {
                i.lane == Lane::ExecuteIntent
                    && self.catalog.resolve(&i.action).is_some_and(|a| a.is_read())
            });
        // Writes run one at a time under a heartbeat: keep one, give the other leases back at once so
        // that no lease of an intent waiting in this batch runs out (and is taken over) meanwhile.
        let mut others = others.into_iter();
        let write = others.next();
        for rest in others {
            self.store.release_lease(&rest.id, &self.owner).await?;
        }
        if !reads.is_empty() {
            let ids: Vec<String> = reads.iter().map(|i| i.id.clone()).collect();
            let mut executions: HashMap<String, Vec<ExecutionRecord>> = HashMap::new();
            for e in self.store.list_executions_of(&ids).await? {
                executions.entry(e.intent_id.clone()).or_default().push(e);
            }
            self.run_reads(&reads, executions).await?;
        }
        if let Some(intent) = write {
            self.process(intent).await?;
        }
        Ok(true)
    }

    /// Runs leased reads (side-effect free) together and records and settles them in one
    /// transaction, as long as their leases are still this process's.
    async fn run_reads(
        &self,
        reads: &[IntentRecord],
        mut executions: HashMap<String, Vec<ExecutionRecord>>,
    ) -> Result<()> {
        let mut done = Vec::new();
        let mut ended = Vec::new();
        let ids: Vec<String> = reads.iter().map(|i| i.id.clone()).collect();
        for intent in reads {
            let params = intent
                .params
                .value()
                .map_err(|e| Error::internal(format!("stored params: {e}")));
            let mut states = Vec::new();
            for execution in executions.remove(&intent.id).unwrap_or_default() {
                if execution.state.is_ended() {
                    states.push(execution.state);
                } else {
                    let outcome = match &params {
                        Ok(params) => {
                            let ctx = self.context(intent, &execution, params, String::new());
                            self.execute(&ctx).await
                        }
                        Err(e) => e.clone().into(),
                    };
                    states.push(ExecutionState::ended(outcome.success));
                    done.push((intent.id.clone(), execution.seq, finish_of(outcome)));
                }
            }
            ended.push(IntentStatus::settled(&states));
        }
        self.store
            .finish_reads(&self.owner, &ids, &done, to_millis(self.clock.now()))
            .await?;
        for status in ended {
            crate::metrics::intent_ended(status);
        }
        self.ended.notify_waiters();
        Ok(())
    }

    fn context(
        &self,
        intent: &IntentRecord,
        execution: &ExecutionRecord,
        params: &serde_json::Value,
        agent_address: String,
    ) -> ExecutionContext {
        ExecutionContext {
            intent_id: intent.id.clone(),
            execution_key: execution.execution_key.clone(),
            action: intent.action.clone(),
            params: params.clone(),
            chain_id: execution.chain_id,
            lane: intent.lane,
            // Unknown to the catalog (it changed since): handled as a write, which reconciles.
            read: self
                .catalog
                .resolve(&intent.action)
                .is_some_and(|a| a.is_read()),
            subject: Subject::of(execution),
            agent_id: intent.agent_id.clone(),
            agent_address,
            grant: None,
            lease: Some(LeaseFence {
                intent_id: intent.id.clone(),
                owner: self.owner.clone(),
            }),
        }
    }

    /// Runs every execution of a leased intent that has not ended, then ends the intent.
    pub async fn process(&self, intent: IntentRecord) -> Result<()> {
        if intent.awaits_approval() {
            // Never claimed so; an approval only the owner can give comes first.
            return Ok(());
        }
        let heartbeat = {
            let store = self.store.clone();
            let (id, owner) = (intent.id.clone(), self.owner.clone());
            let every = (self.lease / 3_i32)
                .unsigned_abs()
                .max(Duration::from_millis(50));
            let clock = self.clock.clone();
            let lease = self.lease;
            AbortOnDrop(tokio::spawn(async move {
                loop {
                    tokio::time::sleep(every).await;
                    match store
                        .renew_lease(&id, &owner, to_millis(clock.now() + lease))
                        .await
                    {
                        Ok(true) => {}
                        // Lost: another worker owns the intent; our sends stop at the next lease check.
                        Ok(false) => break,
                        // A storage hiccup: keep trying while the lease may still be ours.
                        Err(e) => {
                            tracing::warn!(intent_id = id, error = %e, "lease renewal failed; retrying")
                        }
                    }
                }
            }))
        };
        // The heartbeat stops when this future ends or is dropped (a timed-out direct execution).
        let result = self.run_executions(&intent).await;
        drop(heartbeat);
        if !result? {
            // An execution is sent and not mined yet (or the lease was lost): the intent's lease
            // runs out soon, and whichever process claims it then takes the execution up again.
            let again = to_millis(self.clock.now() + PENDING_RECHECK);
            self.store
                .renew_lease(&intent.id, &self.owner, again)
                .await?;
            return Ok(());
        }
        let finished = self
            .store
            .finish_intent(&intent.id, to_millis(self.clock.now()))
            .await?;
        if let Some(f) = finished {
            tracing::info!(intent_id = f.id, status = %f.status, "intent ended");
            crate::metrics::intent_ended(f.status);
        }
        self.ended.notify_waiters();
        Ok(())
    }

    /// Runs the executions that have not ended, up to `fanout_concurrency` at once (a fan-out's
    /// users are independent: each one's calls stay in order, and the agent wallet's transactions
    /// are signed and sent in nonce order by its sender); false when one is left unended (sent and
    /// not mined yet, or the lease was lost), so the intent cannot end now. Once the lease is lost
    /// or the store fails, no further execution is started; those already running end first.
    async fn run_executions(&self, intent: &IntentRecord) -> Result<bool> {
        use futures_util::StreamExt;
        let params = intent
            .params
            .value()
            .map_err(|e| Error::internal(format!("stored params: {e}")))?;
        let agent = self.store.get_agent(&intent.agent_id).await?;
        let agent_address = agent.map(|a| a.wallet_address).unwrap_or_default();
        let open: Vec<ExecutionRecord> = self
            .store
            .list_executions(&intent.id)
            .await?
            .into_iter()
            .filter(|e| !e.state.is_ended())
            .collect();
        let halted = std::sync::atomic::AtomicBool::new(false);
        let run = |execution: ExecutionRecord| {
            let (params, agent_address, halted) = (&params, &agent_address, &halted);
            async move {
                if halted.load(std::sync::atomic::Ordering::Acquire) {
                    return Ok(false);
                }
                let ran = self
                    .run_execution(intent, execution, params, agent_address)
                    .await;
                if matches!(ran, Ok(false) | Err(_)) {
                    halted.store(true, std::sync::atomic::Ordering::Release);
                }
                ran
            }
        };
        // Started in groups, once half the places are free: executions started together plan,
        // simulate and reserve together, so their node calls and writes are gathered
        // (`chain::gather`); one that waits long (a transaction slow to be mined) holds its own
        // place, not the others'.
        let window = self.fanout_concurrency;
        let mut waiting = open.into_iter();
        let mut running = futures_util::stream::FuturesUnordered::new();
        let mut results: Vec<Result<bool>> = Vec::new();
        loop {
            if running.len() <= window / 2 {
                running.extend(waiting.by_ref().take(window - running.len()).map(run));
            }
            match running.next().await {
                Some(ran) => results.push(ran),
                None => break,
            }
        }
        let mut ended = true;
        for ran in results {
            ended &= ran?;
        }
        Ok(ended)
    }

    /// Runs one execution that has not ended; false when it is left unended (see
    /// [`IntentRunner::run_executions`]).
    async fn run_execution(
        &self,
        intent: &IntentRecord,
        execution: ExecutionRecord,
        params: &serde_json::Value,
        agent_address: &str,
    ) -> Result<bool> {
        let ctx = self.context(intent, &execution, params, agent_address.to_owned());
        let outcome = match execution.state {
            ExecutionState::Pending => {
                if !self.start(&intent.id, execution.seq).await? {
                    // The lease was lost: another worker owns the intent now.
                    tracing::warn!(
                        intent_id = intent.id,
                        "lease lost; leaving the intent to its new owner"
                    );
                    return Ok(false);
                }
                self.execute(&ctx).await
            }
            ExecutionState::Started => {
                // Taking over: only while the lease is ours, checked right before anything is sent.
                if !self
                    .store
                    .renew_lease(&intent.id, &self.owner, self.lease_until())
                    .await?
                {
                    tracing::warn!(
                        intent_id = intent.id,
                        "lease lost before a takeover; leaving the intent"
                    );
                    return Ok(false);
                }
                let outcome = match self.reconcile(&ctx).await {
                    Reconciled::Done(outcome) => outcome,
                    Reconciled::NotSent => self.execute(&ctx).await,
                };
                tracing::info!(
                    intent_id = intent.id,
                    seq = execution.seq,
                    pending = outcome.pending,
                    "execution reconciled after a takeover"
                );
                outcome
            }
            ExecutionState::Succeeded | ExecutionState::Failed => return Ok(true),
        };
        self.record(intent, &execution, outcome).await
    }

    async fn execute(&self, ctx: &ExecutionContext) -> ExecutionOutcome {
        // A held order past its expiration ends here, without its venue: nothing is sent.
        let expired = crate::orders::held_order(&ctx.action, &ctx.params)
            .filter(|terms| terms.expired(to_millis(self.clock.now())));
        let outcome = match expired {
            Some(terms) => ExecutionOutcome::failed(
                ErrorCode::OrderExpired,
                format!(
                    "Order {} reached its expiration (Unix time {}) before the market met its price; nothing was sent.",
                    ctx.intent_id,
                    terms.expiration.unwrap_or_default()
                ),
            ),
            None => self.attempt(ctx).await,
        };
        crate::metrics::execution(&outcome, ctx.read);
        outcome
    }

    /// Runs one execution: the grant of a fan-out first, then the provider.
    async fn attempt(&self, ctx: &ExecutionContext) -> ExecutionOutcome {
        let spec = self
            .catalog
            .resolve(&ctx.action)
            .filter(|a| a.fans_out(ctx.lane));
        let Some(spec) = spec else {
            return self.provide(ctx).await;
        };
        // Acceptance refused a fan-out naming another recipient; an intent accepted before that
        // rule (stored by an older build) meets it here, under the same rule.
        let named = recipients(&ctx.params, &spec.recipients);
        if let Some((field, named)) = foreign_recipient(&named, &ctx.subject.wallet_address) {
            return foreign_recipient_refusal(field, named, &ctx.subject.wallet_address).into();
        }
        let grant = match self.grant(ctx).await {
            Ok(Ok(grant)) => grant,
            Ok(Err(refused)) => return refused,
            Err(e) => return e.into(),
        };
        let hash = grant.hash.clone();
        let ctx = ExecutionContext {
            grant: Some(grant),
            ..ctx.clone()
        };
        let outcome = self.provide(&ctx).await;
        if outcome
            .error
            .as_ref()
            .is_some_and(|(code, _)| *code == ErrorCode::DelegationRevoked)
        {
            let now = to_millis(self.clock.now());
            match self
                .store
                .set_delegation_status(
                    &hash,
                    DelegationStatus::Revoked,
                    now,
                    &crate::audit::delegation_event(
                        &ctx.agent_id,
                        &hash,
                        DelegationStatus::Revoked,
                        crate::audit::actor::GATEWAY,
                        now,
                        serde_json::json!({"delegator": ctx.subject.wallet_address, "foundBy": "execution", "intentId": ctx.intent_id}),
                    ),
                )
                .await
            {
                Ok(_) => tracing::info!(
                    delegation_hash = hash,
                    "a delegation disabled at its venue is now revoked; its user is skipped"
                ),
                Err(e) => tracing::warn!(
                    delegation_hash = hash,
                    error = %e,
                    "recording a delegation revoked failed; the sweep will find it"
                ),
            }
        }
        outcome
    }

    /// The delegation a fan-out execution runs under: its user's newest active delegation to the
    /// agent now, or the execution's refusal when it was revoked or expired since acceptance.
    async fn grant(&self, ctx: &ExecutionContext) -> Result<Result<Grant, ExecutionOutcome>> {
        let wallet = &ctx.subject.wallet_address;
        let looked_up = self
            .grants
            .one_each(
                (ctx.agent_id.clone(), ctx.chain_id),
                wallet.clone(),
                |wallets, answers| async move {
                    // One query a group of the batch (a store read answers all of its group or
                    // none), each group's executions going on to their plans as soon as its own is
                    // read: a fan-out of 1,000 read 873 grants in one batch of 92 ms, answered at
                    // its end.
                    let now = to_millis(self.clock.now());
                    let mut at = 0;
                    for group in wallets.chunks(GRANTS_PER_READ) {
                        match self
                            .store
                            .active_delegations_of(&ctx.agent_id, ctx.chain_id, group, now)
                            .await
                        {
                            Ok(found) => {
                                for (j, grant) in found.into_iter().enumerate() {
                                    answers.answer(at + j, Ok(grant));
                                }
                            }
                            Err(e) => {
                                for j in 0..group.len() {
                                    answers.answer(at + j, Err(e.clone()));
                                }
                            }
                        }
                        at += group.len();
                    }
                },
            )
            .await
            .ok_or_else(|| Error::internal("a delegation lookup was dropped unanswered"))?;
        let Some(record) = looked_up? else {
            return Ok(Err(ExecutionOutcome::failed(
                ErrorCode::DelegationRevoked,
                format!(
                    "{wallet} has no active delegation to this agent on chain {} any more (revoked or expired since the intent was accepted); skipped, nothing was sent.",
                    ctx.chain_id
                ),
            )));
        };
        let delegation = record
            .body
            .as_deref()
            .map(serde_json::from_str::<Delegation>)
            .transpose()
            .map_err(|e| Error::internal(format!("stored delegation {}: {e}", record.hash)))?;
        Ok(Ok(Grant {
            hash: record.hash,
            delegator: record.delegator,
            delegation,
        }))
    }

    async fn provide(&self, ctx: &ExecutionContext) -> ExecutionOutcome {
        match self.registry.provider(&ctx.action, ctx.lane) {
            Some(p) => p.execute(ctx).await,
            None => ExecutionOutcome::failed(
                ErrorCode::NotAvailable,
                format!("{} has no provider in this build.", ctx.action),
            ),
        }
    }

    async fn reconcile(&self, ctx: &ExecutionContext) -> Reconciled {
        match self.registry.provider(&ctx.action, ctx.lane) {
            Some(p) => p.reconcile(ctx).await,
            None => Reconciled::NotSent,
        }
    }

    /// Records how an execution ended; false when it has not ended (pending), or when this worker
    /// no longer holds the intent's lease (its new holder records it).
    async fn record(
        &self,
        intent: &IntentRecord,
        execution: &ExecutionRecord,
        outcome: ExecutionOutcome,
    ) -> Result<bool> {
        if outcome.held {
            // A held order sent nothing: back to pending, looked at again after HELD_RECHECK.
            let data = outcome.data.map(|d| d.to_string()).unwrap_or_default();
            let until = to_millis(self.clock.now() + HELD_RECHECK);
            if !self
                .store
                .hold_execution(
                    &execution.intent_id,
                    execution.seq,
                    &self.owner,
                    &data,
                    until,
                )
                .await?
            {
                tracing::warn!(
                    intent_id = execution.intent_id,
                    "a held order's execution is another worker's now"
                );
            }
            return Ok(false);
        }
        if let Some((code, _)) = &outcome.error
            && crate::orders::releases_daily_share(*code)
        {
            // An order that filled nothing: ended, and its daily-limit share given back, at once.
            let (day, release_micros) = crate::acceptance::daily_share(intent);
            let end = OrderEnd {
                intent_id: execution.intent_id.clone(),
                seq: execution.seq,
                owner: Some(self.owner.clone()),
                agent_id: intent.agent_id.clone(),
                day,
                release_micros,
                finish: finish_of(outcome),
                now: to_millis(self.clock.now()),
            };
            if !self.store.end_order(&end).await? {
                tracing::warn!(
                    intent_id = execution.intent_id,
                    "order already ended, or its intent's lease is another worker's"
                );
                return Ok(false);
            }
            return Ok(true);
        }
        if outcome.pending {
            tracing::info!(
                intent_id = execution.intent_id,
                seq = execution.seq,
                tx_hash = outcome.tx_hash.as_deref().unwrap_or(""),
                "execution sent and not mined yet; it is taken up again"
            );
            return Ok(false);
        }
        let mut finish = finish_of(outcome);
        // A write its venue goes on with elsewhere (a bridge's fill) is followed until it ends.
        finish.leg_open = finish.success
            && self
                .registry
                .provider(&intent.action, intent.lane)
                .is_some_and(|p| p.follows(&intent.action));
        let now = to_millis(self.clock.now());
        let event = crate::audit::execution_event(intent, execution, &finish, now);
        let end = ExecutionEnd {
            seq: execution.seq,
            finish,
            now,
            event,
        };
        if !self.end(&execution.intent_id, end).await? {
            tracing::warn!(
                intent_id = execution.intent_id,
                seq = execution.seq,
                "execution already recorded, or its intent's lease is another worker's"
            );
            return Ok(false);
        }
        Ok(true)
    }

    /// Marks a pending execution started, with the executions of the intent starting at the same
    /// time (one transaction; each alone if it fails).
    async fn start(&self, intent_id: &str, seq: u32) -> Result<bool> {
        let key = intent_id.to_owned();
        let started = self
            .starts
            .one(key, seq, |seqs| {
                let now = to_millis(self.clock.now());
                each_alone_on_failure(
                    seqs,
                    move |seqs: Vec<u32>| async move {
                        self.store
                            .start_executions(intent_id, &seqs, &self.owner, now)
                            .await
                    },
                    unanswered,
                )
            })
            .await;
        match started {
            Some(started) => Ok(started?),
            // Its batch was dropped before it answered: whether it started is not known; the
            // intent is left to be taken up again (a started execution is reconciled).
            None => Err(Error::internal(
                "an execution's start was dropped unanswered",
            )),
        }
    }

    /// Records how a started execution ended, with the executions of the intent ending at the same
    /// time (one transaction; each alone if it fails).
    async fn end(&self, intent_id: &str, end: ExecutionEnd) -> Result<bool> {
        let ended = self
            .ends
            .one(intent_id.to_owned(), end, |ends| {
                each_alone_on_failure(
                    ends,
                    move |ends: Vec<ExecutionEnd>| async move {
                        self.store
                            .finish_executions(intent_id, &self.owner, &ends)
                            .await
                    },
                    unanswered,
                )
            })
            .await;
        match ended {
            Some(ended) => Ok(ended?),
            None => Err(Error::internal("an execution's end was dropped unanswered")),
        }
    }
}
