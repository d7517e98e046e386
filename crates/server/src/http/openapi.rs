//! The OpenAPI 3.1 document: its frame here (info, the wire types, security schemes, tags), each
//! route's operation from the route's own declaration (`super::routes`).

use actiongate_api_types::catalog::{
    ActionList, CatalogAction, CatalogDocument, EditorConfig, McpToolInfo, McpToolList,
    OptionSource, ProviderFamily,
};
use actiongate_api_types::identity::{
    AccountSummary, AgentBootstrap, AgentKeyIssued, AgentListResponse, AgentView,
    CreateAgentRequest, EmailCompleteRequest, EmailCompleteResponse, EmailStartRequest,
    EmailStartResponse, OwnerSession, PolicyRequest, PolicyView,
};
use actiongate_api_types::intents::{
    AgentIdentity, CreditBalance, DirectExecution, ExecuteIntentRequest, Intent, IntentResult,
    PreflightCheck, PreflightReport,
};
use actiongate_api_types::personhood::{
    DepositReceipt, PersonhoodState, PersonhoodStatus, ProofBegun, ProofRequest, RelyingParty,
    RpContext,
};
use actiongate_api_types::{ErrorBody, ErrorCode, ErrorFamily, Health};
use utoipa::openapi::security::{ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

#[derive(OpenApi)]
#[openapi(
    info(
        title = "actiongate",
        description = "Gateway through which AI agents act on onchain and off-chain finance under an owner's policy. \
                       Every error body is {success: false, error, code, message}; see docs/API.md for the code table.",
    ),
    components(schemas(
        ErrorBody, ErrorCode, ErrorFamily, Health,
        CatalogDocument, ProviderFamily, CatalogAction, EditorConfig, OptionSource, ActionList,
        EmailStartRequest, EmailStartResponse, EmailCompleteRequest, EmailCompleteResponse, AgentBootstrap,
        AgentKeyIssued, OwnerSession, AccountSummary, CreateAgentRequest, AgentView, AgentListResponse,
        PolicyRequest, PolicyView,
        ExecuteIntentRequest, Intent, IntentResult, DirectExecution, CreditBalance, McpToolInfo, McpToolList,
        PreflightCheck, PreflightReport, AgentIdentity,
        actiongate_api_types::chain::BuildTxRequest, actiongate_api_types::chain::BuildTxData,
        actiongate_api_types::chain::UnsignedTransaction,
        actiongate_api_types::credits::X402Metadata, actiongate_api_types::credits::CreditPackage,
        actiongate_api_types::credits::PaymentCurrency, actiongate_api_types::credits::BuyCreditsRequest,
        actiongate_api_types::credits::X402Challenge, actiongate_api_types::credits::ChallengeBody,
        actiongate_api_types::credits::CreditPurchase, actiongate_api_types::credits::WalletLinkBegin,
        actiongate_api_types::credits::WalletLinkChallenge, actiongate_api_types::credits::WalletLinkRequest,
        actiongate_api_types::credits::WalletLinked,
        actiongate_api_types::delegation::Caveat, actiongate_api_types::delegation::Delegation,
        actiongate_api_types::delegation::TokenCap, actiongate_api_types::delegation::PeriodCap,
        actiongate_api_types::delegation::CaveatRequest, actiongate_api_types::delegation::DelegationCreateRequest,
        actiongate_api_types::delegation::TypedData, actiongate_api_types::delegation::DelegationCreated,
        actiongate_api_types::delegation::DelegationActivateRequest, actiongate_api_types::delegation::DelegationActivated,
        actiongate_api_types::delegation::DelegationSummary, actiongate_api_types::delegation::DelegationCheck,
        actiongate_api_types::delegation::VerifyCheck, actiongate_api_types::delegation::DelegationVerified,
        actiongate_api_types::delegation::DecodedCaveat, actiongate_api_types::delegation::DelegationInspected,
        actiongate_api_types::delegation::TokenBalance, actiongate_api_types::delegation::DelegationBalance,
        actiongate_api_types::delegation::DelegationRevokeRequest, actiongate_api_types::delegation::DelegationRevoke,
        actiongate_api_types::delegation::DelegationRedeemRequest, actiongate_api_types::delegation::DelegationRedeemed,
        super::personhood::OrgBegin, super::personhood::OrgComplete, super::personhood::AgentBegin,
        super::personhood::AgentComplete, super::personhood::DepositBeginBody, super::personhood::DepositConsume,
        ProofBegun, ProofRequest, RpContext, PersonhoodStatus, PersonhoodState, DepositReceipt, RelyingParty,
        actiongate_api_types::venues::VenueReadiness, actiongate_api_types::venues::BlockingReason,
        actiongate_api_types::venues::BlockingCode, actiongate_api_types::venues::Fix,
        actiongate_api_types::venues::VenueList, actiongate_api_types::venues::VenueSummary,
        actiongate_api_types::venues::ReadinessQuery,
        actiongate_api_types::intents::IntentApproval, actiongate_api_types::intents::ApprovalItem,
        actiongate_api_types::intents::ApprovalList, actiongate_api_types::intents::RejectRequest,
        actiongate_api_types::audit::AuditEntryView, actiongate_api_types::audit::AuditVerify,
        actiongate_api_types::webhooks::WebhookRequest, actiongate_api_types::webhooks::WebhookView,
        actiongate_api_types::webhooks::WebhookCreated, actiongate_api_types::webhooks::WebhookList,
        actiongate_api_types::webhooks::Delivery, actiongate_api_types::webhooks::DeliveryList,
        actiongate_api_types::account::AccountIntent, actiongate_api_types::account::AccountIntentList,
        actiongate_api_types::account::LedgerItem, actiongate_api_types::account::AccountCredits,
        actiongate_api_types::account::AccountDelegation, actiongate_api_types::account::AccountDelegationList,
    )),
    modifiers(&Security),
    tags(
        (name = "catalog", description = "Discover: the action catalog"),
        (name = "onboarding", description = "Sign-up and sign-in by e-mail"),
        (name = "agents", description = "An owner's agents and their keys"),
        (name = "policy", description = "What an agent may do"),
        (name = "intents", description = "Check, execute and track actions"),
        (name = "webhooks", description = "Webhooks (signed, retried deliveries) and the owner's event stream (SSE)"),
        (name = "audit", description = "The owner's audit trail: every decision, hash-chained per account; export and verify"),
        (name = "approvals", description = "The owner's approval queue: writes above the policy's approvalAboveUsd wait here"),
        (name = "credits", description = "What actions cost and what is left"),
        (name = "venues", description = "Check: venue readiness, what blocks a venue's actions and what fixes it"),
        (name = "delegation", description = "ERC-7710 delegations on the MetaMask Delegation Framework: create, activate, check, verify, inspect, balance, revoke, redeem"),
        (name = "personhood", description = "Personhood for delegation: org and agent locks, deposit receipts"),
        (name = "mcp", description = "A plain-HTTP mirror of the MCP tools (the MCP server itself is at /mcp)"),
        (name = "operations", description = "Health and readiness"),
    )
)]
pub struct ApiDoc;

struct Security;

impl Modify for Security {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "ownerSession",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .bearer_format("owner-…")
                    .build(),
            ),
        );
        components.add_security_scheme(
            "agentKeyHeader",
            SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::new("x-agent-api-key"))),
        );
    }
}
