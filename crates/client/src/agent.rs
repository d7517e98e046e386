//! What an agent calls: discovery, the intents, build-tx, credits, its identity; and the open routes
//! (health, the x402 metadata, the MCP mirror).

use actiongate_api_types::Health;
use actiongate_api_types::catalog::{ActionList, CatalogDocument, McpToolList};
use actiongate_api_types::chain::{BuildTxData, BuildTxRequest};
use actiongate_api_types::credits::{BuyCreditsRequest, X402Metadata};
use actiongate_api_types::intents::{
    AgentIdentity, CreditBalance, DirectExecution, ExecuteIntentRequest, Intent, PreflightReport,
};
use actiongate_api_types::venues::{ReadinessQuery, VenueList, VenueListQuery, VenueReadiness};

use crate::routes::{self, Route};
use crate::{As, Client, NONE, Purchase, Result};

impl Client {
    pub async fn health(&self) -> Result<Health> {
        self.call(routes::HEALTHZ, As::Anyone, NONE).await
    }

    /// The process is up and its database answers.
    pub async fn ready(&self) -> Result<Health> {
        self.call(routes::READYZ, As::Anyone, NONE).await
    }

    /// The whole catalog document (answered as is, not in an envelope).
    pub async fn catalog(&self) -> Result<CatalogDocument> {
        self.send(self.request(routes::CATALOG, routes::CATALOG.path, As::Anyone, NONE))
            .await
    }

    /// The actions, with what the agent's policy allows when a key is given.
    pub async fn actions(&self, agent_key: Option<&str>) -> Result<ActionList> {
        let query = agent_key.map(|k| [("agentApiKey", k)]);
        self.call(routes::ACTIONS, As::Anyone, query.as_ref()).await
    }

    /// Submits an intent (the answer is the intent itself, not an envelope).
    pub async fn execute_intent(&self, req: &ExecuteIntentRequest) -> Result<Intent> {
        let route = routes::EXECUTE_INTENT;
        self.send(self.request(route, route.path, As::Anyone, Some(req)))
            .await
    }

    pub async fn intent_status(&self, agent_key: &str, intent_id: &str) -> Result<Intent> {
        let route = routes::INTENT_STATUS;
        let query = [("intentId", intent_id)];
        self.send(self.request(route, route.path, As::Agent(agent_key), Some(&query)))
            .await
    }

    /// Runs an action from the agent's own wallet and waits for it.
    pub async fn execute_direct(&self, req: &ExecuteIntentRequest) -> Result<DirectExecution> {
        self.call(routes::EXECUTE, As::Anyone, Some(req)).await
    }

    pub async fn build_tx(&self, req: &BuildTxRequest) -> Result<BuildTxData> {
        self.call(routes::BUILD_TX, As::Anyone, Some(req)).await
    }

    /// Every check a submit (or, with `direct`, a direct execution) would make, without submitting.
    pub async fn preflight(
        &self,
        req: &ExecuteIntentRequest,
        direct: bool,
    ) -> Result<PreflightReport> {
        let route = routes::PREFLIGHT;
        let path = format!("{}?direct={direct}", route.path);
        self.data(self.request(route, &path, As::Anyone, Some(req)))
            .await
    }

    pub async fn credits_balance(&self, agent_key: &str) -> Result<CreditBalance> {
        self.call(routes::CREDITS_BALANCE, As::Agent(agent_key), NONE)
            .await
    }

    pub async fn whoami(&self, agent_key: &str) -> Result<AgentIdentity> {
        self.call(routes::WHOAMI, As::Agent(agent_key), NONE).await
    }

    /// Whether a venue is ready for the agent, and what blocks it.
    pub async fn venue_readiness(
        &self,
        agent_key: &str,
        query: &ReadinessQuery,
    ) -> Result<VenueReadiness> {
        self.call(routes::VENUE_READINESS, As::Agent(agent_key), Some(query))
            .await
    }

    /// Every venue with its actions and whether it is ready for the agent.
    pub async fn venues(&self, agent_key: &str, query: &VenueListQuery) -> Result<VenueList> {
        self.call(routes::VENUES, As::Agent(agent_key), Some(query))
            .await
    }

    pub async fn x402_metadata(&self) -> Result<X402Metadata> {
        self.call(routes::X402_METADATA, As::Anyone, NONE).await
    }

    /// A credit purchase on the agent route: the challenge (HTTP 402) or the completed purchase.
    /// `paid` is (invoiceId, transaction hash) for the retry.
    pub async fn buy_credits(
        &self,
        agent_key: &str,
        req: &BuyCreditsRequest,
        paid: Option<(&str, &str)>,
    ) -> Result<Purchase> {
        self.buy(routes::BUY_CREDITS, As::Agent(agent_key), req, paid)
            .await
    }

    /// The same purchase on the open route, for the wallet in `req.userAddress`.
    pub async fn buy_credits_open(
        &self,
        req: &BuyCreditsRequest,
        paid: Option<(&str, &str)>,
    ) -> Result<Purchase> {
        self.buy(routes::BUY_CREDITS_OPEN, As::Anyone, req, paid)
            .await
    }

    async fn buy(
        &self,
        route: Route,
        who: As<'_>,
        req: &BuyCreditsRequest,
        paid: Option<(&str, &str)>,
    ) -> Result<Purchase> {
        let mut builder = self.request(route, route.path, who, Some(req));
        if let Some((invoice, receipt)) = paid {
            builder = builder
                .header("X-Invoice-Id", invoice)
                .header("X-Payment-Receipt", receipt);
        }
        Self::purchase(builder).await
    }

    /// The same purchase paid the standard x402 v2 way: `payment_signature` is the base64 payload.
    pub async fn buy_credits_x402(
        &self,
        agent_key: &str,
        req: &BuyCreditsRequest,
        payment_signature: &str,
    ) -> Result<Purchase> {
        let route = routes::BUY_CREDITS;
        let builder = self
            .request(route, route.path, As::Agent(agent_key), Some(req))
            .header("PAYMENT-SIGNATURE", payment_signature);
        Self::purchase(builder).await
    }

    /// The MCP tools, as the plain-HTTP mirror lists them.
    pub async fn mcp_tools(&self) -> Result<McpToolList> {
        self.call(routes::MCP_TOOLS, As::Anyone, NONE).await
    }

    /// Calls one MCP tool through the mirror; answers the MCP tool result (`content`,
    /// `structuredContent`, `isError`).
    pub async fn mcp_tool_call(
        &self,
        agent_key: Option<&str>,
        name: &str,
        arguments: &serde_json::Value,
    ) -> Result<serde_json::Value> {
        let route = routes::MCP_TOOL_CALL;
        let path = route.path.replace("{name}", name);
        let req = self.request(route, &path, As::Anyone, Some(arguments));
        let req = match agent_key {
            Some(k) => req.bearer_auth(k),
            None => req,
        };
        self.send(req).await
    }
}
