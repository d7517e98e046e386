//! Webhooks and the owner's event stream (issue 27). Owners register endpoints for event types;
//! an event is an entry of the audit trail (`intent.completed`, `intent.failed`,
//! `approval.requested`, `delegation.revoked`) or derived from one (`credits.low`: a ledger entry
//! that takes the balance below `[webhooks] credits-low-below`). Deliveries are rows written in the
//! transaction that chains the entry (an outbox: a crash loses none), posted by any process,
//! signed like Stripe's (`actiongate-signature: t=<unix>,v1=<hex HMAC-SHA-256(secret, "t.body")>`),
//! retried with exponential backoff for a day, each event at most once per endpoint (its id).
//! Where they may be posted is the transport's rule (no private, loopback or link-local address
//! unless allowed; no redirects).

use std::sync::Arc;

use actiongate_api_types::ErrorCode;
use actiongate_api_types::webhooks::{
    Delivery, DeliveryList, WebhookCreated, WebhookList, WebhookRequest, WebhookView,
};
use async_trait::async_trait;
use hmac::{Hmac, Mac};
use sha2::Sha256;
use zeroize::Zeroizing;

use crate::audit::EVENT_TYPES;
use crate::clock::{Clock, from_millis, rfc3339, to_millis};
use crate::crypto::{Keyring, new_token};
use crate::error::{Error, Result};
use crate::identity::OwnerContext;
use crate::store::{DeliveryEnd, DeliveryRecord, Store, WebhookRecord};

/// Most endpoints an account may register.
const MAX_WEBHOOKS: usize = 10;
/// How long a delivery is tried before it is given up.
pub const RETRY_FOR_MS: i64 = 24 * 3600 * 1000;
/// The first retry's delay; each next one doubles, up to [`MAX_DELAY_MS`].
const FIRST_DELAY_MS: i64 = 10_000;
const MAX_DELAY_MS: i64 = 3600 * 1000;
/// Deliveries one look posts.
const CLAIM: u32 = 32;
/// How long a claimed delivery is another process's to leave alone.
const CLAIM_MS: i64 = 60_000;
/// The secret's prefix.
const SECRET_PREFIX: &str = "whsec_";

/// Posts a signed delivery and says where it may go: the server's HTTP client.
#[async_trait]
pub trait WebhookTransport: Send + Sync + 'static {
    /// Refuses a URL the gateway must not call (a private, loopback or link-local address, unless
    /// allowed): the reason, for the owner.
    async fn check(&self, url: &str) -> std::result::Result<(), String>;

    /// Posts `body` with `headers`; the HTTP status, or why nothing was answered.
    async fn post(
        &self,
        url: &str,
        headers: &[(&str, String)],
        body: &str,
    ) -> std::result::Result<u16, String>;
}

/// `actiongate-signature` of `body` sent at `t` (Unix seconds) under `secret` (as shown to its
/// owner, whole).
pub fn signature(secret: &str, t: i64, body: &str) -> String {
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(secret.as_bytes())
        .unwrap_or_else(|_| unreachable!("HMAC accepts keys of any length"));
    mac.update(t.to_string().as_bytes());
    mac.update(b".");
    mac.update(body.as_bytes());
    format!("t={t},v1={}", hex::encode(mac.finalize().into_bytes()))
}

/// When a delivery tried `attempts` times (1 or more) is tried again; none once a day has passed
/// since its event.
pub fn next_attempt(created_at: i64, attempts: u32, now: i64) -> Option<i64> {
    let doublings = attempts.saturating_sub(1).min(20);
    let delay = FIRST_DELAY_MS
        .saturating_mul(1_i64 << doublings)
        .min(MAX_DELAY_MS);
    let at = now.saturating_add(delay);
    (at <= created_at.saturating_add(RETRY_FOR_MS)).then_some(at)
}

fn view(w: &WebhookRecord) -> WebhookView {
    WebhookView {
        id: w.id.clone(),
        url: w.url.clone(),
        events: w.events.clone(),
        created_at: rfc3339(from_millis(w.created_at)),
    }
}

fn delivery_view(d: &DeliveryRecord) -> Delivery {
    Delivery {
        id: d.id.clone(),
        event_id: d.event_id.clone(),
        event_type: d.kind.clone(),
        state: d.state.clone(),
        attempts: d.attempts,
        last_status: d.last_status,
        last_error: d.last_error.clone(),
        created_at: rfc3339(from_millis(d.created_at)),
        delivered_at: d.delivered_at.map(|t| rfc3339(from_millis(t))),
        next_attempt_at: (d.state == "pending").then(|| rfc3339(from_millis(d.next_at))),
    }
}

/// Webhook endpoints and their deliveries.
pub struct Webhooks {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    keys: Keyring,
    transport: Option<Arc<dyn WebhookTransport>>,
}

impl Webhooks {
    pub(crate) fn new(
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        keys: Keyring,
        transport: Option<Arc<dyn WebhookTransport>>,
    ) -> Self {
        Self {
            store,
            clock,
            keys,
            transport,
        }
    }

    fn transport(&self) -> Result<&Arc<dyn WebhookTransport>> {
        self.transport.as_ref().ok_or_else(|| {
            Error::new(
                ErrorCode::NotAvailable,
                "Webhooks are not available on this gateway.",
            )
        })
    }

    /// A new secret, sealed for the endpoint's row, and the text shown once.
    fn secret(&self, id: &str) -> Result<(Vec<u8>, Zeroizing<String>)> {
        let text = new_token(SECRET_PREFIX)?;
        let raw = hex::decode(&text[SECRET_PREFIX.len()..]).map_err(Error::internal)?;
        let bytes: [u8; 32] = raw.as_slice().try_into().map_err(Error::internal)?;
        let sealed = self.keys.seal_wallet_key(&bytes, id)?;
        Ok((sealed, text))
    }

    fn open(&self, sealed: &[u8], id: &str) -> Result<Zeroizing<String>> {
        let bytes = self.keys.open_wallet_key(sealed, id)?;
        Ok(Zeroizing::new(format!(
            "{SECRET_PREFIX}{}",
            hex::encode(bytes.as_slice())
        )))
    }

    pub async fn create(
        &self,
        owner: &OwnerContext,
        req: &WebhookRequest,
    ) -> Result<WebhookCreated> {
        let transport = self.transport()?;
        let url = req.url.trim();
        let parsed = url::Url::parse(url).map_err(|_| {
            Error::new(
                ErrorCode::InvalidRequest,
                format!("url {url:?} is not a URL."),
            )
        })?;
        if !matches!(parsed.scheme(), "https" | "http")
            || parsed.host_str().is_none()
            || !parsed.username().is_empty()
            || parsed.password().is_some()
            || url.len() > 2000
        {
            return Err(Error::new(
                ErrorCode::InvalidRequest,
                "url must be an http(s) URL with a host and no credentials, at most 2000 characters.",
            ));
        }
        let mut events: Vec<String> = Vec::new();
        for e in &req.events {
            if !EVENT_TYPES.contains(&e.as_str()) {
                return Err(Error::new(
                    ErrorCode::InvalidRequest,
                    format!("{e:?} is not an event type ({}).", EVENT_TYPES.join(", ")),
                ));
            }
            if !events.contains(e) {
                events.push(e.clone());
            }
        }
        if events.is_empty() {
            return Err(Error::new(
                ErrorCode::InvalidRequest,
                "events must name at least one event type.",
            ));
        }
        // Bad input first; then where the URL leads (a lookup).
        transport
            .check(url)
            .await
            .map_err(|reason| Error::new(ErrorCode::WebhookUrlRefused, reason))?;
        if self.store.list_webhooks(&owner.account_id).await?.len() >= MAX_WEBHOOKS {
            return Err(Error::new(
                ErrorCode::InvalidRequest,
                format!("An account has at most {MAX_WEBHOOKS} webhooks; delete one first."),
            ));
        }
        let id = format!("wh_{}", uuid::Uuid::now_v7().simple());
        let (sealed, secret) = self.secret(&id)?;
        let record = WebhookRecord {
            id: id.clone(),
            account_id: owner.account_id.clone(),
            url: url.to_owned(),
            events,
            secret_sealed: sealed,
            created_at: to_millis(self.clock.now()),
        };
        self.store.put_webhook(&record).await?;
        tracing::info!(
            account_id = owner.account_id,
            webhook_id = id,
            "webhook registered"
        );
        Ok(WebhookCreated {
            webhook: view(&record),
            secret: secret.to_string(),
        })
    }

    pub async fn list(&self, owner: &OwnerContext) -> Result<WebhookList> {
        let hooks = self.store.list_webhooks(&owner.account_id).await?;
        Ok(WebhookList {
            webhooks: hooks.iter().map(view).collect(),
        })
    }

    async fn owned(&self, owner: &OwnerContext, id: &str) -> Result<WebhookRecord> {
        self.store
            .list_webhooks(&owner.account_id)
            .await?
            .into_iter()
            .find(|w| w.id == id)
            .ok_or_else(|| Error::not_found(format!("No webhook {id} in this account.")))
    }

    /// Deletes an endpoint; its pending deliveries are not posted.
    pub async fn delete(&self, owner: &OwnerContext, id: &str) -> Result<WebhookView> {
        let hook = self.owned(owner, id).await?;
        self.store.delete_webhook(&owner.account_id, id).await?;
        tracing::info!(
            account_id = owner.account_id,
            webhook_id = id,
            "webhook deleted"
        );
        Ok(view(&hook))
    }

    /// A new secret; the old one signs nothing from now on.
    pub async fn rotate_secret(&self, owner: &OwnerContext, id: &str) -> Result<WebhookCreated> {
        let mut hook = self.owned(owner, id).await?;
        let (sealed, secret) = self.secret(id)?;
        self.store
            .set_webhook_secret(&owner.account_id, id, &sealed)
            .await?;
        hook.secret_sealed = sealed;
        tracing::info!(
            account_id = owner.account_id,
            webhook_id = id,
            "webhook secret rotated"
        );
        Ok(WebhookCreated {
            webhook: view(&hook),
            secret: secret.to_string(),
        })
    }

    /// The endpoint's latest deliveries, newest first.
    pub async fn deliveries(&self, owner: &OwnerContext, id: &str) -> Result<DeliveryList> {
        self.owned(owner, id).await?;
        let list = self.store.list_deliveries(id, 100).await?;
        Ok(DeliveryList {
            deliveries: list.iter().map(delivery_view).collect(),
        })
    }

    /// Posts the deliveries that are due (claimed so that one process posts each); how many it
    /// tried.
    pub async fn deliver_due(&self) -> Result<usize> {
        let Some(transport) = self.transport.clone() else {
            return Ok(0);
        };
        let now = to_millis(self.clock.now());
        let due = self
            .store
            .claim_deliveries(now, now + CLAIM_MS, CLAIM)
            .await?;
        let n = due.len();
        let posts = due.into_iter().map(|(d, url, sealed)| {
            let transport = transport.clone();
            async move {
                let secret = match self.open(&sealed, &d.webhook_id) {
                    Ok(s) => s,
                    Err(e) => return (d, Err(format!("the secret cannot be opened: {}", e.code))),
                };
                let t = to_millis(self.clock.now()).div_euclid(1000);
                let headers = [
                    ("content-type", "application/json".to_owned()),
                    ("actiongate-signature", signature(&secret, t, &d.payload)),
                    ("actiongate-event-id", d.event_id.clone()),
                    ("actiongate-event-type", d.kind.clone()),
                ];
                let posted = transport.post(&url, &headers, &d.payload).await;
                (d, posted)
            }
        });
        let results = futures_util::future::join_all(posts).await;
        for (d, posted) in results {
            let now = to_millis(self.clock.now());
            let attempts = d.attempts.saturating_add(1);
            let end = match posted {
                Ok(status) if (200..300).contains(&status) => DeliveryEnd::Delivered { status },
                other => {
                    let (status, error) = match other {
                        Ok(status) => (Some(status), format!("answered HTTP {status}")),
                        Err(e) => (None, e),
                    };
                    match next_attempt(d.created_at, attempts, now) {
                        Some(at) => DeliveryEnd::Retry { status, error, at },
                        None => DeliveryEnd::GivenUp { status, error },
                    }
                }
            };
            self.store.end_delivery(&d.id, attempts, &end, now).await?;
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_are_stripes_scheme() {
        // HMAC-SHA-256("whsec_test", "1700000000.{}"), computed independently.
        let s = signature("whsec_test", 1_700_000_000, "{}");
        assert!(s.starts_with("t=1700000000,v1="), "{s}");
        assert_eq!(s.len(), "t=1700000000,v1=".len() + 64);
        assert_ne!(s, signature("whsec_other", 1_700_000_000, "{}"));
        assert_ne!(s, signature("whsec_test", 1_700_000_001, "{}"));
    }

    #[test]
    fn retries_back_off_for_a_day_then_stop() {
        assert_eq!(next_attempt(0, 1, 0), Some(10_000));
        assert_eq!(next_attempt(0, 2, 0), Some(20_000));
        assert_eq!(next_attempt(0, 10, 0), Some(3_600_000));
        assert_eq!(next_attempt(0, 30, RETRY_FOR_MS - 1), None);
    }
}
