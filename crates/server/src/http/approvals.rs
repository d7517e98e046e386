//! The owner's approval queue (issue 27): intents priced above their policy's `approvalAboveUsd`
//! wait here until the owner approves or rejects them, or their time runs out. Owner routes: they
//! take `Authorization: Bearer owner-…`; an agent key is not an owner session.

use actiongate_api_types::intents::{ApprovalItem, ApprovalList, RejectRequest};
use actiongate_api_types::{Envelope, ErrorBody};
use axum::Json;
use axum::extract::{Path, State};
use serde::Deserialize;
use utoipa::IntoParams;

use super::AppState;
use super::error::ApiError;
use super::extract::{ApiQuery, OptionalJson};
use super::identity::Owner;

type Answer<T> = Result<Json<Envelope<T>>, ApiError>;

/// Query of `GET /api/v1/approvals`.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ApprovalsQuery {
    /// pending (default), approved, rejected or expired.
    pub state: Option<String>,
}

/// The account's approvals in one state (default pending), newest first (at most 200).
#[utoipa::path(
    get,
    path = "/api/v1/approvals",
    tag = "approvals",
    security(("ownerSession" = [])),
    params(ApprovalsQuery),
    responses(
        (status = 200, body = Envelope<ApprovalList>),
        (status = 400, description = "INVALID_REQUEST: not an approval state", body = ErrorBody),
        (status = 401, description = "UNAUTHORIZED: no owner session", body = ErrorBody),
    )
)]
pub async fn list(
    State(state): State<AppState>,
    Owner(owner): Owner,
    ApiQuery(q): ApiQuery<ApprovalsQuery>,
) -> Answer<ApprovalList> {
    Ok(Json(Envelope::new(
        state
            .gateway
            .approvals()
            .list(&owner, q.state.as_deref())
            .await?,
    )))
}

/// Approves a pending intent of the account: the runner runs it at once. Approving it again
/// answers the same approval.
#[utoipa::path(
    post,
    path = "/api/v1/approvals/{intentId}/approve",
    tag = "approvals",
    security(("ownerSession" = [])),
    params(("intentId" = String, Path, description = "The intent waiting for approval")),
    responses(
        (status = 200, body = Envelope<ApprovalItem>),
        (status = 401, description = "UNAUTHORIZED: no owner session", body = ErrorBody),
        (status = 404, description = "NOT_FOUND: no approval of that intent in this account", body = ErrorBody),
        (status = 409, description = "APPROVAL_NOT_PENDING: rejected or expired", body = ErrorBody),
    )
)]
pub async fn approve(
    State(state): State<AppState>,
    Owner(owner): Owner,
    Path(intent_id): Path<String>,
) -> Answer<ApprovalItem> {
    Ok(Json(Envelope::new(
        state
            .gateway
            .approvals()
            .approve(&owner, &intent_id)
            .await?,
    )))
}

/// Rejects a pending intent of the account: it ends failed with APPROVAL_REJECTED (the reason in
/// its message), nothing sent, its credits and daily-limit share released.
#[utoipa::path(
    post,
    path = "/api/v1/approvals/{intentId}/reject",
    tag = "approvals",
    security(("ownerSession" = [])),
    params(("intentId" = String, Path, description = "The intent waiting for approval")),
    request_body(content = RejectRequest, description = "Optional"),
    responses(
        (status = 200, body = Envelope<ApprovalItem>),
        (status = 400, description = "INVALID_REQUEST: the reason is too long", body = ErrorBody),
        (status = 401, description = "UNAUTHORIZED: no owner session", body = ErrorBody),
        (status = 404, description = "NOT_FOUND: no approval of that intent in this account", body = ErrorBody),
        (status = 409, description = "APPROVAL_NOT_PENDING: approved or expired", body = ErrorBody),
    )
)]
pub async fn reject(
    State(state): State<AppState>,
    Owner(owner): Owner,
    Path(intent_id): Path<String>,
    OptionalJson(req): OptionalJson<RejectRequest>,
) -> Answer<ApprovalItem> {
    Ok(Json(Envelope::new(
        state
            .gateway
            .approvals()
            .reject(&owner, &intent_id, req.reason.as_deref())
            .await?,
    )))
}
