//! The delegation routes (ERC-7710), each with the agent key.

use actiongate_api_types::delegation::{
    DelegationActivateRequest, DelegationActivated, DelegationBalance, DelegationCheck,
    DelegationCheckQuery, DelegationCreateRequest, DelegationCreated, DelegationHashQuery,
    DelegationInspected, DelegationRedeemRequest, DelegationRedeemed, DelegationRevoke,
    DelegationRevokeRequest, DelegationVerified,
};

use crate::routes;
use crate::{As, Client, Result};

impl Client {
    /// Builds a delegation for the owner to sign.
    pub async fn delegation_create(
        &self,
        agent_key: &str,
        req: &DelegationCreateRequest,
    ) -> Result<DelegationCreated> {
        self.call(routes::DELEGATION_CREATE, As::Agent(agent_key), Some(req))
            .await
    }

    /// Stores a signed delegation.
    pub async fn delegation_activate(
        &self,
        agent_key: &str,
        req: &DelegationActivateRequest,
    ) -> Result<DelegationActivated> {
        self.call(routes::DELEGATION_ACTIVATE, As::Agent(agent_key), Some(req))
            .await
    }

    /// The agent's delegations from the database.
    pub async fn delegation_check(
        &self,
        agent_key: &str,
        query: &DelegationCheckQuery,
    ) -> Result<DelegationCheck> {
        self.call(routes::DELEGATION_CHECK, As::Agent(agent_key), Some(query))
            .await
    }

    /// One delegation checked against the chain.
    pub async fn delegation_verify(
        &self,
        agent_key: &str,
        query: &DelegationHashQuery,
    ) -> Result<DelegationVerified> {
        self.call(routes::DELEGATION_VERIFY, As::Agent(agent_key), Some(query))
            .await
    }

    pub async fn delegation_inspect(
        &self,
        agent_key: &str,
        query: &DelegationHashQuery,
    ) -> Result<DelegationInspected> {
        self.call(
            routes::DELEGATION_INSPECT,
            As::Agent(agent_key),
            Some(query),
        )
        .await
    }

    pub async fn delegation_balance(
        &self,
        agent_key: &str,
        query: &DelegationHashQuery,
    ) -> Result<DelegationBalance> {
        self.call(
            routes::DELEGATION_BALANCE,
            As::Agent(agent_key),
            Some(query),
        )
        .await
    }

    pub async fn delegation_revoke(
        &self,
        agent_key: &str,
        req: &DelegationRevokeRequest,
    ) -> Result<DelegationRevoke> {
        self.call(routes::DELEGATION_REVOKE, As::Agent(agent_key), Some(req))
            .await
    }

    pub async fn delegation_redeem(
        &self,
        agent_key: &str,
        req: &DelegationRedeemRequest,
    ) -> Result<DelegationRedeemed> {
        self.call(routes::DELEGATION_REDEEM, As::Agent(agent_key), Some(req))
            .await
    }
}
