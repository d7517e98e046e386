//! `GET /api/v1/agent/actions/catalog` (served from bytes computed once at start, with ETag and
//! gzip) and `GET /api/v1/agent/actions`.

use actiongate_api_types::catalog::{ActionList, CatalogDocument};
use actiongate_api_types::{Envelope, ErrorBody};
use axum::Json;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use serde::Deserialize;
use utoipa::IntoParams;

use super::AppState;
use super::error::ApiError;
use super::extract::ApiQuery;

/// The catalog of every action and provider family.
#[utoipa::path(
    get,
    path = "/api/v1/agent/actions/catalog",
    tag = "catalog",
    responses(
        (status = 200, description = "The catalog document (gzip when accepted; ETag for revalidation)", body = CatalogDocument),
        (status = 304, description = "Not modified since the ETag in If-None-Match"),
    )
)]
pub async fn get_catalog(State(state): State<AppState>, headers: HeaderMap) -> Response {
    state.catalog_bytes.get(&headers)
}

/// Query of `GET /api/v1/agent/actions`.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ActionsQuery {
    /// With it, only the actions this agent's policy allows and that are enabled.
    pub agent_api_key: Option<String>,
}

/// The actions an agent may call (or every action, without a key).
#[utoipa::path(
    get,
    path = "/api/v1/agent/actions",
    tag = "catalog",
    params(ActionsQuery),
    responses(
        (status = 200, body = Envelope<ActionList>),
        (status = 401, description = "The key is invalid or revoked", body = ErrorBody),
    )
)]
pub async fn list_actions(
    State(state): State<AppState>,
    ApiQuery(q): ApiQuery<ActionsQuery>,
) -> Result<Json<Envelope<ActionList>>, ApiError> {
    let list = state
        .gateway
        .identity()
        .list_actions(q.agent_api_key.as_deref())
        .await?;
    Ok(Json(Envelope::new(list)))
}
