//! Webhooks and the owner's event stream (issue 27).

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Body of `POST /api/v1/webhooks`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WebhookRequest {
    /// Where events are posted: http(s), a public address (private, loopback and link-local
    /// addresses are refused unless the gateway allows them).
    pub url: String,
    /// intent.completed, intent.failed, approval.requested, delegation.revoked, credits.low,
    /// bridge.completed, bridge.failed.
    pub events: Vec<String>,
}

/// A registered endpoint (never its secret).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct WebhookView {
    pub id: String,
    pub url: String,
    pub events: Vec<String>,
    pub created_at: String,
}

/// `data` of creating an endpoint or rotating its secret: the secret is shown here only.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct WebhookCreated {
    pub webhook: WebhookView,
    /// `whsec_…`: the HMAC-SHA-256 key of `actiongate-signature` (`t=<unix>,v1=<hex of
    /// HMAC(secret, "<t>.<body>")>`). Shown once.
    pub secret: String,
}

/// `data` of `GET /api/v1/webhooks`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct WebhookList {
    pub webhooks: Vec<WebhookView>,
}

/// One event's delivery to one endpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Delivery {
    pub id: String,
    /// The event's id (`evt_…`), the same on every retry and on the event stream.
    pub event_id: String,
    pub event_type: String,
    /// pending (tried again at nextAttemptAt), delivered, or failed (given up after a day).
    pub state: String,
    pub attempts: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_status: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    pub created_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivered_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_attempt_at: Option<String>,
}

/// `data` of `GET /api/v1/webhooks/{id}/deliveries`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeliveryList {
    pub deliveries: Vec<Delivery>,
}
