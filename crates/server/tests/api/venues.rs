//! Venue readiness over REST without a chain (the devnet tests cover gas, balances, allowances,
//! delegations and prices): credits that do not cover one execution, a venue that needs
//! credentials, and the refusals of a bad query.

use serde_json::json;

use crate::helpers::{Backend, Options, spawn_app_with};
use crate::on_both_backends;

const READINESS: &str = "/api/v1/agent/venues/readiness";

async fn readiness_tells_credits_and_credentials_and_refuses_a_bad_query(backend: Backend) {
    let app = spawn_app_with(
        backend,
        Options {
            config_toml: "[credits]\nfree-per-day = 0\n".into(),
            ..Options::default()
        },
    )
    .await;
    let owner = app.onboard("venues@example.com").await;
    let key = owner.agent_key.as_str();

    // No credits and no free requests: the internal reads' venue is blocked, with the route that
    // buys credits; once credits are granted, it is ready.
    let r = app
        .get_agent(&format!("{READINESS}?venue=actiongate"), key)
        .await;
    let data = r.assert_ok().clone();
    assert_eq!(
        (
            data["ready"].clone(),
            data["lane"].clone(),
            data["chainId"].clone()
        ),
        (json!(false), json!("executeIntent"), json!(8453)),
        "{data}"
    );
    assert_eq!(
        data["blockingReasons"][0]["code"],
        json!("CREDITS_SHORT"),
        "{data}"
    );
    assert_eq!(
        data["blockingReasons"][0]["fix"]["route"],
        json!("POST /api/v1/agent/credits/buy-with-x402")
    );
    app.grant(&owner, 10).await;
    let r = app
        .get_agent(&format!("{READINESS}?venue=actiongate"), key)
        .await;
    let data = r.assert_ok().clone();
    assert_eq!(
        (data["ready"].clone(), data["blockingReasons"].clone()),
        (json!(true), json!([])),
        "{data}"
    );

    // A venue that needs exchange credentials this deployment does not hold.
    let r = app
        .get_agent(&format!("{READINESS}?venue=cex-spot"), key)
        .await;
    assert_eq!(
        r.assert_ok()["blockingReasons"][0]["code"],
        json!("CREDENTIALS_MISSING")
    );

    // The list names every venue of the catalog.
    let r = app.get_agent("/api/v1/agent/venues", key).await;
    let venues = r.assert_ok()["venues"].clone();
    assert_eq!(
        venues.as_array().map(Vec::len),
        app.gateway
            .catalog()
            .document()
            .provider_families
            .len()
            .into()
    );

    // Refusals: an unknown venue, chain or lane, a bad wallet, no key.
    app.get_agent(&format!("{READINESS}?venue=no-such-venue"), key)
        .await
        .assert_error(404, "NOT_FOUND");
    app.get_agent(&format!("{READINESS}?venue=erc20&chainId=999"), key)
        .await
        .assert_error(400, "UNKNOWN_CHAIN");
    app.get_agent(&format!("{READINESS}?venue=erc20&lane=wallet"), key)
        .await
        .assert_error(400, "INVALID_REQUEST");
    app.get_agent(&format!("{READINESS}?venue=erc20&lane=buildTx"), key)
        .await
        .assert_error(400, "INVALID_REQUEST");
    app.get_agent(
        &format!("{READINESS}?venue=erc20&lane=buildTx&walletAddress=0x12"),
        key,
    )
    .await
    .assert_error(400, "INVALID_REQUEST");
    app.get(&format!("{READINESS}?venue=erc20"))
        .await
        .assert_error(401, "UNAUTHORIZED");
}

on_both_backends!(readiness_tells_credits_and_credentials_and_refuses_a_bad_query);
