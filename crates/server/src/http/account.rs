//! What an owner reads of their account beside the console (issue 27): its agents' intents, its
//! credits and ledger, and the delegations given to its agents, which the owner may revoke for
//! them. Owner routes: they take `Authorization: Bearer owner-…`; an agent key is not an owner
//! session.

use actiongate_api_types::account::{
    AccountCredits, AccountDelegation, AccountDelegationList, AccountIntentList,
};
use actiongate_api_types::{Envelope, ErrorBody};
use axum::Json;
use axum::extract::{Path, State};

use super::AppState;
use super::error::ApiError;
use super::identity::Owner;

type Answer<T> = Result<Json<Envelope<T>>, ApiError>;

/// The account's latest intents (at most 100), newest first, each as its agent reads it (status,
/// results with transaction hashes, approval) with its agent, action, lane and time.
#[utoipa::path(
    get,
    path = "/api/v1/intents",
    tag = "intents",
    security(("ownerSession" = [])),
    responses(
        (status = 200, body = Envelope<AccountIntentList>),
        (status = 401, description = "UNAUTHORIZED: no owner session", body = ErrorBody),
    )
)]
pub async fn intents(
    State(state): State<AppState>,
    Owner(owner): Owner,
) -> Answer<AccountIntentList> {
    Ok(Json(Envelope::new(
        state.gateway.intents().account_intents(&owner).await?,
    )))
}

/// The account's credits: the balance, what is held for intents that have not ended, and the
/// ledger newest first (at most 200 rows).
#[utoipa::path(
    get,
    path = "/api/v1/credits",
    tag = "credits",
    security(("ownerSession" = [])),
    responses(
        (status = 200, body = Envelope<AccountCredits>),
        (status = 401, description = "UNAUTHORIZED: no owner session", body = ErrorBody),
    )
)]
pub async fn credits(State(state): State<AppState>, Owner(owner): Owner) -> Answer<AccountCredits> {
    Ok(Json(Envelope::new(
        state.gateway.credits().owner_credits(&owner).await?,
    )))
}

/// The delegations given to the account's agents, newest first.
#[utoipa::path(
    get,
    path = "/api/v1/delegations",
    tag = "delegation",
    security(("ownerSession" = [])),
    responses(
        (status = 200, body = Envelope<AccountDelegationList>),
        (status = 401, description = "UNAUTHORIZED: no owner session", body = ErrorBody),
    )
)]
pub async fn delegations(
    State(state): State<AppState>,
    Owner(owner): Owner,
) -> Answer<AccountDelegationList> {
    Ok(Json(Envelope::new(
        state
            .gateway
            .delegations()
            .owner_delegations(&owner)
            .await?,
    )))
}

/// Stops the account's agents from using a delegation: recorded revoked at once (no fan-out
/// runs under it again; `delegation.revoked` is emitted). The delegator's own onchain
/// revocation stays theirs to send. Revoking a revoked one answers it as it is.
#[utoipa::path(
    post,
    path = "/api/v1/delegations/{hash}/revoke",
    tag = "delegation",
    security(("ownerSession" = [])),
    params(("hash" = String, Path, description = "The delegation's hash")),
    responses(
        (status = 200, body = Envelope<AccountDelegation>),
        (status = 401, description = "UNAUTHORIZED: no owner session", body = ErrorBody),
        (status = 404, description = "NOT_FOUND: no such delegation to this account's agents", body = ErrorBody),
    )
)]
pub async fn revoke_delegation(
    State(state): State<AppState>,
    Owner(owner): Owner,
    Path(hash): Path<String>,
) -> Answer<AccountDelegation> {
    Ok(Json(Envelope::new(
        state
            .gateway
            .delegations()
            .owner_revoke(&owner, &hash)
            .await?,
    )))
}
