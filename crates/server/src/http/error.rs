//! How a core error becomes an HTTP response: the status from the code table, the envelope of
//! CONTRACT, a `Retry-After` where one applies. Internal failures are logged here, once, with their
//! detail; the caller only sees a generic sentence.

use actiongate_api_types::{ErrorBody, ErrorCode};
use actiongate_core::Error;
use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

/// An error on its way out.
#[derive(Debug)]
pub struct ApiError {
    error: Error,
}

impl ApiError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Error::new(code, message).into()
    }

    /// A malformed submission body is a refused submission too (`INTENT_REJECTED`).
    pub fn as_intent_rejection(self) -> Self {
        Self {
            error: self.error.intent_rejection(),
        }
    }

    pub fn code(&self) -> ErrorCode {
        self.error.code
    }
}

impl From<Error> for ApiError {
    fn from(error: Error) -> Self {
        Self { error }
    }
}

/// The envelope of an error, logged once here: internal failures with their detail (never sent).
/// Every surface (REST, MCP) renders a refusal through this.
pub fn error_body(error: &Error) -> ErrorBody {
    let code = error.code;
    if code.http_status() >= 500 {
        tracing::error!(code = %code, detail = error.detail.as_deref().unwrap_or(""), "request failed");
    } else if let Some(detail) = &error.detail {
        tracing::warn!(code = %code, detail, "request refused");
    }
    ErrorBody {
        success: false,
        error: error.family(),
        code,
        message: error.message.clone(),
        detail: error.shown.clone(),
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let code = self.error.code;
        let status =
            StatusCode::from_u16(code.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let body = error_body(&self.error);
        let mut response = (status, Json(body)).into_response();
        // For the request metrics (crate::metrics::count_requests).
        response.extensions_mut().insert(code);
        if let Some(seconds) = self.error.retry_after
            && let Ok(v) = HeaderValue::from_str(&seconds.to_string())
        {
            response.headers_mut().insert(header::RETRY_AFTER, v);
        }
        response
    }
}

/// The answer for a path no route has.
pub async fn not_found() -> ApiError {
    ApiError::new(
        ErrorCode::NotFound,
        "No such route; see /api/v1/openapi.json for every route.",
    )
}

/// The answer for a route called with the wrong method.
pub async fn method_not_allowed() -> ApiError {
    ApiError::new(
        ErrorCode::MethodNotAllowed,
        "This route does not take that HTTP method; see /api/v1/openapi.json.",
    )
}
