//! The one error type of the core: a code from the table in `actiongate-api-types`, a message for a
//! person, and (for internal failures only) a private detail that is logged once at the boundary and
//! never sent.

use actiongate_api_types::{ErrorCode, ErrorFamily};

/// A refusal or a failure, as every surface reports it.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{code}: {message}")]
pub struct Error {
    pub code: ErrorCode,
    pub message: String,
    /// Internal detail for the log; never on the wire.
    pub detail: Option<String>,
    /// Seconds the caller should wait, for rate limits.
    pub retry_after: Option<u64>,
    /// The family when it is not the code's own (a refused submission is `INTENT_REJECTED`).
    pub family: Option<ErrorFamily>,
    /// What the caller acts on, sent as the error body's `detail` (`VENUE_NOT_READY`'s reasons).
    pub shown: Option<serde_json::Value>,
}

impl Error {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            detail: None,
            retry_after: None,
            family: None,
            shown: None,
        }
    }

    /// Attaches what the caller acts on: the error body's `detail`.
    pub fn with_shown(mut self, shown: serde_json::Value) -> Self {
        self.shown = Some(shown);
        self
    }

    /// Attaches an internal detail for the log.
    pub fn with_detail(mut self, detail: impl std::fmt::Display) -> Self {
        self.detail = Some(detail.to_string());
        self
    }

    /// An unexpected failure: the caller sees a generic sentence, the log gets `detail`.
    pub fn internal(detail: impl std::fmt::Display) -> Self {
        Self {
            code: ErrorCode::Internal,
            message:
                "An internal error occurred; the request id identifies it in the gateway's logs."
                    .into(),
            detail: Some(detail.to_string()),
            retry_after: None,
            family: None,
            shown: None,
        }
    }

    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Unauthorized, message)
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidRequest, message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::NotFound, message)
    }

    /// A refused submission (SPEC): the family `INTENT_REJECTED` whatever the code; internal
    /// failures keep theirs.
    pub fn intent_rejection(mut self) -> Self {
        if self.code.http_status() < 500 {
            self.family = Some(ErrorFamily::IntentRejected);
        }
        self
    }

    /// The family the envelope carries.
    pub fn family(&self) -> ErrorFamily {
        self.family.unwrap_or(self.code.family())
    }

    pub fn with_retry_after(mut self, seconds: u64) -> Self {
        self.retry_after = Some(seconds);
        self
    }
}

impl From<crate::store::StoreError> for Error {
    /// A busy or unreachable database is answered 503 with a retry hint (nothing was written);
    /// anything else is an internal error.
    fn from(e: crate::store::StoreError) -> Self {
        use crate::store::StoreErrorKind::{Busy, Unavailable};
        match e.kind() {
            Busy | Unavailable => Error {
                detail: Some(e.to_string()),
                ..Error::new(
                    ErrorCode::NotAvailable,
                    "The gateway's database is busy or unreachable; nothing was changed. Try again shortly.",
                )
                .with_retry_after(1)
            },
            _ => Error::internal(e),
        }
    }
}

impl From<crate::crypto::CryptoError> for Error {
    fn from(e: crate::crypto::CryptoError) -> Self {
        Error::internal(e)
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{StoreError, StoreErrorKind};

    #[test]
    fn a_busy_or_absent_database_asks_for_a_retry_and_the_rest_is_internal() {
        for kind in [StoreErrorKind::Busy, StoreErrorKind::Unavailable] {
            let e = Error::from(StoreError::new(kind, "database is locked"));
            assert_eq!((e.code, e.retry_after), (ErrorCode::NotAvailable, Some(1)));
            assert!(!e.message.contains("locked"), "the detail stays in the log");
            assert!(e.detail.is_some_and(|d| d.contains("database is locked")));
        }
        for kind in [StoreErrorKind::Corrupt, StoreErrorKind::Other] {
            let e = Error::from(StoreError::new(kind, "x"));
            assert_eq!((e.code, e.retry_after), (ErrorCode::Internal, None));
        }
    }
}
