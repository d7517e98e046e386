//! Rate limits (CONTRACT "Rate limits and abuse"): onboarding starts per client address, requests
//! per agent key on REST, MCP and the mirror alike, new MCP sessions per address. Each refusal is 429
//! `RATE_LIMITED` with `Retry-After` and changes nothing.

use serde_json::{Value, json};

use crate::helpers::{Backend, Options, Reply, spawn_app_with};
use crate::on_both_backends;

fn retry_after(r: &Reply) -> u64 {
    r.headers
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no Retry-After: {:?}", r.headers))
}

/// 150 onboarding starts in a burst from one address, each for its own e-mail: the shipped
/// 10 a minute go through, the rest are refused with a wait, and only the accepted ones are mailed.
async fn onboarding_starts_are_limited_per_address(backend: Backend) {
    let app = spawn_app_with(
        backend,
        Options {
            config_toml: "[limits]\n".into(),
            ..Options::default()
        },
    )
    .await;
    let mut accepted = Vec::new();
    let mut refused = 0;
    for i in 0..150 {
        let email = format!("burst{i}@example.com");
        let r = app
            .post("/api/v1/onboarding/email/start", json!({"email": email}))
            .await;
        match r.status {
            200 => accepted.push(email),
            _ => {
                r.assert_error(429, "RATE_LIMITED");
                assert!((1..=60).contains(&retry_after(&r)), "{:?}", r.headers);
                refused += 1;
            }
        }
    }
    assert_eq!((accepted.len(), refused), (10, 140));
    // Every accepted start mailed its code; no refused one did.
    for email in &accepted {
        app.smtp.code_for(email, 1).await;
    }
    assert!(app.smtp.messages_to("burst149@example.com").is_empty());
}

/// A burst of 5 per key, refilled at one a second: a burst beyond it is refused on REST and, at once
/// after, as a tool error on the mirror; another key keeps its own budget; the catalog is never
/// limited.
async fn requests_are_limited_per_agent_key(backend: Backend) {
    let app =
        spawn_app_with(
            backend,
            Options {
                config_toml:
                    "[limits]\nrequests-per-second = 1\nburst = 5\nonboarding-per-minute = 100\n"
                        .into(),
                ..Options::default()
            },
        )
        .await;
    let busy = app.onboard("busy@example.com").await;
    let calm = app.onboard("calm@example.com").await;
    let started = std::time::Instant::now();
    let mut accepted = 0;
    loop {
        let r = app
            .get_agent("/api/v1/agent/credits/balance", &busy.agent_key)
            .await;
        if r.status == 429 {
            r.assert_error(429, "RATE_LIMITED");
            assert!(retry_after(&r) >= 1);
            break;
        }
        r.assert_ok();
        accepted += 1;
        assert!(accepted <= 50, "never limited");
    }
    // The burst, plus what refilled meanwhile (one a second), never more.
    let refilled = started.elapsed().as_secs() as usize + 1;
    assert!(
        (5..=5 + refilled).contains(&accepted),
        "{accepted} accepted in {:?}",
        started.elapsed()
    );
    let tool = app
        .send(
            app.client
                .post(app.url("/mcp/tool/getCreditsBalance"))
                .bearer_auth(&busy.agent_key)
                .json(&json!({})),
        )
        .await;
    assert_eq!(
        (
            tool.status,
            tool.body["isError"].clone(),
            tool.body["structuredContent"]["code"].clone()
        ),
        (429, json!(true), json!("RATE_LIMITED")),
        "{}",
        tool.text
    );
    app.get_agent("/api/v1/agent/credits/balance", &calm.agent_key)
        .await
        .assert_ok();
    for _ in 0..20 {
        assert_eq!(app.get("/api/v1/agent/actions/catalog").await.status, 200);
    }
}

/// New MCP sessions (an initialize without a session id or a bearer) from one address: the
/// configured number a minute, then 429.
async fn new_mcp_sessions_are_limited_per_address(backend: Backend) {
    let app = spawn_app_with(
        backend,
        Options {
            config_toml: "[limits]\nmcp-initialize-per-minute = 3\n".into(),
            ..Options::default()
        },
    )
    .await;
    let initialize = crate::helpers::mcp_initialize("limits-test");
    let mut statuses: Vec<u16> = Vec::new();
    for _ in 0..5 {
        let r = app.mcp_open(None, &initialize).await;
        statuses.push(r.status);
        if r.status == 429 {
            let body: Value = r.body.clone();
            assert_eq!(body["code"], json!("RATE_LIMITED"), "{}", r.text);
            assert!(retry_after(&r) >= 1);
        }
    }
    assert_eq!(statuses, [200, 200, 200, 429, 429]);
}

/// Wrong codes count against the address's budget across codes: a new code does not reset it, and
/// once it is spent neither a check (even of the right code) nor a new code is let through until the
/// 24-hour window ends; then the owner signs in with a fresh code.
async fn code_checks_stop_at_the_addresss_budget_across_codes(backend: Backend) {
    const COMPLETE: &str = "/api/v1/onboarding/email/complete";
    let app = spawn_app_with(
        backend,
        Options {
            config_toml: "[limits]\ncode-checks-per-day = 8\n".into(),
            ..Options::default()
        },
    )
    .await;
    let email = "victim@example.com";
    let guess = |code: &str| {
        let wrong = if code == "000000" { "111111" } else { "000000" };
        json!({"email": email, "code": wrong, "acceptTerms": true})
    };
    // An attacker burns the first code with five wrong guesses.
    let first = app.request_code(email).await;
    for _ in 0..4 {
        app.post(COMPLETE, guess(&first))
            .await
            .assert_error(401, "INVALID_CODE");
    }
    app.post(COMPLETE, guess(&first))
        .await
        .assert_error(429, "TOO_MANY_ATTEMPTS");
    // The owner's way back: a fresh code (30 s later). Its tries start over; the budget does not.
    app.clock.advance(time::Duration::seconds(30));
    let second = app.request_code(email).await;
    for _ in 0..3 {
        app.post(COMPLETE, guess(&second))
            .await
            .assert_error(401, "INVALID_CODE");
    }
    // Eight checks spent: the right code is refused too, and no new code is mailed.
    let locked = app
        .post(
            COMPLETE,
            json!({"email": email, "code": second, "acceptTerms": true}),
        )
        .await;
    locked.assert_error(429, "RATE_LIMITED");
    let wait = retry_after(&locked);
    assert!((86_000..=86_400).contains(&wait), "{wait}");
    app.clock.advance(time::Duration::seconds(30));
    let mails = app.smtp.messages_to(email).len();
    app.post("/api/v1/onboarding/email/start", json!({"email": email}))
        .await
        .assert_error(429, "RATE_LIMITED");
    assert_eq!(
        app.smtp.messages_to(email).len(),
        mails,
        "no mail while locked"
    );
    // A day later a fresh code signs the owner in.
    app.clock.advance(time::Duration::days(1));
    let fresh = app.request_code(email).await;
    app.post(
        COMPLETE,
        json!({"email": email, "code": fresh, "acceptTerms": true}),
    )
    .await
    .assert_ok();
}

/// The open credit purchase is held per client address: 10 new invoices a minute (each holds a
/// challenge tag for the recipient), and its paid retries, which read the chain, at the per-key rate.
async fn open_credit_purchases_are_limited_per_address(backend: Backend) {
    let app = spawn_app_with(
        backend,
        Options {
            config_toml: "[limits]\nrequests-per-second = 3\nburst = 3\n".into(),
            ..Options::default()
        },
    )
    .await;
    let body =
        json!({"sku": "credits_100", "userAddress": "0x00000000000000000000000000000000000000aa"});
    let mut statuses = Vec::new();
    for _ in 0..12 {
        let r = app
            .post("/api/v1/credits/buy-with-x402", body.clone())
            .await;
        if r.status == 429 {
            r.assert_error(429, "RATE_LIMITED");
            assert!((1..=60).contains(&retry_after(&r)), "{:?}", r.headers);
        }
        statuses.push(r.status);
    }
    assert_eq!(
        statuses.iter().filter(|s| **s == 429).count(),
        2,
        "10 challenges a minute: {statuses:?}"
    );
    // Paid retries have their own budget (3 a second here), also per address.
    let mut paid = Vec::new();
    for _ in 0..6 {
        let r = app
            .send(
                app.client
                    .post(app.url("/api/v1/credits/buy-with-x402"))
                    .header("X-Invoice-Id", "inv_x")
                    .header("X-Payment-Receipt", format!("0x{}", "ab".repeat(32)))
                    .json(&body),
            )
            .await;
        paid.push(r.status);
    }
    assert!(
        paid[..3].iter().all(|s| *s != 429) && paid[3..].contains(&429),
        "{paid:?}"
    );
}

on_both_backends!(
    open_credit_purchases_are_limited_per_address,
    code_checks_stop_at_the_addresss_budget_across_codes,
    onboarding_starts_are_limited_per_address,
    requests_are_limited_per_agent_key,
    new_mcp_sessions_are_limited_per_address,
);
