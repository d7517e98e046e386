//! A local stand-in of the World ID verify API (`POST {base}/{rp_id}`), small and honest about what
//! it checks: a proof binds a nullifier to the rp_id, action, signal hash and nonce it was made for
//! (here a keccak commitment stands in for the zero-knowledge proof), and the stand-in recomputes it
//! from what the relying party sends. A proof made for another action, signal or nonce is rejected.

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
pub fn commitment(rp_id: &str, nullifier: &str, action: &str, signal_hash: &str, nonce: &str) -> String {
    let text = format!("{rp_id}|{nullifier}|{action}|{signal_hash}|{nonce}").to_ascii_lowercase();
    format!("0x{}", hex::encode(Keccak256::digest(text.as_bytes())))
}

/// What the stand-in proof client returns for a proof request: the person's nullifier and a proof
/// bound to the request's action, signal and nonce.
pub fn proof_for(request: &Value, nullifier: &str) -> Value {
    let action = request["action"].as_str().unwrap_or_default();
    let signal = request["signal"].as_str().unwrap_or_default();
    let nonce = request["rpContext"]["nonce"].as_str().unwrap_or_default();
    let rp_id = request["rpContext"]["rp_id"].as_str().unwrap_or_default();
    let signal_hash = format!("0x{}", hex::encode(actiongate_core::personhood::hash_to_field(signal.as_bytes())));
    json!({
        "nullifier": nullifier,
        "nonce": nonce,
        "merkle_root": "0x0000000000000000000000000000000000000000000000000000000000000001",
        "verification_level": "orb",
        "proof": commitment(rp_id, nullifier, action, &signal_hash, nonce),
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
        let app = Router::new().route("/{rp_id}", post(verify)).with_state(counters.clone());
        let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
            .await
            .unwrap_or_else(|e| panic!("stand-in verify API: {e}"));
        let addr = listener.local_addr().unwrap_or_else(|e| panic!("{e}"));
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self { url: format!("http://{addr}"), counters, task }
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

async fn verify(State(c): State<Arc<Counters>>, Path(rp_id): Path<String>, Json(body): Json<Value>) -> (StatusCode, Json<Value>) {
    c.calls.fetch_add(1, Ordering::SeqCst);
    let field = |k: &str| body.get(k).and_then(Value::as_str).unwrap_or_default().to_owned();
    let (action, signal_hash, nonce, nullifier, proof) =
        (field("action"), field("signal_hash"), field("nonce"), field("nullifier"), field("proof"));
    let is_field = |v: &str| v.len() == 66 && v.starts_with("0x") && v[2..].chars().all(|c| c.is_ascii_hexdigit());
    if action.is_empty() || !is_field(&signal_hash) || !is_field(&nonce) || nullifier.is_empty() {
        return (StatusCode::BAD_REQUEST, Json(json!({"success": false, "code": "invalid_request", "detail": "action, signal_hash, nonce and nullifier are required"})));
    }
    if proof != commitment(&rp_id, &nullifier, &action, &signal_hash, &nonce) {
        return (StatusCode::BAD_REQUEST, Json(json!({"success": false, "code": "invalid_proof", "detail": "the proof does not verify for this action, signal and nonce"})));
    }
    (StatusCode::OK, Json(json!({"success": true, "nullifier": nullifier, "action": action, "signal_hash": signal_hash, "nonce": nonce})))
}
