//! Every route of the REST API the client calls: its method and path, written once for the client's
//! methods and for what the CLI shows of a write it did not send.

/// An HTTP method of the API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Get,
    Post,
    Put,
    Delete,
}

impl Method {
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Post => "POST",
            Method::Put => "PUT",
            Method::Delete => "DELETE",
        }
    }
}

/// One route: its method and path (`{agentId}` / `{name}` segments are filled by the method that
/// calls it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    pub method: Method,
    pub path: &'static str,
}

macro_rules! routes {
    ($($(#[$doc:meta])* $name:ident = $method:ident $path:literal;)*) => {
        $($(#[$doc])* pub const $name: Route = Route { method: Method::$method, path: $path };)*
        /// Every route, in declaration order.
        pub const ALL: &[Route] = &[$($name),*];
    };
}

routes! {
    HEALTHZ = Get "/healthz";
    READYZ = Get "/readyz";
    CATALOG = Get "/api/v1/agent/actions/catalog";
    ACTIONS = Get "/api/v1/agent/actions";
    EMAIL_START = Post "/api/v1/onboarding/email/start";
    EMAIL_COMPLETE = Post "/api/v1/onboarding/email/complete";
    SIGN_OUT = Delete "/api/v1/session";
    AGENTS_LIST = Get "/api/v1/agents";
    AGENTS_CREATE = Post "/api/v1/agents";
    ROTATE_KEY = Post "/api/v1/agents/{agentId}/rotate-key";
    POLICY_GET = Get "/api/v1/agents/{agentId}/policy";
    POLICY_PUT = Put "/api/v1/agents/{agentId}/policy";
    APPROVALS = Get "/api/v1/approvals";
    APPROVE = Post "/api/v1/approvals/{intentId}/approve";
    REJECT = Post "/api/v1/approvals/{intentId}/reject";
    AUDIT_EXPORT = Get "/api/v1/audit";
    AUDIT_VERIFY = Get "/api/v1/audit/verify";
    WEBHOOKS = Get "/api/v1/webhooks";
    WEBHOOK_CREATE = Post "/api/v1/webhooks";
    WEBHOOK_DELETE = Delete "/api/v1/webhooks/{id}";
    WEBHOOK_ROTATE = Post "/api/v1/webhooks/{id}/rotate-secret";
    WEBHOOK_DELIVERIES = Get "/api/v1/webhooks/{id}/deliveries";
    EVENTS = Get "/api/v1/events";
    ACCOUNT_INTENTS = Get "/api/v1/intents";
    ACCOUNT_CREDITS = Get "/api/v1/credits";
    ACCOUNT_DELEGATIONS = Get "/api/v1/delegations";
    ACCOUNT_REVOKE_DELEGATION = Post "/api/v1/delegations/{hash}/revoke";
    EXECUTE_INTENT = Post "/api/v1/agent/execute-intent";
    INTENT_STATUS = Get "/api/v1/agent/execute-intent/status";
    EXECUTE = Post "/api/v1/agent/execute";
    BUILD_TX = Post "/api/v1/agent/build-tx";
    CREDITS_BALANCE = Get "/api/v1/agent/credits/balance";
    X402_METADATA = Get "/api/v1/credits/x402-metadata";
    BUY_CREDITS_OPEN = Post "/api/v1/credits/buy-with-x402";
    BUY_CREDITS = Post "/api/v1/agent/credits/buy-with-x402";
    WALLET_LINK_BEGIN = Post "/api/v1/wallets/link/begin";
    WALLET_LINK = Post "/api/v1/wallets/link";
    PREFLIGHT = Post "/api/v1/agent/preflight";
    WHOAMI = Get "/api/v1/agent/me";
    VENUE_READINESS = Get "/api/v1/agent/venues/readiness";
    VENUES = Get "/api/v1/agent/venues";
    DELEGATION_CREATE = Post "/api/v1/agent/delegation/create";
    DELEGATION_ACTIVATE = Post "/api/v1/agent/delegation/activate";
    DELEGATION_CHECK = Get "/api/v1/agent/delegation/check";
    DELEGATION_VERIFY = Get "/api/v1/agent/delegation/verify";
    DELEGATION_INSPECT = Get "/api/v1/agent/delegation/inspect";
    DELEGATION_BALANCE = Get "/api/v1/agent/delegation/balance";
    DELEGATION_REVOKE = Post "/api/v1/agent/delegation/revoke";
    DELEGATION_REDEEM = Post "/api/v1/agent/delegation/redeem";
    PERSONHOOD_RP = Get "/api/v1/agent/delegation/personhood/rp";
    PERSONHOOD_ORG_BEGIN = Post "/api/v1/agent/delegation/personhood/org/begin";
    PERSONHOOD_ORG_COMPLETE = Post "/api/v1/agent/delegation/personhood/org/complete";
    PERSONHOOD_ORG_CHECK = Get "/api/v1/agent/delegation/personhood/org/check";
    PERSONHOOD_AGENT_BEGIN = Post "/api/v1/agent/delegation/personhood/begin";
    PERSONHOOD_AGENT_COMPLETE = Post "/api/v1/agent/delegation/personhood/complete";
    PERSONHOOD_DEPOSIT_BEGIN = Post "/api/v1/agent/delegation/personhood/deposit/begin";
    PERSONHOOD_DEPOSIT_COMPLETE = Post "/api/v1/agent/delegation/personhood/deposit/complete";
    PERSONHOOD_DEPOSIT_CONSUME = Post "/api/v1/agent/delegation/personhood/deposit/consume";
    MCP_TOOLS = Get "/mcp/tools";
    MCP_TOOL_CALL = Post "/mcp/tool/{name}";
}
