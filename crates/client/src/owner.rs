//! What an owner calls: sign-in by e-mail, the session, agents and their keys and policies, linking
//! a paying wallet.

use actiongate_api_types::account::{
    AccountCredits, AccountDelegation, AccountDelegationList, AccountIntentList,
};
use actiongate_api_types::audit::AuditVerify;
use actiongate_api_types::credits::{
    WalletLinkBegin, WalletLinkChallenge, WalletLinkRequest, WalletLinked,
};
use actiongate_api_types::identity::{
    AgentKeyIssued, AgentListResponse, CreateAgentRequest, EmailCompleteRequest,
    EmailCompleteResponse, EmailStartRequest, EmailStartResponse, PolicyRequest, PolicyView,
};
use actiongate_api_types::intents::{ApprovalItem, ApprovalList, RejectRequest};
use actiongate_api_types::{ErrorBody, Health};

use crate::routes::{self, Route};
use crate::{As, Client, ClientError, NONE, Result};

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

    /// The account's approvals in `state` (pending when none), newest first.
    pub async fn approvals(&self, session: &str, state: Option<&str>) -> Result<ApprovalList> {
        #[derive(serde::Serialize)]
        struct Query<'a> {
            #[serde(skip_serializing_if = "Option::is_none")]
            state: Option<&'a str>,
        }
        self.call(
            routes::APPROVALS,
            As::Owner(session),
            Some(&Query { state }),
        )
        .await
    }

    /// Approves a pending intent: it runs at once.
    pub async fn approve(&self, session: &str, intent_id: &str) -> Result<ApprovalItem> {
        let path = routes::APPROVE.path.replace("{intentId}", intent_id);
        self.data(self.request(routes::APPROVE, &path, As::Owner(session), NONE))
            .await
    }

    /// Rejects a pending intent: it ends failed (APPROVAL_REJECTED), nothing sent.
    pub async fn reject(
        &self,
        session: &str,
        intent_id: &str,
        req: &RejectRequest,
    ) -> Result<ApprovalItem> {
        let path = routes::REJECT.path.replace("{intentId}", intent_id);
        self.data(self.request(routes::REJECT, &path, As::Owner(session), Some(req)))
            .await
    }

    /// The account's latest intents (at most 100), newest first.
    pub async fn account_intents(&self, session: &str) -> Result<AccountIntentList> {
        self.call(routes::ACCOUNT_INTENTS, As::Owner(session), NONE)
            .await
    }

    /// The account's balance, what is held, and its ledger newest first.
    pub async fn account_credits(&self, session: &str) -> Result<AccountCredits> {
        self.call(routes::ACCOUNT_CREDITS, As::Owner(session), NONE)
            .await
    }

    /// The delegations given to the account's agents, newest first.
    pub async fn account_delegations(&self, session: &str) -> Result<AccountDelegationList> {
        self.call(routes::ACCOUNT_DELEGATIONS, As::Owner(session), NONE)
            .await
    }

    /// Stops the account's agents from using a delegation (recorded revoked at once).
    pub async fn revoke_delegation(&self, session: &str, hash: &str) -> Result<AccountDelegation> {
        let path = routes::ACCOUNT_REVOKE_DELEGATION
            .path
            .replace("{hash}", hash);
        self.data(self.request(
            routes::ACCOUNT_REVOKE_DELEGATION,
            &path,
            As::Owner(session),
            NONE,
        ))
        .await
    }

    /// Whether the account's audit chain is intact, and where not.
    pub async fn audit_verify(&self, session: &str) -> Result<AuditVerify> {
        self.call(routes::AUDIT_VERIFY, As::Owner(session), NONE)
            .await
    }

    /// Streams the account's audit export (`format` jsonl or csv; `from`/`to` RFC 3339) into `out`
    /// as it arrives; answers the bytes written.
    pub async fn audit_export(
        &self,
        session: &str,
        query: &[(&str, &str)],
        out: &mut (dyn std::io::Write + Send),
    ) -> Result<u64> {
        let req = self.request(
            routes::AUDIT_EXPORT,
            routes::AUDIT_EXPORT.path,
            As::Owner(session),
            Some(query),
        );
        let mut resp = req.send().await.map_err(|e| {
            ClientError::Transport(format!("cannot reach the gateway: {}", e.without_url()))
        })?;
        let status = resp.status().as_u16();
        if !(200..300).contains(&status) {
            let bytes = resp
                .bytes()
                .await
                .map_err(|e| ClientError::Transport(e.without_url().to_string()))?;
            return Err(match serde_json::from_slice::<ErrorBody>(&bytes) {
                Ok(body) => ClientError::Refused { status, body },
                Err(_) => ClientError::Transport(format!("the gateway answered HTTP {status}")),
            });
        }
        let mut written = 0u64;
        while let Some(chunk) = resp.chunk().await.map_err(|e| {
            ClientError::Transport(format!("the export was cut short: {}", e.without_url()))
        })? {
            out.write_all(&chunk)
                .map_err(|e| ClientError::Transport(format!("cannot write the export: {e}")))?;
            written += chunk.len() as u64;
        }
        Ok(written)
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
