use std::sync::Arc;

use serde_json::json;

use crate::helpers::{Backend, spawn_app};
use crate::on_both_backends;

const START: &str = "/api/v1/onboarding/email/start";
const COMPLETE: &str = "/api/v1/onboarding/email/complete";

fn is_checksummed_address(a: &str) -> bool {
    a.len() == 42
        && a.starts_with("0x")
        && a[2..].chars().all(|c| c.is_ascii_hexdigit())
        && a[2..].chars().any(|c| c.is_ascii_uppercase())
}

async fn onboarding_end_to_end_through_real_smtp(backend: Backend) {
    let app = spawn_app(backend).await;
    let start = app
        .post(START, json!({ "email": " Alice@Example.com " }))
        .await;
    let data = start.assert_ok();
    assert_eq!(data["email"], "alice@example.com");
    assert_eq!(data["maxAttempts"], 5);
    assert_eq!(data["expiresAt"], "2026-11-22T12:10:00.000Z");
    let code = app.smtp.code_for("alice@example.com", 1).await;

    let done = app
        .post(
            COMPLETE,
            json!({"email": "alice@example.com", "code": code, "acceptTerms": true}),
        )
        .await;
    let data = done.assert_ok().clone();
    let key = data["bootstrap"]["agentApiKey"].as_str().unwrap_or("");
    assert!(key.starts_with("agent-") && key.len() > 40, "{key}");
    assert!(
        is_checksummed_address(data["bootstrap"]["agentAddress"].as_str().unwrap_or("")),
        "{data}"
    );
    assert!(data["bootstrap"]["agentId"].is_string());
    let session = data["session"]["token"].as_str().unwrap_or("");
    assert!(session.starts_with("owner-"), "{session}");
    assert_eq!(data["session"]["expiresAt"], "2026-11-29T12:00:00.000Z");
    assert_eq!(data["account"]["created"], json!(true));

    // The key works as an agent key, the session as an owner session.
    app.get(&format!("/api/v1/agent/actions?agentApiKey={key}"))
        .await
        .assert_ok();
    let agents = app.get_as("/api/v1/agents", session).await;
    let list = agents.assert_ok()["agents"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(list.len(), 1);
    assert_eq!(list[0]["agentId"], data["bootstrap"]["agentId"]);
    assert_eq!(list[0]["agentAddress"], data["bootstrap"]["agentAddress"]);

    // The code is single-use.
    app.post(
        COMPLETE,
        json!({"email": "alice@example.com", "code": code, "acceptTerms": true}),
    )
    .await
    .assert_error(401, "CODE_EXPIRED");

    // Completing again (with a new code) signs the owner in: same account, no second agent, no key.
    let code2 = app.request_code("alice@example.com").await;
    let again = app
        .post(
            COMPLETE,
            json!({"email": "ALICE@example.com", "code": code2, "acceptTerms": true}),
        )
        .await;
    let again = again.assert_ok();
    assert_eq!(again["account"]["accountId"], data["account"]["accountId"]);
    assert_eq!(again["account"]["created"], json!(false));
    assert_eq!(again["bootstrap"], json!(null));
    let session2 = again["session"]["token"].as_str().unwrap_or("");
    assert_ne!(session2, session);
    let agents = app.get_as("/api/v1/agents", session2).await;
    assert_eq!(
        agents.assert_ok()["agents"].as_array().map(Vec::len),
        Some(1)
    );
}

async fn wrong_expired_and_exhausted_codes(backend: Backend) {
    let app = spawn_app(backend).await;
    let email = "bob@example.com";
    let code = app.request_code(email).await;
    let wrong = if code == "000000" { "111111" } else { "000000" };

    let r = app
        .post(
            COMPLETE,
            json!({"email": email, "code": wrong, "acceptTerms": true}),
        )
        .await;
    r.assert_error(401, "INVALID_CODE");
    assert!(
        r.body["message"]
            .as_str()
            .unwrap_or("")
            .contains("4 tries left"),
        "{}",
        r.text
    );
    // A wrong code consumes nothing: the right one still works.
    app.post(
        COMPLETE,
        json!({"email": email, "code": code, "acceptTerms": true}),
    )
    .await
    .assert_ok();

    // Expiry: 10 minutes.
    let email = "carol@example.com";
    let code = app.request_code(email).await;
    app.clock.advance(time::Duration::minutes(10));
    app.post(
        COMPLETE,
        json!({"email": email, "code": code, "acceptTerms": true}),
    )
    .await
    .assert_error(401, "CODE_EXPIRED");
    // A code never requested reads the same.
    app.post(
        COMPLETE,
        json!({"email": "nobody@example.com", "code": "123456", "acceptTerms": true}),
    )
    .await
    .assert_error(401, "CODE_EXPIRED");

    // Five wrong tries burn the code, even for the right code afterwards.
    let email = "dave@example.com";
    let code = app.request_code(email).await;
    let wrong = if code == "000000" { "111111" } else { "000000" };
    for left in (1..5).rev() {
        let r = app
            .post(
                COMPLETE,
                json!({"email": email, "code": wrong, "acceptTerms": true}),
            )
            .await;
        r.assert_error(401, "INVALID_CODE");
        assert!(
            r.body["message"]
                .as_str()
                .unwrap_or("")
                .contains(&format!("{left} tr")),
            "{}",
            r.text
        );
    }
    app.post(
        COMPLETE,
        json!({"email": email, "code": wrong, "acceptTerms": true}),
    )
    .await
    .assert_error(429, "TOO_MANY_ATTEMPTS");
    app.post(
        COMPLETE,
        json!({"email": email, "code": code, "acceptTerms": true}),
    )
    .await
    .assert_error(429, "TOO_MANY_ATTEMPTS");
    // A new code starts over (not sooner than 30 s after the last one).
    app.post(START, json!({ "email": email }))
        .await
        .assert_error(429, "RATE_LIMITED");
    app.clock.advance(time::Duration::seconds(30));
    let fresh = app.request_code(email).await;
    app.post(
        COMPLETE,
        json!({"email": email, "code": fresh, "acceptTerms": true}),
    )
    .await
    .assert_ok();
}

async fn terms_must_be_accepted_and_refusal_creates_nothing(backend: Backend) {
    let app = spawn_app(backend).await;
    let email = "erin@example.com";
    let code = app.request_code(email).await;
    for terms in [json!(false), json!("true"), json!(1), json!(null)] {
        app.post(
            COMPLETE,
            json!({"email": email, "code": code, "acceptTerms": terms}),
        )
        .await
        .assert_error(400, "TERMS_NOT_ACCEPTED");
    }
    app.post(COMPLETE, json!({"email": email, "code": code}))
        .await
        .assert_error(400, "TERMS_NOT_ACCEPTED");
    // Nothing was created or consumed: the same code now creates the account.
    let r = app
        .post(
            COMPLETE,
            json!({"email": email, "code": code, "acceptTerms": true}),
        )
        .await;
    assert_eq!(r.assert_ok()["account"]["created"], json!(true));
}

async fn invalid_email_is_refused_and_sends_nothing(backend: Backend) {
    let app = spawn_app(backend).await;
    for bad in [json!("not-an-email"), json!("a@b"), json!(""), json!(42)] {
        app.post(START, json!({ "email": bad }))
            .await
            .assert_error(400, "INVALID_REQUEST");
    }
    app.post(START, json!({}))
        .await
        .assert_error(400, "INVALID_REQUEST");
    app.post(START, json!({"email": "x@example.com", "extra": 1}))
        .await
        .assert_error(400, "INVALID_REQUEST");
    assert!(app.smtp.messages_to("not-an-email").is_empty());
    assert!(app.smtp.messages_to("x@example.com").is_empty());
}

async fn sessions_expire_and_owner_routes_refuse_agent_keys(backend: Backend) {
    let app = spawn_app(backend).await;
    let owner = app.onboard("frank@example.com").await;
    app.get_as("/api/v1/agents", &owner.session)
        .await
        .assert_ok();
    for bad in [owner.agent_key.as_str(), "owner-deadbeef", "garbage"] {
        app.get_as("/api/v1/agents", bad)
            .await
            .assert_error(401, "UNAUTHORIZED");
    }
    app.get("/api/v1/agents")
        .await
        .assert_error(401, "UNAUTHORIZED");
    let policy = format!("/api/v1/agents/{}/policy", owner.agent_id);
    // The agent may not change its own policy, whatever the body.
    app.put_as(
        &policy,
        &owner.agent_key,
        json!({"allowedActions": ["swap"], "dailyLimitUsd": 1e9}),
    )
    .await
    .assert_error(401, "UNAUTHORIZED");
    app.put_as(&policy, &owner.agent_key, json!({}))
        .await
        .assert_error(401, "UNAUTHORIZED");
    app.post_as(
        &format!("/api/v1/agents/{}/rotate-key", owner.agent_id),
        &owner.agent_key,
        None,
    )
    .await
    .assert_error(401, "UNAUTHORIZED");

    app.clock.advance(time::Duration::days(7));
    app.get_as("/api/v1/agents", &owner.session)
        .await
        .assert_error(401, "UNAUTHORIZED");

    // Signing out revokes the session at once; an agent key cannot sign anyone out.
    let again = app.onboard("frank2@example.com").await;
    app.send(
        app.client
            .delete(app.url("/api/v1/session"))
            .bearer_auth(&again.agent_key),
    )
    .await
    .assert_error(401, "UNAUTHORIZED");
    let out = app
        .send(
            app.client
                .delete(app.url("/api/v1/session"))
                .bearer_auth(&again.session),
        )
        .await;
    out.assert_ok();
    app.get_as("/api/v1/agents", &again.session)
        .await
        .assert_error(401, "UNAUTHORIZED");
    app.send(
        app.client
            .delete(app.url("/api/v1/session"))
            .bearer_auth(&again.session),
    )
    .await
    .assert_error(401, "UNAUTHORIZED");
}

async fn further_agents_and_key_rotation(backend: Backend) {
    let app = spawn_app(backend).await;
    let owner = app.onboard("gina@example.com").await;
    let created = app
        .post_as(
            "/api/v1/agents",
            &owner.session,
            Some(json!({"name": "research bot"})),
        )
        .await;
    let b = created.assert_ok()["bootstrap"].clone();
    let second_key = b["agentApiKey"].as_str().unwrap_or("").to_owned();
    let second_id = b["agentId"].as_str().unwrap_or("").to_owned();
    assert!(second_key.starts_with("agent-"));
    assert_ne!(second_key, owner.agent_key);
    assert_ne!(
        b["agentAddress"].as_str(),
        Some(owner.agent_address.as_str())
    );
    // An empty body works too.
    app.post_as("/api/v1/agents", &owner.session, None)
        .await
        .assert_ok();

    let list = app.get_as("/api/v1/agents", &owner.session).await;
    let agents = list.assert_ok()["agents"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(agents.len(), 3);
    assert_eq!(agents[1]["name"], "research bot");

    // Rotation: the new key works, the old one is refused at once.
    let rotated = app
        .post_as(
            &format!("/api/v1/agents/{second_id}/rotate-key"),
            &owner.session,
            None,
        )
        .await;
    let new_key = rotated.assert_ok()["bootstrap"]["agentApiKey"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    assert_eq!(
        rotated.body["data"]["bootstrap"]["agentId"],
        json!(second_id)
    );
    assert_eq!(
        rotated.body["data"]["bootstrap"]["agentAddress"],
        b["agentAddress"]
    );
    assert_ne!(new_key, second_key);
    app.get(&format!("/api/v1/agent/actions?agentApiKey={second_key}"))
        .await
        .assert_error(401, "UNAUTHORIZED");
    app.get(&format!("/api/v1/agent/actions?agentApiKey={new_key}"))
        .await
        .assert_ok();
    // The other agents' keys are untouched.
    app.get(&format!(
        "/api/v1/agent/actions?agentApiKey={}",
        owner.agent_key
    ))
    .await
    .assert_ok();
    let list = app.get_as("/api/v1/agents", &owner.session).await;
    assert!(list.body["data"]["agents"][1]["keyRotatedAt"].is_string());

    // Another owner cannot see, rotate or govern these agents.
    let other = app.onboard("hank@example.com").await;
    app.post_as(
        &format!("/api/v1/agents/{second_id}/rotate-key"),
        &other.session,
        None,
    )
    .await
    .assert_error(404, "NOT_FOUND");
    app.get_as(
        &format!("/api/v1/agents/{second_id}/policy"),
        &other.session,
    )
    .await
    .assert_error(404, "NOT_FOUND");
    app.get(&format!("/api/v1/agent/actions?agentApiKey={new_key}"))
        .await
        .assert_ok();

    // A key is shown once: no read route answers it again.
    let reads = [
        app.get_as("/api/v1/agents", &owner.session).await,
        app.get_as(
            &format!("/api/v1/agents/{second_id}/policy"),
            &owner.session,
        )
        .await,
        app.get(&format!("/api/v1/agent/actions?agentApiKey={new_key}"))
            .await,
    ];
    for r in reads {
        for k in [&owner.agent_key, &second_key, &new_key] {
            assert!(
                !r.text.contains(k.as_str()),
                "a key was answered again: {}",
                r.text
            );
        }
        assert!(!r.text.contains(&owner.session));
    }
}

async fn policy_is_read_and_replaced_by_the_owner(backend: Backend) {
    let app = spawn_app(backend).await;
    let owner = app.onboard("ivy@example.com").await;
    let path = format!("/api/v1/agents/{}/policy", owner.agent_id);
    let initial = app.get_as(&path, &owner.session).await;
    let p = initial.assert_ok().clone();
    assert_eq!(
        p["allowedActions"],
        json!([
            "get-earn-opportunities",
            "get-earning-opportunities",
            "get-earn-provider",
            "get-fx-supported-assets",
            "get-prediction-orders"
        ]),
        "catalog order"
    );
    assert_eq!(p["dailyLimitUsd"], json!(1000.0));
    assert_eq!(p["maxAmountUsdPerAction"], json!(null));
    assert_eq!(p["minHealthFactor"], json!(1.5), "the shipped default");
    assert_eq!(p["agentId"], json!(owner.agent_id));

    let put = app
        .put_as(
            &path,
            &owner.session,
            json!({
                "allowedActions": ["swap_tokens", "claim_rewards", "swap", "CLAIM-REWARDS"],
                "dailyLimitUsd": 250.75,
                "maxAmountUsdPerAction": 100,
                "minHealthFactor": 1.75
            }),
        )
        .await;
    let p = put.assert_ok().clone();
    assert_eq!(
        p["allowedActions"],
        json!(["swap", "claim-rewards"]),
        "aliases stored canonical, once"
    );
    assert_eq!(p["dailyLimitUsd"], json!(250.75));
    assert_eq!(p["maxAmountUsdPerAction"], json!(100.0));
    assert_eq!(p["minHealthFactor"], json!(1.75));
    assert_eq!(app.get_as(&path, &owner.session).await.body["data"], p);

    // Refusals change nothing.
    let refusals = [
        (
            json!({"allowedActions": ["swap", "launch-rocket"], "dailyLimitUsd": 5}),
            404,
            "UNKNOWN_ACTION",
        ),
        (
            json!({"allowedActions": ["swap"], "dailyLimitUsd": -1}),
            400,
            "INVALID_REQUEST",
        ),
        (
            json!({"allowedActions": ["swap"], "dailyLimitUsd": 1e15}),
            400,
            "INVALID_REQUEST",
        ),
        (
            json!({"allowedActions": ["swap"], "dailyLimitUsd": 5, "maxAmountUsdPerAction": -3}),
            400,
            "INVALID_REQUEST",
        ),
        (
            json!({"allowedActions": "swap", "dailyLimitUsd": 5}),
            400,
            "INVALID_REQUEST",
        ),
        (json!({"allowedActions": ["swap"]}), 400, "INVALID_REQUEST"),
        // Aave liquidates below 1: a minimum under it protects nothing.
        (
            json!({"allowedActions": ["swap"], "dailyLimitUsd": 5, "minHealthFactor": 0.9}),
            400,
            "INVALID_REQUEST",
        ),
        (
            json!({"allowedActions": ["swap"], "dailyLimitUsd": 5, "minHealthFactor": "high"}),
            400,
            "INVALID_REQUEST",
        ),
        (
            json!({"allowedActions": ["swap"], "dailyLimitUsd": 5, "surprise": true}),
            400,
            "INVALID_REQUEST",
        ),
    ];
    for (body, status, code) in refusals {
        app.put_as(&path, &owner.session, body)
            .await
            .assert_error(status, code);
    }
    assert_eq!(app.get_as(&path, &owner.session).await.body["data"], p);
    app.get_as("/api/v1/agents/no-such-agent/policy", &owner.session)
        .await
        .assert_error(404, "NOT_FOUND");
}

async fn parallel_guesses_cannot_pass_the_limit_and_codes_are_not_resent_at_once(backend: Backend) {
    let app = Arc::new(spawn_app(backend).await);
    let email = "guess@example.com";
    let code = app.request_code(email).await;
    // A live code is not replaced (nor its tries reset) within 30 s.
    let again = app.post(START, json!({ "email": email })).await;
    again.assert_error(429, "RATE_LIMITED");
    assert!(again.headers.get("retry-after").is_some());
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..20 {
        let app = app.clone();
        let guess = format!(
            "{:06}",
            (code.parse::<u32>().unwrap_or(0) + 1 + i) % 1_000_000
        );
        tasks.spawn(async move {
            app.post(
                COMPLETE,
                json!({"email": email, "code": guess, "acceptTerms": true}),
            )
            .await
        });
    }
    let mut wrong = 0;
    while let Some(r) = tasks.join_next().await {
        let r = r.expect("a task panicked");
        match r.body["code"].as_str() {
            Some("INVALID_CODE") => wrong += 1,
            Some("TOO_MANY_ATTEMPTS") => {}
            other => panic!("unexpected {other:?}: {}", r.text),
        }
    }
    assert!(
        wrong <= 4,
        "{wrong} guesses were compared; the limit is 5 tries"
    );
    app.post(
        COMPLETE,
        json!({"email": email, "code": code, "acceptTerms": true}),
    )
    .await
    .assert_error(429, "TOO_MANY_ATTEMPTS");
    // A burned code is replaced 30 s after it was sent, not sooner.
    app.post(START, json!({ "email": email }))
        .await
        .assert_error(429, "RATE_LIMITED");
    app.clock.advance(time::Duration::seconds(30));
    let fresh = app.request_code(email).await;
    app.post(
        COMPLETE,
        json!({"email": email, "code": fresh, "acceptTerms": true}),
    )
    .await
    .assert_ok();
}

on_both_backends!(
    parallel_guesses_cannot_pass_the_limit_and_codes_are_not_resent_at_once,
    onboarding_end_to_end_through_real_smtp,
    wrong_expired_and_exhausted_codes,
    terms_must_be_accepted_and_refusal_creates_nothing,
    invalid_email_is_refused_and_sends_nothing,
    sessions_expire_and_owner_routes_refuse_agent_keys,
    further_agents_and_key_rotation,
    policy_is_read_and_replaced_by_the_owner,
);
