//! A local stand-in of the World ID v4 verify API (`POST {base}/{rp_id}` with the IDKit result:
//! `protocol_version`, `nonce`, `action`, `responses[]` of `{identifier, signal_hash, issuer_schema_id,
//! nullifier, expires_at_min, proof: [5 hex]}`), small and honest about what it checks: a proof binds
//! a nullifier to the rp_id, action, signal hash and nonce it was made for (a keccak commitment in
//! `proof[0]` stands in for the Groth16 proof), and the stand-in recomputes it from the request.
//! It answers like the real API: `{success, action, nullifier, created_at, environment, results}` or
//! `{success: false, code, detail}`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{Value, json};
use sha3::{Digest, Keccak256};

/// The commitment a stand-in proof carries.
pub fn commitment(
    rp_id: &str,
    nullifier: &str,
    action: &str,
    signal_hash: &str,
    nonce: &str,
) -> String {
    let text = format!("{rp_id}|{nullifier}|{action}|{signal_hash}|{nonce}").to_ascii_lowercase();
    format!("0x{}", hex::encode(Keccak256::digest(text.as_bytes())))
}

/// What the stand-in proof client returns for a proof request (IDKit v4 result shape): the person's
/// nullifier and a proof bound to the request's action, signal and nonce.
pub fn proof_for(request: &Value, nullifier: &str) -> Value {
    let action = request["action"].as_str().unwrap_or_default();
    let signal = request["signal"].as_str().unwrap_or_default();
    let nonce = request["rpContext"]["nonce"].as_str().unwrap_or_default();
    let rp_id = request["rpContext"]["rp_id"].as_str().unwrap_or_default();
    let signal_hash = actiongate_core::personhood::signal_hash(signal);
    let zero = "0x0000000000000000000000000000000000000000000000000000000000000000";
    json!({
        "protocol_version": "4.0",
        "nonce": nonce,
        "action": action,
        "environment": "production",
        "responses": [{
            "identifier": "proof_of_human",
            "signal_hash": signal_hash,
            "issuer_schema_id": 1,
            "nullifier": nullifier,
            "expires_at_min": 0,
            "proof": [commitment(rp_id, nullifier, action, &signal_hash, nonce), zero, zero, zero, zero],
        }],
    })
}

#[derive(Default)]
struct Counters {
    calls: AtomicUsize,
}

/// The running stand-in.
pub struct VerifyApi {
    pub url: String,
    counters: Arc<Counters>,
    task: tokio::task::JoinHandle<()>,
}

impl VerifyApi {
    pub async fn start() -> Self {
        let counters = Arc::new(Counters::default());
        let app = Router::new()
            .route("/{rp_id}", post(verify))
            .with_state(counters.clone());
        let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
            .await
            .expect("stand-in verify API");
        let addr = listener.local_addr().expect("the stand-in's bound address");
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self {
            url: format!("http://{addr}"),
            counters,
            task,
        }
    }

    /// How many proofs were sent to it.
    pub fn calls(&self) -> usize {
        self.counters.calls.load(Ordering::SeqCst)
    }
}

impl Drop for VerifyApi {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn verify(
    State(c): State<Arc<Counters>>,
    Path(rp_id): Path<String>,
    Json(body): Json<Value>,
) -> (StatusCode, Json<Value>) {
    c.calls.fetch_add(1, Ordering::SeqCst);
    let text = |v: &Value, k: &str| {
        v.get(k)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let (action, nonce) = (text(&body, "action"), text(&body, "nonce"));
    let is_field = |v: &str| {
        v.len() == 66 && v.starts_with("0x") && v[2..].chars().all(|c| c.is_ascii_hexdigit())
    };
    let bad = |code: &str, detail: &str| {
        (
            StatusCode::BAD_REQUEST,
            Json(json!({"success": false, "code": code, "detail": detail})),
        )
    };
    let Some(responses) = body
        .get("responses")
        .and_then(Value::as_array)
        .filter(|r| !r.is_empty())
    else {
        return bad("validation_error", "responses is required");
    };
    if text(&body, "protocol_version") != "4.0" || action.is_empty() || !is_field(&nonce) {
        return bad(
            "validation_error",
            "protocol_version 4.0, action and nonce are required",
        );
    }
    let mut nullifier = String::new();
    for r in responses {
        let (signal_hash, n) = (text(r, "signal_hash"), text(r, "nullifier"));
        let proof = r
            .get("proof")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        if !is_field(&signal_hash) || n.is_empty() || proof.len() != 5 {
            return bad(
                "validation_error",
                "each response needs signal_hash, nullifier and a 5-element proof",
            );
        }
        if proof[0].as_str() != Some(commitment(&rp_id, &n, &action, &signal_hash, &nonce).as_str())
        {
            return bad(
                "all_verifications_failed",
                "the proof does not verify for this action, signal and nonce",
            );
        }
        nullifier = n;
    }
    (
        StatusCode::OK,
        Json(json!({
            "success": true,
            "action": action,
            "nullifier": nullifier,
            "created_at": "2026-11-22T12:00:00.000Z",
            "environment": "production",
            "results": [{"identifier": "proof_of_human", "success": true, "nullifier": nullifier}],
            "message": "Proof verified",
        })),
    )
}
