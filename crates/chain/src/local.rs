//! A fan-out's check run in the gateway's own EVM (revm), over the node's state at the latest block.
//!
//! Before the gateway signs a fan-out's redemption it simulates it, and a redemption that would
//! revert is refused before any wallet moves ([`crate::sender::simulate`]). Asked of the node
//! (`eth_simulateV1`), that check costs the node the redemption's whole EVM work a second time, and a
//! node that mines serializes it with its mining (anvil holds its state's write lock for a whole
//! block, a simulation its read lock for a whole request): the fan-out's rate is then bound well
//! under the node's own rate for the same transactions (docs/benchmarks.md). Run here, the check
//! asks the node only for the state it reads (accounts, code, storage slots at one block, in
//! gathered JSON-RPC batches, microseconds of the node's time each), and the EVM work runs in the
//! gateway beside the node's mining.
//!
//! The state is read at the latest block when a batch of checks starts and kept for that block (by
//! its hash: the contracts every delegator touches are read once a block, each delegator's own few
//! slots once). What a check will read is foreseen from the first check of the same shape of calls
//! and read ahead in one round ([`LocalEvm::check`]). Each user's calls run in order with their
//! state carried, in a simulated block dated as the node's check dates it; each user alone, on the
//! block's state. The answer is the same rule as the node's check ([`crate::sender::gas_limits`]):
//! each call's gas before refunds plus headroom, or the first revert's decoded reason.
//!
//! Whether a chain's fan-outs are checked here is the chain's `fanout-check` setting: `node` (the
//! node's `eth_simulateV1`), `local` (here; a user whose state could not be read is checked by the
//! node), or `shadow` (both; the node's answer is used, and every disagreement is logged and
//! counted in `actiongate_local_checks_total{result="disagreed"}`). The EVM runs Ethereum's rules
//! (Osaka): `local` is for chains whose EVM is Ethereum's.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use futures_util::future::BoxFuture;

use actiongate_core::error::Error;
use alloy::eips::BlockId;
use alloy::primitives::{Address, B256, Bytes, U64, U256};
use alloy::providers::{DynProvider, Provider};
use alloy::rpc::client::{BatchRequest, Waiter};
use alloy::rpc::types::{Block, Header};
use revm::bytecode::Bytecode;
use revm::context::result::ExecutionResult;
use revm::context::{BlockEnv, CfgEnv, Journal, TxEnv};
use revm::database::CacheDB;
use revm::database_interface::DBErrorMarker;
use revm::interpreter::Interpreter;
use revm::interpreter::interpreter::EthInterpreter;
use revm::interpreter::interpreter_types::{Jumps, MemoryTr};
use revm::primitives::hardfork::SpecId;
use revm::primitives::{KECCAK_EMPTY, StorageKey, StorageValue, keccak256};
use revm::state::AccountInfo;
use revm::{
    Context, Database, DatabaseRef, ExecuteCommitEvm, InspectCommitEvm, Inspector, MainBuilder,
    MainContext,
};

use crate::client::MAX_BATCH_CALLS;
use crate::gather::Gather;
use crate::plan::Call;
use crate::probe;
use crate::sender::{Simulated, gas_limits};

/// The most gas one simulated call is given: a block's gas limit, capped as Osaka caps a
/// transaction's (EIP-7825).
const CALL_GAS_CAP: u64 = 1 << 24;

/// How many blocking threads a batch of checks runs on: two for each core (a thread parked on a
/// read not foreseen leaves the cores to the others).
pub fn check_threads() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get()) * 2
}

/// How many of one contract's slots, or how many accounts, a batch of reads has before they are read
/// by the node's EVM in one call ([`crate::probe`]) instead of one call each.
const PROBE_FROM: usize = 4;

/// How many accounts one call of [`crate::probe::ACCOUNTS`] reads: with a nonce read each, one
/// JSON-RPC batch of [`MAX_BATCH_CALLS`] calls.
const ACCOUNTS_PER_PROBE: usize = MAX_BATCH_CALLS - 1;

/// How many shapes of calls the reads of are kept ([`Ahead`]); past it they are learnt afresh.
const MAX_SHAPES: usize = 1024;

/// The longest keccak input a learning run keeps (a struct's hash of up to 16 words).
const MAX_PREIMAGE: usize = 512;

/// How deep a slot's keccak inputs are traced back (a mapping of mappings of structs' hashes).
const MAX_DEPTH: usize = 8;

/// A piece of state the EVM asks the node for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Read {
    Account(Address),
    Slot(Address, U256),
    BlockHash(u64),
}

/// Its answer.
#[derive(Debug, Clone)]
enum Value {
    Account(AccountInfo),
    Slot(U256),
    BlockHash(B256),
}

/// A check's answer: the gas limits or the refusal; `Err` when it could not run here.
pub type Checked = Result<Result<Vec<u64>, Error>, String>;

/// Hears a user's check as soon as it is known ([`LocalEvm::check`]).
pub type OnAnswer = Arc<dyn Fn(usize, &Checked) + Send + Sync>;

/// The chain's local EVM: its node's state reads, gathered, and the state of the latest block read.
pub struct LocalEvm {
    chain_id: u64,
    provider: DynProvider,
    /// Taken out of every error it reports (a provider's URL may carry its key).
    rpc_url: Option<String>,
    /// State reads of the checks running on one block, gathered into JSON-RPC batches.
    reads: Gather<B256, Read, Result<Value, String>>,
    /// The state read at the latest block a batch of checks ran on.
    latest: Mutex<Option<Arc<BlockState>>>,
    /// What a check of each shape of calls reads, learnt from its first run.
    shapes: Mutex<HashMap<Shape, Arc<Vec<Ahead>>>>,
}

/// The state of one block as read so far, and the block a check on it simulates.
struct BlockState {
    hash: B256,
    /// The simulated block: the next one. (Its date is each check's own: on an idle chain the
    /// same latest block is checked on for a long time, and a date kept with its state would grow
    /// stale, passing a delegation whose time has run out.)
    number: u64,
    gas_limit: u64,
    beneficiary: Address,
    prevrandao: B256,
    accounts: Mutex<HashMap<Address, AccountInfo>>,
    code: Mutex<HashMap<B256, Bytecode>>,
    storage: Mutex<HashMap<(Address, U256), U256>>,
    hashes: Mutex<HashMap<u64, B256>>,
}

impl BlockState {
    fn has(&self, read: Read) -> bool {
        match read {
            Read::Account(a) => locked(&self.accounts).contains_key(&a),
            Read::Slot(a, i) => locked(&self.storage).contains_key(&(a, i)),
            Read::BlockHash(n) => locked(&self.hashes).contains_key(&n),
        }
    }

    /// Keeps what the node answered for `read`.
    fn keep(&self, read: Read, value: &Value) -> Result<(), Unread> {
        match (read, value) {
            (Read::Account(address), Value::Account(a)) => {
                if let Some(code) = &a.code {
                    locked(&self.code).insert(a.code_hash, code.clone());
                }
                locked(&self.accounts).insert(address, a.clone());
            }
            (Read::Slot(address, index), Value::Slot(v)) => {
                locked(&self.storage).insert((address, index), *v);
            }
            (Read::BlockHash(n), Value::BlockHash(h)) => {
                locked(&self.hashes).insert(n, *h);
            }
            _ => return Err(Unread("the node answered another read".into())),
        }
        Ok(())
    }
}

fn locked<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Nothing panics while holding these; should something, the map is still whole.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A read with the node's answer.
type Answered = (Read, Result<Value, String>);

/// A state read that failed: the check falls back to the node.
#[derive(Debug)]
struct Unread(String);

impl std::fmt::Display for Unread {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Unread {}
impl DBErrorMarker for Unread {}

impl LocalEvm {
    pub fn new(chain_id: u64, provider: DynProvider, rpc_url: Option<String>) -> Self {
        Self {
            chain_id,
            provider,
            rpc_url,
            reads: Gather::new("state"),
            latest: Mutex::new(None),
            shapes: Mutex::default(),
        }
    }

    /// Checks each user's calls (as [`crate::sender::simulate`] does), each on the latest block's
    /// state; `Err` for a user means it could not be checked here (a state read failed), and the
    /// node checks it. `time` is the simulated block's date.
    ///
    /// A fan-out's users call the same contracts the same way, and differ in their addresses and
    /// amounts: what one user's check reads tells what the others' will ([`Ahead`]). So the first
    /// user of a shape of calls not seen before runs first, its reads and its keccak inputs
    /// traced; then the state every other user is expected to read is read in one round (JSON-RPC
    /// batches side by side), and they run on it. What was not foreseen is read when the EVM asks
    /// for it, as before: a wrong guess costs a read, never a wrong answer.
    ///
    /// The users run on a few blocking threads ([`check_threads`]), each taking the next user in
    /// order when it ends one: a read not foreseen parks its thread until its batch ([`Gather`])
    /// answers. (A thread parked for each read and woken for its answer cost the gateway about a
    /// fifth of its CPU in a fan-out before the reads were foreseen. revm's `asyncdb` fibers,
    /// which would suspend a user instead of its thread, keep the running fiber in a thread-local
    /// that a suspended fiber does not give back: with two fibers in flight on one thread the
    /// second's resume runs on the first's frame (a segfault here), so they are not used.)
    ///
    /// `on_answer`, when given, hears each user's answer (by its index in `users`) as soon as it
    /// is known, from whichever thread ran it: a fan-out's executions go on to their reservations
    /// and sends while the other users are still checked.
    pub async fn check(
        self: &Arc<Self>,
        latest: &Header,
        time: u64,
        users: &[(Address, Vec<Call>)],
        on_answer: Option<OnAnswer>,
    ) -> Vec<Checked> {
        let started = std::time::Instant::now();
        let state = self.state_at(latest);
        let asked = Arc::new(AtomicUsize::new(0));
        let mut answers: Vec<Option<Checked>> = vec![None; users.len()];

        // The first user of each shape not learnt yet runs alone first, and teaches it.
        let shapes: Vec<Shape> = users.iter().map(|(_, calls)| Shape::of(calls)).collect();
        let mut learning: HashMap<Shape, usize> = HashMap::new();
        {
            let known = locked(&self.shapes);
            for (i, shape) in shapes.iter().enumerate() {
                if !known.contains_key(shape) {
                    learning.entry(shape.clone()).or_insert(i);
                }
            }
        }
        let learnt = futures_util::future::join_all(learning.into_iter().map(|(shape, i)| {
            let (evm, state, asked) = (self.clone(), state.clone(), asked.clone());
            let runtime = tokio::runtime::Handle::current();
            let (from, calls) = users[i].clone();
            async move {
                let run = tokio::task::spawn_blocking(move || {
                    evm.learn(&state, time, &runtime, &asked, from, &calls)
                })
                .await
                .unwrap_or_else(|e| (Err(format!("the local check stopped: {e}")), None));
                (shape, i, run)
            }
        }))
        .await;
        for (shape, i, (answer, ahead)) in learnt {
            // Learnt from a run that went through (one that reverted read only up to its revert).
            if let (Ok(Ok(_)), Some(ahead)) = (&answer, ahead) {
                let mut shapes = locked(&self.shapes);
                if shapes.len() >= MAX_SHAPES {
                    shapes.clear();
                }
                shapes.insert(shape, Arc::new(ahead));
            }
            if let Some(heard) = &on_answer {
                heard(i, &answer);
            }
            answers[i] = Some(answer);
        }

        // What the others will read, read ahead in one round.
        let mut ahead = Vec::new();
        {
            let known = locked(&self.shapes);
            let mut seen = std::collections::HashSet::new();
            for (((from, calls), shape), answer) in users.iter().zip(&shapes).zip(&answers) {
                if answer.is_some() {
                    continue;
                }
                for a in known.get(shape).into_iter().flat_map(|a| a.iter()) {
                    if let Some(read) = a.read(*from, calls)
                        && seen.insert(read)
                        && !state.has(read)
                    {
                        ahead.push(read);
                    }
                }
            }
        }
        if !ahead.is_empty() {
            let values = self.read_batch(state.hash, ahead.clone()).await;
            for (read, value) in ahead.iter().zip(values) {
                // A read that failed is asked again when the EVM needs it.
                if let Ok(value) = value {
                    let _ = state.keep(*read, &value);
                }
            }
        }

        let read_ahead = started.elapsed();

        // The rest run on a few blocking threads, each taking the next user not yet taken, so that
        // answers come out from the start, in the users' order, at the pace the cores allow. (A
        // thread for every 16 users, all running at once, shared the cores among all of them: each
        // thread's first answer came about when every thread's last did, at the batch's end.)
        let rest: Arc<Vec<_>> = Arc::new(
            answers
                .iter()
                .enumerate()
                .filter(|(_, a)| a.is_none())
                .map(|(i, _)| (i, users[i].clone()))
                .collect(),
        );
        let next = Arc::new(AtomicUsize::new(0));
        let runtime = tokio::runtime::Handle::current();
        let workers = check_threads().min(rest.len());
        let threads = (0..workers).map(|_| {
            let (evm, state, asked) = (self.clone(), state.clone(), asked.clone());
            let (rest, next) = (rest.clone(), next.clone());
            let (runtime, on_answer) = (runtime.clone(), on_answer.clone());
            async move {
                tokio::task::spawn_blocking(move || {
                    let mut ran = Vec::new();
                    while let Some((i, (from, calls))) =
                        rest.get(next.fetch_add(1, Ordering::Relaxed))
                    {
                        let answer = evm.run(&state, time, &runtime, &asked, *from, calls);
                        if let Some(heard) = &on_answer {
                            heard(*i, &answer);
                        }
                        ran.push((*i, answer));
                    }
                    ran
                })
                .await
                // A thread that stopped leaves its users unanswered: the node checks them.
                .unwrap_or_else(|e| {
                    tracing::warn!(error = %e, "a thread of local checks stopped");
                    Vec::new()
                })
            }
        });
        for (i, answer) in futures_util::future::join_all(threads)
            .await
            .into_iter()
            .flatten()
        {
            if let Some(slot) = answers.get_mut(i) {
                *slot = Some(answer);
            }
        }
        tracing::trace!(
            chain_id = self.chain_id,
            users = users.len(),
            ahead = ahead.len(),
            read_ahead_ms = read_ahead.as_secs_f64() * 1e3,
            ms = started.elapsed().as_secs_f64() * 1e3,
            "a batch of local checks ran"
        );
        actiongate_core::metrics::local_check_reads(self.chain_id, "ahead", ahead.len());
        actiongate_core::metrics::local_check_reads(
            self.chain_id,
            "on_demand",
            asked.load(Ordering::Relaxed),
        );
        answers
            .into_iter()
            .map(|a| a.unwrap_or_else(|| Err("the local check answered nothing".into())))
            .collect()
    }

    /// The state of `latest` (kept while it is the latest block checked on).
    fn state_at(&self, latest: &Header) -> Arc<BlockState> {
        let mut kept = locked(&self.latest);
        if let Some(state) = kept.as_ref()
            && state.hash == latest.hash
        {
            return state.clone();
        }
        let state = Arc::new(BlockState {
            hash: latest.hash,
            number: latest.number + 1,
            gas_limit: latest.gas_limit,
            beneficiary: latest.beneficiary,
            prevrandao: latest.mix_hash,
            accounts: Mutex::default(),
            code: Mutex::default(),
            storage: Mutex::default(),
            hashes: Mutex::default(),
        });
        *kept = Some(state.clone());
        state
    }

    /// The EVM's context on `state` over `db`: the simulated block dated `time`, Ethereum's rules.
    fn context<DB: Database>(
        &self,
        state: &BlockState,
        time: u64,
        db: DB,
    ) -> Context<BlockEnv, TxEnv, CfgEnv, DB, Journal<DB>, ()> {
        Context::mainnet()
            .with_db(db)
            .modify_cfg_chained(|cfg| {
                cfg.chain_id = self.chain_id;
                cfg.set_spec_and_mainnet_gas_params(SpecId::OSAKA);
                // As the node's check: the sender's nonce is not checked, and gas costs nothing
                // (no base fee, a gas price of 0); a value sent still needs the balance.
                cfg.disable_nonce_check = true;
            })
            .modify_block_chained(|block| {
                block.number = U256::from(state.number);
                block.timestamp = U256::from(time);
                block.gas_limit = state.gas_limit;
                block.basefee = 0;
                block.beneficiary = state.beneficiary;
                block.prevrandao = Some(state.prevrandao);
            })
    }

    /// One call as the EVM runs it.
    fn tx(&self, state: &BlockState, from: Address, call: &Call) -> Result<TxEnv, String> {
        TxEnv::builder()
            .caller(from)
            .call(call.to)
            .data(call.data.clone())
            .value(call.value)
            .gas_limit(state.gas_limit.min(CALL_GAS_CAP))
            .gas_price(0)
            .chain_id(Some(self.chain_id))
            .build()
            .map_err(|e| format!("{e:?}"))
    }

    /// One user's calls in order, state carried from call to call (on a blocking thread: a read not
    /// foreseen waits for the node).
    fn run(
        &self,
        state: &BlockState,
        time: u64,
        runtime: &tokio::runtime::Handle,
        asked: &AtomicUsize,
        from: Address,
        calls: &[Call],
    ) -> Checked {
        let reader = Reader {
            evm: self,
            state,
            runtime,
            asked,
            traced: None,
        };
        let mut evm = self
            .context(state, time, CacheDB::new(reader))
            .build_mainnet();
        self.each_call(state, from, calls, |tx| {
            evm.transact_commit(tx).map_err(|e| e.to_string())
        })
    }

    /// [`LocalEvm::run`] for the first user of a shape, its reads and keccak inputs traced: its
    /// answer, and what the shape reads.
    fn learn(
        &self,
        state: &BlockState,
        time: u64,
        runtime: &tokio::runtime::Handle,
        asked: &AtomicUsize,
        from: Address,
        calls: &[Call],
    ) -> (Checked, Option<Vec<Ahead>>) {
        let traced = Mutex::new(Vec::new());
        let reader = Reader {
            evm: self,
            state,
            runtime,
            asked,
            traced: Some(&traced),
        };
        let mut evm = self
            .context(state, time, CacheDB::new(reader))
            .build_mainnet_with_inspector(Preimages::default());
        let answer = self.each_call(state, from, calls, |tx| {
            evm.inspect_tx_commit(tx).map_err(|e| e.to_string())
        });
        if answer.is_err() {
            return (answer, None);
        }
        let preimages = std::mem::take(&mut evm.inspector.0);
        let reads = std::mem::take(&mut *locked(&traced));
        (answer, Some(Ahead::learn(from, calls, &reads, &preimages)))
    }

    /// Runs `calls` from `from` with `transact` until one reverts, and answers as the node's check
    /// does. An error (a state read that failed, or not a transaction the node's check would run
    /// either way: an invalid one) leaves the user to the node's check.
    fn each_call(
        &self,
        state: &BlockState,
        from: Address,
        calls: &[Call],
        mut transact: impl FnMut(TxEnv) -> Result<ExecutionResult, String>,
    ) -> Checked {
        let mut outcomes = Vec::with_capacity(calls.len());
        for call in calls {
            let outcome = outcome(transact(self.tx(state, from, call)?)?);
            let reverted = matches!(outcome, Simulated::Reverted { .. });
            outcomes.push(outcome);
            if reverted {
                break;
            }
        }
        Ok(gas_limits(calls, outcomes))
    }

    /// One batch of reads at `block`: each distinct read once. A contract's slots, and accounts,
    /// [`PROBE_FROM`] or more of them, are read by the node's EVM in one `eth_call` for many
    /// ([`crate::probe`]; an account's nonce still one call each); the rest one call each (an
    /// account three: balance, nonce, code), in JSON-RPC batches of at most [`MAX_BATCH_CALLS`]
    /// calls side by side.
    async fn read_batch(&self, block: B256, reads: Vec<Read>) -> Vec<Result<Value, String>> {
        let mut seen = std::collections::HashSet::with_capacity(reads.len());
        let distinct: Vec<Read> = reads.iter().copied().filter(|r| seen.insert(*r)).collect();
        let mut slots: HashMap<Address, Vec<U256>> = HashMap::new();
        let mut accounts = Vec::new();
        let mut singly = Vec::new();
        for r in distinct {
            match r {
                Read::Slot(a, i) => slots.entry(a).or_default().push(i),
                Read::Account(a) => accounts.push(a),
                Read::BlockHash(_) => singly.push(r),
            }
        }
        let mut contracts = Vec::new();
        for (contract, slots) in slots {
            if slots.len() >= PROBE_FROM {
                contracts.extend(
                    slots
                        .chunks(probe::MAX_SLOTS)
                        .map(|c| (contract, c.to_vec())),
                );
            } else {
                singly.extend(slots.into_iter().map(|i| Read::Slot(contract, i)));
            }
        }
        if accounts.len() < PROBE_FROM {
            singly.extend(accounts.drain(..).map(Read::Account));
        }
        let at = BlockId::from(block);
        let mut rounds: Vec<BoxFuture<'_, Vec<Answered>>> = Vec::new();
        for batch in contracts.chunks(MAX_BATCH_CALLS) {
            rounds.push(Box::pin(self.probe_slots(at, batch.to_vec())));
        }
        for batch in accounts.chunks(ACCOUNTS_PER_PROBE) {
            rounds.push(Box::pin(self.probe_accounts(at, batch.to_vec())));
        }
        rounds.push(Box::pin(self.read_singly(at, singly)));
        let answers: HashMap<Read, Result<Value, String>> = futures_util::future::join_all(rounds)
            .await
            .into_iter()
            .flatten()
            .collect();
        reads
            .iter()
            .map(|r| {
                answers
                    .get(r)
                    .cloned()
                    .unwrap_or_else(|| Err("the node answered no state".into()))
            })
            .collect()
    }

    /// `reads`, one call each (an account three), in JSON-RPC batches side by side.
    async fn read_singly(&self, at: BlockId, reads: Vec<Read>) -> Vec<Answered> {
        let mut chunks: Vec<Vec<Read>> = Vec::new();
        let mut in_chunk = usize::MAX;
        for r in reads {
            let calls = if matches!(r, Read::Account(_)) { 3 } else { 1 };
            if in_chunk.saturating_add(calls) > MAX_BATCH_CALLS {
                chunks.push(Vec::new());
                in_chunk = 0;
            }
            if let Some(c) = chunks.last_mut() {
                c.push(r);
            }
            in_chunk += calls;
        }
        futures_util::future::join_all(chunks.into_iter().map(|chunk| self.read_chunk(at, chunk)))
            .await
            .into_iter()
            .flatten()
            .collect()
    }

    /// Contracts' slots, an `eth_call` a contract ([`probe::slots_call`]) in one JSON-RPC batch; a
    /// call the node refuses or answers with something else has its slots read one call each.
    async fn probe_slots(
        &self,
        at: BlockId,
        contracts: Vec<(Address, Vec<U256>)>,
    ) -> Vec<Answered> {
        let mut request = BatchRequest::new(self.provider.client());
        let mut waiting = Vec::with_capacity(contracts.len());
        for (contract, slots) in &contracts {
            match request.add_call::<_, Bytes>("eth_call", &probe::slots_call(*contract, slots, at))
            {
                Ok(w) => waiting.push(w),
                Err(e) => return failed(slot_reads(&contracts), &self.unread(e)),
            }
        }
        if request.send().await.is_err() {
            return self.read_singly(at, slot_reads(&contracts)).await;
        }
        let mut answers = Vec::new();
        let mut again = Vec::new();
        for ((contract, slots), w) in contracts.into_iter().zip(waiting) {
            let values = w
                .await
                .ok()
                .and_then(|out| probe::slots_answer(&out, slots.len()));
            match values {
                Some(values) => answers.extend(
                    slots
                        .into_iter()
                        .zip(values)
                        .map(|(i, v)| (Read::Slot(contract, i), Ok(Value::Slot(v)))),
                ),
                None => again.extend(slots.into_iter().map(|i| Read::Slot(contract, i))),
            }
        }
        if !again.is_empty() {
            answers.extend(self.read_singly(at, again).await);
        }
        answers
    }

    /// Accounts' balances and code in one `eth_call` ([`probe::accounts_call`]) and their nonces
    /// beside it, in one JSON-RPC batch; when the node refuses the call or answers something else,
    /// the accounts are read three calls each.
    async fn probe_accounts(&self, at: BlockId, accounts: Vec<Address>) -> Vec<Answered> {
        let reads = || {
            accounts
                .iter()
                .map(|a| Read::Account(*a))
                .collect::<Vec<_>>()
        };
        let mut request = BatchRequest::new(self.provider.client());
        let added = (|| {
            let probe =
                request.add_call::<_, Bytes>("eth_call", &probe::accounts_call(&accounts, at))?;
            let nonces = accounts
                .iter()
                .map(|a| request.add_call::<_, U64>("eth_getTransactionCount", &(a, at)))
                .collect::<Result<Vec<_>, _>>()?;
            Ok::<_, alloy::transports::TransportError>((probe, nonces))
        })();
        let (probe, nonces) = match added {
            Ok(added) => added,
            Err(e) => return failed(reads(), &self.unread(e)),
        };
        if request.send().await.is_err() {
            return self.read_singly(at, reads()).await;
        }
        let Some(probed) = probe
            .await
            .ok()
            .and_then(|out| probe::accounts_answer(&out, accounts.len()))
        else {
            return self.read_singly(at, reads()).await;
        };
        let mut answers = Vec::with_capacity(accounts.len());
        for ((address, (balance, code)), nonce) in accounts.iter().zip(probed).zip(nonces) {
            let value = match nonce.await {
                Ok(nonce) => Ok(Value::Account(account(balance, nonce.to::<u64>(), code))),
                Err(e) => Err(self.unread(e)),
            };
            answers.push((Read::Account(*address), value));
        }
        answers
    }

    /// A node error as the local check reports it: without the RPC URL.
    fn unread(&self, e: impl std::fmt::Display) -> String {
        crate::plan::without_url(self.rpc_url.as_deref(), e)
    }

    /// One JSON-RPC batch of reads.
    async fn read_chunk(&self, at: BlockId, reads: Vec<Read>) -> Vec<Answered> {
        enum Waiting {
            Account(Waiter<U256>, Waiter<U64>, Waiter<Bytes>),
            Slot(Waiter<U256>),
            BlockHash(Waiter<Option<Block>>),
        }
        let mut request = BatchRequest::new(self.provider.client());
        let mut waiting = Vec::with_capacity(reads.len());
        for r in &reads {
            let added = match *r {
                Read::Account(a) => (|| {
                    Ok(Waiting::Account(
                        request.add_call("eth_getBalance", &(a, at))?,
                        request.add_call("eth_getTransactionCount", &(a, at))?,
                        request.add_call("eth_getCode", &(a, at))?,
                    ))
                })(),
                Read::Slot(a, slot) => request
                    .add_call("eth_getStorageAt", &(a, slot, at))
                    .map(Waiting::Slot),
                Read::BlockHash(n) => request
                    .add_call("eth_getBlockByNumber", &(U64::from(n), false))
                    .map(Waiting::BlockHash),
            };
            match added {
                Ok(w) => waiting.push(w),
                Err(e) => return failed(reads, &self.unread(e)),
            }
        }
        if let Err(e) = request.send().await {
            return failed(reads, &self.unread(e));
        }
        let mut answers = Vec::with_capacity(reads.len());
        for (r, w) in reads.into_iter().zip(waiting) {
            let value = match w {
                Waiting::Account(balance, nonce, code) => {
                    match tokio::try_join!(balance, nonce, code) {
                        Ok((balance, nonce, code)) => {
                            Ok(Value::Account(account(balance, nonce.to::<u64>(), code)))
                        }
                        Err(e) => Err(self.unread(e)),
                    }
                }
                Waiting::Slot(w) => w.await.map(Value::Slot).map_err(|e| self.unread(e)),
                Waiting::BlockHash(w) => match w.await {
                    Ok(Some(b)) => Ok(Value::BlockHash(b.header.hash)),
                    Ok(None) => Ok(Value::BlockHash(B256::ZERO)),
                    Err(e) => Err(self.unread(e)),
                },
            };
            answers.push((r, value));
        }
        answers
    }
}

/// How far below the node's gas limit the local check's may be, in percent, and the answers still
/// agree: the node checks a fan-out's users one after the other in one simulated chain of blocks,
/// the local EVM each on the block's state, and a user's gas depends a little on what ran before
/// it (a Uniswap V2 pair updates its price accumulators once a block); well inside the limit's
/// headroom.
const GAS_BELOW_PERCENT: u64 = 10;
/// How far above: the same, plus the refunds. The local check's gas is before refunds, as a
/// node's `maxUsedGas` is; a node that answers no `maxUsedGas` (anvil) gives the gas after them,
/// and refunds are at most a fifth of that (EIP-3529): 1.2 × 1.1.
const GAS_ABOVE_PERCENT: u64 = 32;

/// Whether the local check answered as the node: both ran, each call's gas limit within
/// [`GAS_BELOW_PERCENT`] below and [`GAS_ABOVE_PERCENT`] above the node's; or both refused with the
/// same code.
pub fn agree(node: &Result<Vec<u64>, Error>, local: &Result<Vec<u64>, Error>) -> bool {
    match (node, local) {
        (Ok(node), Ok(local)) => {
            node.len() == local.len()
                && node.iter().zip(local).all(|(&n, &l)| {
                    l.saturating_mul(100) >= n.saturating_mul(100 - GAS_BELOW_PERCENT)
                        && l.saturating_mul(100) <= n.saturating_mul(100 + GAS_ABOVE_PERCENT)
                })
        }
        (Err(node), Err(local)) => node.code == local.code,
        _ => false,
    }
}

/// Each of `contracts`' slots as a read.
fn slot_reads(contracts: &[(Address, Vec<U256>)]) -> Vec<Read> {
    contracts
        .iter()
        .flat_map(|(a, slots)| slots.iter().map(|i| Read::Slot(*a, *i)))
        .collect()
}

fn failed(reads: Vec<Read>, e: &impl std::fmt::Display) -> Vec<Answered> {
    let e = e.to_string();
    reads.into_iter().map(|r| (r, Err(e.clone()))).collect()
}

/// An account as revm holds it: its code analysed once (an EIP-7702 designator stays one, and
/// revm follows it to the delegated code).
fn account(balance: U256, nonce: u64, code: Bytes) -> AccountInfo {
    if code.is_empty() {
        return AccountInfo::new(balance, nonce, KECCAK_EMPTY, Bytecode::new());
    }
    let hash = keccak256(&code);
    let code =
        Bytecode::new_raw_checked(code.clone()).unwrap_or_else(|_| Bytecode::new_legacy(code));
    AccountInfo::new(balance, nonce, hash, code)
}

/// What one call came to.
fn outcome(result: ExecutionResult) -> Simulated {
    match result {
        ExecutionResult::Success { gas, .. } => Simulated::Ran {
            gas: gas.total_gas_spent().max(gas.tx_gas_used()),
        },
        ExecutionResult::Revert { output, .. } => Simulated::Reverted {
            data: Some(output),
            message: "execution reverted".into(),
        },
        ExecutionResult::Halt { reason, .. } => Simulated::Reverted {
            data: None,
            message: format!("{reason:?}"),
        },
    }
}

/// The block's state as revm reads it: what was read already, else read from the node now (the
/// reads of every check running at the moment gathered into one batch), parking the thread.
struct Reader<'a> {
    evm: &'a LocalEvm,
    state: &'a BlockState,
    runtime: &'a tokio::runtime::Handle,
    /// Reads asked of the node while the EVM waited, for the batch's count.
    asked: &'a AtomicUsize,
    /// Every account and slot the EVM asked for, when learning a shape.
    traced: Option<&'a Mutex<Vec<Read>>>,
}

impl Reader<'_> {
    /// `read` as kept for the block, else asked of the node and kept.
    fn value(&self, read: Read) -> Result<Value, Unread> {
        if let Some(traced) = self.traced {
            locked(traced).push(read);
        }
        let kept = match read {
            Read::Account(a) => locked(&self.state.accounts)
                .get(&a)
                .cloned()
                .map(Value::Account),
            Read::Slot(a, i) => locked(&self.state.storage)
                .get(&(a, i))
                .copied()
                .map(Value::Slot),
            Read::BlockHash(n) => locked(&self.state.hashes)
                .get(&n)
                .copied()
                .map(Value::BlockHash),
        };
        if let Some(value) = kept {
            return Ok(value);
        }
        self.asked.fetch_add(1, Ordering::Relaxed);
        let hash = self.state.hash;
        let value = self
            .runtime
            .block_on(
                self.evm
                    .reads
                    .one(hash, read, |batch| self.evm.read_batch(hash, batch)),
            )
            .unwrap_or_else(|| Err("a state read was dropped".into()))
            .map_err(Unread)?;
        self.state.keep(read, &value)?;
        Ok(value)
    }
}

impl DatabaseRef for Reader<'_> {
    type Error = Unread;

    fn basic_ref(&self, address: Address) -> Result<Option<AccountInfo>, Unread> {
        match self.value(Read::Account(address))? {
            Value::Account(a) => Ok(Some(a)),
            _ => Err(Unread("the node answered another read".into())),
        }
    }

    fn code_by_hash_ref(&self, hash: B256) -> Result<Bytecode, Unread> {
        if hash == KECCAK_EMPTY {
            return Ok(Bytecode::new());
        }
        locked(&self.state.code)
            .get(&hash)
            .cloned()
            .ok_or_else(|| Unread(format!("no code read for hash {hash}")))
    }

    fn storage_ref(&self, address: Address, index: StorageKey) -> Result<StorageValue, Unread> {
        match self.value(Read::Slot(address, index))? {
            Value::Slot(v) => Ok(v),
            _ => Err(Unread("the node answered another read".into())),
        }
    }

    fn block_hash_ref(&self, number: u64) -> Result<B256, Unread> {
        match self.value(Read::BlockHash(number))? {
            Value::BlockHash(h) => Ok(h),
            _ => Err(Unread("the node answered another read".into())),
        }
    }
}

/// The keccak inputs a learning run hashed (a mapping's slot is the keccak of its key and its
/// place), by their hash.
#[derive(Default)]
struct Preimages(HashMap<B256, Vec<u8>>);

impl<CTX> Inspector<CTX, EthInterpreter> for Preimages {
    fn step(&mut self, interp: &mut Interpreter<EthInterpreter>, _context: &mut CTX) {
        const KECCAK256: u8 = 0x20;
        if interp.bytecode.opcode() != KECCAK256 {
            return;
        }
        let (Ok(offset), Ok(size)) = (interp.stack.peek(0), interp.stack.peek(1)) else {
            return;
        };
        let (Ok(offset), Ok(size)) = (usize::try_from(offset), usize::try_from(size)) else {
            return;
        };
        if size == 0 || size > MAX_PREIMAGE || !size.is_multiple_of(32) {
            return;
        }
        // Memory past its end reads as zeros (the instruction grows it).
        let mut input = vec![0u8; size];
        let present = interp.memory.size().saturating_sub(offset).min(size);
        if present > 0 {
            input[..present].copy_from_slice(&interp.memory.slice_len(offset, present));
        }
        self.0.insert(keccak256(&input), input);
    }
}

/// A shape of calls: the same targets, functions, data lengths and whether value is sent (a
/// fan-out's users, who differ in their addresses and amounts).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Shape(Vec<(Address, [u8; 4], usize, bool)>);

impl Shape {
    fn of(calls: &[Call]) -> Self {
        Self(
            calls
                .iter()
                .map(|c| {
                    let mut selector = [0u8; 4];
                    let n = c.data.len().min(4);
                    selector[..n].copy_from_slice(&c.data[..n]);
                    (c.to, selector, c.data.len(), c.value.is_zero())
                })
                .collect(),
        )
    }
}

/// A 32-byte word a check read by, as another user of the shape finds its own: the same
/// constant, its sender, a call's target, bytes of a call's data, or the keccak of such words.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Word {
    Const(B256),
    From,
    To(usize),
    Data { call: usize, at: usize, len: usize },
    Keccak(Vec<Word>),
}

/// A read a shape's check makes.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Ahead {
    Account(Word),
    Slot(Word, Word),
}

impl Ahead {
    /// What a run of `calls` from `from` read, as words of its inputs where they came from them.
    fn learn(
        from: Address,
        calls: &[Call],
        reads: &[Read],
        preimages: &HashMap<B256, Vec<u8>>,
    ) -> Vec<Ahead> {
        let word = |w: B256| Word::learn(w, from, calls, preimages, 0);
        let mut ahead: Vec<Ahead> = Vec::new();
        for read in reads {
            let a = match *read {
                Read::Account(a) => Ahead::Account(word(a.into_word())),
                Read::Slot(a, i) => Ahead::Slot(word(a.into_word()), word(B256::from(i))),
                Read::BlockHash(_) => continue,
            };
            if !ahead.contains(&a) {
                ahead.push(a);
            }
        }
        ahead
    }

    /// The read this makes for `from`'s `calls` (of the shape it was learnt from).
    fn read(&self, from: Address, calls: &[Call]) -> Option<Read> {
        let address = |w: &Word| w.eval(from, calls).map(Address::from_word);
        match self {
            Ahead::Account(a) => Some(Read::Account(address(a)?)),
            Ahead::Slot(a, i) => Some(Read::Slot(address(a)?, i.eval(from, calls)?.into())),
        }
    }
}

impl Word {
    fn learn(
        w: B256,
        from: Address,
        calls: &[Call],
        preimages: &HashMap<B256, Vec<u8>>,
        depth: usize,
    ) -> Word {
        let value = U256::from_be_bytes(w.0);
        // Small numbers (a mapping's place, a flag) are constants wherever else they appear.
        if value <= U256::from(u64::MAX) {
            return Word::Const(w);
        }
        if w == from.into_word() {
            return Word::From;
        }
        if let Some(i) = calls.iter().position(|c| c.to.into_word() == w) {
            return Word::To(i);
        }
        let address = w[..12].iter().all(|b| *b == 0);
        if address && let Some(found) = Word::found(calls, &w[12..]) {
            return found;
        }
        if depth < MAX_DEPTH
            && let Some(input) = preimages.get(&w)
        {
            let words: Vec<Word> = input
                .chunks(32)
                .map(|c| Word::learn(B256::from_slice(c), from, calls, preimages, depth + 1))
                .collect();
            if words.iter().any(|w| !matches!(w, Word::Const(_))) {
                return Word::Keccak(words);
            }
            return Word::Const(w);
        }
        Word::found(calls, w.as_slice()).unwrap_or(Word::Const(w))
    }

    /// Where `bytes` first appear in the calls' data.
    fn found(calls: &[Call], bytes: &[u8]) -> Option<Word> {
        calls.iter().enumerate().find_map(|(call, c)| {
            let at = c.data.windows(bytes.len()).position(|w| w == bytes)?;
            Some(Word::Data {
                call,
                at,
                len: bytes.len(),
            })
        })
    }

    fn eval(&self, from: Address, calls: &[Call]) -> Option<B256> {
        Some(match self {
            Word::Const(w) => *w,
            Word::From => from.into_word(),
            Word::To(i) => calls.get(*i)?.to.into_word(),
            Word::Data { call, at, len } => {
                let bytes = calls.get(*call)?.data.get(*at..at.checked_add(*len)?)?;
                let mut w = B256::ZERO;
                w[32 - len..].copy_from_slice(bytes);
                w
            }
            Word::Keccak(words) => {
                let mut input = Vec::with_capacity(words.len() * 32);
                for w in words {
                    input.extend_from_slice(w.eval(from, calls)?.as_slice());
                }
                keccak256(&input)
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use actiongate_api_types::ErrorCode;

    use super::*;

    #[test]
    fn agreement_allows_the_refunds_above_and_a_tenth_below() {
        let ok = |g: u64| Ok::<_, Error>(vec![1_000, g]);
        let refused = |code| Err::<Vec<u64>, _>(Error::new(code, "would revert"));
        assert!(agree(&ok(100_000), &ok(100_000)));
        assert!(agree(&ok(100_000), &ok(90_000)));
        assert!(!agree(&ok(100_000), &ok(89_999)));
        // A node that answers the gas after refunds (anvil): the local figure, before them, is
        // up to a fifth more, and a tenth on top.
        assert!(agree(&ok(100_000), &ok(132_000)));
        assert!(!agree(&ok(100_000), &ok(132_001)));
        assert!(!agree(&ok(100_000), &Ok(vec![1_000])));
        assert!(agree(
            &refused(ErrorCode::ExecutionReverted),
            &refused(ErrorCode::ExecutionReverted)
        ));
        assert!(!agree(
            &refused(ErrorCode::ExecutionReverted),
            &refused(ErrorCode::NotAvailable)
        ));
        assert!(!agree(&refused(ErrorCode::ExecutionReverted), &ok(100_000)));
    }
}
