//! Webhook endpoints (register, list, delete, rotate the secret, deliveries) and the owner's event
//! stream over SSE (issue 27). Owner routes: `Authorization: Bearer owner-…`.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use actiongate_api_types::webhooks::{
    DeliveryList, WebhookCreated, WebhookList, WebhookRequest, WebhookView,
};
use actiongate_api_types::{Envelope, ErrorBody};
use actiongate_core::Gateway;
use axum::Json;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::Stream;

use super::AppState;
use super::error::ApiError;
use super::extract::{ApiJson, bearer};
use super::identity::Owner;

type Answer<T> = Result<Json<Envelope<T>>, ApiError>;

/// Registers an endpoint for event types; its signing secret is in this answer only.
#[utoipa::path(
    post,
    path = "/api/v1/webhooks",
    tag = "webhooks",
    security(("ownerSession" = [])),
    request_body = WebhookRequest,
    responses(
        (status = 200, body = Envelope<WebhookCreated>),
        (status = 400, description = "INVALID_REQUEST (not an http(s) URL, an unknown event type, too many endpoints), WEBHOOK_URL_REFUSED (a private, loopback or link-local address)", body = ErrorBody),
        (status = 401, description = "UNAUTHORIZED: no owner session", body = ErrorBody),
    )
)]
pub async fn create(
    State(state): State<AppState>,
    Owner(owner): Owner,
    ApiJson(req): ApiJson<WebhookRequest>,
) -> Answer<WebhookCreated> {
    Ok(Json(Envelope::new(
        state.gateway.webhooks().create(&owner, &req).await?,
    )))
}

/// The account's endpoints (never their secrets).
#[utoipa::path(
    get,
    path = "/api/v1/webhooks",
    tag = "webhooks",
    security(("ownerSession" = [])),
    responses(
        (status = 200, body = Envelope<WebhookList>),
        (status = 401, description = "UNAUTHORIZED: no owner session", body = ErrorBody),
    )
)]
pub async fn list(State(state): State<AppState>, Owner(owner): Owner) -> Answer<WebhookList> {
    Ok(Json(Envelope::new(
        state.gateway.webhooks().list(&owner).await?,
    )))
}

/// Deletes an endpoint; its pending deliveries are dropped.
#[utoipa::path(
    delete,
    path = "/api/v1/webhooks/{id}",
    tag = "webhooks",
    security(("ownerSession" = [])),
    params(("id" = String, Path, description = "The endpoint")),
    responses(
        (status = 200, body = Envelope<WebhookView>),
        (status = 401, description = "UNAUTHORIZED: no owner session", body = ErrorBody),
        (status = 404, description = "NOT_FOUND", body = ErrorBody),
    )
)]
pub async fn delete(
    State(state): State<AppState>,
    Owner(owner): Owner,
    Path(id): Path<String>,
) -> Answer<WebhookView> {
    Ok(Json(Envelope::new(
        state.gateway.webhooks().delete(&owner, &id).await?,
    )))
}

/// A new signing secret (shown here only); the old one signs nothing from now on.
#[utoipa::path(
    post,
    path = "/api/v1/webhooks/{id}/rotate-secret",
    tag = "webhooks",
    security(("ownerSession" = [])),
    params(("id" = String, Path, description = "The endpoint")),
    responses(
        (status = 200, body = Envelope<WebhookCreated>),
        (status = 401, description = "UNAUTHORIZED: no owner session", body = ErrorBody),
        (status = 404, description = "NOT_FOUND", body = ErrorBody),
    )
)]
pub async fn rotate_secret(
    State(state): State<AppState>,
    Owner(owner): Owner,
    Path(id): Path<String>,
) -> Answer<WebhookCreated> {
    Ok(Json(Envelope::new(
        state.gateway.webhooks().rotate_secret(&owner, &id).await?,
    )))
}

/// The endpoint's latest deliveries (at most 100), newest first.
#[utoipa::path(
    get,
    path = "/api/v1/webhooks/{id}/deliveries",
    tag = "webhooks",
    security(("ownerSession" = [])),
    params(("id" = String, Path, description = "The endpoint")),
    responses(
        (status = 200, body = Envelope<DeliveryList>),
        (status = 401, description = "UNAUTHORIZED: no owner session", body = ErrorBody),
        (status = 404, description = "NOT_FOUND", body = ErrorBody),
    )
)]
pub async fn deliveries(
    State(state): State<AppState>,
    Owner(owner): Owner,
    Path(id): Path<String>,
) -> Answer<DeliveryList> {
    Ok(Json(Envelope::new(
        state.gateway.webhooks().deliveries(&owner, &id).await?,
    )))
}

/// How often an open stream checks that its owner session still holds (signed out or expired:
/// the stream ends).
const SESSION_RECHECK: Duration = Duration::from_secs(5);

/// Where a stream is: the last audit entry it has looked at, and the session it was opened with.
struct Follow {
    gateway: Arc<Gateway>,
    account_id: String,
    session: zeroize::Zeroizing<String>,
    checked: tokio::time::Instant,
    after: i64,
    queue: std::collections::VecDeque<Event>,
}

/// The account's events as they happen, over server-sent events: `id` the event id, `event` its
/// type, `data` the payload a webhook receives. From now on, or after `Last-Event-ID` (the
/// `auditSeq` of the last event received) to resume without a gap. The stream ends within a few
/// seconds of its session's end (signed out or expired).
#[utoipa::path(
    get,
    path = "/api/v1/events",
    tag = "webhooks",
    security(("ownerSession" = [])),
    params(("Last-Event-ID" = Option<String>, Header, description = "Resume after this audit seq")),
    responses(
        (status = 200, description = "text/event-stream of events", content_type = "text/event-stream"),
        (status = 401, description = "UNAUTHORIZED: no owner session", body = ErrorBody),
    )
)]
pub async fn events(
    State(state): State<AppState>,
    Owner(owner): Owner,
    headers: HeaderMap,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let resume = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<i64>().ok());
    let after = match resume {
        Some(seq) => seq,
        None => state.gateway.audit().head_seq(&owner.account_id).await?,
    };
    let follow = Follow {
        gateway: state.gateway.clone(),
        account_id: owner.account_id,
        session: zeroize::Zeroizing::new(bearer(&headers).unwrap_or_default().to_owned()),
        checked: tokio::time::Instant::now(),
        after,
        queue: std::collections::VecDeque::new(),
    };
    let stream = futures_util::stream::unfold(follow, |mut f| async move {
        loop {
            if f.checked.elapsed() >= SESSION_RECHECK {
                // Not metered (the stream's own checks do not spend the owner's request rate); only
                // a session that ended ends the stream, not a passing store error.
                let owner = f.gateway.identity().recognize_owner(Some(&f.session)).await;
                if owner.is_err_and(|e| e.code == actiongate_api_types::ErrorCode::Unauthorized) {
                    return None;
                }
                f.checked = tokio::time::Instant::now();
            }
            if let Some(event) = f.queue.pop_front() {
                return Some((Ok(event), f));
            }
            match f
                .gateway
                .audit()
                .page(&f.account_id, f.after, (None, None))
                .await
            {
                Ok(page) if !page.is_empty() => {
                    for entry in &page {
                        f.after = entry.entry.seq;
                        for (kind, payload) in f.gateway.audit().events_of(entry) {
                            f.queue.push_back(
                                Event::default()
                                    .id(entry.entry.seq.to_string())
                                    .event(kind)
                                    .data(payload),
                            );
                        }
                    }
                }
                Ok(_) => tokio::time::sleep(Duration::from_millis(250)).await,
                Err(e) => {
                    tracing::warn!(code = %e.code, "event stream: the audit trail was not read");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
        }
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()))
}
