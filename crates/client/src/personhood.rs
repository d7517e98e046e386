//! The personhood routes (World ID), each with the owner session; the relying party is open.

use actiongate_api_types::personhood::{
    AgentBegin, AgentComplete, DepositBeginBody, DepositConsume, DepositReceipt, OrgBegin,
    OrgCheck, OrgComplete, PersonhoodStatus, ProofBegun, RelyingParty,
};

use crate::routes;
use crate::{As, Client, NONE, Result};

impl Client {
    pub async fn personhood_rp(&self) -> Result<RelyingParty> {
        self.call(routes::PERSONHOOD_RP, As::Anyone, NONE).await
    }

    pub async fn personhood_org_begin(&self, session: &str, req: &OrgBegin) -> Result<ProofBegun> {
        self.call(routes::PERSONHOOD_ORG_BEGIN, As::Owner(session), Some(req))
            .await
    }

    pub async fn personhood_org_complete(
        &self,
        session: &str,
        req: &OrgComplete,
    ) -> Result<PersonhoodStatus> {
        self.call(
            routes::PERSONHOOD_ORG_COMPLETE,
            As::Owner(session),
            Some(req),
        )
        .await
    }

    pub async fn personhood_org_check(
        &self,
        session: &str,
        query: &OrgCheck,
    ) -> Result<PersonhoodStatus> {
        self.call(
            routes::PERSONHOOD_ORG_CHECK,
            As::Owner(session),
            Some(query),
        )
        .await
    }

    pub async fn personhood_agent_begin(
        &self,
        session: &str,
        req: &AgentBegin,
    ) -> Result<ProofBegun> {
        self.call(
            routes::PERSONHOOD_AGENT_BEGIN,
            As::Owner(session),
            Some(req),
        )
        .await
    }

    pub async fn personhood_agent_complete(
        &self,
        session: &str,
        req: &AgentComplete,
    ) -> Result<PersonhoodStatus> {
        self.call(
            routes::PERSONHOOD_AGENT_COMPLETE,
            As::Owner(session),
            Some(req),
        )
        .await
    }

    pub async fn personhood_deposit_begin(
        &self,
        session: &str,
        req: &DepositBeginBody,
    ) -> Result<ProofBegun> {
        self.call(
            routes::PERSONHOOD_DEPOSIT_BEGIN,
            As::Owner(session),
            Some(req),
        )
        .await
    }

    pub async fn personhood_deposit_complete(
        &self,
        session: &str,
        req: &OrgComplete,
    ) -> Result<DepositReceipt> {
        self.call(
            routes::PERSONHOOD_DEPOSIT_COMPLETE,
            As::Owner(session),
            Some(req),
        )
        .await
    }

    pub async fn personhood_deposit_consume(
        &self,
        session: &str,
        req: &DepositConsume,
    ) -> Result<DepositReceipt> {
        self.call(
            routes::PERSONHOOD_DEPOSIT_CONSUME,
            As::Owner(session),
            Some(req),
        )
        .await
    }
}
