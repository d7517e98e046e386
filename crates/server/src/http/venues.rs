//! `GET /api/v1/agent/venues/readiness` and `GET /api/v1/agent/venues`: what blocks a venue for the
//! agent of `x-agent-api-key`, read live.

use actiongate_api_types::venues::{ReadinessQuery, VenueList, VenueListQuery, VenueReadiness};
use actiongate_api_types::{Envelope, ErrorBody};
use axum::Json;
use axum::extract::State;
use axum::http::HeaderMap;

use super::AppState;
use super::error::ApiError;
use super::extract::ApiQuery;
use super::intents::header_key;

/// Whether a venue is ready for this agent on a chain and a lane, and what blocks it: each reason
/// with what fixes it. Read live; a read action is never blocked by its venue.
#[utoipa::path(
    get,
    path = "/api/v1/agent/venues/readiness",
    tag = "venues",
    params(ReadinessQuery, ("x-agent-api-key" = String, Header, description = "The agent key")),
    responses(
        (status = 200, body = Envelope<VenueReadiness>),
        (status = 400, description = "INVALID_REQUEST (a lane or address), UNKNOWN_CHAIN", body = ErrorBody),
        (status = 401, description = "UNAUTHORIZED", body = ErrorBody),
        (status = 404, description = "NOT_FOUND: no such venue (a providerId of the catalog)", body = ErrorBody),
        (status = 503, description = "NOT_AVAILABLE: the chain's node did not answer", body = ErrorBody),
    )
)]
pub async fn readiness(
    State(state): State<AppState>,
    headers: HeaderMap,
    ApiQuery(q): ApiQuery<ReadinessQuery>,
) -> Result<Json<Envelope<VenueReadiness>>, ApiError> {
    let data = state
        .gateway
        .venues()
        .readiness(header_key(&headers), &q)
        .await?;
    Ok(Json(Envelope::new(data)))
}

/// Every venue of the catalog with its enabled actions through the lane, and whether it is ready
/// for this agent on the chain.
#[utoipa::path(
    get,
    path = "/api/v1/agent/venues",
    tag = "venues",
    params(VenueListQuery, ("x-agent-api-key" = String, Header, description = "The agent key")),
    responses(
        (status = 200, body = Envelope<VenueList>),
        (status = 400, description = "INVALID_REQUEST (a lane), UNKNOWN_CHAIN", body = ErrorBody),
        (status = 401, description = "UNAUTHORIZED", body = ErrorBody),
        (status = 503, description = "NOT_AVAILABLE: the chain's node did not answer", body = ErrorBody),
    )
)]
pub async fn list(
    State(state): State<AppState>,
    headers: HeaderMap,
    ApiQuery(q): ApiQuery<VenueListQuery>,
) -> Result<Json<Envelope<VenueList>>, ApiError> {
    let data = state
        .gateway
        .venues()
        .list(header_key(&headers), &q)
        .await?;
    Ok(Json(Envelope::new(data)))
}
