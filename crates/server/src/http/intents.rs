//! `POST /api/v1/agent/execute-intent`, `GET /api/v1/agent/execute-intent/status`,
//! `POST /api/v1/agent/execute`, `POST /api/v1/agent/build-tx` and `GET /api/v1/agent/credits/balance`.

use actiongate_api_types::chain::{BuildTxData, BuildTxRequest};
use actiongate_api_types::intents::{
    AgentIdentity, CreditBalance, DirectExecution, ExecuteIntentRequest, Intent, PreflightReport,
};
use actiongate_api_types::{Envelope, ErrorBody};
use actiongate_core::catalog::Lane;
use actiongate_core::states::ApprovalState;
use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use serde::Deserialize;
use utoipa::IntoParams;

use super::AppState;
use super::error::ApiError;
use super::extract::{ApiJson, ApiQuery};

const AGENT_KEY_HEADER: &str = "x-agent-api-key";

/// SPEC's default chain.
pub const DEFAULT_CHAIN: u64 = actiongate_core::chains::DEFAULT_CHAIN_ID;

pub(crate) fn header_key(headers: &HeaderMap) -> Option<&str> {
    headers.get(AGENT_KEY_HEADER).and_then(|v| v.to_str().ok())
}

/// Submits an intent: every policy check runs in order and a refusal creates nothing.
#[utoipa::path(
    post,
    path = "/api/v1/agent/execute-intent",
    tag = "intents",
    request_body = ExecuteIntentRequest,
    responses(
        (status = 200, description = "Accepted: status queued", body = Intent),
        (status = 400, description = "INVALID_PARAMS, UNKNOWN_CHAIN, INVALID_REQUEST", body = ErrorBody),
        (status = 401, description = "UNAUTHORIZED", body = ErrorBody),
        (status = 402, description = "INSUFFICIENT_CREDITS, DAILY_FREE_LIMIT_EXCEEDED", body = ErrorBody),
        (status = 403, description = "ACTION_NOT_ALLOWED, POLICY_AMOUNT_LIMIT, POLICY_DAILY_LIMIT, DELEGATION_REQUIRED", body = ErrorBody),
        (status = 404, description = "UNKNOWN_ACTION", body = ErrorBody),
        (status = 409, description = "IDEMPOTENCY_KEY_REUSED", body = ErrorBody),
        (status = 422, description = "ACTION_DISABLED, CHAIN_NOT_CONFIGURED", body = ErrorBody),
    )
)]
pub async fn execute_intent(
    State(state): State<AppState>,
    body: Result<ApiJson<ExecuteIntentRequest>, ApiError>,
) -> Result<Json<Intent>, ApiError> {
    let ApiJson(req) = body.map_err(ApiError::as_intent_rejection)?;
    let intent = state.gateway.intents().execute_intent(&req).await?;
    Ok(Json(intent))
}

/// Query of the status route.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct StatusQuery {
    /// From the submit response.
    pub intent_id: String,
    /// The agent key, when not sent in `x-agent-api-key`.
    pub agent_api_key: Option<String>,
    /// Up to 30: answer once the intent has ended (completed or failed) or after this many
    /// seconds, whichever comes first (a long poll). 0 or absent: answer at once.
    #[param(maximum = 30)]
    pub wait_seconds: Option<u64>,
}

/// The intent, for the agent that submitted it. Poll until status is completed or failed, or wait
/// for the end in one request with waitSeconds.
#[utoipa::path(
    get,
    path = "/api/v1/agent/execute-intent/status",
    tag = "intents",
    params(StatusQuery, ("x-agent-api-key" = Option<String>, Header, description = "The agent key")),
    responses(
        (status = 200, body = Intent),
        (status = 400, description = "INVALID_REQUEST: waitSeconds above 30", body = ErrorBody),
        (status = 401, description = "UNAUTHORIZED: no key", body = ErrorBody),
        (status = 404, description = "NOT_FOUND: no such intent for this agent", body = ErrorBody),
    )
)]
pub async fn intent_status(
    State(state): State<AppState>,
    headers: HeaderMap,
    ApiQuery(q): ApiQuery<StatusQuery>,
) -> Result<Json<Intent>, ApiError> {
    let key = header_key(&headers).or(q.agent_api_key.as_deref());
    Ok(Json(
        state
            .gateway
            .intents()
            .intent_status_waiting(key, &q.intent_id, q.wait_seconds.unwrap_or(0))
            .await?,
    ))
}

/// Runs the action from the agent's own execution wallet and answers once it has ended (bounded).
/// A write needs an explicit idempotencyKey; a retry with the same key sends nothing again.
#[utoipa::path(
    post,
    path = "/api/v1/agent/execute",
    tag = "intents",
    request_body = ExecuteIntentRequest,
    responses(
        (status = 200, body = Envelope<DirectExecution>),
        (status = 202, description = "Waiting for the owner's approval (the policy's approvalAboveUsd): nothing sent; data.approval and the intent id tell the rest", body = Envelope<DirectExecution>),
        (status = 400, description = "WALLET_IDEMPOTENCY_KEY_REQUIRED, INVALID_PARAMS", body = ErrorBody),
        (status = 401, description = "UNAUTHORIZED", body = ErrorBody),
        (status = 402, description = "INSUFFICIENT_CREDITS, DAILY_FREE_LIMIT_EXCEEDED", body = ErrorBody),
        (status = 403, description = "ACTION_NOT_ALLOWED, POLICY_AMOUNT_LIMIT, POLICY_DAILY_LIMIT", body = ErrorBody),
        (status = 422, description = "ACTION_DISABLED, CHAIN_NOT_CONFIGURED, EXECUTION_REVERTED", body = ErrorBody),
    )
)]
pub async fn execute_direct(
    State(state): State<AppState>,
    body: Result<ApiJson<ExecuteIntentRequest>, ApiError>,
) -> Result<(StatusCode, Json<Envelope<DirectExecution>>), ApiError> {
    let ApiJson(req) = body.map_err(ApiError::as_intent_rejection)?;
    let done = state.gateway.intents().execute_direct(&req).await?;
    // Waiting for its owner's approval: accepted, not run (202 with the intent id).
    let status = match done
        .approval
        .as_ref()
        .is_some_and(|a| a.state == ApprovalState::Pending.as_str())
    {
        true => StatusCode::ACCEPTED,
        false => StatusCode::OK,
    };
    Ok((status, Json(Envelope::new(done))))
}

/// Builds the unsigned transactions of an action for a wallet to sign locally (Model B): an ordered
/// list (an approval the action needs comes first), nonce and fees filled for `walletAddress`, each
/// simulated before it is answered. Nothing is written or charged.
#[utoipa::path(
    post,
    path = "/api/v1/agent/build-tx",
    tag = "intents",
    request_body = BuildTxRequest,
    responses(
        (status = 200, body = Envelope<BuildTxData>),
        (status = 400, description = "INVALID_PARAMS, INVALID_REQUEST (walletAddress missing), UNKNOWN_CHAIN", body = ErrorBody),
        (status = 401, description = "UNAUTHORIZED", body = ErrorBody),
        (status = 403, description = "ACTION_NOT_ALLOWED, POLICY_AMOUNT_LIMIT", body = ErrorBody),
        (status = 404, description = "UNKNOWN_ACTION", body = ErrorBody),
        (status = 422, description = "ACTION_DISABLED, CHAIN_NOT_CONFIGURED, EXECUTION_REVERTED (the decoded revert reason)", body = ErrorBody),
        (status = 503, description = "NOT_AVAILABLE: the chain's node did not answer", body = ErrorBody),
    )
)]
pub async fn build_tx(
    State(state): State<AppState>,
    body: Result<ApiJson<BuildTxRequest>, ApiError>,
) -> Result<Json<Envelope<BuildTxData>>, ApiError> {
    let ApiJson(req) = body.map_err(ApiError::as_intent_rejection)?;
    Ok(Json(Envelope::new(
        state.gateway.intents().build_tx(&req).await?,
    )))
}

/// The credit balance of the agent's account.
#[utoipa::path(
    get,
    path = "/api/v1/agent/credits/balance",
    tag = "credits",
    params(("x-agent-api-key" = String, Header, description = "The agent key")),
    responses(
        (status = 200, body = Envelope<CreditBalance>),
        (status = 401, description = "UNAUTHORIZED", body = ErrorBody),
    )
)]
pub async fn credit_balance(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Json<Envelope<CreditBalance>>, ApiError> {
    Ok(Json(Envelope::new(
        state
            .gateway
            .intents()
            .credit_balance(header_key(&headers))
            .await?,
    )))
}

/// Runs every check a submission would run, each with its verdict, and writes nothing.
#[utoipa::path(
    post,
    path = "/api/v1/agent/preflight",
    tag = "intents",
    request_body = ExecuteIntentRequest,
    responses((status = 200, body = Envelope<PreflightReport>), (status = 400, body = ErrorBody))
)]
pub async fn preflight(
    State(state): State<AppState>,
    ApiQuery(q): ApiQuery<LaneQuery>,
    ApiJson(req): ApiJson<ExecuteIntentRequest>,
) -> Result<Json<Envelope<PreflightReport>>, ApiError> {
    let lane = if q.direct.unwrap_or(false) {
        Lane::Execute
    } else {
        Lane::ExecuteIntent
    };
    Ok(Json(Envelope::new(
        state.gateway.intents().preflight(&req, lane).await?,
    )))
}

/// Query of the preflight route.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct LaneQuery {
    /// Check the direct-execution lane (`POST /api/v1/agent/execute`) instead of execute-intent.
    pub direct: Option<bool>,
}

/// The agent the key belongs to.
#[utoipa::path(
    get,
    path = "/api/v1/agent/me",
    tag = "intents",
    params(("x-agent-api-key" = String, Header, description = "The agent key")),
    responses((status = 200, body = Envelope<AgentIdentity>), (status = 401, body = ErrorBody))
)]
pub async fn whoami(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Json<Envelope<AgentIdentity>>, ApiError> {
    Ok(Json(Envelope::new(
        state.gateway.intents().whoami(header_key(&headers)).await?,
    )))
}
