//! Onboarding by e-mail, agents, key rotation and policies (CONTRACT "Identity and sessions",
//! "Policy"). Owner routes take `Authorization: Bearer owner-…`.

use actiongate_api_types::identity::{
    AgentKeyIssued, AgentListResponse, CreateAgentRequest, EmailCompleteRequest,
    EmailCompleteResponse, EmailStartRequest, EmailStartResponse, PolicyRequest, PolicyView,
};
use actiongate_api_types::{Envelope, ErrorBody, Health};
use actiongate_core::OwnerContext;
use axum::Json;
use axum::extract::{FromRequestParts, Path, State};
use axum::http::request::Parts;

use super::AppState;
use super::error::ApiError;
use super::extract::{ApiJson, OptionalJson, bearer};

type Answer<T> = Result<Json<Envelope<T>>, ApiError>;

/// An authenticated owner. Extracted from the headers before any body is read, so that a
/// request without a session is refused as 401 whatever its body.
pub struct Owner(pub OwnerContext);

impl FromRequestParts<AppState> for Owner {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        Ok(Owner(
            state
                .gateway
                .identity()
                .authenticate_owner(bearer(&parts.headers))
                .await?,
        ))
    }
}

/// Sends a 6-digit sign-in code to an e-mail address (valid 10 minutes, 5 tries).
#[utoipa::path(
    post,
    path = "/api/v1/onboarding/email/start",
    tag = "onboarding",
    request_body = EmailStartRequest,
    responses(
        (status = 200, body = Envelope<EmailStartResponse>),
        (status = 400, description = "INVALID_REQUEST: not an e-mail address", body = ErrorBody),
        (status = 503, description = "NOT_AVAILABLE: the mail could not be sent", body = ErrorBody),
    )
)]
pub async fn email_start(
    State(state): State<AppState>,
    ApiJson(req): ApiJson<EmailStartRequest>,
) -> Answer<EmailStartResponse> {
    Ok(Json(Envelope::new(
        state
            .gateway
            .identity()
            .start_email_onboarding(&req.email)
            .await?,
    )))
}

/// Checks the code. On the account's first completion answers the first agent's key (shown once);
/// later completions sign the owner in. Always answers an owner session.
#[utoipa::path(
    post,
    path = "/api/v1/onboarding/email/complete",
    tag = "onboarding",
    request_body = EmailCompleteRequest,
    responses(
        (status = 200, body = Envelope<EmailCompleteResponse>),
        (status = 400, description = "TERMS_NOT_ACCEPTED or INVALID_REQUEST", body = ErrorBody),
        (status = 401, description = "INVALID_CODE or CODE_EXPIRED", body = ErrorBody),
        (status = 429, description = "TOO_MANY_ATTEMPTS", body = ErrorBody),
    )
)]
pub async fn email_complete(
    State(state): State<AppState>,
    ApiJson(req): ApiJson<EmailCompleteRequest>,
) -> Answer<EmailCompleteResponse> {
    Ok(Json(Envelope::new(
        state
            .gateway
            .identity()
            .complete_email_onboarding(&req)
            .await?,
    )))
}

/// The owner's agents (never their keys).
#[utoipa::path(
    get,
    path = "/api/v1/agents",
    tag = "agents",
    security(("ownerSession" = [])),
    responses(
        (status = 200, body = Envelope<AgentListResponse>),
        (status = 401, description = "UNAUTHORIZED: no owner session", body = ErrorBody),
    )
)]
pub async fn list_agents(
    State(state): State<AppState>,
    Owner(owner): Owner,
) -> Answer<AgentListResponse> {
    Ok(Json(Envelope::new(
        state.gateway.identity().list_agents(&owner).await?,
    )))
}

/// Creates a further agent with its own key and execution wallet; the key is shown once.
#[utoipa::path(
    post,
    path = "/api/v1/agents",
    tag = "agents",
    security(("ownerSession" = [])),
    request_body(content = Option<CreateAgentRequest>, description = "Optional; may be empty"),
    responses(
        (status = 200, body = Envelope<AgentKeyIssued>),
        (status = 401, description = "UNAUTHORIZED: no owner session", body = ErrorBody),
    )
)]
pub async fn create_agent(
    State(state): State<AppState>,
    Owner(owner): Owner,
    OptionalJson(req): OptionalJson<CreateAgentRequest>,
) -> Answer<AgentKeyIssued> {
    Ok(Json(Envelope::new(
        state
            .gateway
            .identity()
            .create_agent(&owner, req.name)
            .await?,
    )))
}

/// Issues a new key for an agent; the old key stops working at once.
#[utoipa::path(
    post,
    path = "/api/v1/agents/{agentId}/rotate-key",
    tag = "agents",
    security(("ownerSession" = [])),
    params(("agentId" = String, Path, description = "The agent's id")),
    responses(
        (status = 200, body = Envelope<AgentKeyIssued>),
        (status = 401, description = "UNAUTHORIZED: no owner session", body = ErrorBody),
        (status = 404, description = "NOT_FOUND: no such agent in this account", body = ErrorBody),
    )
)]
pub async fn rotate_key(
    State(state): State<AppState>,
    Owner(owner): Owner,
    Path(agent_id): Path<String>,
) -> Answer<AgentKeyIssued> {
    Ok(Json(Envelope::new(
        state
            .gateway
            .identity()
            .rotate_agent_key(&owner, &agent_id)
            .await?,
    )))
}

/// The agent's policy.
#[utoipa::path(
    get,
    path = "/api/v1/agents/{agentId}/policy",
    tag = "policy",
    security(("ownerSession" = [])),
    params(("agentId" = String, Path, description = "The agent's id")),
    responses(
        (status = 200, body = Envelope<PolicyView>),
        (status = 401, description = "UNAUTHORIZED: no owner session", body = ErrorBody),
        (status = 404, description = "NOT_FOUND: no such agent in this account", body = ErrorBody),
    )
)]
pub async fn get_policy(
    State(state): State<AppState>,
    Owner(owner): Owner,
    Path(agent_id): Path<String>,
) -> Answer<PolicyView> {
    Ok(Json(Envelope::new(
        state
            .gateway
            .identity()
            .get_policy(&owner, &agent_id)
            .await?,
    )))
}

/// Replaces the agent's policy. Action names are resolved through aliases and stored canonical.
#[utoipa::path(
    put,
    path = "/api/v1/agents/{agentId}/policy",
    tag = "policy",
    security(("ownerSession" = [])),
    params(("agentId" = String, Path, description = "The agent's id")),
    request_body = PolicyRequest,
    responses(
        (status = 200, body = Envelope<PolicyView>),
        (status = 400, description = "INVALID_REQUEST: a limit is negative or not a number", body = ErrorBody),
        (status = 401, description = "UNAUTHORIZED: no owner session", body = ErrorBody),
        (status = 404, description = "UNKNOWN_ACTION or NOT_FOUND", body = ErrorBody),
    )
)]
pub async fn put_policy(
    State(state): State<AppState>,
    Owner(owner): Owner,
    Path(agent_id): Path<String>,
    ApiJson(req): ApiJson<PolicyRequest>,
) -> Answer<PolicyView> {
    Ok(Json(Envelope::new(
        state
            .gateway
            .identity()
            .put_policy(&owner, &agent_id, &req)
            .await?,
    )))
}

/// Revokes the owner session that carries this request; it is refused from now on.
#[utoipa::path(
    delete,
    path = "/api/v1/session",
    tag = "onboarding",
    security(("ownerSession" = [])),
    responses((status = 200, body = Envelope<Health>), (status = 401, description = "UNAUTHORIZED", body = ErrorBody))
)]
pub async fn sign_out(
    State(state): State<AppState>,
    headers: axum::http::HeaderMap,
) -> Answer<Health> {
    state.gateway.identity().sign_out(bearer(&headers)).await?;
    Ok(Json(Envelope::new(Health {
        status: "signed out".into(),
    })))
}
