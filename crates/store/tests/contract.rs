//! The Store contract: every test runs on SQLite and on PostgreSQL, each against a fresh database.
#![allow(clippy::panic, clippy::expect_used)] // Tests fail by panicking, saying what failed.

use actiongate_core::crypto::SecretHash;
use actiongate_core::states::DelegationStatus;
use actiongate_core::store::{
    AcceptOutcome, AgentRecord, AuditEvent, EmailChallenge, ExecutionDraft, IntentDraft, NewAgent,
    Onboarding, OnboardingOutcome, PolicyRecord, Store,
};
use actiongate_core::store::{
    CreditStore, DelegationStore, IdentityStore, IntentStore, NonceStore, PaymentStore,
};
use actiongate_store::{SqlStore, testing};

struct Fixture {
    store: std::sync::Arc<SqlStore>,
    _dir: tempfile::TempDir,
}

async fn backends() -> Vec<(&'static str, Fixture)> {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let url = format!("sqlite://{}", dir.path().join("t.db").display());
    let sqlite = SqlStore::connect(&url).await.expect("connect");
    sqlite.migrate().await.expect("migrate");
    let pg_url = testing::fresh_postgres_url()
        .await
        .expect("fresh postgres url");
    let pg = SqlStore::connect(&pg_url).await.expect("connect");
    pg.migrate().await.expect("migrate");
    // Migrating twice is a no-op.
    pg.migrate().await.expect("migrate");
    let pg_dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    vec![
        (
            "sqlite",
            Fixture {
                store: sqlite.into(),
                _dir: dir,
            },
        ),
        (
            "postgres",
            Fixture {
                store: pg.into(),
                _dir: pg_dir,
            },
        ),
    ]
}

fn h(b: u8) -> SecretHash {
    SecretHash([b; 32])
}

fn agent(id: &str, account: &str, key: u8) -> NewAgent {
    NewAgent {
        record: AgentRecord {
            id: id.into(),
            account_id: account.into(),
            name: None,
            wallet_address: format!("0x{id:0>40}"),
            created_at: 1_000,
            key_rotated_at: None,
        },
        key_hash: h(key),
        wallet_sealed: vec![1, 2, 3],
    }
}

fn policy(agent_id: &str) -> PolicyRecord {
    PolicyRecord {
        agent_id: agent_id.into(),
        allowed_actions: vec!["get-fx-supported-assets".into()],
        daily_limit_micros: 1_000_000_000,
        max_per_action_micros: None,
        min_health_factor_bps: 17_500,
        approval_above_micros: None,
        updated_at: 1_000,
    }
}

fn onboarding(
    email: &str,
    code: u8,
    account: &str,
    agent_id: &str,
    key: u8,
    session: u8,
) -> Onboarding {
    Onboarding {
        email: email.into(),
        code_hash: h(code),
        max_attempts: 5,
        now: 2_000,
        new_account_id: account.into(),
        first_agent: agent(agent_id, account, key),
        first_policy: policy(agent_id),
        session_hash: h(session),
        session_expires_at: 10_000,
        created_events: vec![audit_event(None, agent_id, "agent.created")],
        login_event: audit_event(None, agent_id, "owner.login"),
    }
}

/// An audit event of `kind` about `subject`, for `account` (none: the store's to fill in).
fn audit_event(account: Option<&str>, subject: &str, kind: &str) -> AuditEvent {
    let mut e = AuditEvent::new(
        "",
        2_000,
        kind,
        "owner",
        subject,
        serde_json::json!({"k": kind}),
    );
    e.account_id = account.map(str::to_owned);
    e
}

async fn challenge(store: &SqlStore, email: &str, code: u8) {
    store
        .put_email_challenge(&EmailChallenge {
            email: email.into(),
            code_hash: h(code),
            expires_at: 5_000,
            attempts: 0,
        })
        .await
        .expect("put email challenge");
}

/// Account acc1 of `email` with its first agent ag1 (key 1).
async fn onboarded(store: &SqlStore, email: &str) {
    challenge(store, email, 9).await;
    store
        .complete_onboarding(&onboarding(email, 9, "acc1", "ag1", 1, 11))
        .await
        .expect("complete onboarding");
}

#[tokio::test]
async fn onboarding_creates_once_then_signs_in() {
    for (name, f) in backends().await {
        let s = &f.store;
        s.ping().await.unwrap_or_else(|e| panic!("{name}: {e}"));
        challenge(s, "a@example.com", 9).await;
        let first = s
            .complete_onboarding(&onboarding("a@example.com", 9, "acc1", "ag1", 1, 11))
            .await;
        assert_eq!(
            first.ok(),
            Some(OnboardingOutcome::Created {
                account_id: "acc1".into()
            }),
            "{name}"
        );
        // The code is single-use.
        let again = s
            .complete_onboarding(&onboarding("a@example.com", 9, "acc2", "ag2", 2, 12))
            .await;
        assert_eq!(again.ok(), Some(OnboardingOutcome::ChallengeGone), "{name}");
        // A new code for the same e-mail signs in to the same account and creates no agent.
        challenge(s, "a@example.com", 8).await;
        let second = s
            .complete_onboarding(&onboarding("a@example.com", 8, "acc3", "ag3", 3, 13))
            .await;
        assert_eq!(
            second.ok(),
            Some(OnboardingOutcome::SignedIn {
                account_id: "acc1".into()
            }),
            "{name}"
        );
        let agents = s.list_agents("acc1").await.unwrap_or_default();
        assert_eq!(
            agents.iter().map(|a| a.id.as_str()).collect::<Vec<_>>(),
            ["ag1"],
            "{name}"
        );
        assert!(
            s.list_agents("acc3").await.unwrap_or_default().is_empty(),
            "{name}"
        );
        assert!(
            s.find_agent_and_policy(&h(3))
                .await
                .ok()
                .flatten()
                .is_none(),
            "{name}"
        );
        // Both sessions work; expired ones do not.
        for sess in [11, 13] {
            let found = s
                .find_session(&h(sess), 2_000)
                .await
                .ok()
                .flatten()
                .map(|s| s.account_id);
            assert_eq!(found.as_deref(), Some("acc1"), "{name}");
        }
        assert!(
            s.find_session(&h(11), 10_000)
                .await
                .ok()
                .flatten()
                .is_none(),
            "{name}"
        );
        assert!(
            s.find_session(&h(99), 2_000).await.ok().flatten().is_none(),
            "{name}"
        );
    }
}

#[tokio::test]
async fn expired_or_wrong_codes_consume_nothing() {
    for (name, f) in backends().await {
        let s = &f.store;
        challenge(s, "b@example.com", 9).await;
        let mut late = onboarding("b@example.com", 9, "acc1", "ag1", 1, 11);
        late.now = 5_000;
        assert_eq!(
            s.complete_onboarding(&late).await.ok(),
            Some(OnboardingOutcome::ChallengeGone),
            "{name}"
        );
        let wrong = onboarding("b@example.com", 7, "acc1", "ag1", 1, 11);
        assert_eq!(
            s.complete_onboarding(&wrong).await.ok(),
            Some(OnboardingOutcome::ChallengeGone),
            "{name}"
        );
        assert!(
            s.list_agents("acc1").await.unwrap_or_default().is_empty(),
            "{name}"
        );
        assert!(
            s.get_email_challenge("b@example.com")
                .await
                .ok()
                .flatten()
                .is_some(),
            "{name}"
        );
    }
}

#[tokio::test]
async fn code_checks_count_atomically_and_the_address_budget_survives_a_new_code() {
    const DAY: i64 = 86_400_000;
    for (name, f) in backends().await {
        let s = &f.store;
        challenge(s, "c@example.com", 9).await;
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..10 {
            let s = f.store.clone();
            tasks.spawn(async move { s.count_code_check("c@example.com", 1_000, 100).await });
        }
        let mut on_code: Vec<u32> = Vec::new();
        let mut budget: Vec<u32> = Vec::new();
        while let Some(joined) = tasks.join_next().await {
            let c = joined
                .expect("a task panicked")
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            on_code.push(c.on_code);
            budget.push(c.budget.checks);
        }
        on_code.sort_unstable();
        budget.sort_unstable();
        assert_eq!(on_code, (1..=10).collect::<Vec<_>>(), "{name}");
        assert_eq!(budget, (1..=10).collect::<Vec<_>>(), "{name}");
        // A new code resets its own tries, not the address's budget.
        challenge(s, "c@example.com", 9).await;
        let c = s
            .get_email_challenge("c@example.com")
            .await
            .ok()
            .flatten()
            .map(|c| c.attempts);
        assert_eq!(c, Some(0), "{name}");
        let next = s.count_code_check("c@example.com", 2_000, 100).await.ok();
        assert_eq!(
            next.map(|c| (c.on_code, c.budget.checks, c.budget.window_start)),
            Some((1, 11, 1_000)),
            "{name}"
        );
        // 24 hours after the window started, it starts again.
        let later = s
            .count_code_check("c@example.com", 1_000 + DAY, 100)
            .await
            .ok();
        assert_eq!(
            later.map(|c| (c.budget.checks, c.budget.window_start)),
            Some((1, 1_000 + DAY)),
            "{name}"
        );
        assert_eq!(
            s.code_check_budget("c@example.com")
                .await
                .ok()
                .flatten()
                .map(|b| b.checks),
            Some(1),
            "{name}"
        );
        // A try past the code's own limit is not compared, so it does not spend the budget.
        let past = s
            .count_code_check("c@example.com", 1_000 + DAY, 1)
            .await
            .ok();
        assert_eq!(
            past.map(|c| (c.on_code, c.budget.checks)),
            Some((3, 1)),
            "{name}"
        );
        let nobody = s
            .count_code_check("nobody@example.com", 1_000, 100)
            .await
            .ok();
        assert_eq!(
            nobody.map(|c| (c.on_code, c.budget.checks)),
            Some((u32::MAX, 0)),
            "{name}"
        );
    }
}

#[tokio::test]
async fn agents_keys_and_policies() {
    for (name, f) in backends().await {
        let s = &f.store;
        onboarded(s, "d@example.com").await;
        s.create_agent(
            &agent("ag2", "acc1", 2),
            &policy("ag2"),
            &audit_event(Some("acc1"), "ag2", "agent.created"),
        )
        .await
        .unwrap_or_else(|e| panic!("{name}: {e}"));
        // A key hash is unique: a second agent with the same hash is refused.
        assert!(
            s.create_agent(
                &agent("ag3", "acc1", 2),
                &policy("ag3"),
                &audit_event(Some("acc1"), "ag3", "agent.created")
            )
            .await
            .is_err(),
            "{name}"
        );
        assert!(
            s.get_agent("ag3").await.ok().flatten().is_none(),
            "{name}: a failed create left a row"
        );

        let found = s
            .find_agent_and_policy(&h(2))
            .await
            .ok()
            .flatten()
            .map(|(a, _)| a.id);
        assert_eq!(found.as_deref(), Some("ag2"), "{name}");
        assert_eq!(
            s.agent_wallet_sealed("ag2").await.ok().flatten(),
            Some(vec![1, 2, 3]),
            "{name}"
        );

        assert_eq!(
            s.rotate_agent_key(
                "ag2",
                &h(5),
                3_000,
                &audit_event(Some("acc1"), "ag2", "agent.key_rotated")
            )
            .await
            .ok(),
            Some(true),
            "{name}"
        );
        assert!(
            s.find_agent_and_policy(&h(2))
                .await
                .ok()
                .flatten()
                .is_none(),
            "{name}: old key still works"
        );
        let rotated = s.find_agent_and_policy(&h(5)).await.ok().flatten();
        assert_eq!(
            rotated.and_then(|(a, _)| a.key_rotated_at),
            Some(3_000),
            "{name}"
        );
        assert_eq!(
            s.rotate_agent_key(
                "nope",
                &h(6),
                3_000,
                &audit_event(Some("acc1"), "nope", "agent.key_rotated")
            )
            .await
            .ok(),
            Some(false),
            "{name}"
        );

        assert_eq!(
            s.get_policy("ag2").await.ok().flatten(),
            Some(policy("ag2")),
            "{name}"
        );
        let mut p = policy("ag2");
        p.allowed_actions = vec!["swap".into(), "vote".into()];
        p.max_per_action_micros = Some(5);
        p.updated_at = 4_000;
        s.put_policy(&p, &audit_event(Some("acc1"), "ag2", "policy.changed"))
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(
            s.get_policy("ag2").await.ok().flatten(),
            Some(p.clone()),
            "{name}"
        );
        // The agent of a key comes with its policy in one read.
        let with_policy = s
            .find_agent_and_policy(&h(5))
            .await
            .ok()
            .flatten()
            .and_then(|(_, policy)| policy);
        assert_eq!(with_policy, Some(p), "{name}");
        assert_eq!(s.get_policy("nope").await.ok().flatten(), None, "{name}");
        assert_eq!(
            s.list_agents("acc1").await.unwrap_or_default().len(),
            2,
            "{name}"
        );
    }
}

fn signed(nonce: u64, hash: &str) -> actiongate_core::store::SignedTx {
    actiongate_core::store::SignedTx {
        nonce,
        tx_hash: hash.into(),
        raw_tx: vec![1, 2, 3],
    }
}

#[tokio::test]
async fn wallet_nonces_are_reserved_once_contiguously_and_voided_ones_are_reused() {
    for (name, f) in backends().await {
        let store = f.store.clone();
        let wallet = "0x00000000000000000000000000000000000000aa";
        // The chain says the wallet has sent 7 transactions: numbering starts there.
        let first = store
            .reserve_nonces(84532, wallet, "i1:0", 2, 7, 1)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(
            first.iter().map(|t| t.nonce).collect::<Vec<_>>(),
            vec![7, 8],
            "{name}"
        );
        // Reserving again for the same execution answers the same rows (idempotent).
        let again = store
            .reserve_nonces(84532, wallet, "i1:0", 2, 7, 2)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(again, first, "{name}");
        // Many executions at once: contiguous, no duplicate.
        let tasks: Vec<_> = (0..20)
            .map(|i| {
                let store = store.clone();
                tokio::spawn(async move {
                    store
                        .reserve_nonces(84532, wallet, &format!("i2:{i}"), 1, 7, 3)
                        .await
                })
            })
            .collect();
        let mut nonces = Vec::new();
        for t in tasks {
            let rows = t
                .await
                .expect("a task panicked")
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            nonces.extend(rows.iter().map(|r| r.nonce));
        }
        nonces.sort_unstable();
        assert_eq!(nonces, (9..29).collect::<Vec<_>>(), "{name}");
        // Signed, then mined; a re-signing keeps the earlier hash.
        store
            .record_signed_txs(84532, wallet, "i1:0", &[signed(7, "0xaa")], None, 4)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        store
            .record_signed_txs(84532, wallet, "i1:0", &[signed(7, "0xbb")], None, 5)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let pending = store
            .execution_txs("i1:0")
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(
            (pending[0].state.as_str(), pending[1].state.as_str()),
            ("signed", "reserved"),
            "{name}"
        );
        assert_eq!(
            (
                pending[0].tx_hash.as_deref(),
                pending[0].prior_hashes.clone()
            ),
            (Some("0xbb"), vec!["0xaa".to_owned()]),
            "{name}"
        );
        store
            .record_mined_tx(84532, wallet, 7, "0xaa", 1, 6)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let txs = store
            .execution_txs("i1:0")
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(
            (
                txs[0].state.as_str(),
                txs[0].tx_hash.as_deref(),
                txs[0].receipt_status
            ),
            ("mined", Some("0xaa"), Some(1)),
            "{name}"
        );
        // A mined transaction cannot be re-signed.
        assert!(
            store
                .record_signed_txs(
                    84532,
                    wallet,
                    "i1:0",
                    &[signed(8, "0xdd"), signed(7, "0xcc")],
                    None,
                    7
                )
                .await
                .is_err(),
            "{name}"
        );
        // ... and the batch it was in changed nothing.
        let second = store
            .execution_txs("i1:0")
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(
            (second[1].state.as_str(), second[1].tx_hash.as_deref()),
            ("reserved", None),
            "{name}"
        );
        // Voided (never sent) nonces are filled before new ones.
        let gap_nonce = store
            .execution_txs("i2:3")
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"))[0]
            .nonce;
        store
            .void_txs("i2:3", false, 8)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let gap = store
            .execution_txs("i2:3")
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(
            gap.is_empty(),
            "{name}: a voided execution has no transactions"
        );
        let refill = store
            .reserve_nonces(84532, wallet, "i3:0", 2, 7, 9)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(
            refill.iter().map(|t| t.nonce).collect::<Vec<_>>(),
            vec![gap_nonce, 29],
            "{name}"
        );
    }
}

fn invoice(id: &str, payer: &str, account: Option<&str>) -> actiongate_core::store::InvoiceRecord {
    actiongate_core::store::InvoiceRecord {
        id: id.into(),
        sku: "credits_100".into(),
        credits: 100,
        amount_atomic: 2_000_000,
        // A tag of its own per invoice id, as the core draws them.
        tag_atomic: id.bytes().map(i64::from).sum(),
        payer: payer.into(),
        account_id: account.map(str::to_owned),
        agent_id: None,
        chain_id: 84532,
        token: "0x00000000000000000000000000000000000000c0".into(),
        recipient: "0x00000000000000000000000000000000000000r0".into(),
        created_at: 1,
        issued_block: Some(41),
        expires_at: 1_000,
        paid_at: None,
        tx_hash: None,
    }
}

#[tokio::test]
async fn an_invoice_tag_is_held_by_one_open_invoice_of_a_recipient_and_token() {
    for (name, f) in backends().await {
        let s = f.store.clone();
        let wallet = "0x00000000000000000000000000000000000000aa";
        let tagged = |id: &str, tag: i64, recipient: &str| {
            let mut i = invoice(id, wallet, None);
            i.tag_atomic = tag;
            i.recipient = recipient.into();
            i
        };
        let r = "0x00000000000000000000000000000000000000r0";
        // 20 racing invoices with the same tag: one gets it, the others store nothing.
        let tasks: Vec<_> = (0..20)
            .map(|n| {
                let (s, i) = (s.clone(), tagged(&format!("race{n}"), 7, r));
                tokio::spawn(async move { s.create_invoice(&i, 1_000, 10).await })
            })
            .collect();
        let mut won = Vec::new();
        for (n, t) in tasks.into_iter().enumerate() {
            if t.await
                .expect("a task panicked")
                .unwrap_or_else(|e| panic!("{name}: {e}"))
            {
                won.push(n);
            }
        }
        assert_eq!(won.len(), 1, "{name}: one of 20 invoices holds tag 7");
        for n in 0..20 {
            let stored = s
                .get_invoice(&format!("race{n}"))
                .await
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(stored.is_some(), won == [n], "{name}: race{n}");
        }
        // Another recipient has its own tags; another tag is free.
        assert_eq!(
            s.create_invoice(
                &tagged(
                    "other-recipient",
                    7,
                    "0x00000000000000000000000000000000000000r1"
                ),
                1_000,
                10
            )
            .await
            .ok(),
            Some(true),
            "{name}"
        );
        // Held until its hold ends ...
        assert_eq!(
            s.create_invoice(&tagged("late", 7, r), 2_000, 999)
                .await
                .ok(),
            Some(false),
            "{name}"
        );
        assert_eq!(
            s.create_invoice(&tagged("later", 7, r), 2_000, 1_000)
                .await
                .ok(),
            Some(true),
            "{name}: a hold that ended frees the tag"
        );
        // ... or until its invoice is paid.
        assert!(
            matches!(
                s.settle_invoice("later", "0xtag", 1_100).await,
                Ok(actiongate_core::store::SettleOutcome::Credited { .. })
            ),
            "{name}"
        );
        assert_eq!(
            s.create_invoice(&tagged("after-paid", 7, r), 3_000, 1_100)
                .await
                .ok(),
            Some(true),
            "{name}: a paid invoice frees its tag"
        );
    }
}

#[tokio::test]
async fn an_invoice_is_paid_once_by_one_transaction_and_held_credits_join_a_linked_account() {
    use actiongate_core::store::SettleOutcome;
    for (name, f) in backends().await {
        let s = f.store.clone();
        onboarded(&s, "buyer@example.com").await;
        // An agent's execution wallet belongs to the agent's account; another wallet to none.
        assert_eq!(
            (
                s.agent_wallet_account(&format!("0x{:0>40}", "ag1"))
                    .await
                    .ok()
                    .flatten(),
                s.agent_wallet_account("0x00000000000000000000000000000000000000aa")
                    .await
                    .ok()
                    .flatten(),
            ),
            (Some("acc1".to_owned()), None),
            "{name}"
        );
        let wallet = "0x00000000000000000000000000000000000000aa";
        // An unlinked payer: the credits are held for the wallet.
        assert_eq!(
            s.create_invoice(&invoice("inv1", wallet, None), 1_000, 1)
                .await
                .ok(),
            Some(true),
            "{name}"
        );
        let tasks: Vec<_> = (0..20)
            .map(|_| {
                let s = s.clone();
                tokio::spawn(async move { s.settle_invoice("inv1", "0xt1", 5).await })
            })
            .collect();
        let mut credited = 0;
        for t in tasks {
            match t
                .await
                .expect("a task panicked")
                .unwrap_or_else(|e| panic!("{name}: {e}"))
            {
                SettleOutcome::Credited {
                    account: None,
                    balance: 100,
                } => credited += 1,
                SettleOutcome::AlreadyPaid {
                    account: None,
                    balance: 100,
                } => {}
                other => panic!("{name}: {other:?}"),
            }
        }
        assert_eq!(credited, 1, "{name}: one of 20 racing retries credits");
        // The same transaction cannot pay another invoice; a paid invoice takes no other payment.
        assert_eq!(
            s.create_invoice(&invoice("inv2", wallet, None), 1_000, 1)
                .await
                .ok(),
            Some(true),
            "{name}"
        );
        assert_eq!(
            s.settle_invoice("inv2", "0xt1", 6).await.ok(),
            Some(SettleOutcome::PaymentUsed),
            "{name}"
        );
        assert_eq!(
            s.settle_invoice("inv1", "0xt2", 6).await.ok(),
            Some(SettleOutcome::InvoicePaid),
            "{name}"
        );
        assert!(
            s.get_invoice("inv2")
                .await
                .ok()
                .flatten()
                .is_some_and(|i| i.paid_at.is_none()),
            "{name}: a refused payment changes nothing"
        );
        // An invoice reads back as issued, the chain's head at its issue with it.
        assert_eq!(
            s.get_invoice("inv2").await.ok().flatten(),
            Some(invoice("inv2", wallet, None)),
            "{name}"
        );
        // Linking the wallet moves what is held into the account, once.
        assert_eq!(
            s.link_wallet(wallet, "acc1", 7).await.ok(),
            Some(Some(100)),
            "{name}"
        );
        assert_eq!(
            s.link_wallet(wallet, "acc1", 8).await.ok(),
            Some(Some(0)),
            "{name}"
        );
        assert_eq!(
            s.credit_account("acc1")
                .await
                .ok()
                .flatten()
                .map(|a| a.balance),
            Some(100),
            "{name}"
        );
        // Now linked: a purchase by the wallet credits the account directly, with its invoice in the ledger.
        assert_eq!(
            s.settle_invoice("inv2", "0xt3", 9).await.ok(),
            Some(SettleOutcome::Credited {
                account: Some("acc1".into()),
                balance: 200
            }),
            "{name}"
        );
        let ledger = s.ledger("acc1").await.unwrap_or_default();
        assert_eq!(
            ledger
                .iter()
                .filter(|e| e.kind.as_str() == "purchase")
                .count(),
            2,
            "{name}"
        );
        // The owner's read: the newest rows, newest first.
        let newest: Vec<_> = ledger.iter().rev().take(2).cloned().collect();
        assert_eq!(
            s.recent_ledger("acc1", 2).await.ok(),
            Some(newest),
            "{name}"
        );
        assert!(
            ledger
                .iter()
                .any(|e| e.invoice_id.as_deref() == Some("inv2") && e.balance_after == 200),
            "{name}"
        );
    }
}

fn delegation(
    hash: &str,
    agent: &str,
    delegator: &str,
    created_at: i64,
    expires_at: Option<i64>,
) -> actiongate_core::store::DelegationRecord {
    actiongate_core::store::DelegationRecord {
        hash: hash.into(),
        agent_id: agent.into(),
        delegator: delegator.into(),
        chain_id: 84532,
        status: DelegationStatus::Active,
        created_at,
        expires_at,
        body: Some(format!("{{\"salt\":\"{hash}\"}}")),
    }
}

#[tokio::test]
async fn delegations_are_found_by_agent_delegator_and_window_and_revoked_once() {
    for (name, f) in backends().await {
        let s = &f.store;
        onboarded(s, "g@example.com").await;
        s.create_agent(
            &agent("ag2", "acc1", 2),
            &policy("ag2"),
            &audit_event(Some("acc1"), "ag2", "agent.created"),
        )
        .await
        .unwrap_or_else(|e| panic!("{name}: {e}"));
        let (alice, bob) = (
            "0xA11ce00000000000000000000000000000000001",
            "0xB0b0000000000000000000000000000000000002",
        );
        for d in [
            delegation("0x01", "ag1", alice, 1_000, None),
            delegation("0x02", "ag1", alice, 2_000, Some(5_000)),
            delegation("0x03", "ag1", bob, 3_000, Some(4_000)),
            delegation("0x04", "ag2", bob, 3_000, None),
        ] {
            s.put_delegation(&d, &audit_event(Some("acc1"), "d", "delegation.activated"))
                .await
                .unwrap_or_else(|e| panic!("{name}: {e}"));
        }
        assert_eq!(
            s.get_delegation("0x02").await.ok().flatten(),
            Some(delegation("0x02", "ag1", alice, 2_000, Some(5_000))),
            "{name}"
        );
        // One delegator counts once, however many delegations it gave; an expired one does not count.
        assert_eq!(
            s.count_active_delegations("ag1", 84532, 3_500).await.ok(),
            Some(2),
            "{name}"
        );
        assert_eq!(
            s.count_active_delegations("ag1", 84532, 4_500).await.ok(),
            Some(1),
            "{name}: bob's window closed"
        );
        assert_eq!(
            s.count_active_delegations("ag1", 8453, 3_500).await.ok(),
            Some(0),
            "{name}: another chain"
        );
        // The newest active, unexpired delegation of a delegator, whatever the address case.
        let found = s
            .active_delegation("ag1", 84532, &alice.to_lowercase(), 4_500)
            .await
            .ok()
            .flatten()
            .map(|d| d.hash);
        assert_eq!(found.as_deref(), Some("0x02"), "{name}");
        let found = s
            .active_delegation("ag1", 84532, alice, 6_000)
            .await
            .ok()
            .flatten()
            .map(|d| d.hash);
        assert_eq!(
            found.as_deref(),
            Some("0x01"),
            "{name}: the newer one expired"
        );
        assert!(
            s.active_delegation("ag1", 84532, bob, 4_500)
                .await
                .ok()
                .flatten()
                .is_none(),
            "{name}"
        );
        // Several delegators in one lookup, answered in the order asked, each as alone: the newest
        // usable one, whatever the case; none for a closed window or a stranger.
        let stranger = "0xC0ffee0000000000000000000000000000000003".to_owned();
        let asked = vec![
            bob.to_owned(),
            alice.to_lowercase(),
            stranger.clone(),
            alice.to_uppercase().replacen("0X", "0x", 1),
        ];
        for (now, want) in [
            (3_500, [Some("0x03"), Some("0x02"), None, Some("0x02")]),
            (6_000, [None, Some("0x01"), None, Some("0x01")]),
        ] {
            let found: Vec<Option<String>> = s
                .active_delegations_of("ag1", 84532, &asked, now)
                .await
                .unwrap_or_else(|e| panic!("{name}: {e}"))
                .into_iter()
                .map(|d| d.map(|d| d.hash))
                .collect();
            assert_eq!(
                found,
                want.map(|h| h.map(str::to_owned)).to_vec(),
                "{name} at {now}"
            );
        }
        assert_eq!(
            s.active_delegations_of("ag2", 84532, &[stranger], 3_500)
                .await
                .ok(),
            Some(vec![None]),
            "{name}"
        );
        let listed: Vec<String> = s
            .list_delegations("ag1", Some(84532), None)
            .await
            .unwrap_or_default()
            .into_iter()
            .map(|d| d.hash)
            .collect();
        assert_eq!(
            listed,
            ["0x03", "0x02", "0x01"],
            "{name}: newest first, only the agent's"
        );
        let listed = s
            .list_delegations("ag1", None, Some(&bob.to_lowercase()))
            .await
            .unwrap_or_default();
        assert_eq!(listed.len(), 1, "{name}");

        assert_eq!(
            s.set_delegation_status(
                "0x02",
                DelegationStatus::Revoked,
                4_000,
                &audit_event(Some("acc1"), "0x02", "delegation.revoked")
            )
            .await
            .ok(),
            Some(true),
            "{name}"
        );
        assert_eq!(
            s.set_delegation_status(
                "0xff",
                DelegationStatus::Revoked,
                4_000,
                &audit_event(Some("acc1"), "0xff", "delegation.revoked")
            )
            .await
            .ok(),
            Some(false),
            "{name}"
        );
        let found = s
            .active_delegation("ag1", 84532, alice, 4_500)
            .await
            .ok()
            .flatten()
            .map(|d| d.hash);
        assert_eq!(
            found.as_deref(),
            Some("0x01"),
            "{name}: a revoked delegation is not used"
        );
        assert_eq!(
            s.get_delegation("0x02")
                .await
                .ok()
                .flatten()
                .map(|d| d.status),
            Some(DelegationStatus::Revoked),
            "{name}"
        );
        // Storing a revoked delegation again does not bring it back, nor does another agent take one over.
        s.put_delegation(
            &delegation("0x02", "ag1", alice, 9_000, None),
            &audit_event(Some("acc1"), "0x02", "delegation.activated"),
        )
        .await
        .unwrap_or_else(|e| panic!("{name}: {e}"));
        s.put_delegation(
            &delegation("0x01", "ag2", alice, 9_000, None),
            &audit_event(Some("acc1"), "0x01", "delegation.activated"),
        )
        .await
        .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(
            s.get_delegation("0x02")
                .await
                .ok()
                .flatten()
                .map(|d| d.status),
            Some(DelegationStatus::Revoked),
            "{name}"
        );
        assert_eq!(
            s.get_delegation("0x01")
                .await
                .ok()
                .flatten()
                .map(|d| d.agent_id)
                .as_deref(),
            Some("ag1"),
            "{name}"
        );
        // The sweep pages through every agent's active delegations by hash.
        let page: Vec<String> = s
            .active_delegations(None, 2)
            .await
            .unwrap_or_default()
            .into_iter()
            .map(|d| d.hash)
            .collect();
        assert_eq!(page, ["0x01", "0x03"], "{name}");
        let page: Vec<String> = s
            .active_delegations(Some("0x03"), 2)
            .await
            .unwrap_or_default()
            .into_iter()
            .map(|d| d.hash)
            .collect();
        assert_eq!(page, ["0x04"], "{name}");
    }
}

fn read_draft(n: u32, account: &str, key: u8) -> IntentDraft {
    IntentDraft {
        id: format!("intent-{n}"),
        agent_id: "ag1".into(),
        account_id: account.into(),
        action: "get-fx-supported-assets".into(),
        lane: actiongate_core::states::Lane::ExecuteIntent,
        params: Default::default(),
        chain_id: 8453,
        amount_micros: 0,
        is_write: false,
        daily_limit_micros: 1_000_000_000,
        price_per_execution: 1,
        free_per_day: 0,
        idempotency_key: format!("k:{n}"),
        request_hash: [u8::try_from(n % 256).unwrap_or(0); 32],
        replace_idempotency_before: None,
        fan_out: false,
        only_delegator: None,
        recipients: vec![],
        own: ExecutionDraft {
            user_did: "did:pkh:eip155:8453:0xag1".into(),
            wallet_address: "0xag1".into(),
        },
        lease: None,
        day: 0,
        now: 3_000,
        key_hash: h(key),
        policy: Some(policy("ag1")),
        approval_expires_at: None,
    }
}

/// The sweep of unmined gap fills takes up fills of every wallet of the chain (and nothing else),
/// signed long enough ago, each for one sweeper at a time; a mined fill never.
#[tokio::test]
async fn unmined_gap_fills_of_any_wallet_are_claimed_by_one_sweeper_at_a_time() {
    for (name, f) in backends().await {
        let s = &f.store;
        let rows = [
            (
                "0x00000000000000000000000000000000000000d1",
                "i1:0/fill/100",
                100,
            ),
            (
                "0x00000000000000000000000000000000000000d2",
                "i2:0/fill/200",
                200,
            ),
            (
                "0x00000000000000000000000000000000000000d2",
                "i3:0/fill/900",
                900,
            ),
            // Not a fill: the execution's own transaction is its execution's to take up.
            ("0x00000000000000000000000000000000000000d1", "i4:0", 100),
        ];
        let mut nonces = Vec::new();
        for (wallet, key, at) in rows {
            s.reserve_nonces(84532, wallet, key, 1, 0, at)
                .await
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            let row = s.execution_txs(key).await.unwrap_or_default();
            s.record_signed_txs(84532, wallet, key, &[signed(row[0].nonce, key)], None, at)
                .await
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            nonces.push(row[0].nonce);
        }
        // Another chain's fill is not this chain's.
        assert_eq!(
            s.claim_unmined_fills(1, 500, 1_000, 2_000).await.ok(),
            Some(vec![]),
            "{name}"
        );
        assert_eq!(
            s.claim_unmined_fills(84532, 500, 1_000, 2_000).await.ok(),
            Some(vec!["i1:0/fill/100".to_owned(), "i2:0/fill/200".to_owned()]),
            "{name}: the fills signed before 500, of both wallets"
        );
        assert_eq!(
            s.claim_unmined_fills(84532, 500, 1_500, 3_000).await.ok(),
            Some(vec![]),
            "{name}: claimed until 2,000"
        );
        s.record_mined_tx(84532, rows[0].0, nonces[0], "i1:0/fill/100", 1, 2_100)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(
            s.claim_unmined_fills(84532, 3_000, 3_000, 4_000).await.ok(),
            Some(vec!["i2:0/fill/200".to_owned(), "i3:0/fill/900".to_owned()]),
            "{name}: the claims ran out; the mined fill (recorded at 2,100) never"
        );
    }
}

/// The background sweep of unmined transactions claims each row for one sweeper at a time, and only
/// rows signed long enough ago (a request may still be waiting for the newer ones).
#[tokio::test]
async fn unmined_transactions_are_claimed_by_one_sweeper_at_a_time() {
    for (name, f) in backends().await {
        let s = &f.store;
        let wallet = "0x00000000000000000000000000000000000000cc";
        for (key, nonce_at) in [("x402:a", 100), ("x402:b", 900)] {
            s.reserve_nonces(84532, wallet, key, 1, 0, nonce_at)
                .await
                .unwrap_or_else(|e| panic!("{name}: {e}"));
        }
        let a = s.execution_txs("x402:a").await.unwrap_or_default();
        let b = s.execution_txs("x402:b").await.unwrap_or_default();
        for (key, rows, at) in [("x402:a", &a, 100), ("x402:b", &b, 900)] {
            s.record_signed_txs(84532, wallet, key, &[signed(rows[0].nonce, key)], None, at)
                .await
                .unwrap_or_else(|e| panic!("{name}: {e}"));
        }
        // Signed before 500: a only. Claimed until 2,000; a second sweeper meanwhile gets nothing.
        assert_eq!(
            s.claim_unmined(84532, wallet, 500, 1_000, 2_000).await.ok(),
            Some(vec!["x402:a".to_owned()]),
            "{name}"
        );
        assert_eq!(
            s.claim_unmined(84532, wallet, 500, 1_500, 3_000).await.ok(),
            Some(vec![]),
            "{name}"
        );
        // Once the claim ran out, both (b is old enough by now); a mined row never.
        s.record_mined_tx(84532, wallet, b[0].nonce, "x402:b", 1, 2_100)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(
            s.claim_unmined(84532, wallet, 2_000, 2_500, 4_000)
                .await
                .ok(),
            Some(vec!["x402:a".to_owned()]),
            "{name}"
        );
    }
}

/// An onboarded account `acc1` with credits and one accepted intent (`intent-1`) leased to worker
/// `w1` until 10,000.
async fn leased_intent(s: &SqlStore, name: &str, email: &str) {
    onboarded(s, email).await;
    s.grant_credits("acc1", 100, "grant", "test", 2_500)
        .await
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    let mut draft = read_draft(1, "acc1", 1);
    draft.lease = Some(("w1".into(), 10_000));
    assert!(
        matches!(
            s.accept_intent(&draft).await,
            Ok(AcceptOutcome::Accepted { .. })
        ),
        "{name}"
    );
}

/// Issue 22: a fan-out's executions that start or end at the same time are written in one
/// transaction, each answered as it would be alone: only the lease's holder starts or ends one, an
/// execution not pending (or not started) is answered false, and only an end that changed its
/// execution writes its audit event.
#[tokio::test]
async fn executions_started_and_ended_together_are_answered_each_as_alone() {
    use actiongate_core::audit::Linker;
    use actiongate_core::crypto::MasterKey;
    use actiongate_core::store::{AuditStore, ExecutionEnd, ExecutionFinish};
    let linker = Linker::new(
        MasterKey::from_hex(&"34".repeat(32))
            .expect("key")
            .keyring(),
    );
    for (name, f) in backends().await {
        let s = &f.store;
        leased_intent(s, name, "together@example.com").await;
        let state = |seq: u32| async move {
            s.list_executions("intent-1")
                .await
                .unwrap_or_else(|e| panic!("{name}: {e}"))
                .into_iter()
                .find(|e| e.seq == seq)
                .map(|e| e.state.as_str().to_owned())
        };
        // Another worker starts nothing; the holder starts the one pending execution, and the
        // seq that names no execution is answered false beside it.
        assert_eq!(
            s.start_executions("intent-1", &[0, 7], "thief", 4_000)
                .await
                .ok(),
            Some(vec![false, false]),
            "{name}"
        );
        assert_eq!(state(0).await.as_deref(), Some("pending"), "{name}");
        assert_eq!(
            s.start_executions("intent-1", &[0, 7], "w1", 4_000)
                .await
                .ok(),
            Some(vec![true, false]),
            "{name}"
        );
        assert_eq!(
            s.start_executions("intent-1", &[0], "w1", 4_001).await.ok(),
            Some(vec![false]),
            "started once: {name}"
        );
        let end = |seq: u32| ExecutionEnd {
            seq,
            finish: ExecutionFinish {
                success: true,
                tx_hash: Some("0x02".into()),
                error_code: None,
                error_message: None,
                data: None,
                leg_open: false,
            },
            now: 4_100,
            event: audit_event(Some("acc1"), "intent-1", "execution.ended"),
        };
        assert_eq!(
            s.finish_executions("intent-1", "thief", &[end(0)])
                .await
                .ok(),
            Some(vec![false]),
            "{name}"
        );
        assert_eq!(
            s.finish_executions("intent-1", "w1", &[end(7), end(0), end(0)])
                .await
                .ok(),
            Some(vec![false, true, false]),
            "{name}"
        );
        assert_eq!(state(0).await.as_deref(), Some("succeeded"), "{name}");
        // One audit event: the end that changed the execution.
        while let Ok(added) = s.chain_audit(&linker, 50).await {
            if added.is_empty() {
                break;
            }
        }
        let ended = s
            .audit_page("acc1", 0, None, None, 100)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"))
            .into_iter()
            .filter(|e| e.entry.kind == "execution.ended")
            .count();
        assert_eq!(ended, 1, "{name}");
    }
}

/// Issue 22: a fan-out's executions started and ended in one statement each get their own values:
/// several executions started at once (a seq named twice starts once, one not pending stays), ended
/// at once with different outcomes, each row as its own end says.
#[tokio::test]
async fn a_fan_outs_executions_started_and_ended_together_keep_their_own_values() {
    use actiongate_core::store::{ExecutionEnd, ExecutionFinish};
    for (name, f) in backends().await {
        let s = &f.store;
        onboarded(s, "fan@example.com").await;
        s.grant_credits("acc1", 100, "grant", "test", 2_500)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        for (hash, delegator) in [
            ("0x11", "0x1111111111111111111111111111111111111111"),
            ("0x22", "0x2222222222222222222222222222222222222222"),
            ("0x33", "0x3333333333333333333333333333333333333333"),
        ] {
            let mut d = delegation(hash, "ag1", delegator, 1_000, None);
            d.chain_id = 8453;
            s.put_delegation(&d, &audit_event(Some("acc1"), "d", "delegation.activated"))
                .await
                .unwrap_or_else(|e| panic!("{name}: {e}"));
        }
        let mut draft = read_draft(1, "acc1", 1);
        draft.fan_out = true;
        draft.lease = Some(("w1".into(), 10_000));
        let accepted = s.accept_intent(&draft).await;
        assert!(
            matches!(accepted, Ok(AcceptOutcome::Accepted { .. })),
            "{name}: {accepted:?}"
        );
        let seqs: Vec<u32> = s
            .list_executions("intent-1")
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"))
            .iter()
            .map(|e| e.seq)
            .collect();
        assert_eq!(seqs.len(), 3, "{name}: {seqs:?}");
        let (a, b, c) = (seqs[0], seqs[1], seqs[2]);
        assert_eq!(
            s.start_executions("intent-1", &[c, a, c, 99], "w1", 4_000)
                .await
                .ok(),
            Some(vec![true, true, false, false]),
            "{name}"
        );
        let end = |seq: u32, success: bool, hash: Option<&str>, leg_open: bool| ExecutionEnd {
            seq,
            finish: ExecutionFinish {
                success,
                tx_hash: hash.map(str::to_owned),
                error_code: (!success).then(|| "REVERTED".to_owned()),
                error_message: (!success).then(|| format!("execution {seq} reverted")),
                data: success.then(|| format!("{{\"seq\":{seq}}}")),
                leg_open,
            },
            now: 4_100,
            event: audit_event(Some("acc1"), "intent-1", "execution.ended"),
        };
        assert_eq!(
            s.finish_executions(
                "intent-1",
                "w1",
                &[
                    end(a, true, Some("0xaa"), true),
                    end(b, true, Some("0xbb"), false),
                    end(c, false, None, false),
                ]
            )
            .await
            .ok(),
            Some(vec![true, false, true]),
            "{name}: the one never started does not end"
        );
        let rows = s
            .list_executions("intent-1")
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let row = |seq: u32| {
            rows.iter().find(|e| e.seq == seq).map(|e| {
                (
                    e.state.as_str().to_owned(),
                    e.tx_hash.clone(),
                    e.error_code.clone(),
                    e.error_message.clone(),
                    e.data.clone(),
                )
            })
        };
        assert_eq!(
            row(a),
            Some((
                "succeeded".into(),
                Some("0xaa".into()),
                None,
                None,
                Some(format!("{{\"seq\":{a}}}"))
            )),
            "{name}"
        );
        assert_eq!(
            row(b),
            Some(("pending".into(), None, None, None, None)),
            "{name}"
        );
        assert_eq!(
            row(c),
            Some((
                "failed".into(),
                None,
                Some("REVERTED".into()),
                Some(format!("execution {c} reverted")),
                None
            )),
            "{name}"
        );
        // Only the succeeded one whose leg was open is an open leg.
        let open: Vec<u32> = s
            .open_legs(0, 10)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"))
            .into_iter()
            .map(|l| l.execution.seq)
            .collect();
        assert_eq!(open, vec![a], "{name}");
    }
}

/// Issue 22: the executions waiting for a wallet's turn are reserved together, in one transaction:
/// each item answered as it would be alone, in order (later items above earlier ones), a lost
/// lease only that item's answer, an execution signed already answered as stored; and a failing
/// signing fails the whole batch, which records nothing.
#[tokio::test]
async fn a_batch_of_reservations_is_one_transaction_answered_item_by_item() {
    use actiongate_core::store::{
        LeaseFence, NonceRequest, Reservation, ReserveItem, SignAt, SignedTx, StoreError,
        StoreErrorKind,
    };
    for (name, f) in backends().await {
        let s = &f.store;
        leased_intent(s, name, "batch@example.com").await;
        let wallet = "0x00000000000000000000000000000000000000ee";
        let request = |key: &'static str, count: u32| NonceRequest {
            chain_id: 84532,
            wallet,
            execution_key: key,
            count,
            chain_nonce: 3,
            now: 4_000,
            gaps_only: false,
        };
        let holder = LeaseFence {
            intent_id: "intent-1".into(),
            owner: "w1".into(),
        };
        let thief = LeaseFence {
            intent_id: "intent-1".into(),
            owner: "thief".into(),
        };
        let sign = |nonces: &[u64]| -> Result<Vec<SignedTx>, StoreError> {
            Ok(nonces
                .iter()
                .map(|n| signed(*n, &format!("0x{n:02x}")))
                .collect())
        };
        let broken = |_: &[u64]| -> Result<Vec<SignedTx>, StoreError> {
            Err(StoreError::new(StoreErrorKind::Other, "no key"))
        };
        let (sign, broken): (&SignAt<'_>, &SignAt<'_>) = (&sign, &broken);
        // An execution's reservation: under the intent's holder, another worker, or no lease.
        let item = |key: &'static str, count: u32, fence: Option<&'static str>, sign| ReserveItem {
            request: request(key, count),
            fence: fence.map(|f| if f == "w1" { &holder } else { &thief }),
            sign: Some(sign),
        };
        // A failing signing: the batch fails, nothing of it recorded.
        let failed = s
            .reserve_signed_batch(&[
                item("b:0", 1, Some("w1"), sign),
                item("b:1", 1, Some("w1"), broken),
            ])
            .await;
        assert!(failed.is_err(), "{name}: {failed:?}");
        assert_eq!(s.execution_txs("b:0").await.ok(), Some(vec![]), "{name}");
        // Then: two executions, one under another's lease, one more; in order, above each other.
        let answers = s
            .reserve_signed_batch(&[
                item("b:0", 1, Some("w1"), sign),
                item("b:1", 2, Some("thief"), sign),
                item("b:2", 2, Some("w1"), sign),
            ])
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let nonces = |r: &Reservation| match r {
            Reservation::New(rows) => (
                "new",
                rows.iter().map(|r| (r.nonce, r.tx_hash.clone())).collect(),
            ),
            Reservation::Existing(rows) => (
                "existing",
                rows.iter().map(|r| (r.nonce, r.tx_hash.clone())).collect(),
            ),
            Reservation::LeaseLost => ("lease lost", Vec::new()),
        };
        let hash = |n: u64| Some(format!("0x{n:02x}"));
        assert_eq!(
            answers.iter().map(nonces).collect::<Vec<_>>(),
            vec![
                ("new", vec![(3, hash(3))]),
                ("lease lost", vec![]),
                ("new", vec![(4, hash(4)), (5, hash(5))]),
            ],
            "{name}"
        );
        assert_eq!(s.execution_txs("b:1").await.ok(), Some(vec![]), "{name}");
        // Again beside a new one: the signed one as stored, the new one above everything.
        let again = s
            .reserve_signed_batch(&[item("b:2", 2, Some("w1"), sign), item("b:3", 1, None, sign)])
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(
            again.iter().map(nonces).collect::<Vec<_>>(),
            vec![
                ("existing", vec![(4, hash(4)), (5, hash(5))]),
                ("new", vec![(6, hash(6))]),
            ],
            "{name}"
        );
        // The node's nonce moving past the counter within a batch: later items reserve above it,
        // and the counter keeps it for the next batch.
        let at = |key: &'static str, chain_nonce: u64| ReserveItem {
            request: NonceRequest {
                chain_nonce,
                ..request(key, 1)
            },
            fence: Some(&holder),
            sign: Some(sign),
        };
        let moved = s
            .reserve_signed_batch(&[at("b:4", 3), at("b:5", 20), at("b:6", 3)])
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let next = s
            .reserve_signed_batch(&[at("b:7", 3)])
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(
            moved.iter().chain(&next).map(nonces).collect::<Vec<_>>(),
            vec![
                ("new", vec![(7, hash(7))]),
                ("new", vec![(20, hash(20))]),
                ("new", vec![(21, hash(21))]),
                ("new", vec![(22, hash(22))]),
            ],
            "{name}"
        );
    }
}

/// Issue 22: the nonces of an execution are reserved, signed at and recorded in one transaction,
/// under the intent's lease: a lost lease or a failed signing reserves nothing, the signer is given
/// the nonces picked (voided ones first), and an execution signed already is answered as stored,
/// never signed again.
#[tokio::test]
async fn reserving_and_signing_are_one_write_fenced_by_the_lease() {
    use actiongate_core::store::{
        LeaseFence, MinedTx, NonceRequest, Reservation, SignedTx, StoreError, StoreErrorKind,
    };
    for (name, f) in backends().await {
        let s = &f.store;
        leased_intent(s, name, "reserve@example.com").await;
        let wallet = "0x00000000000000000000000000000000000000dd";
        let request = |key: &'static str, now: i64| NonceRequest {
            chain_id: 84532,
            wallet,
            execution_key: key,
            count: 2,
            chain_nonce: 5,
            now,
            gaps_only: false,
        };
        let fence = |owner: &str| LeaseFence {
            intent_id: "intent-1".into(),
            owner: owner.into(),
        };
        let sign = |nonces: &[u64]| -> Result<Vec<SignedTx>, StoreError> {
            Ok(nonces
                .iter()
                .map(|n| signed(*n, &format!("0x{n:02x}")))
                .collect())
        };
        // Another worker's lease: nothing reserved, the signer never asked.
        assert_eq!(
            s.reserve_signed(
                request("intent-1:0", 4_000),
                Some(&fence("thief")),
                Some(&sign)
            )
            .await
            .ok(),
            Some(Reservation::LeaseLost),
            "{name}"
        );
        // A signing that fails: nothing reserved either.
        let broken = |_: &[u64]| -> Result<Vec<SignedTx>, StoreError> {
            Err(StoreError::new(StoreErrorKind::Other, "no key"))
        };
        assert!(
            s.reserve_signed(
                request("intent-1:0", 4_000),
                Some(&fence("w1")),
                Some(&broken)
            )
            .await
            .is_err(),
            "{name}"
        );
        assert_eq!(
            s.execution_txs("intent-1:0").await.ok(),
            Some(vec![]),
            "{name}"
        );
        // The holder: reserved from the chain's count, signed at those nonces, in one write.
        let rows = match s
            .reserve_signed(
                request("intent-1:0", 4_000),
                Some(&fence("w1")),
                Some(&sign),
            )
            .await
        {
            Ok(Reservation::New(rows)) => rows,
            other => panic!("{name}: {other:?}"),
        };
        let view = |rows: &[actiongate_core::store::ChainTxRecord]| {
            rows.iter()
                .map(|r| (r.nonce, r.state.as_str().to_owned(), r.tx_hash.clone()))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            view(&rows),
            vec![
                (5, "signed".to_owned(), Some("0x05".to_owned())),
                (6, "signed".to_owned(), Some("0x06".to_owned()))
            ],
            "{name}"
        );
        assert_eq!(
            s.execution_txs("intent-1:0").await.ok(),
            Some(rows.clone()),
            "{name}"
        );
        // Again (another process running the same execution): as stored, not signed again.
        let again = |_: &[u64]| -> Result<Vec<SignedTx>, StoreError> {
            Ok(vec![signed(5, "0xff"), signed(6, "0xfe")])
        };
        assert_eq!(
            s.reserve_signed(
                request("intent-1:0", 4_100),
                Some(&fence("w1")),
                Some(&again)
            )
            .await
            .ok(),
            Some(Reservation::Existing(rows.clone())),
            "{name}"
        );
        // Both receipts in one write.
        let mined = [
            MinedTx {
                nonce: 5,
                tx_hash: "0x05".into(),
                status: 1,
            },
            MinedTx {
                nonce: 6,
                tx_hash: "0x06".into(),
                status: 0,
            },
        ];
        s.record_mined_txs(84532, wallet, &mined, 4_200)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let ended = s.execution_txs("intent-1:0").await.unwrap_or_default();
        assert_eq!(
            ended
                .iter()
                .map(|r| (r.state.as_str(), r.receipt_status))
                .collect::<Vec<_>>(),
            vec![("mined", Some(1)), ("mined", Some(0))],
            "{name}"
        );
        // Voided nonces are signed at first: an execution that gave nonce 7 back leaves no gap.
        s.reserve_nonces(84532, wallet, "other:0", 1, 5, 4_300)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        s.void_txs("other:0", false, 4_300)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let refill = match s
            .reserve_signed(request("next:0", 4_400), None, Some(&sign))
            .await
        {
            Ok(Reservation::New(rows)) => rows,
            other => panic!("{name}: {other:?}"),
        };
        assert_eq!(
            view(&refill),
            vec![
                (7, "signed".to_owned(), Some("0x07".to_owned())),
                (8, "signed".to_owned(), Some("0x08".to_owned()))
            ],
            "{name}"
        );
        // Gaps only: nonces given back below a transaction still in use, never a new one.
        let gaps = |key: &'static str, now: i64| NonceRequest {
            count: 5,
            gaps_only: true,
            ..request(key, now)
        };
        let reserve = |r: NonceRequest<'static>| {
            let s = s.clone();
            async move {
                match s.reserve_signed(r, None, Some(&sign)).await {
                    Ok(Reservation::New(rows)) => rows,
                    other => panic!("{other:?}"),
                }
            }
        };
        assert_eq!(
            view(&reserve(gaps("fill-none:0", 4_500)).await),
            vec![],
            "{name}: no gap"
        );
        let later = reserve(NonceRequest {
            count: 1,
            ..request("later:0", 4_500)
        })
        .await;
        assert_eq!(view(&later)[0].0, 9, "{name}");
        // The node refused 7 and 8 after 9 was sent: 7 and 8 are a gap below 9.
        s.void_txs("next:0", true, 4_600)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(
            view(&reserve(gaps("fill:0", 4_700)).await),
            vec![
                (7, "signed".to_owned(), Some("0x07".to_owned())),
                (8, "signed".to_owned(), Some("0x08".to_owned()))
            ],
            "{name}: the gap is filled"
        );
        // A nonce given back above every one in use is no gap: left for the next reservation.
        s.void_txs("later:0", true, 4_800)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(
            view(&reserve(gaps("fill:1", 4_900)).await),
            vec![],
            "{name}"
        );
        assert_eq!(
            view(
                &reserve(NonceRequest {
                    count: 1,
                    ..request("after:0", 5_000)
                })
                .await
            )[0]
            .0,
            9,
            "{name}"
        );
    }
}

/// Issue 21, finding 7: a worker records what it signs (and so sends it) only while it holds the
/// intent's lease, checked in the transaction that records it; only the lease's holder records an
/// execution's end; a signing is recorded only for its own execution's rows.
#[tokio::test]
async fn signing_and_ending_an_execution_are_fenced_by_the_intents_lease() {
    use actiongate_core::store::{ExecutionFinish, LeaseFence};
    for (name, f) in backends().await {
        let s = &f.store;
        leased_intent(s, name, "fence@example.com").await;
        let (key, wallet) = ("intent-1:0", "0x00000000000000000000000000000000000000bb");
        s.reserve_nonces(84532, wallet, key, 1, 0, 3_000)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let fence = |owner: &str| LeaseFence {
            intent_id: "intent-1".into(),
            owner: owner.into(),
        };
        let state = || async {
            s.execution_txs(key)
                .await
                .unwrap_or_else(|e| panic!("{name}: {e}"))
                .first()
                .map(|t| (t.state.as_str().to_owned(), t.tx_hash.clone()))
        };
        // Another worker's lease, or ours run out: nothing recorded.
        for (owner, now) in [("thief", 4_000), ("w1", 10_001)] {
            assert_eq!(
                s.record_signed_txs(
                    84532,
                    wallet,
                    key,
                    &[signed(0, "0x01")],
                    Some(&fence(owner)),
                    now
                )
                .await
                .ok(),
                Some(false),
                "{name}: {owner} at {now}"
            );
        }
        assert_eq!(state().await, Some(("reserved".to_owned(), None)), "{name}");
        // Another execution's rows are not this one's to sign.
        assert!(
            s.record_signed_txs(
                84532,
                wallet,
                "intent-9:0",
                &[signed(0, "0x01")],
                None,
                4_000
            )
            .await
            .is_err(),
            "{name}"
        );
        // The holder, in time: recorded.
        assert_eq!(
            s.record_signed_txs(
                84532,
                wallet,
                key,
                &[signed(0, "0x02")],
                Some(&fence("w1")),
                4_000
            )
            .await
            .ok(),
            Some(true),
            "{name}"
        );
        assert_eq!(
            state().await,
            Some(("signed".to_owned(), Some("0x02".to_owned()))),
            "{name}"
        );
        // Only the lease's holder records the end.
        assert_eq!(
            s.start_execution("intent-1", 0, "w1", 4_000).await.ok(),
            Some(true),
            "{name}"
        );
        let finish = ExecutionFinish {
            success: true,
            tx_hash: Some("0x02".into()),
            error_code: None,
            error_message: None,
            data: None,
            leg_open: true,
        };
        assert_eq!(
            s.finish_execution(
                "intent-1",
                0,
                "thief",
                &finish,
                4_100,
                &audit_event(Some("acc1"), "intent-1", "execution.ended")
            )
            .await
            .ok(),
            Some(false),
            "{name}"
        );
        assert_eq!(
            s.finish_execution(
                "intent-1",
                0,
                "w1",
                &finish,
                4_100,
                &audit_event(Some("acc1"), "intent-1", "execution.ended")
            )
            .await
            .ok(),
            Some(true),
            "{name}"
        );
        // Its leg goes on elsewhere: open until one process ends it, once.
        let open = s
            .open_legs(0, 10)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(
            open.iter()
                .map(|l| (l.intent.id.as_str(), l.execution.seq, l.finished_at))
                .collect::<Vec<_>>(),
            [("intent-1", 0, 4_100)],
            "{name}"
        );
        // A look that passes over the first one finds none after it.
        assert_eq!(
            s.open_legs(1, 10).await.map(|l| l.len()).ok(),
            Some(0),
            "{name}"
        );
        let done = audit_event(Some("acc1"), "intent-1", "bridge.completed");
        for ended in [true, false] {
            assert_eq!(
                s.end_leg(
                    "intent-1",
                    0,
                    actiongate_core::states::LegState::Done,
                    &done
                )
                .await
                .ok(),
                Some(ended),
                "{name}"
            );
        }
        assert_eq!(
            s.open_legs(0, 10).await.map(|l| l.len()).ok(),
            Some(0),
            "{name}"
        );
    }
}

/// A held order (issue 26): its lease's holder puts its execution back to pending and frees the
/// intent until the next look; a cancellation ends a pending one and gives its daily-limit share back
/// once, a worker ends a started one only under its lease; the agent's orders are listed newest first.
#[tokio::test]
async fn held_orders_wait_end_once_and_give_their_daily_share_back() {
    use actiongate_core::store::{ExecutionFinish, OrderEnd};
    for (name, f) in backends().await {
        let s = &f.store;
        onboarded(s, "orders@example.com").await;
        s.grant_credits("acc1", 100, "grant", "test", 2_500)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let order = |n: u32| {
            let mut d = read_draft(n, "acc1", 1);
            d.action = "place-prediction-order".into();
            d.lane = actiongate_core::states::Lane::Execute;
            d.is_write = true;
            d.amount_micros = 5_000_000;
            d.lease = Some(("w1".into(), 10_000));
            d.now = 3_000 + i64::from(n);
            d
        };
        for n in [1, 2] {
            assert!(
                matches!(
                    s.accept_intent(&order(n)).await,
                    Ok(AcceptOutcome::Accepted { .. })
                ),
                "{name}"
            );
        }
        assert_eq!(
            s.daily_usage("ag1", 0).await.ok(),
            Some(10_000_000),
            "{name}"
        );
        assert_eq!(
            s.start_execution("intent-1", 0, "w1", 4_000).await.ok(),
            Some(true),
            "{name}"
        );
        // Only the lease's holder holds it; then nobody claims it before `until`.
        let data = r#"{"status":"open"}"#;
        assert_eq!(
            s.hold_execution("intent-1", 0, "thief", data, 5_000)
                .await
                .ok(),
            Some(false),
            "{name}"
        );
        assert_eq!(
            s.hold_execution("intent-1", 0, "w1", data, 5_000)
                .await
                .ok(),
            Some(true),
            "{name}"
        );
        let e = s.list_executions("intent-1").await.unwrap_or_default();
        assert_eq!(
            (e[0].state.as_str(), e[0].data.as_deref()),
            ("pending", Some(data)),
            "{name}"
        );
        let claimed = |now: i64| async move {
            s.claim_intents("w2", now, now + 1_000, 10)
                .await
                .unwrap_or_else(|e| panic!("{name}: {e}"))
                .into_iter()
                .map(|i| i.id)
                .collect::<Vec<_>>()
        };
        assert!(
            !claimed(4_500).await.contains(&"intent-1".to_owned()),
            "{name}"
        );
        assert!(
            claimed(5_001).await.contains(&"intent-1".to_owned()),
            "{name}"
        );
        // A cancellation ends the pending execution once, whoever holds the lease.
        let end = |owner: Option<&str>, id: &str| OrderEnd {
            intent_id: id.into(),
            seq: 0,
            owner: owner.map(str::to_owned),
            agent_id: "ag1".into(),
            day: 0,
            release_micros: 5_000_000,
            finish: ExecutionFinish {
                success: false,
                tx_hash: None,
                error_code: Some("ORDER_CANCELLED".into()),
                error_message: Some("cancelled".into()),
                data: None,
                leg_open: false,
            },
            now: 5_100,
        };
        assert_eq!(
            s.end_order(&end(None, "intent-1")).await.ok(),
            Some(true),
            "{name}"
        );
        assert_eq!(
            s.end_order(&end(None, "intent-1")).await.ok(),
            Some(false),
            "{name}"
        );
        assert_eq!(
            s.daily_usage("ag1", 0).await.ok(),
            Some(5_000_000),
            "{name}"
        );
        let finished = s
            .finish_intent("intent-1", 5_200)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(
            finished.map(|i| i.status.to_string()),
            Some("failed".to_owned()),
            "{name}"
        );
        // A started execution ends only under its lease (a pending-only end does not touch it).
        assert_eq!(
            s.start_execution("intent-2", 0, "w1", 5_300).await.ok(),
            Some(true),
            "{name}"
        );
        for owner in [None, Some("thief")] {
            assert_eq!(
                s.end_order(&end(owner, "intent-2")).await.ok(),
                Some(false),
                "{name}: {owner:?}"
            );
        }
        assert_eq!(
            s.daily_usage("ag1", 0).await.ok(),
            Some(5_000_000),
            "{name}"
        );
        assert_eq!(
            s.end_order(&end(Some("w1"), "intent-2")).await.ok(),
            Some(true),
            "{name}"
        );
        assert_eq!(s.daily_usage("ag1", 0).await.ok(), Some(0), "{name}");
        let listed: Vec<String> = s
            .list_agent_intents("ag1", "place-prediction-order", 10)
            .await
            .unwrap_or_default()
            .into_iter()
            .map(|i| i.id)
            .collect();
        assert_eq!(listed, ["intent-2", "intent-1"], "{name}");
        assert_eq!(
            s.list_agent_intents("ag1", "swap", 10).await.ok(),
            Some(vec![]),
            "{name}"
        );
    }
}

#[tokio::test]
async fn drafts_accepted_together_fail_and_go_stale_one_by_one() {
    for (name, f) in backends().await {
        let s = &f.store;
        onboarded(s, "e@example.com").await;
        s.grant_credits("acc1", 100, "grant", "test", 2_500)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        // Submitted at once, so that the batcher takes them together: 20 good drafts, one whose
        // account does not exist (its credit row cannot be written: the batch fails and every draft
        // is accepted in its own savepoint) and one checked against a key the agent no longer has.
        let mut tasks = tokio::task::JoinSet::new();
        for n in 0..22 {
            let (store, draft) = (
                s.clone(),
                match n {
                    10 => read_draft(n, "no-such-account", 1),
                    11 => read_draft(n, "acc1", 7),
                    _ => read_draft(n, "acc1", 1),
                },
            );
            tasks.spawn(async move { (n, store.accept_intent(&draft).await) });
        }
        while let Some(joined) = tasks.join_next().await {
            let (n, outcome) = joined.unwrap_or_else(|e| panic!("{name}: {e}"));
            match n {
                10 => assert!(
                    outcome.is_err(),
                    "{name}: a draft of an unknown account was {outcome:?}"
                ),
                11 => assert!(
                    matches!(outcome, Ok(AcceptOutcome::Stale)),
                    "{name}: a stale key's draft was {outcome:?}"
                ),
                _ => assert!(
                    matches!(
                        outcome,
                        Ok(AcceptOutcome::Accepted {
                            total: 1,
                            reserved_credits: 1,
                            free_request: false
                        })
                    ),
                    "{name}: draft {n} was {outcome:?}"
                ),
            }
        }
        // The good ones are written and reserved; the failed and the stale one left nothing.
        assert_eq!(s.count_intents("ag1").await.ok(), Some(20), "{name}");
        for n in [10, 11] {
            assert!(
                s.get_intent(&format!("intent-{n}"))
                    .await
                    .ok()
                    .flatten()
                    .is_none(),
                "{name}: intent {n} was written"
            );
            assert!(
                s.find_idempotency("ag1", &format!("k:{n}"))
                    .await
                    .ok()
                    .flatten()
                    .is_none(),
                "{name}: key {n} was kept"
            );
        }
        let account = s
            .credit_account("acc1")
            .await
            .ok()
            .flatten()
            .unwrap_or_else(|| panic!("{name}: no credit row"));
        assert_eq!((account.balance, account.reserved), (80, 20), "{name}");
        assert_eq!(
            s.ledger("acc1").await.unwrap_or_default().len(),
            21,
            "{name}: a grant and 20 reservations"
        );
    }
}

#[tokio::test]
async fn audit_events_are_written_with_their_decisions_and_chained_once_in_order() {
    use actiongate_core::audit::{GENESIS, Linker, Verifier};
    use actiongate_core::crypto::MasterKey;
    use actiongate_core::store::AuditStore;
    let linker = Linker::new(
        MasterKey::from_hex(&"33".repeat(32))
            .expect("key")
            .keyring(),
    );
    for (name, f) in backends().await {
        let s = f.store.clone();
        // Onboarding writes the first agent's creation and the login, with the new account.
        onboarded(&s, "audit@example.com").await;
        // A further decision that knows only its agent: the store finds the account.
        let mut by_agent = audit_event(None, "ag1", "delegation.revoked");
        by_agent.agent_id = Some("ag1".into());
        s.append_audit(&[by_agent])
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        // Two processes chaining at once: every event chained once, one gapless chain.
        for i in 0..300 {
            s.append_audit(&[audit_event(
                Some("acc1"),
                &format!("x{i}"),
                "policy.changed",
            )])
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        }
        let (a, b) = tokio::join!(
            async {
                let mut n = 0;
                while let Ok(added) = s.chain_audit(&linker, 50).await {
                    if added.is_empty() {
                        break;
                    }
                    n += added.len();
                }
                n
            },
            async {
                let mut n = 0;
                while let Ok(added) = s.chain_audit(&linker, 50).await {
                    if added.is_empty() {
                        break;
                    }
                    n += added.len();
                }
                n
            }
        );
        assert_eq!(a + b, 303, "{name}");
        let mut all = Vec::new();
        let mut after = 0;
        loop {
            let page = s
                .audit_page("acc1", after, None, None, 100)
                .await
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            let Some(last) = page.last() else { break };
            after = last.entry.seq;
            all.extend(page);
        }
        assert_eq!(all.len(), 303, "{name}");
        assert_eq!(
            all.iter().map(|e| e.entry.seq).collect::<Vec<_>>(),
            (1..=303).collect::<Vec<_>>(),
            "{name}"
        );
        assert_eq!(all[0].prev_hash, GENESIS);
        assert_eq!(
            (
                all[0].entry.kind.as_str(),
                all[1].entry.kind.as_str(),
                all[2].entry.kind.as_str()
            ),
            ("agent.created", "owner.login", "delegation.revoked"),
            "{name}"
        );
        assert!(all.iter().all(|e| e.entry.account_id == "acc1"));
        let head = s
            .audit_head("acc1")
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut v = Verifier::new(linker.clone());
        v.check(&all);
        let verdict = v.finish(head);
        assert!(verdict.ok && verdict.entries == 303, "{name}: {verdict:?}");
        // A time window reads only its entries.
        let window = s
            .audit_page("acc1", 0, Some(2_000), Some(2_001), 1000)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(window.len(), 303);
        let none = s
            .audit_page("acc1", 0, Some(2_001), None, 1000)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(none.is_empty());
        // An event for nobody is refused whole.
        assert!(
            s.append_audit(&[audit_event(None, "x", "policy.changed")])
                .await
                .is_err()
        );
    }
}

#[tokio::test]
async fn mcp_sessions_keep_their_owner_and_old_ones_are_pruned() {
    use actiongate_core::store::McpSessionStore;
    for (name, f) in backends().await {
        let s = &f.store;
        s.put_mcp_session("old", "{}", 1_000)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        s.put_mcp_session("new", "{}", 5_000)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        s.set_mcp_session_owner("new", "owner-hash")
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(
            (
                s.mcp_session_owner("old").await.ok(),
                s.mcp_session_owner("new").await.ok(),
                s.mcp_session_owner("none").await.ok(),
            ),
            (
                Some(Some(None)),
                Some(Some(Some("owner-hash".to_owned()))),
                Some(None)
            ),
            "{name}"
        );
        assert_eq!(s.prune_mcp_sessions(5_000).await.ok(), Some(1), "{name}");
        assert_eq!(s.get_mcp_session("old").await.ok(), Some(None), "{name}");
        assert!(
            s.get_mcp_session("new").await.ok().flatten().is_some(),
            "{name}"
        );
    }
}

/// TLS to PostgreSQL (issue 21, finding 8): the URL's `sslmode` decides; without one a remote
/// server is `verify-full` and a loopback one `prefer`. Against the test server (Debian's, TLS on
/// with its self-signed "snakeoil" certificate): `require` encrypts, `disable` does not, and
/// `verify-full` refuses a certificate no trusted root signed.
#[tokio::test]
async fn postgres_tls_is_what_the_url_says() {
    use actiongate_store::postgres_options;
    use sqlx::ConnectOptions as _;
    use sqlx::postgres::PgSslMode;
    let Ok(base) = std::env::var("ACTIONGATE_TEST_POSTGRES_URL") else {
        panic!("ACTIONGATE_TEST_POSTGRES_URL is not set (scripts/test sets it)");
    };
    let with = |mode: &str| {
        let sep = if base.contains('?') { '&' } else { '?' };
        format!("{base}{sep}sslmode={mode}")
    };
    let encrypted = |url: String| async move {
        let mut conn = postgres_options(&url)
            .map_err(|e| e.to_string())?
            .connect()
            .await
            .map_err(|e| e.to_string())?;
        sqlx::query_scalar::<_, bool>("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()")
            .fetch_one(&mut conn)
            .await
            .map_err(|e| e.to_string())
    };
    assert_eq!(encrypted(with("require")).await, Ok(true));
    assert_eq!(encrypted(with("disable")).await, Ok(false));
    assert!(
        encrypted(with("verify-full")).await.is_err(),
        "a self-signed server certificate is not trusted"
    );
    // No sslmode: TLS when the local server offers it; a remote server must prove who it is.
    assert_eq!(encrypted(base.clone()).await, Ok(true));
    let mode = |url: &str| postgres_options(url).map(|o| o.get_ssl_mode()).ok();
    assert!(matches!(
        mode("postgres://gateway@db.example.com/actiongate"),
        Some(PgSslMode::VerifyFull)
    ));
    assert!(matches!(
        mode("postgres://gateway@127.0.0.1/actiongate"),
        Some(PgSslMode::Prefer)
    ));
    assert!(matches!(
        mode("postgres://gateway@db.example.com/actiongate?sslmode=disable"),
        Some(PgSslMode::Disable)
    ));
}
