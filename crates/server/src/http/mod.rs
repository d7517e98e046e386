//! The REST surface: routes, extractors, error mapping, request ids and tracing.
//!
//! Invariant: handlers parse, call one `Gateway` method, and render; they decide nothing.

pub mod catalog;
pub mod credits;
pub mod delegation;
pub mod error;
pub mod extract;
pub mod identity;
pub mod intents;
pub mod openapi;
pub mod personhood;

use std::sync::Arc;
use std::time::Duration;

use actiongate_api_types::{Envelope, ErrorBody, Health};
use actiongate_core::Gateway;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderName, Request};
use axum::routing::{get, post};
use axum::{Json, Router};
use tower::ServiceBuilder;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::trace::{DefaultOnResponse, TraceLayer};
use tracing::Level;
use utoipa::OpenApi;
use utoipa_swagger_ui::SwaggerUi;

use self::catalog::CatalogBytes;
use self::error::ApiError;

/// What every handler can reach.
#[derive(Clone)]
pub struct AppState {
    pub gateway: Arc<Gateway>,
    pub catalog_bytes: Arc<CatalogBytes>,
    pub personhood: Arc<actiongate_core::personhood::Personhood>,
    /// Where the MCP server keeps its sessions.
    pub mcp_sessions: Arc<dyn actiongate_core::store::McpSessionStore>,
}

const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// The whole router, with its layers.
pub fn router(state: AppState, mcp_allowed_hosts: Vec<String>) -> Router {
    let mcp_service = crate::mcp::service(
        state.gateway.clone(),
        state.personhood.clone(),
        state.mcp_sessions.clone(),
        mcp_allowed_hosts,
    );
    let mcp = Router::new().route_service("/mcp", mcp_service).layer(
        axum::middleware::from_fn_with_state(state.clone(), crate::mcp::require_agent_key),
    );
    let api = Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/api/v1/agent/actions/catalog", get(catalog::get_catalog))
        .route("/api/v1/agent/actions", get(catalog::list_actions))
        .route(
            "/api/v1/onboarding/email/start",
            post(identity::email_start),
        )
        .route(
            "/api/v1/onboarding/email/complete",
            post(identity::email_complete),
        )
        .route("/api/v1/session", axum::routing::delete(identity::sign_out))
        .route(
            "/api/v1/agent/execute-intent",
            post(intents::execute_intent),
        )
        .route(
            "/api/v1/agent/execute-intent/status",
            get(intents::intent_status),
        )
        .route("/api/v1/agent/execute", post(intents::execute_direct))
        .route("/api/v1/agent/build-tx", post(intents::build_tx))
        .route(
            "/api/v1/agent/credits/balance",
            get(intents::credit_balance),
        )
        .route(
            "/api/v1/agent/credits/buy-with-x402",
            post(credits::agent_buy),
        )
        .route("/api/v1/credits/x402-metadata", get(credits::metadata))
        .route("/api/v1/credits/buy-with-x402", post(credits::buy))
        .route("/api/v1/wallets/link/begin", post(credits::link_begin))
        .route("/api/v1/wallets/link", post(credits::link))
        .route("/api/v1/agent/preflight", post(intents::preflight))
        .route("/api/v1/agent/me", get(intents::whoami))
        .route("/api/v1/agent/delegation/create", post(delegation::create))
        .route(
            "/api/v1/agent/delegation/activate",
            post(delegation::activate),
        )
        .route("/api/v1/agent/delegation/check", get(delegation::check))
        .route("/api/v1/agent/delegation/verify", get(delegation::verify))
        .route("/api/v1/agent/delegation/inspect", get(delegation::inspect))
        .route("/api/v1/agent/delegation/balance", get(delegation::balance))
        .route("/api/v1/agent/delegation/revoke", post(delegation::revoke))
        .route("/api/v1/agent/delegation/redeem", post(delegation::redeem))
        .route(
            "/api/v1/agent/delegation/personhood/rp",
            get(personhood::relying_party),
        )
        .route(
            "/api/v1/agent/delegation/personhood/org/begin",
            post(personhood::org_begin),
        )
        .route(
            "/api/v1/agent/delegation/personhood/org/complete",
            post(personhood::org_complete),
        )
        .route(
            "/api/v1/agent/delegation/personhood/org/check",
            get(personhood::org_check),
        )
        .route(
            "/api/v1/agent/delegation/personhood/begin",
            post(personhood::agent_begin),
        )
        .route(
            "/api/v1/agent/delegation/personhood/complete",
            post(personhood::agent_complete),
        )
        .route(
            "/api/v1/agent/delegation/personhood/deposit/begin",
            post(personhood::deposit_begin),
        )
        .route(
            "/api/v1/agent/delegation/personhood/deposit/complete",
            post(personhood::deposit_complete),
        )
        .route(
            "/api/v1/agent/delegation/personhood/deposit/consume",
            post(personhood::deposit_consume),
        )
        .route("/mcp/tools", get(crate::mcp::mirror::list_tools))
        .route("/mcp/tool/{name}", post(crate::mcp::mirror::call_tool))
        .route(
            "/api/v1/agents",
            get(identity::list_agents).post(identity::create_agent),
        )
        .route(
            "/api/v1/agents/{agentId}/rotate-key",
            post(identity::rotate_key),
        )
        .route(
            "/api/v1/agents/{agentId}/policy",
            get(identity::get_policy).put(identity::put_policy),
        )
        .with_state(state)
        .merge(mcp)
        .merge(SwaggerUi::new("/docs").url("/api/v1/openapi.json", openapi::ApiDoc::openapi()))
        .fallback(error::not_found)
        .method_not_allowed_fallback(error::method_not_allowed);

    // The span names the path only: a query string can carry an agent key.
    let trace = TraceLayer::new_for_http()
        .make_span_with(|req: &Request<_>| {
            let id = req.headers().get(&REQUEST_ID).and_then(|v| v.to_str().ok()).unwrap_or("-");
            tracing::info_span!("request", id = %id, method = %req.method(), path = %req.uri().path())
        })
        .on_response(DefaultOnResponse::new().level(Level::INFO).latency_unit(tower_http::LatencyUnit::Micros));

    api.layer(
        ServiceBuilder::new()
            .layer(SetRequestIdLayer::new(REQUEST_ID, MakeRequestUuid))
            .layer(trace)
            .layer(PropagateRequestIdLayer::new(REQUEST_ID))
            .layer(tower_http::timeout::TimeoutLayer::with_status_code(
                axum::http::StatusCode::SERVICE_UNAVAILABLE,
                Duration::from_secs(60),
            ))
            .layer(DefaultBodyLimit::max(extract::BODY_LIMIT)),
    )
}

/// The process is up.
#[utoipa::path(get, path = "/healthz", tag = "operations", responses((status = 200, body = Envelope<Health>)))]
pub async fn healthz() -> Json<Envelope<Health>> {
    Json(Envelope::new(Health {
        status: "ok".into(),
    }))
}

/// The process is up and its database answers.
#[utoipa::path(
    get,
    path = "/readyz",
    tag = "operations",
    responses((status = 200, body = Envelope<Health>), (status = 503, body = ErrorBody))
)]
pub async fn readyz(State(state): State<AppState>) -> Result<Json<Envelope<Health>>, ApiError> {
    state.gateway.ready().await?;
    Ok(Json(Envelope::new(Health {
        status: "ok".into(),
    })))
}
