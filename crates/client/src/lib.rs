//! A typed client of the actiongate REST API. Every method is one route; a refusal comes back as
//! [`ClientError::Refused`] with the gateway's error envelope, untouched.

use actiongate_api_types::catalog::{ActionList, CatalogDocument};
use actiongate_api_types::chain::{BuildTxData, BuildTxRequest};
use actiongate_api_types::credits::{
    BuyCreditsRequest, ChallengeBody, CreditPurchase, X402Metadata,
};
use actiongate_api_types::identity::{
    EmailCompleteRequest, EmailCompleteResponse, EmailStartRequest, EmailStartResponse,
};
use actiongate_api_types::intents::{
    AgentIdentity, CreditBalance, DirectExecution, ExecuteIntentRequest, Intent, PreflightReport,
};
use actiongate_api_types::{Envelope, ErrorBody};
use serde::de::DeserializeOwned;

/// Header that carries the agent key on the routes that take it as a header.
pub const AGENT_KEY_HEADER: &str = "x-agent-api-key";

/// What can go wrong with a call.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The gateway answered with its error envelope.
    #[error("{}: {}", .body.code, .body.message)]
    Refused { status: u16, body: ErrorBody },
    /// The gateway could not be reached, or answered something that is not our envelope.
    #[error("{0}")]
    Transport(String),
}

impl ClientError {
    /// A refusal by the gateway (4xx with a code), as opposed to a failure to get an answer.
    pub fn is_refusal(&self) -> bool {
        matches!(self, ClientError::Refused { status, .. } if *status < 500)
    }
}

pub type Result<T> = std::result::Result<T, ClientError>;

/// The answer of a credit purchase.
#[derive(Debug, Clone)]
pub enum Purchase {
    Paid(CreditPurchase),
    /// Pay this (again after `retry_after` seconds when a payment was seen but is not confirmed).
    /// `requirements` is the decoded x402 v2 `PAYMENT-REQUIRED` header.
    PaymentRequired {
        challenge: ChallengeBody,
        retry_after: Option<u64>,
        requirements: Option<serde_json::Value>,
    },
}

/// The client.
#[derive(Clone)]
pub struct Client {
    http: reqwest::Client,
    base: String,
}

impl Client {
    pub fn new(base_url: &str) -> Result<Self> {
        let http = reqwest::Client::builder()
            .timeout(std::time::Duration::from_secs(60))
            .user_agent(concat!("actiongate-cli/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| ClientError::Transport(e.to_string()))?;
        Ok(Self {
            http,
            base: base_url.trim_end_matches('/').to_owned(),
        })
    }

    pub fn base_url(&self) -> &str {
        &self.base
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    async fn send<T: DeserializeOwned>(&self, req: reqwest::RequestBuilder) -> Result<T> {
        // Without the URL: a query string can carry the agent key.
        let resp = req.send().await.map_err(|e| {
            ClientError::Transport(format!("cannot reach the gateway: {}", e.without_url()))
        })?;
        let status = resp.status().as_u16();
        let bytes = resp
            .bytes()
            .await
            .map_err(|e| ClientError::Transport(e.without_url().to_string()))?;
        if (200..300).contains(&status) {
            return serde_json::from_slice(&bytes).map_err(|e| {
                ClientError::Transport(format!("unexpected answer from the gateway: {e}"))
            });
        }
        match serde_json::from_slice::<ErrorBody>(&bytes) {
            Ok(body) => Err(ClientError::Refused { status, body }),
            Err(_) => Err(ClientError::Transport(format!(
                "the gateway answered HTTP {status}"
            ))),
        }
    }

    async fn data<T: DeserializeOwned>(&self, req: reqwest::RequestBuilder) -> Result<T> {
        self.send::<Envelope<T>>(req).await.map(|e| e.data)
    }

    pub async fn catalog(&self) -> Result<CatalogDocument> {
        self.send(self.http.get(self.url("/api/v1/agent/actions/catalog")))
            .await
    }

    pub async fn actions(&self, agent_key: Option<&str>) -> Result<ActionList> {
        let mut req = self.http.get(self.url("/api/v1/agent/actions"));
        if let Some(k) = agent_key {
            req = req.query(&[("agentApiKey", k)]);
        }
        self.data(req).await
    }

    pub async fn execute_intent(&self, req: &ExecuteIntentRequest) -> Result<Intent> {
        self.send(
            self.http
                .post(self.url("/api/v1/agent/execute-intent"))
                .json(req),
        )
        .await
    }

    pub async fn execute_direct(&self, req: &ExecuteIntentRequest) -> Result<DirectExecution> {
        self.data(self.http.post(self.url("/api/v1/agent/execute")).json(req))
            .await
    }

    pub async fn x402_metadata(&self) -> Result<X402Metadata> {
        self.data(self.http.get(self.url("/api/v1/credits/x402-metadata")))
            .await
    }

    /// A credit purchase on the agent route: the challenge (HTTP 402) or the completed purchase.
    /// `paid` is (invoiceId, transaction hash) for the retry.
    pub async fn buy_credits(
        &self,
        agent_key: &str,
        req: &BuyCreditsRequest,
        paid: Option<(&str, &str)>,
    ) -> Result<Purchase> {
        let mut builder = self
            .http
            .post(self.url("/api/v1/agent/credits/buy-with-x402"))
            .header(AGENT_KEY_HEADER, agent_key)
            .json(req);
        if let Some((invoice, receipt)) = paid {
            builder = builder
                .header("X-Invoice-Id", invoice)
                .header("X-Payment-Receipt", receipt);
        }
        Self::purchase(builder).await
    }

    /// The same purchase paid the standard x402 v2 way: `payment_signature` is the base64 payload.
    pub async fn buy_credits_x402(
        &self,
        agent_key: &str,
        req: &BuyCreditsRequest,
        payment_signature: &str,
    ) -> Result<Purchase> {
        let builder = self
            .http
            .post(self.url("/api/v1/agent/credits/buy-with-x402"))
            .header(AGENT_KEY_HEADER, agent_key)
            .header("PAYMENT-SIGNATURE", payment_signature)
            .json(req);
        Self::purchase(builder).await
    }

    async fn purchase(builder: reqwest::RequestBuilder) -> Result<Purchase> {
        let resp = builder.send().await.map_err(|e| {
            ClientError::Transport(format!("cannot reach the gateway: {}", e.without_url()))
        })?;
        if resp.status().as_u16() != 402 {
            let status = resp.status().as_u16();
            let bytes = resp
                .bytes()
                .await
                .map_err(|e| ClientError::Transport(e.without_url().to_string()))?;
            if status == 200 {
                return serde_json::from_slice(&bytes)
                    .map(Purchase::Paid)
                    .map_err(|e| {
                        ClientError::Transport(format!("unexpected answer from the gateway: {e}"))
                    });
            }
            return match serde_json::from_slice::<ErrorBody>(&bytes) {
                Ok(body) => Err(ClientError::Refused { status, body }),
                Err(_) => Err(ClientError::Transport(format!(
                    "the gateway answered HTTP {status}"
                ))),
            };
        }
        let retry_after = resp
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse().ok());
        let requirements = resp
            .headers()
            .get("payment-required")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| {
                use base64::Engine as _;
                let bytes = base64::engine::general_purpose::STANDARD.decode(v).ok()?;
                serde_json::from_slice(&bytes).ok()
            });
        let challenge = resp.json().await.map_err(|e| {
            ClientError::Transport(format!("unexpected challenge: {}", e.without_url()))
        })?;
        Ok(Purchase::PaymentRequired {
            challenge,
            retry_after,
            requirements,
        })
    }

    pub async fn build_tx(&self, req: &BuildTxRequest) -> Result<BuildTxData> {
        self.data(self.http.post(self.url("/api/v1/agent/build-tx")).json(req))
            .await
    }

    pub async fn preflight(
        &self,
        req: &ExecuteIntentRequest,
        direct: bool,
    ) -> Result<PreflightReport> {
        let q = [("direct", if direct { "true" } else { "false" })];
        self.data(
            self.http
                .post(self.url("/api/v1/agent/preflight"))
                .query(&q)
                .json(req),
        )
        .await
    }

    pub async fn intent_status(&self, agent_key: &str, intent_id: &str) -> Result<Intent> {
        let req = self
            .http
            .get(self.url("/api/v1/agent/execute-intent/status"))
            .query(&[("intentId", intent_id)])
            .header(AGENT_KEY_HEADER, agent_key);
        self.send(req).await
    }

    pub async fn credits_balance(&self, agent_key: &str) -> Result<CreditBalance> {
        self.data(
            self.http
                .get(self.url("/api/v1/agent/credits/balance"))
                .header(AGENT_KEY_HEADER, agent_key),
        )
        .await
    }

    pub async fn whoami(&self, agent_key: &str) -> Result<AgentIdentity> {
        self.data(
            self.http
                .get(self.url("/api/v1/agent/me"))
                .header(AGENT_KEY_HEADER, agent_key),
        )
        .await
    }

    /// `POST` with `body`, or `GET` with `body`'s fields (null ones left out) as the query.
    fn routed(
        &self,
        method: &str,
        path: &str,
        body: &serde_json::Value,
    ) -> reqwest::RequestBuilder {
        let url = self.url(path);
        if method == "GET" {
            let query: Vec<(String, String)> = body
                .as_object()
                .map(|m| {
                    m.iter()
                        .filter(|(_, v)| !v.is_null())
                        .map(|(k, v)| {
                            (
                                k.clone(),
                                v.as_str().map_or_else(|| v.to_string(), str::to_owned),
                            )
                        })
                        .collect()
                })
                .unwrap_or_default();
            self.http.get(url).query(&query)
        } else {
            self.http.post(url).json(body)
        }
    }

    /// A personhood route with the owner session: `POST` with a body, or `GET` with a query.
    pub async fn owner_call(
        &self,
        session: &str,
        method: &str,
        path: &str,
        body: &serde_json::Value,
    ) -> Result<serde_json::Value> {
        self.data(self.routed(method, path, body).bearer_auth(session))
            .await
    }

    /// A delegation route with the agent key: `POST` with a body, or `GET` with a query.
    pub async fn agent_call(
        &self,
        agent_key: &str,
        method: &str,
        path: &str,
        body: &serde_json::Value,
    ) -> Result<serde_json::Value> {
        self.data(
            self.routed(method, path, body)
                .header(AGENT_KEY_HEADER, agent_key),
        )
        .await
    }

    /// Revokes an owner session.
    pub async fn sign_out(&self, session: &str) -> Result<()> {
        self.send::<serde_json::Value>(
            self.http
                .delete(self.url("/api/v1/session"))
                .bearer_auth(session),
        )
        .await
        .map(|_| ())
    }

    pub async fn email_start(&self, email: &str) -> Result<EmailStartResponse> {
        let body = EmailStartRequest {
            email: email.to_owned(),
        };
        self.data(
            self.http
                .post(self.url("/api/v1/onboarding/email/start"))
                .json(&body),
        )
        .await
    }

    pub async fn email_complete(
        &self,
        req: &EmailCompleteRequest,
    ) -> Result<EmailCompleteResponse> {
        self.data(
            self.http
                .post(self.url("/api/v1/onboarding/email/complete"))
                .json(req),
        )
        .await
    }
}
