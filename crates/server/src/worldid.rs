//! The production proof verifier: the World ID developer portal's v4 verify API.

use std::time::Duration;

use actiongate_core::personhood::{ProofCheck, ProofVerifier, VerifiedProof, VerifyError};
use async_trait::async_trait;
use serde_json::{Value, json};

/// Posts the proof, with the action, signal hash and nonce we issued, to `{url}/{rp_id}`.
pub struct WorldIdVerifier {
    http: reqwest::Client,
    url: String,
}

impl WorldIdVerifier {
    pub fn new(url: &str) -> Result<Self, reqwest::Error> {
        let http = reqwest::Client::builder().timeout(Duration::from_secs(20)).build()?;
        Ok(Self { http, url: url.trim_end_matches('/').to_owned() })
    }
}

fn text(v: &Value, keys: &[&str]) -> Option<String> {
    keys.iter().find_map(|k| v.get(*k).and_then(Value::as_str).map(str::to_owned))
}

#[async_trait]
impl ProofVerifier for WorldIdVerifier {
    async fn verify(&self, check: &ProofCheck) -> Result<VerifiedProof, VerifyError> {
        let mut body = match &check.proof {
            Value::Object(m) => m.clone(),
            _ => return Err(VerifyError::Rejected("the proof must be the proof client's result object".into())),
        };
        body.insert("action".into(), json!(check.action));
        body.insert("signal_hash".into(), json!(check.signal_hash));
        body.insert("nonce".into(), json!(check.nonce));
        let url = format!("{}/{}", self.url, check.rp_id);
        let resp = self
            .http
            .post(&url)
            .json(&Value::Object(body))
            .send()
            .await
            .map_err(|e| VerifyError::Unavailable(e.to_string()))?;
        let status = resp.status();
        let answer: Value = resp.json().await.unwrap_or(Value::Null);
        if status.is_server_error() {
            return Err(VerifyError::Unavailable(format!("verify API answered {status}")));
        }
        let success = answer.get("success").and_then(Value::as_bool).unwrap_or(status.is_success());
        if !status.is_success() || !success {
            let why = text(&answer, &["detail", "code", "message"]).unwrap_or_else(|| format!("HTTP {status}"));
            return Err(VerifyError::Rejected(why));
        }
        let nullifier = text(&answer, &["nullifier", "nullifier_hash"])
            .ok_or_else(|| VerifyError::Rejected("the verify API answered no nullifier".into()))?;
        Ok(VerifiedProof {
            nullifier,
            action: text(&answer, &["action"]).unwrap_or_default(),
            signal_hash: text(&answer, &["signal_hash"]).unwrap_or_default(),
            nonce: text(&answer, &["nonce"]).unwrap_or_default(),
        })
    }
}
