//! Personhood: every row of SPEC's state table, nonce replay and expiry, the RP signature, and
//! concurrent consumes — against the real verifier client and a local stand-in of the verify API.

use std::sync::Arc;

use actiongate_testkit::worldid::proof_for;
use serde_json::{Value, json};
use sha3::{Digest, Keccak256};

use crate::helpers::{Backend, Owner, TestApp, spawn_app};
use crate::on_both_backends;

const P: &str = "/api/v1/agent/delegation/personhood";
const ALICE: &str = "0x00aa000000000000000000000000000000000000000000000000000000000001";
const BOB: &str = "0x00bb000000000000000000000000000000000000000000000000000000000002";

async fn begin(app: &TestApp, owner: &Owner, path: &str, body: Value) -> Value {
    let r = app
        .post_as(&format!("{P}/{path}"), &owner.session, Some(body))
        .await;
    r.assert_ok().clone()
}

async fn complete(app: &TestApp, owner: &Owner, path: &str, body: Value) -> crate::helpers::Reply {
    app.post_as(&format!("{P}/{path}"), &owner.session, Some(body))
        .await
}

/// Recovers the RP signer from an rpContext, the way a verifier of World ID requests does.
fn recover_rp_signer(request: &Value) -> String {
    let ctx = &request["rpContext"];
    let nonce = hex::decode(ctx["nonce"].as_str().unwrap_or("").trim_start_matches("0x"))
        .unwrap_or_default();
    let mut message = vec![0x01];
    message.extend_from_slice(&nonce);
    message.extend_from_slice(&ctx["created_at"].as_u64().unwrap_or(0).to_be_bytes());
    message.extend_from_slice(&ctx["expires_at"].as_u64().unwrap_or(0).to_be_bytes());
    message.extend_from_slice(&actiongate_core::personhood::hash_to_field(
        request["action"].as_str().unwrap_or("").as_bytes(),
    ));
    let mut prefixed = format!("\x19Ethereum Signed Message:\n{}", message.len()).into_bytes();
    prefixed.extend_from_slice(&message);
    let digest = Keccak256::digest(&prefixed);
    let sig = hex::decode(
        ctx["signature"]
            .as_str()
            .unwrap_or("")
            .trim_start_matches("0x"),
    )
    .unwrap_or_default();
    assert_eq!(sig.len(), 65);
    let signature = k256::ecdsa::Signature::from_slice(&sig[..64]).expect("from slice");
    let recid = k256::ecdsa::RecoveryId::from_byte(sig[64] - 27).unwrap_or_else(|| panic!("v"));
    let key = k256::ecdsa::VerifyingKey::recover_from_prehash(&digest, &signature, recid)
        .expect("recover from prehash");
    let point = key.to_encoded_point(false);
    actiongate_core::crypto::to_checksum(&Keccak256::digest(&point.as_bytes()[1..])[12..])
}

async fn check(app: &TestApp, owner: &Owner) -> crate::helpers::Reply {
    app.get_as(&format!("{P}/org/check?orgId=acme"), &owner.session)
        .await
}

async fn org_lock_follows_the_state_table(backend: Backend) {
    let app = spawn_app(backend).await;
    let owner = app.onboard("org@example.com").await;
    assert_eq!(
        check(&app, &owner).await.assert_ok()["personhood"],
        json!({"status": "unverified"})
    );

    let req =
        begin(&app, &owner, "org/begin", json!({"orgId": "acme"})).await["proofRequest"].clone();
    assert_eq!(req["action"], "delegate-org:acme");
    assert_eq!(req["signal"], "acme");
    assert_eq!(req["rpContext"]["rp_id"], "rp_test");
    let ctx = &req["rpContext"];
    assert_eq!(
        ctx["expires_at"].as_u64().unwrap_or(0) - ctx["created_at"].as_u64().unwrap_or(0),
        300
    );
    assert_eq!(
        ctx["nonce"].as_str().map(|n| (n.len(), &n[..4])),
        Some((66, "0x00")),
        "a field element"
    );
    // The signature verifies against the gateway's RP signer, recovered from the message.
    let signer = recover_rp_signer(&req);
    let again =
        begin(&app, &owner, "org/begin", json!({"orgId": "acme"})).await["proofRequest"].clone();
    assert_eq!(recover_rp_signer(&again), signer, "one RP key");
    assert_ne!(again["rpContext"]["nonce"], req["rpContext"]["nonce"]);

    // unlocked --complete, proof valid--> locked to the proof's nullifier
    let done = complete(
        &app,
        &owner,
        "org/complete",
        json!({"orgId": "acme", "proof": proof_for(&req, ALICE)}),
    )
    .await;
    let locked = done.assert_ok()["personhood"].clone();
    assert_eq!(locked["status"], "locked");
    let checked = check(&app, &owner).await;
    assert_eq!(checked.assert_ok()["personhood"], locked);
    assert!(
        !checked.text.contains(ALICE),
        "the nullifier is never answered"
    );

    // A nonce is accepted once.
    complete(
        &app,
        &owner,
        "org/complete",
        json!({"orgId": "acme", "proof": proof_for(&req, ALICE)}),
    )
    .await
    .assert_error(409, "PERSONHOOD_CHALLENGE_INVALID");

    // locked --complete, another nullifier--> unchanged, PERSONHOOD_ORG_NULLIFIER_MISMATCH
    let r = complete(
        &app,
        &owner,
        "org/complete",
        json!({"orgId": "acme", "proof": proof_for(&again, BOB)}),
    )
    .await;
    r.assert_error(403, "PERSONHOOD_ORG_NULLIFIER_MISMATCH");
    assert_eq!(check(&app, &owner).await.body["data"]["personhood"], locked);
    // The refused proof did not use its nonce: the same request still takes the right person.
    let same = complete(
        &app,
        &owner,
        "org/complete",
        json!({"orgId": "acme", "proof": proof_for(&again, ALICE)}),
    )
    .await;
    assert_eq!(
        same.assert_ok()["personhood"],
        locked,
        "the same nullifier again is idempotent"
    );

    // A proof made for another request is refused by the check of what the verifier vouched for.
    let third =
        begin(&app, &owner, "org/begin", json!({"orgId": "acme"})).await["proofRequest"].clone();
    let mut forged = third.clone();
    forged["action"] = json!("delegate-org:other");
    complete(
        &app,
        &owner,
        "org/complete",
        json!({"orgId": "acme", "proof": proof_for(&forged, ALICE)}),
    )
    .await
    .assert_error(403, "PERSONHOOD_PROOF_INVALID");

    // Expiry: a request answered after expires_at is refused, and the verifier is not even asked.
    let late =
        begin(&app, &owner, "org/begin", json!({"orgId": "acme"})).await["proofRequest"].clone();
    app.clock.advance(time::Duration::seconds(301));
    let calls = app.verify_api.calls();
    complete(
        &app,
        &owner,
        "org/complete",
        json!({"orgId": "acme", "proof": proof_for(&late, ALICE)}),
    )
    .await
    .assert_error(409, "PERSONHOOD_CHALLENGE_INVALID");
    assert_eq!(app.verify_api.calls(), calls);

    // Orgs are the account's own: another account's "acme" is a different organization.
    let other = app.onboard("org2@example.com").await;
    let r = app
        .get_as(&format!("{P}/org/check?orgId=acme"), &other.session)
        .await;
    assert_eq!(r.assert_ok()["personhood"]["status"], "unverified");
    // An agent key is not an owner session.
    app.post_as(
        &format!("{P}/org/begin"),
        &owner.agent_key,
        Some(json!({"orgId": "acme"})),
    )
    .await
    .assert_error(401, "UNAUTHORIZED");
}

async fn deposit_receipts_are_single_use(backend: Backend) {
    let app = Arc::new(spawn_app(backend).await);
    let owner = app.onboard("deposit@example.com").await;
    // A deposit for an organization nobody verified yet.
    let b = begin(&app, &owner, "deposit/begin", json!({"orgId": "fund"})).await;
    complete(
        &app,
        &owner,
        "deposit/complete",
        json!({"orgId": "fund", "proof": proof_for(&b["proofRequest"], ALICE)}),
    )
    .await
    .assert_error(409, "PERSONHOOD_ORG_NOT_LOCKED");

    let req =
        begin(&app, &owner, "org/begin", json!({"orgId": "fund"})).await["proofRequest"].clone();
    let locked = complete(
        &app,
        &owner,
        "org/complete",
        json!({"orgId": "fund", "proof": proof_for(&req, ALICE)}),
    )
    .await;
    let lock = locked.assert_ok()["personhood"].clone();

    // no receipt --deposit complete, proof valid, nullifier matches--> receipt issued, org row unchanged
    let b = begin(
        &app,
        &owner,
        "deposit/begin",
        json!({"orgId": "fund", "runtimeId": "rt-1", "amountUsd": 25.5,
        "destinationAddress": owner.agent_address, "idempotencyKey": "dep-1"}),
    )
    .await;
    let challenge = b["challengeId"].as_str().unwrap_or("").to_owned();
    assert_eq!(b["proofRequest"]["action"], "delegate-org:fund");
    assert_eq!(
        b["proofRequest"]["signal"],
        json!(format!("deposit:{challenge}"))
    );
    let same = begin(
        &app,
        &owner,
        "deposit/begin",
        json!({"orgId": "fund", "idempotencyKey": "dep-1"}),
    )
    .await;
    assert_eq!(
        same["challengeId"], b["challengeId"],
        "the same key is the same challenge"
    );
    assert_eq!(
        same["proofRequest"]["rpContext"]["nonce"],
        b["proofRequest"]["rpContext"]["nonce"]
    );
    let done = complete(
        &app,
        &owner,
        "deposit/complete",
        json!({"orgId": "fund", "proof": proof_for(&b["proofRequest"], ALICE)}),
    )
    .await;
    let receipt = done.assert_ok()["receiptId"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    assert!(receipt.starts_with("rcpt_"));
    assert_eq!(
        app.get_as(&format!("{P}/org/check?orgId=fund"), &owner.session)
            .await
            .body["data"]["personhood"],
        lock
    );

    // A deposit proof from another person (the code SPEC leaves open): PERSONHOOD_DEPOSIT_NULLIFIER_MISMATCH.
    let b2 = begin(
        &app,
        &owner,
        "deposit/begin",
        json!({"orgId": "fund", "depositSignal": "deposit:invoice-7"}),
    )
    .await;
    assert_eq!(b2["proofRequest"]["signal"], "deposit:invoice-7");
    complete(
        &app,
        &owner,
        "deposit/complete",
        json!({"orgId": "fund", "proof": proof_for(&b2["proofRequest"], BOB)}),
    )
    .await
    .assert_error(403, "PERSONHOOD_DEPOSIT_NULLIFIER_MISMATCH");
    for bad in ["invoice-7", "deposit:", "Deposit:x"] {
        app.post_as(
            &format!("{P}/deposit/begin"),
            &owner.session,
            Some(json!({"orgId": "fund", "depositSignal": bad})),
        )
        .await
        .assert_error(400, "INVALID_REQUEST");
    }

    // receipt issued --first consume--> used; any later consume: PERSONHOOD_DEPOSIT_RECEIPT_ALREADY_USED
    let consume =
        json!({"orgId": "fund", "receiptId": receipt, "runtimeId": "rt-1", "amountUsd": 25.5});
    let first = complete(&app, &owner, "deposit/consume", consume.clone()).await;
    assert_eq!(first.assert_ok()["receiptId"], json!(receipt));
    assert!(first.body["data"]["consumedAt"].is_string());
    complete(&app, &owner, "deposit/consume", consume.clone())
        .await
        .assert_error(409, "PERSONHOOD_DEPOSIT_RECEIPT_ALREADY_USED");
    complete(
        &app,
        &owner,
        "deposit/consume",
        json!({"orgId": "fund", "receiptId": "rcpt_nope"}),
    )
    .await
    .assert_error(404, "NOT_FOUND");

    // 50 concurrent consumes of one receipt: one success.
    let b3 = begin(&app, &owner, "deposit/begin", json!({"orgId": "fund"})).await;
    let r3 = complete(
        &app,
        &owner,
        "deposit/complete",
        json!({"orgId": "fund", "proof": proof_for(&b3["proofRequest"], ALICE)}),
    )
    .await;
    let receipt3 = r3.assert_ok()["receiptId"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..50 {
        let app = app.clone();
        let session = owner.session.clone();
        let body = json!({"orgId": "fund", "receiptId": receipt3});
        tasks.spawn(async move {
            app.post_as(&format!("{P}/deposit/consume"), &session, Some(body))
                .await
        });
    }
    let (mut ok, mut used) = (0, 0);
    while let Some(r) = tasks.join_next().await {
        let r = r.expect("a task panicked");
        match r.status {
            200 => ok += 1,
            _ => {
                r.assert_error(409, "PERSONHOOD_DEPOSIT_RECEIPT_ALREADY_USED");
                used += 1;
            }
        }
    }
    assert_eq!((ok, used), (1, 49));
}

async fn an_agent_is_locked_like_an_org(backend: Backend) {
    let app = spawn_app(backend).await;
    let owner = app.onboard("agentlock@example.com").await;
    let b = begin(&app, &owner, "begin", json!({"agentKey": owner.agent_key})).await;
    assert_eq!(
        b["proofRequest"]["action"],
        json!(format!("delegate-agent:{}", owner.agent_id))
    );
    assert_eq!(b["proofRequest"]["signal"], json!(owner.agent_id));
    let done = complete(
        &app,
        &owner,
        "complete",
        json!({"agentKey": owner.agent_key, "proof": proof_for(&b["proofRequest"], ALICE)}),
    )
    .await;
    assert_eq!(done.assert_ok()["personhood"]["status"], "locked");
    let b2 = begin(&app, &owner, "begin", json!({"agentKey": owner.agent_key})).await;
    complete(
        &app,
        &owner,
        "complete",
        json!({"agentKey": owner.agent_key, "proof": proof_for(&b2["proofRequest"], BOB)}),
    )
    .await
    .assert_error(403, "PERSONHOOD_ORG_NULLIFIER_MISMATCH");
    // The owner names the agent by its id, without holding its key: the same agent, still locked
    // to its first person.
    let by_id = begin(&app, &owner, "begin", json!({"agentId": owner.agent_id})).await;
    assert_eq!(by_id["proofRequest"]["signal"], json!(owner.agent_id));
    complete(
        &app,
        &owner,
        "complete",
        json!({"agentId": owner.agent_id, "proof": proof_for(&by_id["proofRequest"], BOB)}),
    )
    .await
    .assert_error(403, "PERSONHOOD_ORG_NULLIFIER_MISMATCH");
    // Neither or both: a clear refusal.
    for body in [
        json!({}),
        json!({"agentId": owner.agent_id, "agentKey": owner.agent_key}),
    ] {
        app.post_as(&format!("{P}/begin"), &owner.session, Some(body))
            .await
            .assert_error(400, "INVALID_REQUEST");
    }
    // Another account's agent cannot be enrolled by this owner, and a key that does not exist is
    // answered the same way: the answer does not tell whether a key exists.
    let other = app.onboard("agentlock2@example.com").await;
    for id in [other.agent_id.as_str(), "no-such-agent"] {
        app.post_as(
            &format!("{P}/begin"),
            &owner.session,
            Some(json!({"agentId": id})),
        )
        .await
        .assert_error(404, "NOT_FOUND");
    }
    for key in [
        other.agent_key.as_str(),
        "agent-0000000000000000000000000000000000000000000",
    ] {
        let r = app
            .post_as(
                &format!("{P}/begin"),
                &owner.session,
                Some(json!({"agentKey": key})),
            )
            .await;
        r.assert_error(404, "NOT_FOUND");
        assert_eq!(r.body["message"], json!("No such agent in this account."));
    }
}

on_both_backends!(
    org_lock_follows_the_state_table,
    deposit_receipts_are_single_use,
    an_agent_is_locked_like_an_org
);

/// The RP signature checked by World ID's own package (message bytes) and @noble (recovery): the
/// signer is the address the gateway publishes for its relying party.
#[tokio::test]
async fn idkit_server_accepts_our_rp_signature() {
    let app = spawn_app(Backend::Sqlite).await;
    let owner = app.onboard("idkit@example.com").await;
    let rp = app.get(&format!("{P}/rp")).await;
    let signer = rp.assert_ok()["signerAddress"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    assert_eq!(rp.body["data"]["rpId"], "rp_test");
    let script = actiongate_testkit::repo_root().join("tests/e2e/rp_signature.mjs");
    for org in ["acme", "ünïcode-org"] {
        let req =
            begin(&app, &owner, "org/begin", json!({"orgId": org})).await["proofRequest"].clone();
        let out = tokio::process::Command::new("node")
            .arg(&script)
            .arg(req.to_string())
            .arg(&signer)
            .output()
            .await
            .unwrap_or_else(|e| panic!("node: {e}"));
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "idkit-server/noble do not accept our signature: {stdout} {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(recover_rp_signer(&req), signer);
    }
    // A tampered request does not verify.
    let mut req =
        begin(&app, &owner, "org/begin", json!({"orgId": "acme"})).await["proofRequest"].clone();
    req["action"] = json!("delegate-org:evil");
    let out = tokio::process::Command::new("node")
        .arg(&script)
        .arg(req.to_string())
        .arg(&signer)
        .output()
        .await
        .unwrap_or_else(|e| panic!("node: {e}"));
    assert!(!out.status.success(), "a tampered action must not verify");
}
