//! The wallet sender against the devnet's node (anvil), for what only a real node can show: a
//! transaction the node refuses while a later one of the same wallet is already with it leaves no
//! gap behind that one (its nonce is filled with a no-op transfer and the later one is mined).
#![allow(clippy::panic, clippy::expect_used)] // Tests fail by panicking, saying what failed.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use actiongate_api_types::ErrorCode;
use actiongate_chain::client::ChainClient;
use actiongate_chain::plan::{Call, Plan};
use actiongate_chain::sender::{BeforeReserve, SendHooks, WalletSender};
use actiongate_chain::{ChainClients, ChainOptions};
use actiongate_core::chains::{ChainSettings, Chains, FanoutCheck, HandOver};
use actiongate_core::clock::SystemClock;
use actiongate_core::error::Error;
use actiongate_core::store::{NonceRequest, Reservation, Store};
use actiongate_store::SqlStore;
use alloy::consensus::Transaction;
use alloy::primitives::{Address, Bytes, U256};
use alloy::providers::Provider;
use alloy::signers::local::PrivateKeySigner;
use serde_json::{Value, json};

use common::*;

const CHAIN: u64 = 84532;

/// An approval of `spender` on the devnet's USDC: ~46,000 gas, ~60,000 with the sender's headroom.
fn approval(usdc: Address, spender: Address) -> Plan {
    let mut data = vec![0x09, 0x5e, 0xa7, 0xb3];
    data.extend_from_slice(&[0u8; 12]);
    data.extend_from_slice(spender.as_slice());
    data.extend_from_slice(&U256::from(1u64).to_be_bytes::<32>());
    Plan {
        calls: vec![Call {
            to: usdc,
            data: Bytes::from(data),
            value: U256::ZERO,
            description: "approve".into(),
        }],
        summary: json!({}),
    }
}

/// A plain transfer of 1 wei: 21,000 gas, 27,300 with the headroom.
fn transfer(to: Address) -> Plan {
    Plan {
        calls: vec![Call {
            to,
            data: Bytes::new(),
            value: U256::from(1u64),
            description: "transfer".into(),
        }],
        summary: json!({}),
    }
}

/// A SQLite store in the devnet's folder and the devnet's client.
async fn connect(devnet: &Devnet, options: &ChainOptions) -> (Arc<dyn Store>, Arc<ChainClient>) {
    let db = devnet.dir.path().join("nonces.db");
    let store = SqlStore::connect(&format!("sqlite://{}", db.display()))
        .await
        .expect("the store opens");
    store.migrate().await.expect("migrations");
    let store: Arc<dyn Store> = Arc::new(store);
    (store, devnet_client(devnet, options, FanoutCheck::Node))
}

/// A wallet of the devnet with its sender's parts: a receipt timeout of 60 s.
struct Wallet {
    options: ChainOptions,
    store: Arc<dyn Store>,
    client: Arc<ChainClient>,
    address: Address,
    signer: PrivateKeySigner,
    /// Its next nonce on the chain when it was taken.
    first: u64,
}

async fn wallet_of(devnet: &Devnet, account: usize) -> Wallet {
    let options = ChainOptions {
        receipt_timeout: Duration::from_secs(60),
        ..ChainOptions::default()
    };
    let (store, client) = connect(devnet, &options).await;
    let (address, key) = devnet.account(account);
    Wallet {
        options,
        store,
        client,
        address,
        signer: key.parse().expect("a devnet key"),
        first: devnet.nonce(address).await,
    }
}

/// The devnet's client, its fan-outs checked where `check` says.
fn devnet_client(devnet: &Devnet, options: &ChainOptions, check: FanoutCheck) -> Arc<ChainClient> {
    client_handing_over(devnet, options, check, HandOver::Eager)
}

/// The devnet's client, its fan-outs checked where `check` says, its wallets' transactions handed
/// over as `hand_over` says.
fn client_handing_over(
    devnet: &Devnet,
    options: &ChainOptions,
    check: FanoutCheck,
    hand_over: HandOver,
) -> Arc<ChainClient> {
    let settings = ChainSettings {
        name: "devnet".into(),
        rpc_url: Some(devnet.url.clone()),
        tokens: BTreeMap::new(),
        contracts: BTreeMap::new(),
        vaults: BTreeMap::new(),
        price_feeds: BTreeMap::new(),
        price_pools: BTreeMap::new(),
        fx_pairs: Vec::new(),
        prediction_questions: BTreeMap::new(),
        bridge_routes: BTreeMap::new(),
        fanout_check: check,
        hand_over,
    };
    let clients = ChainClients::connect(
        &Chains(BTreeMap::from([(CHAIN, settings)])),
        options.clone(),
    )
    .expect("the devnet's client");
    clients.get(CHAIN).expect("the devnet's client").clone()
}

/// Execution B is reserved while execution A holds the nonce below it (A's reservation is made from
/// B's before-reserve hook); B's transfer goes to the node and waits there above A's nonce. Then the
/// block gas limit drops to 50,000 (from A's hook, after A's simulation), so the node refuses A's
/// approval (its gas limit, ~60,000, is above the block's) on both of A's attempts (the fill and B,
/// 48,300 together, fit in one block). A fails, its nonce is
/// filled with a no-op transfer to the wallet itself, and B is mined right above it.
#[tokio::test]
async fn a_refused_transaction_leaves_no_gap_below_the_next() {
    let devnet = Devnet::start();
    let Wallet {
        options,
        store,
        client,
        address: wallet,
        signer,
        first,
    } = wallet_of(&devnet, 9).await;

    let hook_store = store.clone();
    let node = devnet.provider.clone();
    let before_reserve: BeforeReserve = Arc::new(move |execution_key: &str| {
        let (store, node, key) = (hook_store.clone(), node.clone(), execution_key.to_owned());
        Box::pin(async move {
            match key.as_str() {
                // A takes the nonce below B's before B reserves (reserved, not signed yet).
                "B" => {
                    let wallet = wallet.to_string();
                    let request = NonceRequest {
                        chain_id: CHAIN,
                        wallet: &wallet,
                        execution_key: "A",
                        count: 1,
                        chain_nonce: first,
                        now: 1,
                        gaps_only: false,
                    };
                    let held = store.reserve_signed(request, None, None).await;
                    assert!(
                        matches!(&held, Ok(Reservation::New(rows)) if rows[0].nonce == first),
                        "{held:?}"
                    );
                }
                // After A's simulation: no block may hold A's approval any more.
                "A" => {
                    let _: Value = node
                        .raw_request("evm_setBlockGasLimit".into(), (U256::from(50_000u64),))
                        .await
                        .expect("the devnet sets the block gas limit");
                }
                _ => {}
            }
        })
    });
    let hooks = SendHooks {
        before_reserve: Some(before_reserve),
        after_send: None,
    };
    let sender = Arc::new(WalletSender::new(
        store.clone(),
        Arc::new(SystemClock),
        options,
        hooks,
    ));

    // B: sent, and waiting in the node above A's nonce.
    let b = {
        let (sender, client, signer) = (sender.clone(), client.clone(), signer.clone());
        let to = devnet.account(8).0;
        tokio::spawn(async move {
            sender
                .execute(&client, &signer, wallet, "B", None, || async {
                    Ok::<_, Error>(transfer(to))
                })
                .await
        })
    };
    // Until B is with the node (queued behind the nonce A holds).
    pooled(&devnet, 1).await;
    assert_eq!(
        devnet.nonce(wallet).await,
        first,
        "nothing mined above the gap"
    );

    // A: refused by the node twice; its nonce filled.
    let usdc = devnet.usdc();
    let a = sender
        .execute(&client, &signer, wallet, "A", None, || async {
            Ok::<_, Error>(approval(usdc, Address::repeat_byte(0x11)))
        })
        .await;
    assert!(!a.success && !a.pending, "{a:?}");
    let (code, message) = a.error.clone().expect("A's refusal");
    assert_eq!(code, ErrorCode::NotAvailable, "{a:?}");
    assert!(
        message.contains("The node refused the transaction") && message.contains("gas"),
        "the node's own reason: {message}"
    );
    let b = tokio::time::timeout(Duration::from_secs(60), b)
        .await
        .expect("B is mined once the gap is filled")
        .expect("B's task");
    assert!(b.success, "{b:?}");
    assert_eq!(devnet.nonce(wallet).await, first + 2);

    // What fills A's nonce is a no-op: nothing sent anywhere, 0 value, to the wallet itself, mined
    // at or before B's block.
    let b_hash = b.tx_hash.clone().expect("B's transaction");
    let b_block = devnet
        .provider
        .get_transaction_receipt(b_hash.parse().expect("a hash"))
        .await
        .expect("the node answers")
        .and_then(|r| r.block_number)
        .expect("B is mined");
    let mut fill = None;
    for n in b_block.saturating_sub(3)..=b_block {
        let block = devnet
            .provider
            .get_block_by_number(n.into())
            .full()
            .await
            .expect("the node answers")
            .expect("the block");
        if let Some(t) = block
            .transactions
            .into_transactions()
            .find(|t| t.inner.signer() == wallet && t.nonce() == first)
        {
            fill = Some(t);
        }
    }
    let tx = fill.expect("the fill is on the chain");
    assert_eq!(
        (tx.to(), tx.value(), tx.input().len()),
        (Some(wallet), U256::ZERO, 0)
    );
    let _: Value = devnet
        .provider
        .raw_request("evm_setBlockGasLimit".into(), (U256::from(30_000_000u64),))
        .await
        .expect("the devnet sets the block gas limit back");
}

/// A signed no-op transfer of the wallet to itself at `nonce`: (hash, raw bytes).
fn no_op(signer: &PrivateKeySigner, nonce: u64) -> (String, Vec<u8>) {
    use alloy::consensus::{SignableTransaction, TxEip1559, TxEnvelope};
    use alloy::eips::eip2718::Encodable2718;
    use alloy::network::TxSignerSync;
    let mut tx = TxEip1559 {
        chain_id: CHAIN,
        nonce,
        gas_limit: 21_000,
        max_fee_per_gas: 2_000_000_000,
        max_priority_fee_per_gas: 1_000_000_000,
        to: alloy::primitives::TxKind::Call(signer.address()),
        ..TxEip1559::default()
    };
    let signature = signer.sign_transaction_sync(&mut tx).expect("signed");
    let envelope = TxEnvelope::Eip1559(tx.into_signed(signature));
    (envelope.tx_hash().to_string(), envelope.encoded_2718())
}

/// A gap fill signed and recorded just before a crash, never sent: the node holds the wallet's next
/// transaction above its nonce. The sweep takes the fill up (the same bytes to the node), both are
/// mined, and a later sweep records the fill mined.
#[tokio::test]
async fn a_gap_fill_left_unsent_is_taken_up_by_the_sweep() {
    let devnet = Devnet::start();
    let options = ChainOptions {
        // The sweep takes up fills signed two bump intervals ago, and claims them for one.
        bump_after: Duration::from_millis(150),
        ..ChainOptions::default()
    };
    let (store, client) = connect(&devnet, &options).await;
    let (wallet, key) = devnet.account(7);
    let signer: PrivateKeySigner = key.parse().expect("a devnet key");
    let first = devnet.nonce(wallet).await;

    // The fill at `first`, reserved and signed in one write (as the sender does), then nothing.
    let fill = actiongate_core::store::fill_key("crashed:0", 1);
    let (fill_hash, fill_raw) = no_op(&signer, first);
    let wallet_text = wallet.to_string();
    let sign_at = |nonces: &[u64]| {
        assert_eq!(nonces, [first]);
        Ok(vec![actiongate_core::store::SignedTx {
            nonce: first,
            tx_hash: fill_hash.clone(),
            raw_tx: fill_raw.clone(),
        }])
    };
    let request = NonceRequest {
        chain_id: CHAIN,
        wallet: &wallet_text,
        execution_key: &fill,
        count: 1,
        chain_nonce: first,
        now: 1,
        gaps_only: false,
    };
    let reserved = store.reserve_signed(request, None, Some(&sign_at)).await;
    assert!(matches!(reserved, Ok(Reservation::New(_))), "{reserved:?}");
    // The wallet's next transaction, with the node, waiting above the fill's nonce.
    let (_, next_raw) = no_op(&signer, first + 1);
    let _ = devnet
        .provider
        .send_raw_transaction(&next_raw)
        .await
        .expect("the node takes the next transaction");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        devnet.nonce(wallet).await,
        first,
        "nothing mined above the gap"
    );

    let sender = WalletSender::new(
        store.clone(),
        Arc::new(SystemClock),
        options,
        SendHooks {
            before_reserve: None,
            after_send: None,
        },
    );
    assert_eq!(sender.sweep_fills(&client).await.ok(), Some(1));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while devnet.nonce(wallet).await < first + 2 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the fill and the transaction above it are mined"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Once its claim ran out, the next sweep finds the receipt and records it.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        tokio::time::sleep(Duration::from_millis(400)).await;
        sender.sweep_fills(&client).await.expect("the sweep");
        let rows = store.execution_txs(&fill).await.expect("the fill's row");
        if rows[0].state == actiongate_core::states::ChainTxState::Mined {
            assert_eq!(rows[0].receipt_status, Some(1));
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the fill is recorded mined: {rows:?}"
        );
    }
    assert_eq!(
        sender.sweep_fills(&client).await.ok(),
        Some(0),
        "a mined fill is not taken up again"
    );
}

/// An error as a caller sees it (its code and message).
/// Users to check, each with its calls: a transfer of 1 wei, a token transfer of more than the
/// user holds (it reverts), an approval then a transfer, an approval.
fn users_to_check(
    usdc: Address,
    holder: Address,
    a: Address,
    b: Address,
) -> Vec<(Address, Vec<Call>)> {
    use alloy::sol_types::SolCall;
    let overdraw = Call {
        to: usdc,
        data: actiongate_chain::bindings::IERC20::transferCall {
            to: b,
            amount: U256::MAX,
        }
        .abi_encode()
        .into(),
        value: U256::ZERO,
        description: "overdraw".into(),
    };
    let mut two = approval(usdc, holder).calls;
    two.extend(transfer(holder).calls);
    vec![
        (holder, transfer(a).calls),
        (a, vec![overdraw]),
        (b, two),
        (holder, approval(usdc, b).calls),
    ]
}

/// The sum of the counters of a rendered Prometheus text whose lines `series` picks.
fn counted(rendered: &str, series: impl Fn(&str) -> bool) -> u64 {
    rendered
        .lines()
        .filter(|l| series(l))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

/// The JSON-RPC calls of `method` the gateway counted.
fn rpc_calls(rendered: &str, method: &str) -> u64 {
    counted(rendered, |l| {
        l.starts_with("actiongate_rpc_calls_total") && l.contains(method)
    })
}

fn seen<T>(r: Result<T, Error>) -> Result<T, (ErrorCode, String)> {
    r.map_err(|e| (e.code, e.message))
}

/// A fan-out's users are planned side by side, and their plan reads and simulations go to the node
/// together (`plan::batch::gathered`: the callers that ask together as one `eth_simulateV1`). Each caller is answered exactly as it is alone: the same read asked
/// twice answered twice, a reverting read with the node's own error, a user whose calls revert
/// refused alone while the others in the same request get their gas limits.
#[tokio::test]
async fn gathered_reads_and_simulations_answer_each_caller_as_alone() {
    use actiongate_chain::bindings::IERC20 as Token;
    use actiongate_chain::plan::batch::gathered;
    use actiongate_chain::plan::view;
    use actiongate_chain::sender::simulate;

    // The node requests by method, as the gateway's metrics count them (this test's thread).
    let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    let metrics = recorder.handle();
    let _recording = metrics::set_default_local_recorder(&recorder);
    let simulations = || rpc_calls(&metrics.render(), "eth_simulateV1");
    let devnet = Devnet::start();
    let (_, client) = connect(&devnet, &ChainOptions::default()).await;
    let client = &*client;
    let usdc = devnet.usdc();
    let (holder, a, b) = (
        devnet.account(0).0,
        devnet.account(1).0,
        devnet.account(2).0,
    );
    let funded = devnet.balance(usdc, a).await + U256::from(5_000_000u64);
    devnet.fund(a, U256::ZERO, U256::from(5_000_000u64)).await;
    let reads = || async {
        tokio::join!(
            view(client, usdc, Token::decimalsCall {}),
            view(client, usdc, Token::balanceOfCall { owner: holder }),
            view(client, usdc, Token::balanceOfCall { owner: a }),
            view(client, usdc, Token::balanceOfCall { owner: holder }),
            view(
                client,
                usdc,
                Token::transferCall {
                    to: b,
                    amount: U256::MAX
                }
            ),
        )
    };
    let alone = reads().await;
    let before = simulations();
    let together = gathered(reads()).await;
    // The five reads in one simulation (identical ones once; its reverting call read again alone).
    assert_eq!(simulations() - before, 1);
    let (d, h, x, h2, t) = alone;
    let alone = (seen(d), seen(h), seen(x), seen(h2), seen(t));
    let (d, h, x, h2, t) = together;
    assert_eq!((seen(d), seen(h), seen(x), seen(h2), seen(t)), alone);
    assert_eq!(alone.2, Ok(funded), "{alone:?}");
    assert!(
        alone.4.is_err(),
        "a transfer of more than the caller holds reverts: {alone:?}"
    );

    let groups = users_to_check(usdc, holder, a, b);
    let sims = || {
        futures_util::future::join_all(
            groups
                .iter()
                .map(|(from, calls)| simulate(client, *from, calls)),
        )
    };
    let before = simulations();
    let alone: Vec<_> = sims().await.into_iter().map(seen).collect();
    assert_eq!(simulations() - before, 4);
    let together: Vec<_> = gathered(sims()).await.into_iter().map(seen).collect();
    // The four users asked together: one request (the first caller yields once before taking
    // the queue, so the others started with it queue first).
    assert_eq!(simulations() - before, 5);
    assert_eq!(together, alone);
    assert_eq!(alone[0], Ok(vec![27_300]), "{alone:?}");
    assert!(
        matches!(&alone[1], Err((ErrorCode::ExecutionReverted, m)) if m.starts_with("overdraw would revert")),
        "{alone:?}"
    );
    assert_eq!(alone[2].as_ref().map(Vec::len), Ok(2), "{alone:?}");

    // 150 users asked together (200 calls): requests of at most 64 calls, a user's calls never
    // split (64, 64, 64 and 8 calls), each user answered as alone, the reverting ones alone
    // failing. Calls whose gas does not depend on the users simulated before them in the same
    // request (transfers of 1 wei, and a revert), so that "as alone" is one answer per kind.
    let kinds = [
        groups[0].clone(),
        groups[1].clone(),
        (b, [transfer(holder).calls, transfer(a).calls].concat()),
    ];
    let each_alone: Vec<_> = futures_util::future::join_all(
        kinds
            .iter()
            .map(|(from, calls)| simulate(client, *from, calls)),
    )
    .await
    .into_iter()
    .map(seen)
    .collect();
    let many: Vec<_> = kinds.iter().cycle().take(150).collect();
    let before = simulations();
    let together: Vec<_> = gathered(futures_util::future::join_all(
        many.iter()
            .map(|(from, calls)| simulate(client, *from, calls)),
    ))
    .await
    .into_iter()
    .map(seen)
    .collect();
    assert_eq!(
        simulations() - before,
        4,
        "four requests of at most 64 calls"
    );
    let expected: Vec<_> = each_alone.iter().cycle().take(150).cloned().collect();
    assert_eq!(together, expected);
    assert_eq!(each_alone[2], Ok(vec![27_300, 27_300]), "{each_alone:?}");
}

/// A fan-out's check in the gateway's own EVM (`fanout-check = "local"`) answers each user as the
/// node's check does: the same gas limits, the same refusal for a call that would revert, each
/// user alone; and it asks the node to simulate only what it does not run itself or refuses (a
/// refusal is the node's to confirm: the local EVM's reads of one block may come from two states).
/// Its state reads run on blocking threads, which this test's thread-local metrics recorder does
/// not see. The fan-out's own redemptions (EIP-7702 accounts redeeming through the Delegation
/// Framework) are compared with the node's in `delegation.rs`, with the devnet's gateway in
/// `shadow`.
#[tokio::test]
async fn the_local_check_answers_as_the_nodes() {
    let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    let metrics = recorder.handle();
    let _recording = metrics::set_default_local_recorder(&recorder);
    let calls_of = |method: &str| rpc_calls(&metrics.render(), method);
    let devnet = Devnet::start();
    let options = ChainOptions::default();
    let node = devnet_client(&devnet, &options, FanoutCheck::Node);
    let local = devnet_client(&devnet, &options, FanoutCheck::Local);
    let usdc = devnet.usdc();
    let (holder, a, b) = (
        devnet.account(0).0,
        devnet.account(1).0,
        devnet.account(2).0,
    );
    devnet.fund(a, U256::ZERO, U256::from(5_000_000u64)).await;
    let mut users = users_to_check(usdc, holder, a, b);
    // A user that has nothing sends value: not a transaction the local EVM runs (the sender cannot
    // pay it), so the node checks it, and refuses it.
    users.push((Address::repeat_byte(0x5a), transfer(a).calls));
    let by_node = checked_together(&node, &users).await;
    let simulations = calls_of("eth_simulateV1");
    let by_local = checked_together(&local, &users).await;
    assert_eq!(by_local, by_node);
    assert_eq!(by_node[0], Ok(vec![27_300]), "{by_node:?}");
    assert!(
        matches!(&by_node[1], Err((ErrorCode::ExecutionReverted, m)) if m.starts_with("overdraw would revert")),
        "{by_node:?}"
    );
    assert_eq!(by_node[2].as_ref().map(Vec::len), Ok(2), "{by_node:?}");
    assert!(by_node[4].is_err(), "{by_node:?}");
    assert_eq!(
        calls_of("eth_simulateV1"),
        simulations + 3,
        "the local check asks the node to simulate only what it does not run or refuses: the \
         two in one request, which the node refuses whole (one sender cannot pay), then each alone"
    );
    // The overdraw, refused here and confirmed by the node; the user with nothing, checked there.
    for result in ["agreed", "unchecked"] {
        let series =
            format!(r#"actiongate_local_checks_total{{chain="84532",result="{result}"}} 1"#);
        assert!(metrics.render().contains(&series), "{}", metrics.render());
    }
}

/// A batch of local checks answers its users from the start, in about the order they came: a few
/// threads ([`actiongate_chain::local::check_threads`]) each take the next user as they end one, so
/// the first answer after the shape's first user (run alone, to learn what the shape reads) is one
/// of the first users the threads took, whoever runs fastest. (With a thread for every 16 users,
/// all at once, it was the first of whichever thread's group ended its first run first.)
#[tokio::test]
async fn a_batch_of_local_checks_answers_its_first_users_first() {
    use actiongate_chain::local::{OnAnswer, check_threads};

    let devnet = Devnet::start();
    let client = devnet_client(&devnet, &ChainOptions::default(), FanoutCheck::Local);
    let (usdc, holder) = (devnet.usdc(), devnet.account(0).0);
    let users: Vec<(Address, Vec<Call>)> = (1..=96u8)
        .map(|b| {
            let to = Address::repeat_byte(b);
            (holder, token_transfer(usdc, to, U256::from(b)))
        })
        .collect();
    let latest = devnet.latest_header().await;
    let heard = Arc::new(std::sync::Mutex::new(Vec::new()));
    let on_answer: OnAnswer = {
        let heard = heard.clone();
        Arc::new(move |i, _| heard.lock().expect("not poisoned").push(i))
    };
    let time = latest.timestamp + 2;
    let answers = client
        .local
        .check(&latest, time, &users, Some(on_answer))
        .await;
    assert!(
        answers
            .iter()
            .all(|a| matches!(a, Ok(Ok(gas)) if gas.len() == 1)),
        "{answers:?}"
    );
    let heard = heard.lock().expect("not poisoned").clone();
    let mut each = heard.clone();
    each.sort_unstable();
    assert_eq!(
        each,
        (0..users.len()).collect::<Vec<_>>(),
        "each user heard once"
    );
    assert_eq!(
        heard[0], 0,
        "the shape's first user runs alone first: {heard:?}"
    );
    assert!(
        heard[1] <= check_threads(),
        "the next answer is one of the first {} users the threads took: {heard:?}",
        check_threads()
    );
}

/// A local check is dated as its caller asks, whatever the block it reads: on an idle chain the same
/// latest block is checked on for a long time, and a check an hour later must see the hour gone
/// (a delegation whose time ran out refused before any wallet moves, not a transaction that reverts
/// onchain). A contract that reverts once the block's date passes a deadline, checked twice at the
/// same latest block: before the deadline it runs, after it it is refused.
#[tokio::test]
async fn a_local_check_is_dated_by_its_caller_at_the_same_block() {
    let devnet = Devnet::start();
    let client = devnet_client(&devnet, &ChainOptions::default(), FanoutCheck::Local);
    let latest = devnet.latest_header().await;
    let deadline = u32::try_from(latest.timestamp + 100).expect("a date of four bytes");
    // TIMESTAMP PUSH4 deadline LT PUSH1 0x0b JUMPI STOP JUMPDEST PUSH1 0 DUP1 REVERT: reverts
    // once the block's date is past the deadline.
    let mut code = vec![0x42, 0x63];
    code.extend_from_slice(&deadline.to_be_bytes());
    code.extend_from_slice(&[0x10, 0x60, 0x0b, 0x57, 0x00, 0x5b, 0x60, 0x00, 0x80, 0xfd]);
    let until = Address::repeat_byte(0x7d);
    rpc(
        &devnet,
        "anvil_setCode",
        json!([until.to_string(), Bytes::from(code).to_string()]),
    )
    .await;
    // Read the latest block again: setting code mines nothing, so it is the same block.
    let same = devnet.latest_header().await;
    assert_eq!(same.hash, latest.hash, "no block between the checks");
    let users = vec![(
        devnet.account(0).0,
        vec![Call {
            to: until,
            data: Bytes::new(),
            value: U256::ZERO,
            description: "until the deadline".into(),
        }],
    )];
    let before = client
        .local
        .check(&latest, latest.timestamp + 2, &users, None)
        .await;
    assert!(
        matches!(&before[0], Ok(Ok(gas)) if gas.len() == 1),
        "{before:?}"
    );
    let after = client
        .local
        .check(&latest, latest.timestamp + 3_600, &users, None)
        .await;
    assert!(
        matches!(&after[0], Ok(Err(e)) if e.code == ErrorCode::ExecutionReverted),
        "an hour later, at the same block: {after:?}"
    );
}

/// Each user's calls checked by `client` as a fan-out's are: all at the same time, at the latest
/// block (as the sender checks an account with nothing in flight).
async fn checked_together(
    client: &ChainClient,
    users: &[(Address, Vec<Call>)],
) -> Vec<Result<Vec<u64>, (ErrorCode, String)>> {
    use actiongate_chain::plan::batch::gathered;
    use actiongate_chain::plan::reading_at;
    use actiongate_chain::sender::simulate;
    use alloy::eips::BlockId;

    let all = futures_util::future::join_all(
        users
            .iter()
            .map(|(from, calls)| simulate(client, *from, calls)),
    );
    reading_at(BlockId::latest(), gathered(all))
        .await
        .into_iter()
        .map(seen)
        .collect()
}

/// An ERC-20 transfer of `amount` of `token` to `to`.
fn token_transfer(token: Address, to: Address, amount: U256) -> Vec<Call> {
    use alloy::sol_types::SolCall;
    vec![Call {
        to: token,
        data: actiongate_chain::bindings::IERC20::transferCall { to, amount }
            .abi_encode()
            .into(),
        value: U256::ZERO,
        description: "transfer".into(),
    }]
}

/// A fan-out's users call the same contracts the same way, and differ in their addresses and
/// amounts. The local check learns from the first user of a shape of calls what its check reads,
/// and reads that ahead, in one round, for the next users of the shape. On a later block, with
/// other senders, recipients and amounts, every read is foreseen: none is asked while the EVM
/// waits; and every answer is still the node's (a token transfer, an approval, an overdraw).
#[tokio::test]
async fn the_local_check_reads_ahead_what_a_shape_of_calls_reads() {
    use actiongate_chain::plan::batch::gathered;
    use actiongate_chain::plan::reading_at;
    use actiongate_chain::sender::simulate;
    use alloy::eips::BlockId;

    let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    let metrics = recorder.handle();
    let _recording = metrics::set_default_local_recorder(&recorder);
    let reads = |read: &str| {
        let series =
            format!(r#"actiongate_local_check_reads_total{{chain="84532",read="{read}"}}"#);
        counted(&metrics.render(), |l| l.starts_with(&series))
    };
    let devnet = Devnet::start();
    let options = ChainOptions::default();
    let node = devnet_client(&devnet, &options, FanoutCheck::Node);
    let local = devnet_client(&devnet, &options, FanoutCheck::Local);
    let usdc = devnet.usdc();
    let (holder, a, b) = (
        devnet.account(0).0,
        devnet.account(1).0,
        devnet.account(2).0,
    );
    devnet.fund(a, U256::ZERO, U256::from(5_000_000u64)).await;
    let check = |users: Vec<(Address, Vec<Call>)>| {
        let (node, local) = (node.clone(), local.clone());
        async move {
            let mut answers = Vec::new();
            for client in [node, local] {
                let all = futures_util::future::join_all(
                    users
                        .iter()
                        .map(|(from, calls)| simulate(&client, *from, calls)),
                );
                answers.push(
                    reading_at(BlockId::latest(), gathered(all))
                        .await
                        .into_iter()
                        .map(seen)
                        .collect::<Vec<_>>(),
                );
            }
            let local = answers.pop().unwrap_or_default();
            let node = answers.pop().unwrap_or_default();
            assert_eq!(local, node);
            node
        }
    };

    let first = check(vec![
        (holder, token_transfer(usdc, a, U256::from(1u64))),
        (holder, token_transfer(usdc, b, U256::from(2u64))),
        (b, approval(usdc, holder).calls),
    ])
    .await;
    assert!(first.iter().all(Result::is_ok), "{first:?}");
    let (asked, ahead) = (reads("on_demand"), reads("ahead"));
    assert!(
        asked > 0,
        "the first user of each shape reads as its EVM asks"
    );
    assert!(ahead > 0, "the second transfer's own reads are read ahead");

    // A later block: nothing read for the first is kept for it.
    rpc(&devnet, "evm_mine", json!([])).await;
    let second = check(vec![
        (a, token_transfer(usdc, b, U256::from(3u64))),
        (
            holder,
            token_transfer(usdc, Address::repeat_byte(0x77), U256::from(4u64)),
        ),
        (a, approval(usdc, b).calls),
        // (Each user alone, as a fan-out's are: the node checks them one after the other.)
        (
            Address::repeat_byte(0x66),
            token_transfer(usdc, a, U256::MAX),
        ),
    ])
    .await;
    assert!(second[..3].iter().all(Result::is_ok), "{second:?}");
    assert!(
        matches!(&second[3], Err((ErrorCode::ExecutionReverted, _))),
        "{second:?}"
    );
    assert_eq!(
        reads("on_demand"),
        asked,
        "every read of a learnt shape is read ahead\n{}",
        metrics.render()
    );
    assert!(reads("ahead") > ahead);
}

/// A fan-out's many users' state goes to the node in a few calls: what the users after the first
/// of a shape read (each sender's account, its token balance, its recipient's) is read by the
/// node's own EVM, a contract's slots in one `eth_call` and the accounts' balances and code in one
/// more (their nonces one call each), where it was a call a read; and every answer is still the
/// node's.
#[tokio::test]
async fn the_local_check_reads_many_users_state_in_a_few_calls() {
    let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    let metrics = recorder.handle();
    let _recording = metrics::set_default_local_recorder(&recorder);
    let calls_of = |method: &str| rpc_calls(&metrics.render(), method);
    let ahead = || {
        counted(&metrics.render(), |l| {
            l.starts_with(r#"actiongate_local_check_reads_total{chain="84532",read="ahead"}"#)
        })
    };
    let devnet = Devnet::start();
    let options = ChainOptions::default();
    let node = devnet_client(&devnet, &options, FanoutCheck::Node);
    let local = devnet_client(&devnet, &options, FanoutCheck::Local);
    let usdc = devnet.usdc();
    let mut users = Vec::new();
    for i in 0..8u8 {
        let sender = Address::repeat_byte(0x30 + i);
        // Some hold ETH too, so that balances differ.
        let eth = U256::from(u64::from(i % 2)) * U256::from(10u64).pow(U256::from(17u64));
        devnet
            .fund(sender, eth, U256::from(1_000_000u64 + u64::from(i)))
            .await;
        let to = Address::repeat_byte(0x50 + i);
        users.push((
            sender,
            token_transfer(usdc, to, U256::from(1_000u64 + u64::from(i))),
        ));
    }
    // A sender that holds nothing: refused, as the node refuses it.
    users.push((
        Address::repeat_byte(0x3f),
        token_transfer(usdc, Address::repeat_byte(0x5f), U256::from(1u64)),
    ));
    let by_node = checked_together(&node, &users).await;
    let before = |m: &str| calls_of(m);
    let (storage, balances, codes, calls, read) = (
        before("eth_getStorageAt"),
        before("eth_getBalance"),
        before("eth_getCode"),
        before("eth_call"),
        ahead(),
    );
    let by_local = checked_together(&local, &users).await;
    assert_eq!(by_local, by_node);
    assert!(by_node[..8].iter().all(Result::is_ok), "{by_node:?}");
    assert!(
        matches!(&by_node[8], Err((ErrorCode::ExecutionReverted, _))),
        "{by_node:?}"
    );
    // The seven users after the first: their accounts and their and their recipients' balances
    // of the token, read ahead.
    assert!(ahead() - read >= 7 * 3, "{}", metrics.render());
    assert_eq!(
        (
            calls_of("eth_getStorageAt") - storage,
            calls_of("eth_getBalance") - balances,
            calls_of("eth_getCode") - codes,
        ),
        (0, 0, 0),
        "no slot or account read ahead a call each\n{}",
        metrics.render()
    );
    assert_eq!(
        calls_of("eth_call") - calls,
        2,
        "the token's slots in one call, the accounts in another"
    );
}

/// How many transactions the node's pool holds (pending or queued).
async fn pool_count(devnet: &Devnet) -> u64 {
    let pool: Value = devnet
        .provider
        .raw_request("txpool_status".into(), ())
        .await
        .expect("the pool's status");
    let held = |k: &str| {
        u64::from_str_radix(
            pool[k].as_str().unwrap_or("0x0").trim_start_matches("0x"),
            16,
        )
        .unwrap_or(0)
    };
    held("pending") + held("queued")
}

/// Until the node's pool holds `count` transactions (pending or queued).
async fn pooled(devnet: &Devnet, count: u64) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while pool_count(devnet).await < count {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the pool never held {count} transactions"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// On a chain whose hand-over is paced (`hand-over = "paced"`: a node that mines each transaction
/// as it arrives), a wallet's next run goes to the node only once its earlier transactions are
/// mined: while the node mines nothing, the first execution's transaction waits in its pool alone
/// and the next executions' are held back; as blocks come they follow, and each execution is mined
/// exactly once.
#[tokio::test]
async fn a_paced_hand_over_waits_until_the_wallets_earlier_transactions_are_mined() {
    let devnet = Devnet::start();
    let w = wallet_of(&devnet, 6).await;
    let (wallet, first) = (w.address, w.first);
    let client = client_handing_over(&devnet, &w.options, FanoutCheck::Node, HandOver::Paced);
    let transfers = Transfers::new(&devnet, w, client).await;
    let execute = |key: String| transfers.start(key);
    let mut executions = vec![execute("P0".into())];
    pooled(&devnet, 1).await;
    executions.extend((1..6).map(|i| execute(format!("P{i}"))));
    // Reserved and signed, they wait behind the first, which nothing mines (well inside the 2 s a
    // paced hand-over waits at most).
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        pool_count(&devnet).await,
        1,
        "the next runs wait until the first is mined"
    );
    assert_eq!(devnet.nonce(wallet).await, first);
    // Blocks come: the rest follow.
    let mining = {
        let provider = devnet.provider.clone();
        tokio::spawn(async move {
            loop {
                let _: Result<Value, _> = provider.raw_request("evm_mine".into(), ()).await;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };
    let hashes = succeeded(executions).await;
    mining.abort();
    assert_eq!(hashes.len(), 6);
    assert_eq!(devnet.nonce(wallet).await, first + 6);
}

/// A devnet that has stopped mining, a wallet of it, and a client whose hand-over is paced.
async fn paced_not_mining() -> (Devnet, Wallet, Arc<ChainClient>) {
    let devnet = Devnet::start();
    let w = wallet_of(&devnet, 3).await;
    let client = client_handing_over(&devnet, &w.options, FanoutCheck::Node, HandOver::Paced);
    let _: Value = devnet
        .provider
        .raw_request("evm_setAutomine".into(), (false,))
        .await
        .expect("the devnet stops mining");
    (devnet, w, client)
}

/// `count` no-op transactions of `w` queued in `outbox`, at its next nonces.
fn queue_no_ops(
    outbox: &actiongate_chain::outbox::Outbox,
    w: &Wallet,
    count: u64,
) -> Vec<actiongate_chain::outbox::Ticket> {
    (0..count)
        .map(|i| outbox.queue(CHAIN, w.address, &no_op(&w.signer, w.first + i).1))
        .collect()
}

/// A paced hand-over answers each run's transactions as soon as the node has taken them, so that
/// their executions go on to wait for their receipts while the batch's later runs wait their turn:
/// with nothing mined, the first answers come while the node's pool holds the first run of a batch
/// of 70 alone (the second waits for it to be mined, 2 s at most, and then follows).
#[tokio::test]
async fn a_paced_hand_over_answers_each_run_as_the_node_takes_it() {
    use actiongate_chain::outbox::Outbox;
    use futures_util::StreamExt;

    let (devnet, w, client) = paced_not_mining().await;
    let outbox = Outbox::default();
    let tickets = queue_no_ops(&outbox, &w, 70);
    let mut handing: futures_util::stream::FuturesUnordered<_> = tickets
        .into_iter()
        .map(|ticket| outbox.hand_over(&client, w.address, ticket))
        .collect();
    let first = handing.next().await.expect("an answer");
    assert!(first.is_ok(), "{first:?}");
    let held = pool_count(&devnet).await;
    assert!(
        (63..=64).contains(&held),
        "answered while the pool holds the first run alone: {held}"
    );
    while let Some(answer) = handing.next().await {
        assert!(answer.is_ok(), "{answer:?}");
    }
    assert_eq!(pool_count(&devnet).await, 70, "the second run followed");
}

/// A paced hand-over hands a run's rest to the node while the run before it is still unmined (none
/// of the rest is executable before its own first is with the node, so the node takes it in while
/// it mines instead of between blocks), and holds the run's first back until the run before is
/// mined: with nothing mined, a batch of 70 has 69 in the pool (the first run and the second's
/// rest) while the second's first waits; a block, and it follows. (Before, the second run waited
/// whole: 64 in the pool until the block.)
#[tokio::test]
async fn a_paced_hand_over_hands_the_next_runs_rest_over_while_the_run_before_is_unmined() {
    use actiongate_chain::outbox::Outbox;

    let (devnet, w, client) = paced_not_mining().await;
    let outbox = Outbox::default();
    let tickets = queue_no_ops(&outbox, &w, 70);
    let handing = futures_util::future::join_all(
        tickets
            .into_iter()
            .map(|ticket| outbox.hand_over(&client, w.address, ticket)),
    );
    let watching = async {
        // Well inside the 2 s a paced hand-over waits at most.
        let deadline = tokio::time::Instant::now() + Duration::from_millis(1500);
        let mut held = pool_count(&devnet).await;
        while held < 69 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
            held = pool_count(&devnet).await;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        let still = pool_count(&devnet).await;
        let _: Value = devnet
            .provider
            .raw_request("evm_mine".into(), ())
            .await
            .expect("a block");
        (held, still)
    };
    let (answers, (held, still)) = tokio::join!(handing, watching);
    assert_eq!(
        held, 69,
        "the second run's rest is with the node before the first run is mined"
    );
    assert_eq!(
        still, 69,
        "the second run's first waits for the first run to be mined"
    );
    for answer in answers {
        assert!(answer.is_ok(), "{answer:?}");
    }
    assert_eq!(
        devnet.nonce(w.address).await,
        w.first + 64,
        "the first run mined"
    );
    assert_eq!(
        pool_count(&devnet).await,
        6,
        "the second run followed, whole"
    );
}

/// A paced hand-over waits for the wallet's earlier transactions to be mined before it takes the
/// queue, so that what is queued while it waits goes in its run: the second transaction's
/// hand-over, waiting on the first (nothing mines it), takes the three queued after it along, one
/// run with its rest first, and is answered with all four in the pool. (Taken before its wait, the
/// second went alone and the three waited for it to be mined in turn.)
#[tokio::test]
async fn a_paced_hand_over_takes_along_what_was_queued_while_it_waited() {
    use actiongate_chain::outbox::Outbox;

    let (devnet, w, client) = paced_not_mining().await;
    let outbox = Outbox::default();
    let raw = |i: u64| no_op(&w.signer, w.first + i).1;
    let first = outbox.queue(CHAIN, w.address, &raw(0));
    let taken = outbox.hand_over(&client, w.address, first).await;
    assert!(taken.is_ok(), "{taken:?}");
    let second = outbox.queue(CHAIN, w.address, &raw(1));
    let second = outbox.hand_over(&client, w.address, second);
    tokio::pin!(second);
    assert!(
        tokio::time::timeout(Duration::from_millis(300), &mut second)
            .await
            .is_err(),
        "the second waits for the first to be mined"
    );
    assert_eq!(pool_count(&devnet).await, 1);
    let later: Vec<_> = (2..5)
        .map(|i| outbox.queue(CHAIN, w.address, &raw(i)))
        .collect();
    let _: Value = devnet
        .provider
        .raw_request("evm_mine".into(), ())
        .await
        .expect("a block");
    let answered = second.await;
    assert!(answered.is_ok(), "{answered:?}");
    assert_eq!(
        pool_count(&devnet).await,
        4,
        "the three queued while it waited went in its run"
    );
    for ticket in later {
        let answered = outbox.hand_over(&client, w.address, ticket).await;
        assert!(answered.is_ok(), "{answered:?}");
    }
    assert_eq!(pool_count(&devnet).await, 4, "each handed over once");
}

/// The transactions of `executions`, each of which must end, within 30 s, having succeeded.
async fn succeeded(
    executions: Vec<tokio::task::JoinHandle<actiongate_core::execution::ExecutionOutcome>>,
) -> std::collections::BTreeSet<String> {
    let mut hashes = std::collections::BTreeSet::new();
    for e in executions {
        let outcome = tokio::time::timeout(Duration::from_secs(30), e)
            .await
            .expect("every execution ends once its block is mined")
            .expect("the execution's task");
        assert!(outcome.success, "{outcome:?}");
        hashes.insert(outcome.tx_hash.expect("its transaction"));
    }
    hashes
}

/// Transfers from a devnet wallet through its sender, on a devnet that has stopped mining.
struct Transfers {
    sender: Arc<WalletSender>,
    client: Arc<ChainClient>,
    signer: PrivateKeySigner,
    wallet: Address,
    to: Address,
}

impl Transfers {
    /// Stops the devnet's mining; `client` hands `w`'s transactions over.
    async fn new(devnet: &Devnet, w: Wallet, client: Arc<ChainClient>) -> Self {
        let _: Value = devnet
            .provider
            .raw_request("evm_setAutomine".into(), (false,))
            .await
            .expect("the devnet stops mining");
        Self {
            sender: Arc::new(WalletSender::new(
                w.store,
                Arc::new(SystemClock),
                w.options,
                SendHooks::default(),
            )),
            client,
            signer: w.signer,
            wallet: w.address,
            to: devnet.account(8).0,
        }
    }

    /// A transfer under execution key `key`, running.
    fn start(
        &self,
        key: String,
    ) -> tokio::task::JoinHandle<actiongate_core::execution::ExecutionOutcome> {
        let (sender, client, signer) = (
            self.sender.clone(),
            self.client.clone(),
            self.signer.clone(),
        );
        let (wallet, to) = (self.wallet, self.to);
        tokio::spawn(async move {
            sender
                .execute(&client, &signer, wallet, &key, None, || async {
                    Ok::<_, Error>(transfer(to))
                })
                .await
        })
    }
}

/// Executions whose transactions wait in the node's pool leave the node to its mining: while no
/// block comes, none asks the node for its receipt (the receipt watch has read every block since
/// each handed its transaction over; only the first, which started the watch, looks once); and
/// while the wallet's transactions are mined one per block, the ones queued behind are not handed
/// to the node again. Each is mined exactly once.
#[tokio::test]
async fn waiting_executions_leave_the_node_to_its_mining() {
    let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    let metrics = recorder.handle();
    let _recording = metrics::set_default_local_recorder(&recorder);
    let calls_of = |method: &str| rpc_calls(&metrics.render(), method);
    let devnet = Devnet::start();
    let w = wallet_of(&devnet, 5).await;
    let (wallet, first) = (w.address, w.first);
    let client = w.client.clone();
    let transfers = Transfers::new(&devnet, w, client).await;
    let execute = |key: String| transfers.start(key);

    // No block comes: the first execution waits, then twelve more.
    let mut waiting = vec![execute("W0".into())];
    pooled(&devnet, 1).await;
    let w0_pooled = tokio::time::Instant::now();
    tokio::time::sleep(Duration::from_millis(800)).await;
    waiting.extend((1..13).map(|i| execute(format!("W{i}"))));
    pooled(&devnet, 13).await;
    tokio::time::sleep_until(w0_pooled + Duration::from_millis(2500)).await;
    let lookups = calls_of("eth_getTransactionReceipt");
    assert!(
        lookups <= 1,
        "{lookups} receipt lookups while no block came (each waited 1.7 s to 2.5 s)"
    );

    // One transfer per block (27,300 gas each with the headroom), a block every 200 ms.
    let _: Value = devnet
        .provider
        .raw_request("evm_setBlockGasLimit".into(), (U256::from(40_000u64),))
        .await
        .expect("the devnet sets the block gas limit");
    let mine = || async {
        let _: Value = devnet
            .provider
            .raw_request("evm_mine".into(), ())
            .await
            .expect("the devnet mines a block");
    };
    mine().await;
    // Until the watch has read the first block (a waiter that looked just before it may hand its
    // transaction over again once).
    tokio::time::sleep(Duration::from_millis(300)).await;
    let sends = calls_of("eth_sendRawTransaction");
    for _ in 0..12 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        mine().await;
    }
    let hashes = succeeded(waiting).await;
    assert_eq!(
        calls_of("eth_sendRawTransaction") - sends,
        0,
        "transactions handed over again while the wallet's were being mined"
    );
    assert_eq!(hashes.len(), 13);
    assert_eq!(devnet.nonce(wallet).await, first + 13);
}
