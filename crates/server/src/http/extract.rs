//! Extractors whose rejections speak our envelope: malformed JSON is `INVALID_REQUEST`, a body over
//! the limit `PAYLOAD_TOO_LARGE` (413), a body that is not JSON `UNSUPPORTED_MEDIA_TYPE` (415) —
//! never axum's plain-text rejections.

use actiongate_api_types::ErrorCode;
use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Query, Request};
use axum::http::{HeaderMap, StatusCode, header, request::Parts};
use serde::de::DeserializeOwned;

use super::error::ApiError;

/// Largest accepted request body.
pub const BODY_LIMIT: usize = 1024 * 1024;

/// A JSON body.
pub struct ApiJson<T>(pub T);

fn json_rejection(rejection: JsonRejection) -> ApiError {
    match rejection {
        JsonRejection::MissingJsonContentType(_) => ApiError::new(
            ErrorCode::UnsupportedMediaType,
            "The body must be JSON sent with Content-Type: application/json.",
        ),
        JsonRejection::BytesRejection(r) if r.status() == StatusCode::PAYLOAD_TOO_LARGE => {
            ApiError::new(
                ErrorCode::PayloadTooLarge,
                "The request body is over the 1 MiB limit.",
            )
        }
        JsonRejection::JsonDataError(e) => {
            ApiError::new(ErrorCode::InvalidRequest, clean(e.body_text()))
        }
        JsonRejection::JsonSyntaxError(e) => {
            ApiError::new(ErrorCode::InvalidRequest, clean(e.body_text()))
        }
        other => ApiError::new(ErrorCode::InvalidRequest, clean(other.body_text())),
    }
}

/// serde's messages are good; axum's prefix about "the target type" is noise to an API user.
fn clean(text: String) -> String {
    text.replace(
        "Failed to deserialize the JSON body into the target type: ",
        "Invalid JSON body: ",
    )
    .replace(
        "Failed to parse the request body as JSON: ",
        "Malformed JSON body: ",
    )
}

impl<S, T> FromRequest<S> for ApiJson<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        match axum::Json::<T>::from_request(req, state).await {
            Ok(axum::Json(v)) => Ok(Self(v)),
            Err(rejection) => Err(json_rejection(rejection)),
        }
    }
}

/// A raw body, within the limit (`PAYLOAD_TOO_LARGE` in the envelope beyond it).
pub struct ApiBytes(pub axum::body::Bytes);

impl<S> FromRequest<S> for ApiBytes
where
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        match axum::body::Bytes::from_request(req, state).await {
            Ok(b) => Ok(Self(b)),
            Err(r) if r.status() == StatusCode::PAYLOAD_TOO_LARGE => Err(ApiError::new(
                ErrorCode::PayloadTooLarge,
                "The request body is over the 1 MiB limit.",
            )),
            Err(r) => Err(ApiError::new(ErrorCode::InvalidRequest, r.body_text())),
        }
    }
}

/// A JSON body that may be absent altogether (then `T::default()`).
pub struct OptionalJson<T>(pub T);

impl<S, T> FromRequest<S> for OptionalJson<T>
where
    T: DeserializeOwned + Default,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let empty = req
            .headers()
            .get(header::CONTENT_LENGTH)
            .is_some_and(|v| v == "0")
            || (req.headers().get(header::CONTENT_TYPE).is_none()
                && req.headers().get(header::TRANSFER_ENCODING).is_none()
                && req.headers().get(header::CONTENT_LENGTH).is_none());
        if empty {
            return Ok(Self(T::default()));
        }
        ApiJson::<T>::from_request(req, state)
            .await
            .map(|ApiJson(v)| Self(v))
    }
}

/// A query string.
pub struct ApiQuery<T>(pub T);

impl<S, T> FromRequestParts<S> for ApiQuery<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match Query::<T>::from_request_parts(parts, state).await {
            Ok(Query(v)) => Ok(Self(v)),
            Err(QueryRejection::FailedToDeserializeQueryString(e)) => Err(ApiError::new(
                ErrorCode::InvalidRequest,
                format!("Invalid query string: {}", e.body_text()),
            )),
            Err(other) => Err(ApiError::new(ErrorCode::InvalidRequest, other.body_text())),
        }
    }
}

/// The token of an `Authorization: Bearer …` header.
pub fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.trim().split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}
