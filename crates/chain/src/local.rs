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
//! The state is read at the latest block when a batch of checks starts and kept for that block
//! (by its hash: the contracts every delegator touches are read once a block, each delegator's own
//! few slots once). Each user's calls run in order with their state carried, in a simulated block
//! dated as the node's check dates it; each user alone, on the block's state. The answer is the
//! same rule as the node's check ([`crate::sender::gas_limits`]): each call's gas before refunds
//! plus headroom, or the first revert's decoded reason.
//!
//! Whether a chain's fan-outs are checked here is the chain's `fanout-check` setting: `node` (the
//! node's `eth_simulateV1`), `local` (here; a user whose state could not be read is checked by the
//! node), or `shadow` (both; the node's answer is used, and every disagreement is logged and
//! counted in `actiongate_local_checks_total{result="disagreed"}`). The EVM runs Ethereum's rules
//! (Osaka): `local` is for chains whose EVM is Ethereum's.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use actiongate_core::error::Error;
use alloy::eips::BlockId;
use alloy::primitives::{Address, B256, Bytes, U64, U256};
use alloy::providers::{DynProvider, Provider};
use alloy::rpc::client::{BatchRequest, Waiter};
use alloy::rpc::types::{Block, Header};
use revm::bytecode::Bytecode;
use revm::context::TxEnv;
use revm::context::result::{EVMError, ExecutionResult};
use revm::database::CacheDB;
use revm::database_interface::DBErrorMarker;
use revm::primitives::hardfork::SpecId;
use revm::primitives::{KECCAK_EMPTY, StorageKey, StorageValue, keccak256};
use revm::state::AccountInfo;
use revm::{Context, DatabaseRef, ExecuteCommitEvm, MainBuilder, MainContext};

use crate::client::MAX_BATCH_CALLS;
use crate::gather::Gather;
use crate::plan::Call;
use crate::sender::{Simulated, gas_limits};

/// The most gas one simulated call is given: a block's gas limit, capped as Osaka caps a
/// transaction's (EIP-7825).
const CALL_GAS_CAP: u64 = 1 << 24;

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
}

/// The state of one block as read so far, and the block a check on it simulates.
struct BlockState {
    hash: B256,
    /// The simulated block: the next one, dated as the node's check dates it.
    number: u64,
    timestamp: u64,
    gas_limit: u64,
    beneficiary: Address,
    prevrandao: B256,
    accounts: Mutex<HashMap<Address, AccountInfo>>,
    code: Mutex<HashMap<B256, Bytecode>>,
    storage: Mutex<HashMap<(Address, U256), U256>>,
    hashes: Mutex<HashMap<u64, B256>>,
}

fn locked<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Nothing panics while holding these; should something, the map is still whole.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

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
        }
    }

    /// Checks each user's calls (as [`crate::sender::simulate`] does), each on the latest block's
    /// state; `Err` for a user means it could not be checked here (a state read failed), and the
    /// node checks it. `time` is the simulated block's date.
    pub async fn check(
        self: &Arc<Self>,
        latest: &Header,
        time: u64,
        users: &[(Address, Vec<Call>)],
    ) -> Vec<Result<Result<Vec<u64>, Error>, String>> {
        let state = self.state_at(latest, time);
        let runtime = tokio::runtime::Handle::current();
        let runs = users.iter().map(|(from, calls)| {
            let (evm, state, runtime) = (self.clone(), state.clone(), runtime.clone());
            let (from, calls) = (*from, calls.clone());
            async move {
                tokio::task::spawn_blocking(move || evm.run(&state, &runtime, from, &calls))
                    .await
                    .unwrap_or_else(|e| Err(format!("the local check stopped: {e}")))
            }
        });
        futures_util::future::join_all(runs).await
    }

    /// The state of `latest` (kept while it is the latest block checked on).
    fn state_at(&self, latest: &Header, time: u64) -> Arc<BlockState> {
        let mut kept = locked(&self.latest);
        if let Some(state) = kept.as_ref()
            && state.hash == latest.hash
        {
            return state.clone();
        }
        let state = Arc::new(BlockState {
            hash: latest.hash,
            number: latest.number + 1,
            timestamp: time,
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

    /// One user's calls in order, state carried from call to call (on a blocking thread: a state
    /// read waits for the node).
    fn run(
        &self,
        state: &BlockState,
        runtime: &tokio::runtime::Handle,
        from: Address,
        calls: &[Call],
    ) -> Result<Result<Vec<u64>, Error>, String> {
        let db = CacheDB::new(Reader {
            evm: self,
            state,
            runtime,
        });
        let mut evm = Context::mainnet()
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
                block.timestamp = U256::from(state.timestamp);
                block.gas_limit = state.gas_limit;
                block.basefee = 0;
                block.beneficiary = state.beneficiary;
                block.prevrandao = Some(state.prevrandao);
            })
            .build_mainnet();
        let mut outcomes = Vec::with_capacity(calls.len());
        for call in calls {
            let tx = TxEnv::builder()
                .caller(from)
                .call(call.to)
                .data(call.data.clone())
                .value(call.value)
                .gas_limit(state.gas_limit.min(CALL_GAS_CAP))
                .gas_price(0)
                .chain_id(Some(self.chain_id))
                .build()
                .map_err(|e| format!("{e:?}"))?;
            let outcome = match evm.transact_commit(tx) {
                Ok(ExecutionResult::Success { gas, .. }) => Simulated::Ran {
                    gas: gas.total_gas_spent().max(gas.tx_gas_used()),
                },
                Ok(ExecutionResult::Revert { output, .. }) => Simulated::Reverted {
                    data: Some(output),
                    message: "execution reverted".into(),
                },
                Ok(ExecutionResult::Halt { reason, .. }) => Simulated::Reverted {
                    data: None,
                    message: format!("{reason:?}"),
                },
                Err(EVMError::Database(e)) => return Err(e.0),
                // Not a transaction the node's check would run either way (an invalid one): the
                // node's check answers it.
                Err(e) => return Err(e.to_string()),
            };
            let reverted = matches!(outcome, Simulated::Reverted { .. });
            outcomes.push(outcome);
            if reverted {
                break;
            }
        }
        Ok(gas_limits(calls, outcomes))
    }

    /// One batch of reads at `block`: each distinct read once, in JSON-RPC batches of at most
    /// [`MAX_BATCH_CALLS`] calls side by side (an account is three calls: balance, nonce, code).
    async fn read_batch(&self, block: B256, reads: Vec<Read>) -> Vec<Result<Value, String>> {
        let mut seen = std::collections::HashSet::with_capacity(reads.len());
        let distinct: Vec<Read> = reads.iter().copied().filter(|r| seen.insert(*r)).collect();
        let mut chunks: Vec<Vec<Read>> = Vec::new();
        let mut in_chunk = usize::MAX;
        for r in distinct {
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
        let at = BlockId::from(block);
        let answered = futures_util::future::join_all(
            chunks.into_iter().map(|chunk| self.read_chunk(at, chunk)),
        )
        .await;
        let answers: HashMap<Read, Result<Value, String>> =
            answered.into_iter().flatten().collect();
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

    /// A node error as the local check reports it: without the RPC URL.
    fn unread(&self, e: impl std::fmt::Display) -> String {
        crate::plan::without_url(self.rpc_url.as_deref(), e)
    }

    /// One JSON-RPC batch of reads.
    async fn read_chunk(
        &self,
        at: BlockId,
        reads: Vec<Read>,
    ) -> Vec<(Read, Result<Value, String>)> {
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

fn failed(reads: Vec<Read>, e: &impl std::fmt::Display) -> Vec<(Read, Result<Value, String>)> {
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

/// The block's state as revm reads it: what was read already, else read from the node now (the
/// reads of every check running at the moment gathered into one batch).
struct Reader<'a> {
    evm: &'a LocalEvm,
    state: &'a BlockState,
    runtime: &'a tokio::runtime::Handle,
}

impl Reader<'_> {
    fn read(&self, read: Read) -> Result<Value, Unread> {
        let gathered = self
            .runtime
            .block_on(self.evm.reads.one(self.state.hash, read, |batch| {
                self.evm.read_batch(self.state.hash, batch)
            }));
        gathered
            .unwrap_or_else(|| Err("a state read was dropped".into()))
            .map_err(Unread)
    }
}

impl DatabaseRef for Reader<'_> {
    type Error = Unread;

    fn basic_ref(&self, address: Address) -> Result<Option<AccountInfo>, Unread> {
        if let Some(a) = locked(&self.state.accounts).get(&address) {
            return Ok(Some(a.clone()));
        }
        let Value::Account(a) = self.read(Read::Account(address))? else {
            return Err(Unread("the node answered another read".into()));
        };
        if let Some(code) = &a.code {
            locked(&self.state.code).insert(a.code_hash, code.clone());
        }
        locked(&self.state.accounts).insert(address, a.clone());
        Ok(Some(a))
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
        if let Some(v) = locked(&self.state.storage).get(&(address, index)) {
            return Ok(*v);
        }
        let Value::Slot(v) = self.read(Read::Slot(address, index))? else {
            return Err(Unread("the node answered another read".into()));
        };
        locked(&self.state.storage).insert((address, index), v);
        Ok(v)
    }

    fn block_hash_ref(&self, number: u64) -> Result<B256, Unread> {
        if let Some(h) = locked(&self.state.hashes).get(&number) {
            return Ok(*h);
        }
        let Value::BlockHash(h) = self.read(Read::BlockHash(number))? else {
            return Err(Unread("the node answered another read".into()));
        };
        locked(&self.state.hashes).insert(number, h);
        Ok(h)
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
