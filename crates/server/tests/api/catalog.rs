use serde_json::{Value, json};

use crate::helpers::{Backend, spawn_app};
use crate::on_both_backends;

fn catalog_schema() -> jsonschema::Validator {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../catalog/catalog.schema.json"
    );
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let schema: Value = serde_json::from_str(&text).expect("from str");
    jsonschema::validator_for(&schema).unwrap_or_else(|e| panic!("schema does not compile: {e}"))
}

async fn catalog_matches_the_schema_of_spec(backend: Backend) {
    let app = spawn_app(backend).await;
    let r = app.get("/api/v1/agent/actions/catalog").await;
    assert_eq!(r.status, 200);
    let validator = catalog_schema();
    let errors: Vec<String> = validator
        .iter_errors(&r.body)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "catalog violates catalog.schema.json: {errors:#?}"
    );

    // The schema is not vacuous: it refuses a broken document.
    let mut broken = r.body.clone();
    broken["actions"][0]["providerKind"] = json!("casino");
    assert!(!validator.is_valid(&broken));

    assert_eq!(r.body["source"], "action_catalog");
    assert_eq!(r.body["version"], 1);
    assert_eq!(r.body["providerManifestVersion"], 1);
    let kinds: Vec<&str> = r.body["providerFamilies"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|f| f["providerKind"].as_str())
                .collect()
        })
        .unwrap_or_default();
    for kind in [
        "internal",
        "evmDex",
        "vault",
        "cex",
        "bridge",
        "earn",
        "offchainPerp",
        "prediction",
    ] {
        assert!(kinds.contains(&kind), "no family of kind {kind}");
    }
    let actions = r.body["actions"].as_array().cloned().unwrap_or_default();
    let swap = actions
        .iter()
        .find(|a| a["action"] == "swap")
        .cloned()
        .unwrap_or(Value::Null);
    assert_eq!(
        swap["requiredParams"],
        json!(["tokenIn", "tokenOut", "amountIn"])
    );
    assert_eq!(swap["paramsSchema"]["additionalProperties"], json!(false));
    assert_eq!(swap["providerKind"], "evmDex");
    assert_eq!(swap["agentkitAction"], "swap");
    // Nothing executes swaps yet, so the catalog says so.
    assert_eq!(swap["enabled"], json!(false));
    let fx = actions
        .iter()
        .find(|a| a["action"] == "get-fx-supported-assets")
        .cloned()
        .unwrap_or(Value::Null);
    assert_eq!(
        (fx["enabled"].clone(), fx["supportsExecuteIntent"].clone()),
        (json!(true), json!(true))
    );
    assert_eq!(fx["maxAmountUsd"], json!(0.0));
    let claim = actions
        .iter()
        .find(|a| a["action"] == "claim-rewards")
        .cloned()
        .unwrap_or(Value::Null);
    assert!(
        claim["aliases"]
            .as_array()
            .is_some_and(|a| a.contains(&json!("claim_rewards")))
    );
}

async fn catalog_revalidates_with_etag_and_compresses(backend: Backend) {
    let app = spawn_app(backend).await;
    let plain = app.get("/api/v1/agent/actions/catalog").await;
    let etag =
        crate::helpers::assert_revalidates(&app, "/api/v1/agent/actions/catalog", &plain).await;

    let stale = app
        .send(
            app.client
                .get(app.url("/api/v1/agent/actions/catalog"))
                .header("if-none-match", "\"other\""),
        )
        .await;
    assert_eq!(stale.status, 200);

    // reqwest is built without gzip support here, so the bytes arrive as sent.
    let resp = app
        .client
        .get(app.url("/api/v1/agent/actions/catalog"))
        .header("accept-encoding", "gzip")
        .send()
        .await
        .expect("send");
    assert_eq!(
        resp.headers()
            .get("content-encoding")
            .and_then(|v| v.to_str().ok()),
        Some("gzip")
    );
    assert!(resp.headers().get("vary").is_some());
    let gz_etag = resp
        .headers()
        .get("etag")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
        .unwrap_or_default();
    let gz = resp.bytes().await.unwrap_or_default();
    assert_eq!(
        crate::helpers::gunzip(&gz),
        plain.text,
        "gzip and identity carry the same document"
    );
    assert!(
        gz.len() * 3 < plain.text.len(),
        "gzip is at least 3x smaller"
    );
    // A strong tag names one representation: the gzip has its own, and each revalidates only
    // the representation it names.
    assert!(
        !gz_etag.is_empty() && gz_etag != etag,
        "{gz_etag} vs {etag}"
    );
    for (tag, status) in [(&gz_etag, 304), (&etag, 200)] {
        let revalidated = app
            .send(
                app.client
                    .get(app.url("/api/v1/agent/actions/catalog"))
                    .header("accept-encoding", "gzip")
                    .header("if-none-match", tag),
            )
            .await;
        assert_eq!(
            revalidated.status, status,
            "gzip accepted, If-None-Match {tag}"
        );
    }
}

async fn actions_list_filters_by_the_agents_policy(backend: Backend) {
    let app = spawn_app(backend).await;
    let all = app.get("/api/v1/agent/actions").await;
    let data = all.assert_ok();
    let catalog = app.get("/api/v1/agent/actions/catalog").await;
    assert_eq!(
        data["actions"], catalog.body["actions"],
        "without a key: the full list"
    );
    assert_eq!(data["filteredByPolicy"], json!(false));

    let owner = app.onboard("lister@example.com").await;
    let mine = app
        .get(&format!(
            "/api/v1/agent/actions?agentApiKey={}",
            owner.agent_key
        ))
        .await;
    let names: Vec<String> = mine.assert_ok()["actions"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|x| x["action"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    // Default policy: every enabled read action; nothing else.
    assert_eq!(
        names,
        [
            "get-earn-opportunities",
            "get-earning-opportunities",
            "get-earn-provider",
            "get-fx-supported-assets",
            "get-prediction-orders"
        ]
    );

    // Allowing a disabled write does not list it; removing a read hides it.
    let path = format!("/api/v1/agents/{}/policy", owner.agent_id);
    app.put_as(
        &path,
        &owner.session,
        json!({"allowedActions": ["swap", "get_fx_supported_assets"], "dailyLimitUsd": 10}),
    )
    .await
    .assert_ok();
    let mine = app
        .get(&format!(
            "/api/v1/agent/actions?agentApiKey={}",
            owner.agent_key
        ))
        .await;
    let names: Vec<&str> = mine.body["data"]["actions"]
        .as_array()
        .map(|a| a.iter().filter_map(|x| x["action"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(names, ["get-fx-supported-assets"]);

    for bad in ["agent-0000", "nonsense", "", "owner-abc"] {
        app.get(&format!("/api/v1/agent/actions?agentApiKey={bad}"))
            .await
            .assert_error(401, "UNAUTHORIZED");
    }
    // The owner session is not an agent key.
    app.get(&format!(
        "/api/v1/agent/actions?agentApiKey={}",
        owner.session
    ))
    .await
    .assert_error(401, "UNAUTHORIZED");
}

on_both_backends!(
    catalog_matches_the_schema_of_spec,
    catalog_revalidates_with_etag_and_compresses,
    actions_list_filters_by_the_agents_policy,
);
