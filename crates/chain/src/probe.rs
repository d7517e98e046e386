//! Many state reads in one `eth_call`: the local check's reads of a fan-out's users.
//!
//! The local check ([`crate::local`]) reads the state it runs on from the node at one block: an
//! account's balance, nonce and code, a contract's storage slots. One JSON-RPC call a read costs a
//! node its per-call work for each (parsing, finding the block's state: anvil builds the whole
//! block for every read at a block that is not its latest, ~100-150 µs a read against ~17 µs at
//! `latest`), and a fan-out of 1,000 users reads ~7,000 of them (docs/benchmarks.md, stop 53).
//! Here the slots and accounts are read by the EVM of the node itself, in one `eth_call` for many
//! of them, each call at the same block as the reads it replaces:
//!
//! - a contract's slots: the call goes to the contract with its code replaced, by the call's state
//!   override, with [`SLOTS`], which answers the `SLOAD` of each 32-byte word of its calldata (an
//!   override replaces the code and keeps the storage);
//! - accounts: the call goes to [`READER`] with [`ACCOUNTS`] as its code, which answers each listed
//!   address's balance and code (`BALANCE`, `EXTCODESIZE`, `EXTCODECOPY`: an EIP-7702 account's
//!   code is its designator, as `eth_getCode` answers). The EVM has no instruction for an account's
//!   nonce: it is still read with `eth_getTransactionCount`, in the same JSON-RPC batch.
//!
//! State overrides on `eth_call` are answered by geth, reth, Erigon, Nethermind and anvil; a node
//! that refuses one (or answers something that does not decode) has those reads made one call
//! each, as before.

use alloy::eips::BlockId;
use alloy::primitives::{Address, Bytes, U256, address, hex};
use alloy::rpc::types::TransactionRequest;
use alloy::rpc::types::state::{AccountOverride, StateOverride};

/// Answers the storage slot of each 32-byte word of its calldata, each a 32-byte word, in order,
/// from the storage of the account it runs as.
///
/// ```text
/// 00 PUSH1 0        i = 0
/// 02 JUMPDEST       loop:
/// 03 CALLDATASIZE
/// 04 DUP2 LT ISZERO
/// 07 PUSH1 0x15 JUMPI      if !(i < size) goto end
/// 0a DUP1 CALLDATALOAD SLOAD
/// 0d DUP2 MSTORE           memory[i] = sload(calldata[i])
/// 0f PUSH1 32 ADD          i += 32
/// 12 PUSH1 0x02 JUMP
/// 15 JUMPDEST       end:
/// 16 CALLDATASIZE PUSH1 0 RETURN   return memory[0..size]
/// ```
pub const SLOTS: [u8; 26] =
    hex!("6000 5b 36 81 10 15 6015 57 80 35 54 81 52 6020 01 6002 56 5b 36 6000 f3");

/// Answers, for each address its calldata lists (one 32-byte word each): its balance and its
/// code's length (two 32-byte words an address, in order), then every address's code in the same
/// order, each padded to a multiple of 32 bytes.
///
/// ```text
/// 00 PUSH1 0                     i = 0 (calldata offset)
/// 02 CALLDATASIZE DUP1 ADD       out = 2 × size (where the codes go)
/// 05 JUMPDEST                    loop:
/// 06 CALLDATASIZE DUP3 LT ISZERO
/// 0a PUSH1 0x39 JUMPI            if !(i < size) goto end
/// 0d DUP2 CALLDATALOAD           a = calldata[i]
/// 0f DUP1 BALANCE DUP4 DUP1 ADD MSTORE                  memory[2i] = balance(a)
/// 15 DUP1 EXTCODESIZE                                   n = extcodesize(a)
/// 17 DUP1 DUP5 DUP1 ADD PUSH1 32 ADD MSTORE             memory[2i + 32] = n
/// 1f DUP1 PUSH1 0 DUP5 DUP5 EXTCODECOPY                 memory[out..out + n] = code(a)
/// 25 PUSH1 31 ADD PUSH1 31 NOT AND DUP3 ADD             out += n rounded up to 32
/// 2e SWAP2 POP POP
/// 31 SWAP1 PUSH1 32 ADD SWAP1                           i += 32
/// 36 PUSH1 0x05 JUMP
/// 39 JUMPDEST                    end:
/// 3a PUSH1 0 RETURN              return memory[0..out]
/// ```
pub const ACCOUNTS: [u8; 61] = hex!(
    "6000 36 80 01 5b 36 82 10 15 6039 57 81 35 80 31 83 80 01 52 80 3b 80 84 80 01 6020 01 52
     80 6000 84 84 3c 601f 01 601f 19 16 82 01 91 50 50 90 6020 01 90 6005 56 5b 6000 f3"
);

/// Where [`ACCOUNTS`] runs: an address derived from a name (the last 20 bytes of
/// `keccak256("actiongate.local.account-reader")`), whose own state nothing reads.
pub const READER: Address = address!("c75a7f8573d3fa1c67b7cc45b5a5675e88bf5463");

/// The most slots one call reads: 32 KiB of calldata, ~2.7 M gas.
pub const MAX_SLOTS: usize = 1024;

/// The `eth_call` params that read `slots` of `contract` at `at`.
pub fn slots_call(
    contract: Address,
    slots: &[U256],
    at: BlockId,
) -> (TransactionRequest, BlockId, StateOverride) {
    let data: Vec<u8> = slots.iter().flat_map(|s| s.to_be_bytes::<32>()).collect();
    with_code(contract, &SLOTS, data, at)
}

/// The slots' values from the answer to [`slots_call`] for `count` slots.
pub fn slots_answer(out: &[u8], count: usize) -> Option<Vec<U256>> {
    if out.len() != count.checked_mul(32)? {
        return None;
    }
    Some(out.chunks(32).map(U256::from_be_slice).collect())
}

/// The `eth_call` params that read the balance and code of `accounts` at `at`.
pub fn accounts_call(
    accounts: &[Address],
    at: BlockId,
) -> (TransactionRequest, BlockId, StateOverride) {
    let data: Vec<u8> = accounts.iter().flat_map(|a| a.into_word().0).collect();
    with_code(READER, &ACCOUNTS, data, at)
}

/// Each account's balance and code from the answer to [`accounts_call`] for `count` accounts.
pub fn accounts_answer(out: &[u8], count: usize) -> Option<Vec<(U256, Bytes)>> {
    let word = |i: usize| out.get(i * 32..i * 32 + 32).map(U256::from_be_slice);
    let mut at = count.checked_mul(64)?;
    let mut answers = Vec::with_capacity(count);
    for i in 0..count {
        let balance = word(2 * i)?;
        let len = usize::try_from(word(2 * i + 1)?).ok()?;
        let code = out.get(at..at.checked_add(len)?)?;
        answers.push((balance, Bytes::copy_from_slice(code)));
        at = at.checked_add(len.checked_next_multiple_of(32)?)?;
    }
    (at == out.len()).then_some(answers)
}

fn with_code(
    to: Address,
    code: &[u8],
    data: Vec<u8>,
    at: BlockId,
) -> (TransactionRequest, BlockId, StateOverride) {
    let call = TransactionRequest::default()
        .to(to)
        .input(Bytes::from(data).into());
    let mut overrides = StateOverride::default();
    overrides.insert(
        to,
        AccountOverride::default().with_code(Bytes::copy_from_slice(code)),
    );
    (call, at, overrides)
}

#[cfg(test)]
mod tests {
    use alloy::primitives::keccak256;
    use revm::bytecode::Bytecode;
    use revm::context::TxEnv;
    use revm::context::result::{ExecutionResult, Output};
    use revm::database::{CacheDB, EmptyDB};
    use revm::primitives::hardfork::SpecId;
    use revm::state::AccountInfo;
    use revm::{Context, ExecuteEvm, MainBuilder, MainContext};

    use super::*;

    /// Runs a probe's `eth_call` over `db` as the node runs it: the overridden code at the call's
    /// target, with the call's data.
    fn call(
        db: &CacheDB<EmptyDB>,
        params: &(TransactionRequest, BlockId, StateOverride),
    ) -> Vec<u8> {
        let (request, _, overrides) = params;
        let to = *request.to.as_ref().and_then(|t| t.to()).unwrap();
        let code = overrides[&to].code.clone().unwrap();
        let data = request.input.input().unwrap().clone();
        let mut db = db.clone();
        let mut info = db
            .load_account(to)
            .map(|a| a.info.clone())
            .unwrap_or_default();
        let code = Bytecode::new_raw(code);
        info.code_hash = code.hash_slow();
        info.code = Some(code);
        db.insert_account_info(to, info);
        let mut evm = Context::mainnet()
            .with_db(db)
            .modify_cfg_chained(|cfg| cfg.set_spec_and_mainnet_gas_params(SpecId::OSAKA))
            .build_mainnet();
        let tx = TxEnv::builder()
            .caller(Address::repeat_byte(0xca))
            .call(to)
            .data(data)
            .gas_limit(1 << 24)
            .gas_price(0)
            .build()
            .unwrap();
        match evm.transact(tx).unwrap().result {
            ExecutionResult::Success {
                output: Output::Call(out),
                ..
            } => out.to_vec(),
            other => panic!("the reader did not answer: {other:?}"),
        }
    }

    #[test]
    fn the_reader_lives_where_its_name_says() {
        let hash = keccak256("actiongate.local.account-reader");
        assert_eq!(READER, Address::from_slice(&hash[12..]));
    }

    #[test]
    fn a_contracts_slots_are_read_in_one_call_as_its_storage_holds_them() {
        let contract = Address::repeat_byte(0x11);
        let mut db = CacheDB::new(EmptyDB::default());
        let code = Bytecode::new_raw(Bytes::from_static(&[0x60, 0x01, 0x00]));
        db.insert_account_info(
            contract,
            AccountInfo::new(U256::from(5), 1, code.hash_slow(), code),
        );
        let big = U256::from_be_bytes(keccak256("a mapping's slot").0);
        db.insert_account_storage(contract, U256::from(3), U256::from(42))
            .unwrap();
        db.insert_account_storage(contract, big, U256::MAX - U256::from(1))
            .unwrap();
        let slots = [U256::from(3), big, U256::from(7), U256::from(3)];
        let params = slots_call(contract, &slots, BlockId::latest());
        assert_eq!(params.0.to, Some(contract.into()));
        assert_eq!(
            params.2[&contract].code.as_ref().map(|c| &c[..]),
            Some(&SLOTS[..])
        );
        let out = call(&db, &params);
        assert_eq!(
            slots_answer(&out, slots.len()).unwrap(),
            vec![
                U256::from(42),
                U256::MAX - U256::from(1),
                U256::ZERO,
                U256::from(42)
            ]
        );
        // No slots, nothing read; an answer of another length is not an answer.
        assert_eq!(
            call(&db, &slots_call(contract, &[], BlockId::latest())),
            Vec::<u8>::new()
        );
        assert!(slots_answer(&out, 3).is_none());
    }

    #[test]
    fn accounts_are_read_in_one_call_with_their_balance_and_code() {
        let mut db = CacheDB::new(EmptyDB::default());
        let eoa = Address::repeat_byte(0x01);
        db.insert_account_info(
            eoa,
            AccountInfo::from_balance(U256::from(10).pow(U256::from(20))),
        );
        // An EIP-7702 account: its code is its 23-byte designator.
        let delegated = Address::repeat_byte(0x02);
        let designator = Bytecode::new_eip7702(Address::repeat_byte(0x03));
        db.insert_account_info(
            delegated,
            AccountInfo::new(U256::from(7), 4, designator.hash_slow(), designator.clone()),
        );
        // A contract whose code is longer than a word and not a multiple of one.
        let contract = Address::repeat_byte(0x04);
        let long: Vec<u8> = (0..77u8).map(|b| b.wrapping_mul(31) | 1).collect();
        let code = Bytecode::new_raw(Bytes::from(long.clone()));
        db.insert_account_info(
            contract,
            AccountInfo::new(U256::ZERO, 1, code.hash_slow(), code),
        );
        let nobody = Address::repeat_byte(0x05);
        let accounts = [eoa, delegated, contract, nobody, eoa];
        let params = accounts_call(&accounts, BlockId::latest());
        assert_eq!(params.0.to, Some(READER.into()));
        assert_eq!(
            params.2[&READER].code.as_ref().map(|c| &c[..]),
            Some(&ACCOUNTS[..])
        );
        let out = call(&db, &params);
        let answers = accounts_answer(&out, accounts.len()).unwrap();
        assert_eq!(
            answers,
            vec![
                (U256::from(10).pow(U256::from(20)), Bytes::new()),
                (U256::from(7), designator.original_bytes()),
                (U256::ZERO, Bytes::from(long)),
                (U256::ZERO, Bytes::new()),
                (U256::from(10).pow(U256::from(20)), Bytes::new()),
            ]
        );
        assert_eq!(designator.original_bytes().len(), 23);
        // A cut answer, or one for another count, is not an answer.
        assert!(accounts_answer(&out[..out.len() - 32], accounts.len()).is_none());
        assert!(accounts_answer(&out, accounts.len() - 1).is_none());
    }
}
