//! Buying credits with x402: `GET /api/v1/credits/x402-metadata`, `POST /api/v1/credits/buy-with-x402`
//! (open) and `POST /api/v1/agent/credits/buy-with-x402` (the agent's account); linking a wallet to an
//! account with EIP-4361 (`POST /api/v1/wallets/link/begin`, `POST /api/v1/wallets/link`).

use actiongate_api_types::credits::{
    BuyCreditsRequest, ChallengeBody, CreditPurchase, WalletLinkBegin, WalletLinkChallenge,
    WalletLinkRequest, WalletLinked, X402Metadata,
};
use actiongate_api_types::{Envelope, ErrorBody};
use actiongate_core::purchases::{BuyAnswer, PaymentProof};
use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::AppState;
use super::error::ApiError;
use super::extract::ApiJson;
use super::identity::Owner;

fn header_text(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

fn proof(headers: &HeaderMap) -> PaymentProof {
    PaymentProof {
        receipt: header_text(headers, "x-payment-receipt"),
        invoice_id: header_text(headers, "x-invoice-id"),
        payment_signature: header_text(headers, "payment-signature"),
    }
}

/// A JSON value as an x402 header: base64 of its JSON text.
fn x402_header(value: &serde_json::Value) -> Option<HeaderValue> {
    use base64::Engine as _;
    HeaderValue::from_str(&base64::engine::general_purpose::STANDARD.encode(value.to_string())).ok()
}

/// The answer, with the standard x402 v2 headers beside SPEC's body: `PAYMENT-REQUIRED` on a 402
/// (the same invoice's requirements, for this resource), `PAYMENT-RESPONSE` on a standard payment.
fn render(answer: BuyAnswer, resource: &str) -> Response {
    match answer {
        BuyAnswer::Paid {
            purchase,
            settlement,
        } => {
            let mut response = Json(purchase).into_response();
            if let Some(v) = settlement.as_ref().and_then(x402_header) {
                response.headers_mut().insert("PAYMENT-RESPONSE", v);
            }
            response
        }
        BuyAnswer::Challenge {
            body,
            retry_after,
            accepts,
        } => {
            let required = serde_json::json!({
                "x402Version": 2,
                "error": "Payment required",
                "resource": {"url": resource, "description": "actiongate credits", "mimeType": "application/json"},
                "accepts": accepts,
            });
            let mut response = (StatusCode::PAYMENT_REQUIRED, Json(body)).into_response();
            if let Some(v) = x402_header(&required) {
                response.headers_mut().insert("PAYMENT-REQUIRED", v);
            }
            if let Some(seconds) = retry_after {
                response
                    .headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
            }
            response
        }
    }
}

/// The resource URL a standard x402 client pays for.
fn resource_of(headers: &HeaderMap, path: &str) -> String {
    let host = header_text(headers, "host").unwrap_or_else(|| "localhost".into());
    format!("http://{host}{path}")
}

/// The credit packages and how to pay for them.
#[utoipa::path(
    get,
    path = "/api/v1/credits/x402-metadata",
    tag = "credits",
    responses((status = 200, body = Envelope<X402Metadata>), (status = 503, description = "NOT_AVAILABLE: purchases are not configured", body = ErrorBody))
)]
pub async fn metadata(
    State(state): State<AppState>,
) -> Result<Json<Envelope<X402Metadata>>, ApiError> {
    Ok(Json(Envelope::new(
        state.gateway.credits().x402_metadata()?,
    )))
}

/// Buys a credit package (SPEC's four steps). Without payment headers: 402 with the challenge (and the
/// standard x402 v2 `PAYMENT-REQUIRED` header). The retry with `X-Payment-Receipt` (the transfer's
/// hash) and `X-Invoice-Id`: 200 once the transfer is verified onchain, or 402 again with
/// `Retry-After` while it is not mined or confirmed. Or, as any x402 v2 client does, the retry with
/// `PAYMENT-SIGNATURE` (an EIP-3009 authorization): verified, settled by the gateway, 200 with
/// `PAYMENT-RESPONSE`.
#[utoipa::path(
    post,
    path = "/api/v1/credits/buy-with-x402",
    tag = "credits",
    request_body = BuyCreditsRequest,
    params(
        ("X-Payment-Receipt" = Option<String>, Header, description = "The payment transaction's hash"),
        ("X-Invoice-Id" = Option<String>, Header, description = "The invoiceId of the challenge"),
        ("PAYMENT-SIGNATURE" = Option<String>, Header, description = "x402 v2: base64 JSON payment payload with an EIP-3009 authorization"),
    ),
    responses(
        (status = 200, body = CreditPurchase),
        (status = 402, description = "Pay the challenge (again, after Retry-After, when the payment is not confirmed yet)", body = ChallengeBody),
        (status = 400, description = "INVALID_REQUEST", body = ErrorBody),
        (status = 404, description = "INVOICE_NOT_FOUND", body = ErrorBody),
        (status = 409, description = "PAYMENT_ALREADY_USED, INVOICE_ALREADY_PAID", body = ErrorBody),
        (status = 422, description = "INVOICE_EXPIRED, INVOICE_MISMATCH, PAYMENT_REVERTED, PAYMENT_WRONG_TOKEN, PAYMENT_WRONG_RECIPIENT, PAYMENT_WRONG_PAYER, PAYMENT_AMOUNT_MISMATCH, PAYMENT_AUTHORIZATION_INVALID", body = ErrorBody),
        (status = 429, description = "RATE_LIMITED (with Retry-After): new invoices or paid retries from this address, or every invoice tag held", body = ErrorBody),
        (status = 503, description = "NOT_AVAILABLE: not configured, the payment chain's node did not answer (a new invoice records its head block), or (with Retry-After) an x402 settlement sent and not mined yet: send the same payment again", body = ErrorBody),
    )
)]
pub async fn buy(
    State(state): State<AppState>,
    headers: HeaderMap,
    ApiJson(req): ApiJson<BuyCreditsRequest>,
) -> Result<Response, ApiError> {
    let answer = state
        .gateway
        .credits()
        .buy_credits(&req, &proof(&headers), None)
        .await?;
    Ok(render(
        answer,
        &resource_of(&headers, "/api/v1/credits/buy-with-x402"),
    ))
}

/// The same purchase for the agent's account (header `x-agent-api-key`); `userAddress` defaults to the
/// agent's wallet, any wallet may pay.
#[utoipa::path(
    post,
    path = "/api/v1/agent/credits/buy-with-x402",
    tag = "credits",
    request_body = BuyCreditsRequest,
    params(
        ("x-agent-api-key" = String, Header, description = "The agent key"),
        ("X-Payment-Receipt" = Option<String>, Header, description = "The payment transaction's hash"),
        ("X-Invoice-Id" = Option<String>, Header, description = "The invoiceId of the challenge"),
        ("PAYMENT-SIGNATURE" = Option<String>, Header, description = "x402 v2: base64 JSON payment payload with an EIP-3009 authorization"),
    ),
    responses(
        (status = 200, body = CreditPurchase),
        (status = 402, body = ChallengeBody),
        (status = 401, description = "UNAUTHORIZED", body = ErrorBody),
        (status = 404, description = "INVOICE_NOT_FOUND", body = ErrorBody),
        (status = 409, description = "PAYMENT_ALREADY_USED, INVOICE_ALREADY_PAID", body = ErrorBody),
        (status = 422, description = "INVOICE_EXPIRED, INVOICE_MISMATCH, PAYMENT_REVERTED, PAYMENT_WRONG_TOKEN, PAYMENT_WRONG_RECIPIENT, PAYMENT_WRONG_PAYER, PAYMENT_AMOUNT_MISMATCH, PAYMENT_AUTHORIZATION_INVALID", body = ErrorBody),
        (status = 429, description = "RATE_LIMITED (with Retry-After): this key's rate, or every invoice tag held", body = ErrorBody),
        (status = 503, description = "NOT_AVAILABLE: not configured, the payment chain's node did not answer (a new invoice records its head block), or (with Retry-After) an x402 settlement sent and not mined yet: send the same payment again", body = ErrorBody),
    )
)]
pub async fn agent_buy(
    State(state): State<AppState>,
    headers: HeaderMap,
    ApiJson(req): ApiJson<BuyCreditsRequest>,
) -> Result<Response, ApiError> {
    let key = super::intents::header_key(&headers).unwrap_or_default();
    let answer = state
        .gateway
        .credits()
        .buy_credits(&req, &proof(&headers), Some(key))
        .await?;
    Ok(render(
        answer,
        &resource_of(&headers, "/api/v1/agent/credits/buy-with-x402"),
    ))
}

/// Issues the EIP-4361 message that links a wallet to the owner's account once the wallet signs it.
#[utoipa::path(
    post,
    path = "/api/v1/wallets/link/begin",
    tag = "credits",
    security(("ownerSession" = [])),
    request_body = WalletLinkBegin,
    responses((status = 200, body = Envelope<WalletLinkChallenge>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody))
)]
pub async fn link_begin(
    State(state): State<AppState>,
    Owner(owner): Owner,
    ApiJson(req): ApiJson<WalletLinkBegin>,
) -> Result<Json<Envelope<WalletLinkChallenge>>, ApiError> {
    Ok(Json(Envelope::new(
        state
            .gateway
            .credits()
            .begin_wallet_link(&owner, &req)
            .await?,
    )))
}

/// Links the wallet that signed (`personal_sign`) the issued message; credits it bought before join
/// the account.
#[utoipa::path(
    post,
    path = "/api/v1/wallets/link",
    tag = "credits",
    security(("ownerSession" = [])),
    request_body = WalletLinkRequest,
    responses(
        (status = 200, body = Envelope<WalletLinked>),
        (status = 400, description = "WALLET_SIGNATURE_INVALID", body = ErrorBody),
        (status = 401, description = "UNAUTHORIZED", body = ErrorBody),
        (status = 409, description = "WALLET_LINK_INVALID, WALLET_LINKED_ELSEWHERE", body = ErrorBody),
    )
)]
pub async fn link(
    State(state): State<AppState>,
    Owner(owner): Owner,
    ApiJson(req): ApiJson<WalletLinkRequest>,
) -> Result<Json<Envelope<WalletLinked>>, ApiError> {
    Ok(Json(Envelope::new(
        state
            .gateway
            .credits()
            .complete_wallet_link(&owner, &req)
            .await?,
    )))
}
