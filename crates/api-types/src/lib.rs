//! Wire types of the actiongate REST API: every request and response body, and the one table of
//! error codes. Field names follow SPEC (camelCase). Invariant: this crate knows no HTTP framework;
//! an HTTP status is only a number here.

pub mod account;
pub mod audit;
pub mod catalog;
pub mod chain;
pub mod credits;
pub mod delegation;
pub mod error;
pub mod identity;
pub mod intents;
pub mod personhood;
pub mod venues;
pub mod webhooks;

pub use error::{ErrorBody, ErrorCode, ErrorFamily};

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Every success body that SPEC does not shape itself: `{"success": true, "data": {…}}`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Envelope<T> {
    /// Always `true`.
    pub success: bool,
    pub data: T,
}

impl<T> Envelope<T> {
    pub fn new(data: T) -> Self {
        Self {
            success: true,
            data,
        }
    }
}

/// Body of `/healthz` and `/readyz`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Health {
    /// `ok` when the check passed.
    pub status: String,
}
