//! The error envelope and the table of error codes: each code knows its HTTP status, its family and
//! its wire name. This is the one place where a code's status lives (CONTRACT "Envelope and errors").

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// The family of an error: the `error` field of the envelope.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ErrorFamily {
    IntentRejected,
    Unauthorized,
    InvalidRequest,
    NotFound,
    Conflict,
    PersonhoodRejected,
    RateLimited,
    Internal,
}

macro_rules! error_codes {
    ($($variant:ident = $name:literal, $status:literal, $family:ident, $doc:literal;)*) => {
        /// The precise reason of a refusal: the `code` field of the envelope.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
        pub enum ErrorCode {
            $(#[doc = $doc] #[serde(rename = $name)] $variant,)*
        }

        impl ErrorCode {
            /// Every code, in table order.
            pub const ALL: &'static [ErrorCode] = &[$(ErrorCode::$variant,)*];

            /// The wire name, as in CONTRACT.
            pub const fn as_str(self) -> &'static str {
                match self { $(ErrorCode::$variant => $name,)* }
            }

            /// The HTTP status this code is answered with.
            pub const fn http_status(self) -> u16 {
                match self { $(ErrorCode::$variant => $status,)* }
            }

            /// The family a refusal of this code belongs to outside intent submission.
            pub const fn family(self) -> ErrorFamily {
                match self { $(ErrorCode::$variant => ErrorFamily::$family,)* }
            }

            /// One line describing the code, for docs and the OpenAPI document.
            pub const fn describe(self) -> &'static str {
                match self { $(ErrorCode::$variant => $doc,)* }
            }
        }
    };
}

error_codes! {
    InvalidRequest = "INVALID_REQUEST", 400, InvalidRequest, "The request is malformed: bad JSON, a missing or mistyped field.";
    InvalidParams = "INVALID_PARAMS", 400, InvalidRequest, "params do not match the action's paramsSchema; the message names the field.";
    WalletIdempotencyKeyRequired = "WALLET_IDEMPOTENCY_KEY_REQUIRED", 400, InvalidRequest, "A write from the agent wallet needs an explicit idempotencyKey.";
    WalletSignatureInvalid = "WALLET_SIGNATURE_INVALID", 400, InvalidRequest, "The signature is not the wallet's signature of the issued sign-in message.";
    WebhookUrlRefused = "WEBHOOK_URL_REFUSED", 400, InvalidRequest, "The webhook URL names a private, loopback or link-local address (or does not resolve): the gateway does not call it.";
    UnknownChain = "UNKNOWN_CHAIN", 400, InvalidRequest, "The chainId is not one this gateway knows.";
    TermsNotAccepted = "TERMS_NOT_ACCEPTED", 400, InvalidRequest, "Onboarding completes only with acceptTerms true.";
    Unauthorized = "UNAUTHORIZED", 401, Unauthorized, "The agent key or owner session is missing, invalid, revoked or expired.";
    InvalidCode = "INVALID_CODE", 401, Unauthorized, "The e-mail code is wrong; the message says how many tries are left.";
    CodeExpired = "CODE_EXPIRED", 401, Unauthorized, "The e-mail code has expired or was never requested; start onboarding again.";
    InsufficientCredits = "INSUFFICIENT_CREDITS", 402, IntentRejected, "The paid balance cannot cover the action and the free allowance is used.";
    DailyFreeLimitExceeded = "DAILY_FREE_LIMIT_EXCEEDED", 402, IntentRejected, "The free daily requests are used up and the paid balance is empty.";
    ActionNotAllowed = "ACTION_NOT_ALLOWED", 403, IntentRejected, "The action is not on the agent's allowlist.";
    PolicyDailyLimit = "POLICY_DAILY_LIMIT", 403, IntentRejected, "The agent's daily USD limit would be exceeded.";
    PolicyAmountLimit = "POLICY_AMOUNT_LIMIT", 403, IntentRejected, "The USD amount exceeds the action's maxAmountUsd or the policy's per-action cap.";
    PolicyHealthFactor = "POLICY_HEALTH_FACTOR", 403, IntentRejected, "A borrow or withdrawal would leave the lending position's health factor below the policy's minHealthFactor.";
    AgentIdentityMismatch = "AGENT_IDENTITY_MISMATCH", 403, Unauthorized, "A different agent key was passed in arguments than the one authenticating.";
    DelegationRequired = "DELEGATION_REQUIRED", 403, IntentRejected, "Fan-out needs an active delegation first.";
    PersonhoodOrgNullifierMismatch = "PERSONHOOD_ORG_NULLIFIER_MISMATCH", 403, PersonhoodRejected, "The organization (or agent) is locked to a different person.";
    PersonhoodDepositNullifierMismatch = "PERSONHOOD_DEPOSIT_NULLIFIER_MISMATCH", 403, PersonhoodRejected, "A deposit proof from a different person than the organization's lock.";
    PersonhoodProofInvalid = "PERSONHOOD_PROOF_INVALID", 403, PersonhoodRejected, "The proof was not verified, or is for another action, signal or request than ours.";
    InvoiceNotFound = "INVOICE_NOT_FOUND", 404, NotFound, "No open x402 invoice with that id (for this buyer).";
    UnknownAction = "UNKNOWN_ACTION", 404, NotFound, "No action of that name or alias is in the catalog.";
    NotFound = "NOT_FOUND", 404, NotFound, "No such resource (or it belongs to someone else).";
    MethodNotAllowed = "METHOD_NOT_ALLOWED", 405, InvalidRequest, "The route exists but not with this HTTP method.";
    IdempotencyKeyReused = "IDEMPOTENCY_KEY_REUSED", 409, Conflict, "The idempotencyKey was used before with a different request.";
    OrderNotOpen = "ORDER_NOT_OPEN", 409, Conflict, "The prediction order is not open any more (filled, expired, failed, or being filled now): nothing was cancelled; the message says its state.";
    OrderCancelled = "ORDER_CANCELLED", 409, Conflict, "A held prediction order's end: its agent cancelled it before it filled; its daily-limit share and credits were released.";
    OrderExpired = "ORDER_EXPIRED", 409, Conflict, "A held GTD prediction order's end: its expiration passed before it filled; its daily-limit share and credits were released.";
    ApprovalNotPending = "APPROVAL_NOT_PENDING", 409, Conflict, "The intent's approval is not pending any more (approved, rejected or expired): nothing changed; the message says its state.";
    ApprovalRejected = "APPROVAL_REJECTED", 409, Conflict, "An intent's end: its owner rejected it before it ran; nothing was sent, its daily-limit share and credits were released.";
    ApprovalExpired = "APPROVAL_EXPIRED", 409, Conflict, "An intent's end: its owner did not approve it within the approval time; nothing was sent, its daily-limit share and credits were released.";
    PersonhoodDepositReceiptAlreadyUsed = "PERSONHOOD_DEPOSIT_RECEIPT_ALREADY_USED", 409, PersonhoodRejected, "The deposit receipt was consumed before.";
    PaymentAlreadyUsed = "PAYMENT_ALREADY_USED", 409, Conflict, "The payment transaction already paid an invoice.";
    WalletLinkInvalid = "WALLET_LINK_INVALID", 409, Conflict, "No open sign-in message matches: it expired, was used, or was issued to another account.";
    WalletLinkedElsewhere = "WALLET_LINKED_ELSEWHERE", 409, Conflict, "The wallet is linked to another account.";
    InvoiceAlreadyPaid = "INVOICE_ALREADY_PAID", 409, Conflict, "The invoice was paid by another transaction; ask for a new challenge.";
    PersonhoodChallengeInvalid = "PERSONHOOD_CHALLENGE_INVALID", 409, PersonhoodRejected, "No open proof request matches: it expired, was answered, or was never issued.";
    PersonhoodOrgNotLocked = "PERSONHOOD_ORG_NOT_LOCKED", 409, PersonhoodRejected, "A deposit proof for an organization with no verified person yet.";
    PayloadTooLarge = "PAYLOAD_TOO_LARGE", 413, InvalidRequest, "The request body is over 1 MiB.";
    UnsupportedMediaType = "UNSUPPORTED_MEDIA_TYPE", 415, InvalidRequest, "The body must be sent as application/json.";
    ActionDisabled = "ACTION_DISABLED", 422, InvalidRequest, "The action exists but is not enabled in this deployment.";
    VenueNotReady = "VENUE_NOT_READY", 422, IntentRejected, "The venue needs funding, credentials or approvals first.";
    OrderNotFilled = "ORDER_NOT_FILLED", 422, IntentRejected, "A FOK or FAK prediction order found nothing to fill at or better than its price now: nothing was sent, its daily-limit share and credits were released.";
    RouteNotSupported = "ROUTE_NOT_SUPPORTED", 422, IntentRejected, "No configured bridge route carries this token between these chains.";
    PriceUnavailable = "PRICE_UNAVAILABLE", 422, IntentRejected, "The gateway cannot price this write (no price source for its token, a stale feed, or an amount that does not fit): nothing was written or charged.";
    ChainNotConfigured = "CHAIN_NOT_CONFIGURED", 422, InvalidRequest, "The action needs a chain this gateway has no RPC URL for.";
    ExecutionReverted = "EXECUTION_REVERTED", 422, IntentRejected, "A simulation failed; the message carries the decoded revert reason.";
    InvoiceExpired = "INVOICE_EXPIRED", 422, InvalidRequest, "The invoice expired before it was paid; ask for a new challenge.";
    InvoiceMismatch = "INVOICE_MISMATCH", 422, InvalidRequest, "The invoice is for another sku or another userAddress than this request.";
    PaymentReverted = "PAYMENT_REVERTED", 422, InvalidRequest, "The payment transaction was mined and reverted: nothing was paid.";
    PaymentWrongToken = "PAYMENT_WRONG_TOKEN", 422, InvalidRequest, "The payment transaction moves no units of the invoice's stablecoin.";
    PaymentWrongRecipient = "PAYMENT_WRONG_RECIPIENT", 422, InvalidRequest, "The payment transaction pays the stablecoin to someone other than the recipient.";
    PaymentWrongPayer = "PAYMENT_WRONG_PAYER", 422, InvalidRequest, "The payment transaction pays the recipient from another wallet than userAddress.";
    PaymentAuthorizationInvalid = "PAYMENT_AUTHORIZATION_INVALID", 422, InvalidRequest, "The x402 authorization does not pay this invoice: its signature, recipient, amount, validity window or payer's balance is wrong.";
    PaymentAmountMismatch = "PAYMENT_AMOUNT_MISMATCH", 422, InvalidRequest, "The payment transaction does not pay exactly the invoice's challenge amount.";
    DelegationSignatureInvalid = "DELEGATION_SIGNATURE_INVALID", 422, InvalidRequest, "The delegation's signature is not the delegator's (ECDSA for a codeless account, ERC-1271 for a smart account).";
    DelegationWrongDelegate = "DELEGATION_WRONG_DELEGATE", 422, InvalidRequest, "The delegation is to another delegate than this agent's execution wallet.";
    DelegationWrongChain = "DELEGATION_WRONG_CHAIN", 422, InvalidRequest, "The delegation was signed for another chain's DelegationManager than the chainId given.";
    DelegationExpired = "DELEGATION_EXPIRED", 422, InvalidRequest, "The delegation's time window has closed (or has not opened and never will before it closes).";
    DelegationInvalid = "DELEGATION_INVALID", 422, InvalidRequest, "The delegation is malformed: its authority, caveats or enforcers are not ones this gateway can honour.";
    DelegationRevoked = "DELEGATION_REVOKED", 422, InvalidRequest, "The delegator disabled the delegation onchain (or it was revoked here); nothing was sent.";
    DelegationCaveatRefused = "DELEGATION_CAVEAT_REFUSED", 422, IntentRejected, "A caveat enforcer of the delegation refused the execution.";
    RateLimited = "RATE_LIMITED", 429, RateLimited, "Too many requests; wait for Retry-After seconds.";
    TooManyAttempts = "TOO_MANY_ATTEMPTS", 429, RateLimited, "Too many wrong e-mail codes; start onboarding again.";
    Internal = "INTERNAL", 500, Internal, "An unexpected failure; nothing about it is leaked, the request id finds it in the logs.";
    NotAvailable = "NOT_AVAILABLE", 503, Internal, "A capability this deployment does not have yet, or an upstream that is down.";
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Every error body: `{"success": false, "error", "code", "message"}`, and `detail` on the refusals
/// that carry what a client acts on (`VENUE_NOT_READY`: `{venue, chainId, lane, blockingReasons}`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ErrorBody {
    /// Always `false`.
    pub success: bool,
    /// The family of the refusal.
    pub error: ErrorFamily,
    /// The precise reason.
    pub code: ErrorCode,
    /// A sentence for a person.
    pub message: String,
    /// What a client acts on, for the codes that have it; absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub detail: Option<serde_json::Value>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_names_round_trip_through_serde() {
        for code in ErrorCode::ALL {
            let json = serde_json::to_value(code).unwrap_or_default();
            assert_eq!(json, serde_json::Value::String(code.as_str().to_owned()));
        }
    }

    #[test]
    fn statuses_match_contract() {
        assert_eq!(ErrorCode::InvalidParams.http_status(), 400);
        assert_eq!(ErrorCode::Unauthorized.http_status(), 401);
        assert_eq!(ErrorCode::DailyFreeLimitExceeded.http_status(), 402);
        assert_eq!(ErrorCode::AgentIdentityMismatch.http_status(), 403);
        assert_eq!(ErrorCode::UnknownAction.http_status(), 404);
        assert_eq!(ErrorCode::PaymentAlreadyUsed.http_status(), 409);
        assert_eq!(ErrorCode::ChainNotConfigured.http_status(), 422);
        assert_eq!(ErrorCode::RateLimited.http_status(), 429);
        assert_eq!(ErrorCode::NotAvailable.http_status(), 503);
    }
}

#[cfg(test)]
mod docs_tests {
    use super::*;

    /// docs/API.md lists every code with its status and family, and nothing else.
    #[test]
    fn the_api_doc_table_matches_the_code_table() {
        let doc = include_str!("../../../docs/API.md");
        let rows: Vec<Vec<&str>> = doc
            .lines()
            .filter(|l| l.starts_with("| ") && l.matches('|').count() >= 5)
            .map(|l| {
                l.split('|')
                    .map(str::trim)
                    .filter(|c| !c.is_empty())
                    .collect()
            })
            .filter(|cells: &Vec<&str>| cells.len() >= 3 && cells[1].parse::<u16>().is_ok())
            .collect();
        for code in ErrorCode::ALL {
            let family = serde_json::to_value(code.family()).unwrap_or_default();
            let row = rows.iter().find(|r| r[0] == code.as_str());
            assert!(row.is_some(), "docs/API.md has no row for {code}");
            if let Some(row) = row {
                assert_eq!(
                    row[1],
                    code.http_status().to_string(),
                    "status of {code} in docs/API.md"
                );
                assert_eq!(
                    Some(row[2]),
                    family.as_str(),
                    "family of {code} in docs/API.md"
                );
            }
        }
        assert_eq!(
            rows.len(),
            ErrorCode::ALL.len(),
            "docs/API.md lists a code the code table lacks"
        );
    }
}
