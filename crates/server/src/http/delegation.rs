//! Delegation routes (CONTRACT "Delegation"): ERC-7710 delegations on the MetaMask Delegation
//! Framework. Every route takes the agent key (`x-agent-api-key`, or `agentApiKey` in the body or
//! query; both given and different is `AGENT_IDENTITY_MISMATCH`).

use actiongate_api_types::delegation::{
    DelegationActivateRequest, DelegationActivated, DelegationBalance, DelegationCheck,
    DelegationCreateRequest, DelegationCreated, DelegationInspected, DelegationRedeemRequest,
    DelegationRedeemed, DelegationRevoke, DelegationRevokeRequest, DelegationVerified,
};
use actiongate_api_types::delegation::{DelegationCheckQuery, DelegationHashQuery};
use actiongate_api_types::{Envelope, ErrorBody, ErrorCode};
use actiongate_core::AgentContext;
use actiongate_core::error::Error;
use axum::Json;
use axum::extract::State;
use axum::http::HeaderMap;

use super::AppState;
use super::error::ApiError;
use super::extract::{ApiJson, ApiQuery};
use super::intents::header_key;

/// The key of a request: the header's, or the body's / query's when the header has none; both given
/// and different is `AGENT_IDENTITY_MISMATCH`.
fn key_of<'a>(
    headers: &'a HeaderMap,
    passed: Option<&'a str>,
) -> Result<Option<&'a str>, ApiError> {
    let header = header_key(headers);
    if let (Some(h), Some(p)) = (header, passed)
        && h != p
    {
        return Err(Error::new(
            ErrorCode::AgentIdentityMismatch,
            "The agent key in the body differs from the one in x-agent-api-key.",
        )
        .into());
    }
    Ok(header.or(passed))
}

/// The agent of a request (its key as [`key_of`] finds it).
async fn agent(
    state: &AppState,
    headers: &HeaderMap,
    passed: Option<&str>,
) -> Result<AgentContext, ApiError> {
    Ok(state
        .gateway
        .identity()
        .authenticate_agent(key_of(headers, passed)?)
        .await?)
}

/// Builds a delegation for the owner to sign.
#[utoipa::path(
    post,
    path = "/api/v1/agent/delegation/create",
    tag = "delegation",
    request_body = DelegationCreateRequest,
    responses(
        (status = 200, body = Envelope<DelegationCreated>),
        (status = 400, description = "INVALID_REQUEST, UNKNOWN_CHAIN", body = ErrorBody),
        (status = 401, description = "UNAUTHORIZED", body = ErrorBody),
        (status = 403, description = "AGENT_IDENTITY_MISMATCH", body = ErrorBody),
        (status = 404, description = "UNKNOWN_ACTION", body = ErrorBody),
        (status = 422, description = "CHAIN_NOT_CONFIGURED, DELEGATION_EXPIRED", body = ErrorBody),
    )
)]
pub async fn create(
    State(state): State<AppState>,
    headers: HeaderMap,
    ApiJson(req): ApiJson<DelegationCreateRequest>,
) -> Result<Json<Envelope<DelegationCreated>>, ApiError> {
    let agent = agent(&state, &headers, req.agent_api_key.as_deref()).await?;
    Ok(Json(Envelope::new(
        state
            .gateway
            .delegations()
            .delegation_create(&agent, &req)
            .await?,
    )))
}

/// Checks a signed delegation and stores it as active.
#[utoipa::path(
    post,
    path = "/api/v1/agent/delegation/activate",
    tag = "delegation",
    request_body = DelegationActivateRequest,
    responses(
        (status = 200, body = Envelope<DelegationActivated>),
        (status = 400, description = "INVALID_REQUEST, UNKNOWN_CHAIN", body = ErrorBody),
        (status = 401, description = "UNAUTHORIZED", body = ErrorBody),
        (status = 403, description = "AGENT_IDENTITY_MISMATCH", body = ErrorBody),
        (status = 422, description = "DELEGATION_SIGNATURE_INVALID, DELEGATION_WRONG_DELEGATE, DELEGATION_WRONG_CHAIN, DELEGATION_EXPIRED, DELEGATION_INVALID, DELEGATION_REVOKED, CHAIN_NOT_CONFIGURED", body = ErrorBody),
    )
)]
pub async fn activate(
    State(state): State<AppState>,
    headers: HeaderMap,
    ApiJson(req): ApiJson<DelegationActivateRequest>,
) -> Result<Json<Envelope<DelegationActivated>>, ApiError> {
    let agent = agent(&state, &headers, req.agent_api_key.as_deref()).await?;
    Ok(Json(Envelope::new(
        state
            .gateway
            .delegations()
            .delegation_activate(&agent, &req)
            .await?,
    )))
}

/// The agent's delegations from the database, at once (the fan-out gate).
#[utoipa::path(
    get,
    path = "/api/v1/agent/delegation/check",
    tag = "delegation",
    params(DelegationCheckQuery, ("x-agent-api-key" = String, Header, description = "The agent key")),
    responses((status = 200, body = Envelope<DelegationCheck>), (status = 401, description = "UNAUTHORIZED", body = ErrorBody), (status = 403, description = "AGENT_IDENTITY_MISMATCH", body = ErrorBody),)
)]
pub async fn check(
    State(state): State<AppState>,
    headers: HeaderMap,
    ApiQuery(q): ApiQuery<DelegationCheckQuery>,
) -> Result<Json<Envelope<DelegationCheck>>, ApiError> {
    let agent = agent(&state, &headers, q.agent_api_key.as_deref()).await?;
    Ok(Json(Envelope::new(
        state
            .gateway
            .delegations()
            .delegation_check(&agent, q.chain_id, q.delegator.as_deref())
            .await?,
    )))
}

/// Checks a delegation against the chain: the delegator's code, not disabled, signature, enforcers,
/// time window. One found disabled onchain is recorded `revoked`.
#[utoipa::path(
    get,
    path = "/api/v1/agent/delegation/verify",
    tag = "delegation",
    params(DelegationHashQuery, ("x-agent-api-key" = String, Header, description = "The agent key")),
    responses(
        (status = 200, body = Envelope<DelegationVerified>),
        (status = 401, description = "UNAUTHORIZED", body = ErrorBody),
        (status = 403, description = "AGENT_IDENTITY_MISMATCH", body = ErrorBody),
        (status = 404, description = "NOT_FOUND", body = ErrorBody),
        (status = 422, description = "CHAIN_NOT_CONFIGURED", body = ErrorBody),
        (status = 503, description = "NOT_AVAILABLE: the chain's node did not answer", body = ErrorBody),
    )
)]
pub async fn verify(
    State(state): State<AppState>,
    headers: HeaderMap,
    ApiQuery(q): ApiQuery<DelegationHashQuery>,
) -> Result<Json<Envelope<DelegationVerified>>, ApiError> {
    let agent = agent(&state, &headers, q.agent_api_key.as_deref()).await?;
    Ok(Json(Envelope::new(
        state
            .gateway
            .delegations()
            .delegation_verify(&agent, &q.delegation_hash)
            .await?,
    )))
}

/// A delegation's decoded caveats and what was used of them.
#[utoipa::path(
    get,
    path = "/api/v1/agent/delegation/inspect",
    tag = "delegation",
    params(DelegationHashQuery, ("x-agent-api-key" = String, Header, description = "The agent key")),
    responses(
        (status = 200, body = Envelope<DelegationInspected>),
        (status = 401, description = "UNAUTHORIZED", body = ErrorBody),
        (status = 403, description = "AGENT_IDENTITY_MISMATCH", body = ErrorBody),
        (status = 404, description = "NOT_FOUND", body = ErrorBody),
        (status = 422, description = "CHAIN_NOT_CONFIGURED", body = ErrorBody),
        (status = 503, description = "NOT_AVAILABLE: the chain's node did not answer", body = ErrorBody),
    )
)]
pub async fn inspect(
    State(state): State<AppState>,
    headers: HeaderMap,
    ApiQuery(q): ApiQuery<DelegationHashQuery>,
) -> Result<Json<Envelope<DelegationInspected>>, ApiError> {
    let agent = agent(&state, &headers, q.agent_api_key.as_deref()).await?;
    Ok(Json(Envelope::new(
        state
            .gateway
            .delegations()
            .delegation_inspect(&agent, &q.delegation_hash)
            .await?,
    )))
}

/// What the delegator holds of the native coin and the tokens the caveats name.
#[utoipa::path(
    get,
    path = "/api/v1/agent/delegation/balance",
    tag = "delegation",
    params(DelegationHashQuery, ("x-agent-api-key" = String, Header, description = "The agent key")),
    responses(
        (status = 200, body = Envelope<DelegationBalance>),
        (status = 401, description = "UNAUTHORIZED", body = ErrorBody),
        (status = 403, description = "AGENT_IDENTITY_MISMATCH", body = ErrorBody),
        (status = 404, description = "NOT_FOUND", body = ErrorBody),
        (status = 422, description = "CHAIN_NOT_CONFIGURED", body = ErrorBody),
        (status = 503, description = "NOT_AVAILABLE: the chain's node did not answer", body = ErrorBody),
    )
)]
pub async fn balance(
    State(state): State<AppState>,
    headers: HeaderMap,
    ApiQuery(q): ApiQuery<DelegationHashQuery>,
) -> Result<Json<Envelope<DelegationBalance>>, ApiError> {
    let agent = agent(&state, &headers, q.agent_api_key.as_deref()).await?;
    Ok(Json(Envelope::new(
        state
            .gateway
            .delegations()
            .delegation_balance(&agent, &q.delegation_hash)
            .await?,
    )))
}

/// The `disableDelegation` transaction for the owner to sign; `revoked` once the chain has it
/// disabled (by that transaction or any other).
#[utoipa::path(
    post,
    path = "/api/v1/agent/delegation/revoke",
    tag = "delegation",
    request_body = DelegationRevokeRequest,
    responses(
        (status = 200, body = Envelope<DelegationRevoke>),
        (status = 401, description = "UNAUTHORIZED", body = ErrorBody),
        (status = 403, description = "AGENT_IDENTITY_MISMATCH", body = ErrorBody),
        (status = 404, description = "NOT_FOUND", body = ErrorBody),
        (status = 422, description = "CHAIN_NOT_CONFIGURED", body = ErrorBody),
        (status = 503, description = "NOT_AVAILABLE: the chain's node did not answer", body = ErrorBody),
    )
)]
pub async fn revoke(
    State(state): State<AppState>,
    headers: HeaderMap,
    ApiJson(req): ApiJson<DelegationRevokeRequest>,
) -> Result<Json<Envelope<DelegationRevoke>>, ApiError> {
    let agent = agent(&state, &headers, req.agent_api_key.as_deref()).await?;
    Ok(Json(Envelope::new(
        state
            .gateway
            .delegations()
            .delegation_revoke(&agent, &req)
            .await?,
    )))
}

/// The agent redeems one execution within one delegation (policy, limits and credits as a
/// submission; an explicit idempotencyKey), answered when it ends or at the answer deadline.
#[utoipa::path(
    post,
    path = "/api/v1/agent/delegation/redeem",
    tag = "delegation",
    request_body = DelegationRedeemRequest,
    responses(
        (status = 200, body = Envelope<DelegationRedeemed>),
        (status = 400, description = "INVALID_REQUEST, INVALID_PARAMS", body = ErrorBody),
        (status = 401, description = "UNAUTHORIZED", body = ErrorBody),
        (status = 402, description = "INSUFFICIENT_CREDITS, DAILY_FREE_LIMIT_EXCEEDED", body = ErrorBody),
        (status = 403, description = "ACTION_NOT_ALLOWED, POLICY_AMOUNT_LIMIT, POLICY_DAILY_LIMIT, AGENT_IDENTITY_MISMATCH", body = ErrorBody),
        (status = 404, description = "NOT_FOUND, UNKNOWN_ACTION", body = ErrorBody),
        (status = 409, description = "IDEMPOTENCY_KEY_REUSED", body = ErrorBody),
        (status = 422, description = "DELEGATION_REVOKED, DELEGATION_EXPIRED, DELEGATION_INVALID, ACTION_DISABLED, CHAIN_NOT_CONFIGURED", body = ErrorBody),
    )
)]
pub async fn redeem(
    State(state): State<AppState>,
    headers: HeaderMap,
    ApiJson(req): ApiJson<DelegationRedeemRequest>,
) -> Result<Json<Envelope<DelegationRedeemed>>, ApiError> {
    let agent = agent(&state, &headers, req.agent_api_key.as_deref()).await?;
    let key = key_of(&headers, req.agent_api_key.as_deref())?
        .unwrap_or_default()
        .to_owned();
    Ok(Json(Envelope::new(
        state
            .gateway
            .delegations()
            .delegation_redeem(&agent, &key, &req)
            .await?,
    )))
}
