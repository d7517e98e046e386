//! Personhood routes (SPEC "Personhood"): org enrollment, agent-scoped enrollment, deposit receipts.
//! Every route takes an owner session.

pub use actiongate_api_types::personhood::{
    AgentBegin, AgentComplete, DepositBeginBody, DepositConsume, OrgBegin, OrgCheck, OrgComplete,
};
use actiongate_api_types::personhood::{
    DepositReceipt, PersonhoodStatus, ProofBegun, RelyingParty,
};
use actiongate_api_types::{Envelope, ErrorBody};
use actiongate_core::personhood::{DepositBegin, Principal};
use axum::Json;
use axum::extract::State;

use super::AppState;
use super::error::ApiError;
use super::extract::{ApiJson, ApiQuery};
use super::identity::Owner;
use crate::http::intents::DEFAULT_CHAIN;

type Answer<T> = Result<Json<Envelope<T>>, ApiError>;

fn principal(owner: &Owner) -> Principal {
    Principal {
        account_id: owner.0.account_id.clone(),
    }
}

/// Begins the organization's enrollment: the proof request (action `delegate-org:{orgId}`, signal the org id).
#[utoipa::path(post, path = "/api/v1/agent/delegation/personhood/org/begin", tag = "personhood",
    security(("ownerSession" = [])), request_body = OrgBegin,
    responses((status = 200, body = Envelope<ProofBegun>), (status = 401, body = ErrorBody)))]
pub async fn org_begin(
    State(s): State<AppState>,
    owner: Owner,
    ApiJson(b): ApiJson<OrgBegin>,
) -> Answer<ProofBegun> {
    let data = s
        .gateway
        .personhood()
        .begin_org(
            &principal(&owner),
            &b.org_id,
            b.chain_id.unwrap_or(DEFAULT_CHAIN),
        )
        .await?;
    Ok(Json(Envelope::new(data)))
}

/// Completes the organization's enrollment: the first verified nullifier locks it.
#[utoipa::path(post, path = "/api/v1/agent/delegation/personhood/org/complete", tag = "personhood",
    security(("ownerSession" = [])), request_body = OrgComplete,
    responses((status = 200, body = Envelope<PersonhoodStatus>), (status = 403, description = "PERSONHOOD_ORG_NULLIFIER_MISMATCH, PERSONHOOD_PROOF_INVALID", body = ErrorBody),
        (status = 409, description = "PERSONHOOD_CHALLENGE_INVALID", body = ErrorBody)))]
pub async fn org_complete(
    State(s): State<AppState>,
    owner: Owner,
    ApiJson(b): ApiJson<OrgComplete>,
) -> Answer<PersonhoodStatus> {
    Ok(Json(Envelope::new(
        s.gateway
            .personhood()
            .complete_org(&principal(&owner), &b.org_id, &b.proof)
            .await?,
    )))
}

/// The organization's status in `data.personhood`: `unverified`, or `locked` with `lockedAt`.
#[utoipa::path(get, path = "/api/v1/agent/delegation/personhood/org/check", tag = "personhood",
    security(("ownerSession" = [])), params(OrgCheck),
    responses((status = 200, body = Envelope<PersonhoodStatus>), (status = 401, body = ErrorBody)))]
pub async fn org_check(
    State(s): State<AppState>,
    owner: Owner,
    ApiQuery(q): ApiQuery<OrgCheck>,
) -> Answer<PersonhoodStatus> {
    Ok(Json(Envelope::new(
        s.gateway
            .personhood()
            .check_org(&principal(&owner), &q.org_id)
            .await?,
    )))
}

async fn owned_agent(
    s: &AppState,
    owner: &Owner,
    id: &Option<String>,
    key: &Option<String>,
) -> Result<String, ApiError> {
    Ok(s.gateway
        .identity()
        .owned_agent_named(&owner.0, id.as_deref(), key.as_deref())
        .await?)
}

/// Begins an agent's enrollment (action `delegate-agent:{agentId}`).
#[utoipa::path(post, path = "/api/v1/agent/delegation/personhood/begin", tag = "personhood",
    security(("ownerSession" = [])), request_body = AgentBegin,
    responses((status = 200, body = Envelope<ProofBegun>), (status = 401, body = ErrorBody)))]
pub async fn agent_begin(
    State(s): State<AppState>,
    owner: Owner,
    ApiJson(b): ApiJson<AgentBegin>,
) -> Answer<ProofBegun> {
    let agent_id = owned_agent(&s, &owner, &b.agent_id, &b.agent_key).await?;
    let data = s
        .gateway
        .personhood()
        .begin_agent(
            &principal(&owner),
            &agent_id,
            b.chain_id.unwrap_or(DEFAULT_CHAIN),
        )
        .await?;
    Ok(Json(Envelope::new(data)))
}

/// Completes an agent's enrollment: the first verified nullifier locks the agent.
#[utoipa::path(post, path = "/api/v1/agent/delegation/personhood/complete", tag = "personhood",
    security(("ownerSession" = [])), request_body = AgentComplete,
    responses((status = 200, body = Envelope<PersonhoodStatus>), (status = 403, body = ErrorBody)))]
pub async fn agent_complete(
    State(s): State<AppState>,
    owner: Owner,
    ApiJson(b): ApiJson<AgentComplete>,
) -> Answer<PersonhoodStatus> {
    let agent_id = owned_agent(&s, &owner, &b.agent_id, &b.agent_key).await?;
    Ok(Json(Envelope::new(
        s.gateway
            .personhood()
            .complete_agent(&principal(&owner), &agent_id, &b.proof)
            .await?,
    )))
}

/// Begins a deposit receipt: the proof request and `challengeId`.
#[utoipa::path(post, path = "/api/v1/agent/delegation/personhood/deposit/begin", tag = "personhood",
    security(("ownerSession" = [])), request_body = DepositBeginBody,
    responses((status = 200, body = Envelope<ProofBegun>), (status = 400, body = ErrorBody)))]
pub async fn deposit_begin(
    State(s): State<AppState>,
    owner: Owner,
    ApiJson(b): ApiJson<DepositBeginBody>,
) -> Answer<ProofBegun> {
    let d = DepositBegin {
        deposit_signal: b.deposit_signal,
        runtime_id: b.runtime_id,
        amount_usd: b.amount_usd,
        destination_address: b.destination_address,
        idempotency_key: b.idempotency_key,
    };
    let data = s
        .gateway
        .personhood()
        .begin_deposit(
            &principal(&owner),
            &b.org_id,
            b.chain_id.unwrap_or(DEFAULT_CHAIN),
            &d,
        )
        .await?;
    Ok(Json(Envelope::new(data)))
}

/// Completes a deposit: a proof whose nullifier matches the org lock issues a receipt.
#[utoipa::path(post, path = "/api/v1/agent/delegation/personhood/deposit/complete", tag = "personhood",
    security(("ownerSession" = [])), request_body = OrgComplete,
    responses((status = 200, body = Envelope<DepositReceipt>), (status = 403, description = "PERSONHOOD_DEPOSIT_NULLIFIER_MISMATCH", body = ErrorBody),
        (status = 409, description = "PERSONHOOD_ORG_NOT_LOCKED, PERSONHOOD_CHALLENGE_INVALID", body = ErrorBody)))]
pub async fn deposit_complete(
    State(s): State<AppState>,
    owner: Owner,
    ApiJson(b): ApiJson<OrgComplete>,
) -> Answer<DepositReceipt> {
    Ok(Json(Envelope::new(
        s.gateway
            .personhood()
            .complete_deposit(&principal(&owner), &b.org_id, &b.proof)
            .await?,
    )))
}

/// Consumes a deposit receipt, once.
#[utoipa::path(post, path = "/api/v1/agent/delegation/personhood/deposit/consume", tag = "personhood",
    security(("ownerSession" = [])), request_body = DepositConsume,
    responses((status = 200, body = Envelope<DepositReceipt>), (status = 409, description = "PERSONHOOD_DEPOSIT_RECEIPT_ALREADY_USED", body = ErrorBody)))]
pub async fn deposit_consume(
    State(s): State<AppState>,
    owner: Owner,
    ApiJson(b): ApiJson<DepositConsume>,
) -> Answer<DepositReceipt> {
    let data = s
        .gateway
        .personhood()
        .consume_deposit(
            &principal(&owner),
            &b.org_id,
            &b.receipt_id,
            b.runtime_id.as_deref(),
            b.amount_usd,
        )
        .await?;
    Ok(Json(Envelope::new(data)))
}

/// The relying party: its ids and the address its proof requests are signed by (register it with
/// the World ID developer portal). Open.
#[utoipa::path(get, path = "/api/v1/agent/delegation/personhood/rp", tag = "personhood",
    responses((status = 200, body = Envelope<RelyingParty>)))]
pub async fn relying_party(State(s): State<AppState>) -> Json<Envelope<RelyingParty>> {
    Json(Envelope::new(s.gateway.personhood().relying_party()))
}
