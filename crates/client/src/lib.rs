//! A typed client of the actiongate REST API. Every route has one method (`routes` lists them; the
//! methods are grouped by capability in `agent`, `owner`, `delegation` and `personhood`); a refusal
//! comes back as [`ClientError::Refused`] with the gateway's error envelope, untouched.

mod agent;
mod delegation;
mod owner;
mod personhood;
pub mod routes;

use actiongate_api_types::credits::{ChallengeBody, CreditPurchase};
use actiongate_api_types::{Envelope, ErrorBody};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::routes::{Method, Route};

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

/// Who a request is made as.
#[derive(Debug, Clone, Copy)]
pub enum As<'a> {
    /// An open route.
    Anyone,
    /// An agent route: the key goes in `x-agent-api-key`.
    Agent(&'a str),
    /// An owner route: the session goes in `Authorization: Bearer`.
    Owner(&'a str),
}

/// No input: a route that takes neither query nor body.
const NONE: Option<&()> = None;

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

    /// A request to `route` at `path` (the route's, with its segments filled) as `who`, carrying
    /// `input` as the query of a GET and as the JSON body otherwise.
    fn request<I: Serialize + ?Sized>(
        &self,
        route: Route,
        path: &str,
        who: As<'_>,
        input: Option<&I>,
    ) -> reqwest::RequestBuilder {
        let url = self.url(path);
        let mut req = match route.method {
            Method::Get => self.http.get(url),
            Method::Post => self.http.post(url),
            Method::Put => self.http.put(url),
            Method::Delete => self.http.delete(url),
        };
        if let Some(input) = input {
            req = match route.method {
                Method::Get => req.query(input),
                _ => req.json(input),
            };
        }
        match who {
            As::Anyone => req,
            As::Agent(key) => req.header(AGENT_KEY_HEADER, key),
            As::Owner(session) => req.bearer_auth(session),
        }
    }

    /// Calls `route` and answers its envelope's `data`.
    async fn call<I: Serialize + ?Sized, T: DeserializeOwned>(
        &self,
        route: Route,
        who: As<'_>,
        input: Option<&I>,
    ) -> Result<T> {
        self.data(self.request(route, route.path, who, input)).await
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
}
