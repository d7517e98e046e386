//! The REST surface: routes, extractors, error mapping, request ids and tracing.
//!
//! Invariant: handlers parse, call one `Gateway` method, and render; they decide nothing.

pub mod account;
pub mod approvals;
pub mod audit;
pub mod catalog;
pub mod credits;
pub mod delegation;
pub mod error;
pub mod extract;
pub mod fixed;
pub mod identity;
pub mod intents;
pub mod openapi;
pub mod personhood;
pub mod venues;
pub mod webhooks;

use std::sync::Arc;
use std::time::Duration;

use actiongate_api_types::{Envelope, ErrorBody, Health};
use actiongate_core::Gateway;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderName, Request};
use axum::{Json, Router};
use tower::ServiceBuilder;
use tower_http::request_id::{
    MakeRequestId, PropagateRequestIdLayer, RequestId, SetRequestIdLayer,
};
use tower_http::trace::{DefaultOnResponse, TraceLayer};
use tracing::Level;
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use utoipa_swagger_ui::SwaggerUi;

use self::error::ApiError;
use self::fixed::FixedBody;

/// What every handler can reach: one reference to the shared parts, so that the clone every request
/// makes (each `State` extractor and stateful middleware) is one reference count, not one per part.
#[derive(Clone)]
pub struct AppState(Arc<Shared>);

impl AppState {
    pub fn new(shared: Shared) -> Self {
        Self(Arc::new(shared))
    }
}

impl std::ops::Deref for AppState {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        &self.0
    }
}

/// The parts of [`AppState`].
pub struct Shared {
    pub gateway: Arc<Gateway>,
    pub catalog_bytes: FixedBody,
    /// Where the MCP server keeps its sessions.
    pub mcp_sessions: Arc<dyn actiongate_core::store::McpSessionStore>,
    /// The MCP tools' handler, shared by every session and the mirror.
    pub mcp: crate::mcp::GatewayMcp,
    /// The MCP sessions this process serves.
    pub mcp_live: Arc<crate::mcp::LiveSessions>,
}

const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// Request ids: UUID-shaped, a random base drawn once per router plus a counter, so unique within
/// the process and across processes without a read of the OS's random source per request (as
/// tower-http's `MakeRequestUuid` does).
#[derive(Clone)]
struct RequestIds(Arc<IdBase>);

struct IdBase {
    high: u64,
    low: u64,
    next: std::sync::atomic::AtomicU64,
}

impl RequestIds {
    fn new() -> Self {
        let (high, low) = uuid::Uuid::new_v4().as_u64_pair();
        Self(Arc::new(IdBase {
            high,
            low,
            next: std::sync::atomic::AtomicU64::new(0),
        }))
    }
}

impl MakeRequestId for RequestIds {
    fn make_request_id<B>(&mut self, _: &Request<B>) -> Option<RequestId> {
        let base = &*self.0;
        let n = base.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let id = uuid::Uuid::from_u64_pair(base.high, base.low.wrapping_add(n));
        let mut text = [0u8; uuid::fmt::Hyphenated::LENGTH];
        axum::http::HeaderValue::from_str(id.hyphenated().encode_lower(&mut text))
            .ok()
            .map(RequestId::new)
    }
}

/// The whole router, with its layers; `GET /metrics` on it unless `metrics_apart` (then
/// [`metrics_router`] serves it on its own listener).
pub fn router(state: AppState, mcp_allowed_hosts: Vec<String>, metrics_apart: bool) -> Router {
    let mcp_service = crate::mcp::service(
        state.mcp.clone(),
        state.mcp_sessions.clone(),
        state.mcp_live.clone(),
        mcp_allowed_hosts,
    );
    let mcp = Router::new().route_service("/mcp", mcp_service).layer(
        axum::middleware::from_fn_with_state(state.clone(), crate::mcp::require_agent_key),
    );
    let per_address = axum::middleware::from_fn_with_state(state.clone(), limit_by_address);
    let console = crate::console::routes().with_state(state.clone());
    let (api, doc) = routes().split_for_parts();
    let api = if metrics_apart {
        api
    } else {
        api.route("/metrics", axum::routing::get(crate::metrics::scrape))
    };
    let api = api
        .with_state(state)
        .merge(mcp)
        .merge(console)
        .merge(SwaggerUi::new("/docs").url("/api/v1/openapi.json", doc))
        .fallback(error::not_found)
        .method_not_allowed_fallback(error::method_not_allowed)
        .layer(axum::middleware::from_fn(crate::metrics::count_requests));

    // The span names the path only: a query string can carry an agent key.
    let trace = TraceLayer::new_for_http()
        .make_span_with(|req: &Request<_>| {
            let id = req.headers().get(&REQUEST_ID).and_then(|v| v.to_str().ok()).unwrap_or("-");
            tracing::info_span!("request", id = %id, method = %req.method(), path = %req.uri().path())
        })
        .on_response(DefaultOnResponse::new().level(Level::INFO).latency_unit(tower_http::LatencyUnit::Micros));

    api.layer(
        ServiceBuilder::new()
            .layer(SetRequestIdLayer::new(REQUEST_ID, RequestIds::new()))
            .layer(trace)
            .layer(PropagateRequestIdLayer::new(REQUEST_ID))
            .layer(per_address)
            .layer(tower_http::timeout::TimeoutLayer::with_status_code(
                axum::http::StatusCode::SERVICE_UNAVAILABLE,
                Duration::from_secs(60),
            ))
            .layer(DefaultBodyLimit::max(extract::BODY_LIMIT)),
    )
}

/// `GET /metrics` alone, for `metrics-listen`.
pub fn metrics_router(state: AppState) -> Router {
    Router::new()
        .route("/metrics", axum::routing::get(crate::metrics::scrape))
        .with_state(state)
}

/// The client address (CONTRACT "Rate limits and abuse"): the socket peer, or the first
/// `X-Forwarded-For` hop when `[limits] trust-forwarded-for` says a proxy sets it.
fn client_address(request: &axum::extract::Request, trust_forwarded_for: bool) -> String {
    let forwarded = trust_forwarded_for
        .then(|| request.headers().get("x-forwarded-for"))
        .flatten()
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(',').next())
        .map(str::trim)
        .filter(|v| !v.is_empty());
    match forwarded {
        Some(hop) => hop.to_owned(),
        None => request
            .extensions()
            .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
            .map_or_else(|| "unknown".to_owned(), |c| c.0.ip().to_string()),
    }
}

/// The limits kept per client address: onboarding `start`, the open credit purchase (new invoices,
/// and paid retries that read the chain), and a new MCP session (a POST to `/mcp` without a session
/// id or a bearer). The per-key and per-session limits are identity's.
async fn limit_by_address(
    State(state): State<AppState>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let limits = state.gateway.limits();
    let headers = request.headers();
    let check: Option<fn(&actiongate_core::limits::Limits, &str) -> actiongate_core::Result<()>> =
        match (request.method(), request.uri().path()) {
            (&axum::http::Method::POST, "/api/v1/onboarding/email/start" | "/console/sign-in") => {
                Some(actiongate_core::limits::Limits::onboarding)
            }
            (&axum::http::Method::POST, "/api/v1/credits/buy-with-x402") => {
                let paying = ["x-payment-receipt", "payment-signature"]
                    .iter()
                    .any(|h| headers.contains_key(*h));
                Some(if paying {
                    actiongate_core::limits::Limits::open_payment
                } else {
                    actiongate_core::limits::Limits::credit_challenge
                })
            }
            (&axum::http::Method::POST, "/mcp")
                if !headers.contains_key("mcp-session-id")
                    && !headers.contains_key(axum::http::header::AUTHORIZATION) =>
            {
                Some(actiongate_core::limits::Limits::mcp_initialize)
            }
            _ => None,
        };
    if let Some(check) = check {
        let client = client_address(&request, limits.settings().trust_forwarded_for);
        if let Err(e) = check(limits, &client) {
            return axum::response::IntoResponse::into_response(ApiError::from(e));
        }
    }
    next.run(request).await
}

/// Every REST route, each declared once: its `#[utoipa::path]` gives both the route (method and
/// path) and its OpenAPI operation. The document lists them in this order.
pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(openapi::ApiDoc::openapi())
        .routes(routes!(healthz))
        .routes(routes!(readyz))
        .routes(routes!(catalog::get_catalog))
        .routes(routes!(catalog::list_actions))
        .routes(routes!(identity::email_start))
        .routes(routes!(identity::email_complete))
        .routes(routes!(identity::sign_out))
        .routes(routes!(identity::list_agents, identity::create_agent))
        .routes(routes!(identity::rotate_key))
        .routes(routes!(identity::get_policy, identity::put_policy))
        .routes(routes!(account::intents))
        .routes(routes!(account::credits))
        .routes(routes!(account::delegations))
        .routes(routes!(account::revoke_delegation))
        .routes(routes!(approvals::list))
        .routes(routes!(approvals::approve))
        .routes(routes!(approvals::reject))
        .routes(routes!(audit::export))
        .routes(routes!(audit::verify))
        .routes(routes!(webhooks::list, webhooks::create))
        .routes(routes!(webhooks::delete))
        .routes(routes!(webhooks::rotate_secret))
        .routes(routes!(webhooks::deliveries))
        .routes(routes!(webhooks::events))
        .routes(routes!(intents::execute_intent))
        .routes(routes!(intents::intent_status))
        .routes(routes!(intents::execute_direct))
        .routes(routes!(intents::build_tx))
        .routes(routes!(intents::credit_balance))
        .routes(routes!(credits::metadata))
        .routes(routes!(credits::buy))
        .routes(routes!(credits::agent_buy))
        .routes(routes!(credits::link_begin))
        .routes(routes!(credits::link))
        .routes(routes!(intents::preflight))
        .routes(routes!(intents::whoami))
        .routes(routes!(venues::readiness))
        .routes(routes!(venues::list))
        .routes(routes!(delegation::create))
        .routes(routes!(delegation::activate))
        .routes(routes!(delegation::check))
        .routes(routes!(delegation::verify))
        .routes(routes!(delegation::inspect))
        .routes(routes!(delegation::balance))
        .routes(routes!(delegation::revoke))
        .routes(routes!(delegation::redeem))
        .routes(routes!(personhood::relying_party))
        .routes(routes!(personhood::org_begin))
        .routes(routes!(personhood::org_complete))
        .routes(routes!(personhood::org_check))
        .routes(routes!(personhood::agent_begin))
        .routes(routes!(personhood::agent_complete))
        .routes(routes!(personhood::deposit_begin))
        .routes(routes!(personhood::deposit_complete))
        .routes(routes!(personhood::deposit_consume))
        .routes(routes!(crate::mcp::mirror::list_tools))
        .routes(routes!(crate::mcp::mirror::call_tool))
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
