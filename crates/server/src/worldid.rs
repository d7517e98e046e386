//! The production proof verifier: the World ID developer portal's v4 verify API,
//! `POST {verify-url}/{rp_id}` with the proof client's (IDKit) result forwarded unchanged. Before
//! sending, the result's own `nonce`, `action` and every response's `signal_hash` must be the ones we
//! issued; the API answers the nullifier and the action it verified.

use std::time::Duration;

use actiongate_core::personhood::{ProofCheck, ProofVerifier, VerifiedProof, VerifyError};
use async_trait::async_trait;
use serde_json::Value;

pub struct WorldIdVerifier {
    http: reqwest::Client,
    url: String,
}

impl WorldIdVerifier {
    pub fn new(url: &str) -> Result<Self, reqwest::Error> {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(20))
            .build()?;
        Ok(Self {
            http,
            url: url.trim_end_matches('/').to_owned(),
        })
    }
}

fn text<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

#[async_trait]
impl ProofVerifier for WorldIdVerifier {
    async fn verify(&self, check: &ProofCheck) -> Result<VerifiedProof, VerifyError> {
        let proof = &check.proof;
        let responses = proof
            .get("responses")
            .and_then(Value::as_array)
            .filter(|r| !r.is_empty())
            .ok_or_else(|| {
                VerifyError::Rejected(
                    "the proof must be the proof client's result, with responses".into(),
                )
            })?;
        let signal_hash = responses
            .iter()
            .map(|r| text(r, "signal_hash").unwrap_or("0x0"))
            .find(|h| !h.eq_ignore_ascii_case(&check.signal_hash))
            .map_or_else(|| check.signal_hash.clone(), str::to_owned);
        let url = format!("{}/{}", self.url, check.rp_id);
        let resp = self
            .http
            .post(&url)
            .json(proof)
            .send()
            .await
            .map_err(|e| VerifyError::Unavailable(e.to_string()))?;
        let status = resp.status();
        let answer: Value = resp.json().await.unwrap_or(Value::Null);
        if status.is_server_error() {
            return Err(VerifyError::Unavailable(format!(
                "verify API answered {status}"
            )));
        }
        if !status.is_success() || answer.get("success").and_then(Value::as_bool) != Some(true) {
            let why = text(&answer, "detail")
                .or_else(|| text(&answer, "code"))
                .map_or_else(|| format!("HTTP {status}"), str::to_owned);
            return Err(VerifyError::Rejected(why));
        }
        let nullifier = text(&answer, "nullifier")
            .or_else(|| {
                answer
                    .get("results")
                    .and_then(Value::as_array)
                    .and_then(|r| r.iter().find_map(|x| text(x, "nullifier")))
            })
            .ok_or_else(|| VerifyError::Rejected("the verify API answered no nullifier".into()))?;
        Ok(VerifiedProof {
            nullifier: nullifier.to_owned(),
            action: text(&answer, "action")
                .or_else(|| text(proof, "action"))
                .unwrap_or_default()
                .to_owned(),
            signal_hash,
            nonce: text(proof, "nonce").unwrap_or_default().to_owned(),
        })
    }
}
