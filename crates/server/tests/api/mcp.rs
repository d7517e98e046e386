//! The MCP server, driven by the official MCP client SDKs (Python from the test venv, TypeScript from
//! tests/e2e/node_modules), and a parity check of REST and MCP.

use std::process::Command;

use serde_json::{Value, json};

use crate::helpers::{Backend, spawn_app};

fn run_python_client(app: &crate::helpers::TestApp, mode: &str, email: &str) -> Value {
    let out = Command::new(actiongate_testkit::python())
        .arg(actiongate_testkit::repo_root().join("tests/e2e/mcp_python.py"))
        .args([
            "--url",
            &app.url("/mcp"),
            "--email",
            email,
            "--mode",
            mode,
            "--maildir",
        ])
        .arg(app.smtp.maildir())
        .output()
        .unwrap_or_else(|e| panic!("cannot run the Python MCP client: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "python client ({mode}) failed:\n{stdout}\n{stderr}"
    );
    serde_json::from_str(stdout.lines().last().unwrap_or(""))
        .unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

#[tokio::test]
async fn official_python_sdk_in_default_and_legacy_modes() {
    let app = spawn_app(Backend::Sqlite).await;
    let app2 = std::sync::Arc::new(app);
    for (mode, email) in [
        ("auto", "py-auto@example.com"),
        ("legacy", "py-legacy@example.com"),
    ] {
        let app = app2.clone();
        let summary = tokio::task::spawn_blocking(move || run_python_client(&app, mode, email))
            .await
            .expect("spawn blocking");
        assert_eq!(summary["ok"], json!(true), "{summary}");
        assert_eq!(summary["intent"], "completed");
        assert_eq!(summary["mismatch"], "AGENT_IDENTITY_MISMATCH");
    }
}

#[tokio::test]
async fn official_typescript_sdk() {
    let app = spawn_app(Backend::Postgres).await;
    let script = actiongate_testkit::repo_root().join("tests/e2e/mcp_ts.mjs");
    assert!(
        actiongate_testkit::repo_root()
            .join("tests/e2e/node_modules/@modelcontextprotocol/sdk")
            .exists(),
        "the TypeScript SDK is not installed: run ./scripts/test (npm ci in tests/e2e)"
    );
    let out = tokio::process::Command::new("node")
        .arg(&script)
        .args([
            "--url",
            &app.url("/mcp"),
            "--email",
            "ts@example.com",
            "--maildir",
        ])
        .arg(app.smtp.maildir())
        .output()
        .await
        .unwrap_or_else(|e| panic!("cannot run node: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "TypeScript client failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary: Value = serde_json::from_str(stdout.lines().last().unwrap_or(""))
        .unwrap_or_else(|e| panic!("{e}: {stdout}"));
    assert_eq!(summary["ok"], json!(true), "{summary}");
    assert_eq!(summary["mismatch"], "AGENT_IDENTITY_MISMATCH");
}

/// The tools an agent sees are a public contract: a change shows in review.
#[test]
fn tools_list_is_snapshotted() {
    let tools =
        serde_json::to_value(actiongate_server::mcp::tools::tool_list()).unwrap_or(Value::Null);
    insta::assert_json_snapshot!("mcp_tools_list", tools);
}

async fn mirror(
    app: &crate::helpers::TestApp,
    name: &str,
    bearer: Option<&str>,
    args: Value,
) -> crate::helpers::Reply {
    let mut req = app
        .client
        .post(app.url(&format!("/mcp/tool/{name}")))
        .json(&args);
    if let Some(b) = bearer {
        req = req.bearer_auth(b);
    }
    app.send(req).await
}

/// The mirror's fixed answers (the tool list, the catalog tool) are served like the REST catalog:
/// gzip when the client accepts it (the same bytes once decoded), the listing revalidated by ETag.
#[tokio::test]
async fn the_mirrors_fixed_answers_are_gzipped_and_the_listing_revalidated() {
    use crate::helpers::gunzip;
    let app = spawn_app(Backend::Sqlite).await;
    // reqwest is built without gzip support here, so the bytes arrive as sent.
    let call = |gzip: bool| {
        let mut req = app
            .client
            .post(app.url("/mcp/tool/getActionsCatalog"))
            .json(&json!({}));
        if gzip {
            req = req.header("accept-encoding", "gzip, deflate, br");
        }
        // A POST is not revalidated: a precondition changes nothing.
        req.header("if-none-match", "*").send()
    };
    let plain = call(false).await.expect("send");
    assert_eq!(plain.status(), 200);
    assert!(plain.headers().get("content-encoding").is_none());
    let plain = plain.text().await.unwrap_or_default();
    let gz = call(true).await.expect("send");
    assert_eq!(gz.status(), 200);
    assert_eq!(
        gz.headers()
            .get("content-encoding")
            .and_then(|v| v.to_str().ok()),
        Some("gzip")
    );
    assert_eq!(
        gz.headers().get("vary").and_then(|v| v.to_str().ok()),
        Some("accept-encoding")
    );
    assert!(gz.headers().get("etag").is_none(), "no validator on a POST");
    let gz = gz.bytes().await.unwrap_or_default();
    assert_eq!(
        gunzip(&gz),
        plain,
        "gzip and identity carry the same result"
    );
    assert!(gz.len() * 3 < plain.len(), "gzip is at least 3x smaller");
    let result: Value = serde_json::from_str(&plain).unwrap_or(Value::Null);
    assert_eq!(
        result["structuredContent"],
        app.get("/api/v1/agent/actions/catalog").await.body
    );

    let listed = app.get("/mcp/tools").await;
    assert_eq!(listed.status, 200);
    crate::helpers::assert_revalidates(&app, "/mcp/tools", &listed).await;
    let gz = app
        .client
        .get(app.url("/mcp/tools"))
        .header("accept-encoding", "gzip")
        .send()
        .await
        .expect("send")
        .bytes()
        .await
        .unwrap_or_default();
    assert_eq!(gunzip(&gz), listed.text);
}

#[tokio::test]
async fn the_plain_http_mirror_answers_like_mcp() {
    let app = spawn_app(Backend::Sqlite).await;
    let listed = app.get("/mcp/tools").await;
    let tools = listed.assert_ok()["tools"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(tools.len(), 24);
    let open: Vec<&str> = tools
        .iter()
        .filter(|t| t["requiresAuth"] == json!(false))
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(
        open,
        [
            "getActionsCatalog",
            "getProviderActions",
            "startEmailOnboarding",
            "completeEmailOnboarding"
        ]
    );
    assert!(tools.iter().all(|t| t["inputSchema"]["type"] == "object"));

    let catalog = mirror(&app, "getActionsCatalog", None, json!({})).await;
    assert_eq!(catalog.status, 200);
    assert_eq!(catalog.body["isError"], json!(false));
    assert_eq!(
        catalog.body["structuredContent"],
        app.get("/api/v1/agent/actions/catalog").await.body
    );
    assert_eq!(catalog.body["content"][0]["type"], "text");
    // A provider's actions: the catalog's actions of that family, and only those.
    let everything = app.get("/api/v1/agent/actions/catalog").await.body;
    for provider in ["uniswap-v2", "erc20"] {
        let listed = mirror(
            &app,
            "getProviderActions",
            None,
            json!({"providerId": provider}),
        )
        .await;
        assert_eq!(listed.status, 200, "{}", listed.text);
        let expected: Vec<&Value> = everything["actions"]
            .as_array()
            .map(|a| a.iter().filter(|x| x["providerId"] == provider).collect())
            .unwrap_or_default();
        assert!(!expected.is_empty(), "{provider}");
        let got = listed.body["structuredContent"]["data"]["actions"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        assert_eq!(got.iter().collect::<Vec<_>>(), expected, "{provider}");
    }
    let all = mirror(&app, "getProviderActions", None, json!({})).await;
    assert_eq!(
        all.body["structuredContent"]["data"]["actions"],
        everything["actions"]
    );
    let unknown = mirror(
        &app,
        "getProviderActions",
        None,
        json!({"providerId": "no-such-family"}),
    )
    .await;
    assert_eq!(unknown.status, 404, "{}", unknown.text);
    assert_eq!(unknown.body["structuredContent"]["code"], "NOT_FOUND");

    mirror(&app, "getCreditsBalance", None, json!({}))
        .await
        .assert_error(401, "UNAUTHORIZED");
    mirror(&app, "getCreditsBalance", Some("agent-bogus"), json!({}))
        .await
        .assert_error(401, "UNAUTHORIZED");
    mirror(&app, "noSuchTool", None, json!({}))
        .await
        .assert_error(404, "NOT_FOUND");

    let owner = app.onboard("mirror@example.com").await;
    let balance = mirror(&app, "getCreditsBalance", Some(&owner.agent_key), json!({})).await;
    let rest = app
        .send(
            app.client
                .get(app.url("/api/v1/agent/credits/balance"))
                .header("x-agent-api-key", &owner.agent_key),
        )
        .await;
    assert_eq!(balance.body["structuredContent"], rest.body);
    let refused = mirror(
        &app,
        "executeIntent",
        Some(&owner.agent_key),
        json!({"action": "swap", "params": {}}),
    )
    .await;
    assert_eq!(refused.status, 403);
    assert_eq!(refused.body["isError"], json!(true));
    assert_eq!(
        refused.body["structuredContent"]["code"],
        "ACTION_NOT_ALLOWED"
    );
    assert_eq!(
        refused.body["structuredContent"]["error"],
        "INTENT_REJECTED"
    );
    let mismatch = mirror(
        &app,
        "getCreditsBalance",
        Some(&owner.agent_key),
        json!({"agentApiKey": "agent-other"}),
    )
    .await;
    assert_eq!(mismatch.status, 403);
    assert_eq!(
        mismatch.body["structuredContent"]["code"],
        "AGENT_IDENTITY_MISMATCH"
    );
    assert!(
        !mismatch.text.contains(&owner.agent_key),
        "no key is echoed"
    );
    let built = mirror(
        &app,
        "buildTx",
        Some(&owner.agent_key),
        json!({"action": "swap", "params": {}, "chainId": 84532}),
    )
    .await;
    assert_eq!(
        (
            built.status,
            built.body["structuredContent"]["code"].clone()
        ),
        (403, json!("ACTION_NOT_ALLOWED"))
    );
    let missing = mirror(&app, "getVenueReadiness", Some(&owner.agent_key), json!({})).await;
    assert_eq!(
        (
            missing.status,
            missing.body["structuredContent"]["code"].clone()
        ),
        (400, json!("INVALID_REQUEST"))
    );
    let read = mirror(
        &app,
        "getVenueReadiness",
        Some(&owner.agent_key),
        json!({"venue": "erc20", "chainId": 8453}),
    )
    .await;
    assert_eq!(
        (
            read.status,
            read.body["structuredContent"]["data"]["venue"].clone(),
            read.body["structuredContent"]["data"]["blockingReasons"][0]["code"].clone()
        ),
        (200, json!("erc20"), json!("VENUE_UNAVAILABLE")),
        "no chain has an RPC URL here: {}",
        read.body
    );
}

/// The first `data:` JSON of an SSE or JSON response.
pub(crate) fn rpc_body(text: &str) -> Value {
    serde_json::from_str(text).ok().unwrap_or_else(|| {
        text.lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
            .find(|v| v.get("jsonrpc").is_some())
            .unwrap_or(Value::Null)
    })
}

/// A handshake-era session opened on one gateway process is served by another (a load balancer
/// without stickiness): sessions live in the shared database.
#[tokio::test]
async fn a_session_moves_between_processes() {
    let a = spawn_app(Backend::Postgres).await;
    let b = crate::helpers::spawn_app_with(
        Backend::Postgres,
        crate::helpers::Options {
            database_url: Some(a.database_url.clone()),
            ..Default::default()
        },
    )
    .await;
    let post = |app: &crate::helpers::TestApp, body: Value, session: Option<&str>| {
        let mut req = app
            .client
            .post(app.url("/mcp"))
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .json(&body);
        if let Some(s) = session {
            req = req
                .header("mcp-session-id", s)
                .header("mcp-protocol-version", "2025-11-25");
        }
        req
    };
    let init = post(&a, json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "lb-test", "version": "1"}}}), None)
        .send()
        .await
        .expect("send");
    let session = init
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let Some(session) = session else {
        panic!("no Mcp-Session-Id from the handshake")
    };
    let body = rpc_body(&init.text().await.unwrap_or_default());
    assert_eq!(body["result"]["protocolVersion"], "2025-11-25");
    let notified = post(
        &a,
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        Some(&session),
    )
    .send()
    .await
    .expect("send");
    assert!(notified.status().is_success());

    // The next request lands on the other process.
    let listed = post(
        &b,
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
        Some(&session),
    )
    .send()
    .await
    .expect("send");
    assert_eq!(listed.status().as_u16(), 200);
    let body = rpc_body(&listed.text().await.unwrap_or_default());
    assert_eq!(
        body["result"]["tools"].as_array().map(Vec::len),
        Some(24),
        "{body}"
    );
}

/// The personhood tools are owner-only (CONTRACT): they take the owner's session as the bearer;
/// an agent key is refused.
#[tokio::test]
async fn personhood_through_mcp_tools() {
    let app = spawn_app(Backend::Sqlite).await;
    let owner = app.onboard("mcp-person@example.com").await;
    let key = owner.agent_key.clone();
    mirror(
        &app,
        "delegationPersonhoodBegin",
        Some(&key),
        json!({"agentKey": key}),
    )
    .await
    .assert_error(401, "UNAUTHORIZED");
    mirror(&app, "delegationPersonhoodBegin", None, json!({}))
        .await
        .assert_error(401, "UNAUTHORIZED");
    let begun = mirror(
        &app,
        "delegationPersonhoodBegin",
        Some(&owner.session),
        json!({"agentKey": key}),
    )
    .await;
    assert_eq!(begun.status, 200, "{}", begun.text);
    let request = begun.body["structuredContent"]["data"]["proofRequest"].clone();
    assert_eq!(
        request["action"],
        json!(format!("delegate-agent:{}", owner.agent_id))
    );
    let proof = actiongate_testkit::worldid::proof_for(
        &request,
        "0x00cc000000000000000000000000000000000000000000000000000000000003",
    );
    // The owner names the agent by its id: no agent key in the tool's arguments.
    let done = mirror(
        &app,
        "delegationPersonhoodComplete",
        Some(&owner.session),
        json!({"agentId": owner.agent_id, "proof": proof}),
    )
    .await;
    assert_eq!(
        done.body["structuredContent"]["data"]["personhood"]["status"], "locked",
        "{}",
        done.text
    );
    let deposit = mirror(
        &app,
        "delegationPersonhoodDepositBegin",
        Some(&owner.session),
        json!({"orgId": "acme"}),
    )
    .await;
    assert!(
        deposit.body["structuredContent"]["data"]["challengeId"].is_string(),
        "{}",
        deposit.text
    );
    let refused = mirror(&app, "delegationPersonhoodDepositComplete", Some(&owner.session),
        json!({"orgId": "acme", "proof": actiongate_testkit::worldid::proof_for(&deposit.body["structuredContent"]["data"]["proofRequest"], "0x01")})).await;
    assert_eq!(
        refused.body["structuredContent"]["code"], "PERSONHOOD_ORG_NOT_LOCKED",
        "{}",
        refused.text
    );
    // At the MCP endpoint itself, an agent key is refused at the HTTP level for these tools.
    let raw = app
        .client
        .post(app.url("/mcp"))
        .header("accept", "application/json, text/event-stream")
        .bearer_auth(&key)
        .json(&json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "delegationPersonhoodComplete", "arguments": {}}}))
        .send()
        .await
        .expect("send");
    assert_eq!(raw.status().as_u16(), 401);
}
