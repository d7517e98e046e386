//! What an owner calls: sign-in by e-mail, the session, agents and their keys and policies, linking
//! a paying wallet.

use actiongate_api_types::Health;
use actiongate_api_types::credits::{
    WalletLinkBegin, WalletLinkChallenge, WalletLinkRequest, WalletLinked,
};
use actiongate_api_types::identity::{
    AgentKeyIssued, AgentListResponse, CreateAgentRequest, EmailCompleteRequest,
    EmailCompleteResponse, EmailStartRequest, EmailStartResponse, PolicyRequest, PolicyView,
};

use crate::routes::{self, Route};
use crate::{As, Client, NONE, Result};

impl Client {
    pub async fn email_start(&self, email: &str) -> Result<EmailStartResponse> {
        let body = EmailStartRequest {
            email: email.to_owned(),
        };
        self.call(routes::EMAIL_START, As::Anyone, Some(&body))
            .await
    }

    pub async fn email_complete(
        &self,
        req: &EmailCompleteRequest,
    ) -> Result<EmailCompleteResponse> {
        self.call(routes::EMAIL_COMPLETE, As::Anyone, Some(req))
            .await
    }

    /// Revokes an owner session.
    pub async fn sign_out(&self, session: &str) -> Result<()> {
        self.call::<(), Health>(routes::SIGN_OUT, As::Owner(session), NONE)
            .await
            .map(|_| ())
    }

    pub async fn agents(&self, session: &str) -> Result<AgentListResponse> {
        self.call(routes::AGENTS_LIST, As::Owner(session), NONE)
            .await
    }

    /// A new agent; its key is shown in this answer only.
    pub async fn create_agent(
        &self,
        session: &str,
        req: &CreateAgentRequest,
    ) -> Result<AgentKeyIssued> {
        self.call(routes::AGENTS_CREATE, As::Owner(session), Some(req))
            .await
    }

    /// A new key for the agent; the old one stops working at once.
    pub async fn rotate_key(&self, session: &str, agent_id: &str) -> Result<AgentKeyIssued> {
        self.on_agent(routes::ROTATE_KEY, session, agent_id, NONE)
            .await
    }

    pub async fn policy(&self, session: &str, agent_id: &str) -> Result<PolicyView> {
        self.on_agent(routes::POLICY_GET, session, agent_id, NONE)
            .await
    }

    pub async fn put_policy(
        &self,
        session: &str,
        agent_id: &str,
        req: &PolicyRequest,
    ) -> Result<PolicyView> {
        self.on_agent(routes::POLICY_PUT, session, agent_id, Some(req))
            .await
    }

    /// The EIP-4361 message for the wallet to sign.
    pub async fn wallet_link_begin(
        &self,
        session: &str,
        req: &WalletLinkBegin,
    ) -> Result<WalletLinkChallenge> {
        self.call(routes::WALLET_LINK_BEGIN, As::Owner(session), Some(req))
            .await
    }

    /// Links the wallet that signed the message to the owner's account.
    pub async fn wallet_link(
        &self,
        session: &str,
        req: &WalletLinkRequest,
    ) -> Result<WalletLinked> {
        self.call(routes::WALLET_LINK, As::Owner(session), Some(req))
            .await
    }

    async fn on_agent<I: serde::Serialize, T: serde::de::DeserializeOwned>(
        &self,
        route: Route,
        session: &str,
        agent_id: &str,
        input: Option<&I>,
    ) -> Result<T> {
        let path = route.path.replace("{agentId}", agent_id);
        self.data(self.request(route, &path, As::Owner(session), input))
            .await
    }
}
