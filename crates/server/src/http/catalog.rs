//! `GET /api/v1/agent/actions/catalog` (served from bytes computed once at start, with ETag and
//! gzip) and `GET /api/v1/agent/actions`.

use std::io::Write;

use actiongate_api_types::catalog::{ActionList, CatalogDocument};
use actiongate_api_types::{Envelope, ErrorBody};
use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use sha2::{Digest, Sha256};
use utoipa::IntoParams;

use super::AppState;
use super::error::ApiError;
use super::extract::ApiQuery;

/// The catalog document, serialized and compressed once.
pub struct CatalogBytes {
    json: Bytes,
    gzip: Bytes,
    etag: HeaderValue,
}

impl CatalogBytes {
    pub fn new(document: &CatalogDocument) -> Result<Self, std::io::Error> {
        let json = serde_json::to_vec(document)?;
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        encoder.write_all(&json)?;
        let gzip = encoder.finish()?;
        let digest = Sha256::digest(&json);
        let etag = HeaderValue::from_str(&format!("\"{}\"", hex::encode(&digest[..16])))
            .map_err(std::io::Error::other)?;
        Ok(Self {
            json: json.into(),
            gzip: gzip.into(),
            etag,
        })
    }

    pub fn etag(&self) -> &HeaderValue {
        &self.etag
    }
}

/// True when an `If-None-Match` list names our tag (weak comparison, `*` included).
fn matches_etag(headers: &HeaderMap, etag: &HeaderValue) -> bool {
    let Ok(ours) = etag.to_str() else {
        return false;
    };
    headers
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|list| {
            list.split(',')
                .map(str::trim)
                .any(|tag| tag == "*" || tag.trim_start_matches("W/") == ours)
        })
}

/// True when the client accepts gzip (and did not give it q=0).
fn accepts_gzip(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|list| {
            list.split(',').any(|item| {
                let mut parts = item.split(';').map(str::trim);
                let coding = parts.next().unwrap_or("");
                let refused =
                    parts.any(|p| p.replace(' ', "") == "q=0" || p.replace(' ', "") == "q=0.0");
                (coding.eq_ignore_ascii_case("gzip") || coding == "*") && !refused
            })
        })
}

/// The catalog of every action and provider family.
#[utoipa::path(
    get,
    path = "/api/v1/agent/actions/catalog",
    tag = "catalog",
    responses(
        (status = 200, description = "The catalog document (gzip when accepted; ETag for revalidation)", body = CatalogDocument),
        (status = 304, description = "Not modified since the ETag in If-None-Match"),
    )
)]
pub async fn get_catalog(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let bytes = &state.catalog_bytes;
    let common = [
        (header::ETAG, bytes.etag.clone()),
        (
            header::CACHE_CONTROL,
            HeaderValue::from_static("public, no-cache"),
        ),
        (header::VARY, HeaderValue::from_static("accept-encoding")),
    ];
    if matches_etag(&headers, &bytes.etag) {
        return (StatusCode::NOT_MODIFIED, common).into_response();
    }
    let json = (
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    if accepts_gzip(&headers) {
        let gzip = (header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
        (common, [json, gzip], bytes.gzip.clone()).into_response()
    } else {
        (common, [json], bytes.json.clone()).into_response()
    }
}

/// Query of `GET /api/v1/agent/actions`.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ActionsQuery {
    /// With it, only the actions this agent's policy allows and that are enabled.
    pub agent_api_key: Option<String>,
}

/// The actions an agent may call (or every action, without a key).
#[utoipa::path(
    get,
    path = "/api/v1/agent/actions",
    tag = "catalog",
    params(ActionsQuery),
    responses(
        (status = 200, body = Envelope<ActionList>),
        (status = 401, description = "The key is invalid or revoked", body = ErrorBody),
    )
)]
pub async fn list_actions(
    State(state): State<AppState>,
    ApiQuery(q): ApiQuery<ActionsQuery>,
) -> Result<Json<Envelope<ActionList>>, ApiError> {
    let list = state
        .gateway
        .identity()
        .list_actions(q.agent_api_key.as_deref())
        .await?;
    Ok(Json(Envelope::new(list)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(name: header::HeaderName, value: &'static str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(name, HeaderValue::from_static(value));
        h
    }

    #[test]
    fn etag_lists_and_weak_tags_match() {
        let tag = HeaderValue::from_static("\"abc\"");
        assert!(matches_etag(
            &headers(header::IF_NONE_MATCH, "\"abc\""),
            &tag
        ));
        assert!(matches_etag(
            &headers(header::IF_NONE_MATCH, "\"x\", W/\"abc\""),
            &tag
        ));
        assert!(matches_etag(&headers(header::IF_NONE_MATCH, "*"), &tag));
        assert!(!matches_etag(
            &headers(header::IF_NONE_MATCH, "\"abd\""),
            &tag
        ));
        assert!(!matches_etag(&HeaderMap::new(), &tag));
    }

    #[test]
    fn gzip_is_chosen_only_when_accepted() {
        assert!(accepts_gzip(&headers(
            header::ACCEPT_ENCODING,
            "gzip, deflate, br"
        )));
        assert!(accepts_gzip(&headers(
            header::ACCEPT_ENCODING,
            "br;q=1.0, gzip;q=0.8"
        )));
        assert!(!accepts_gzip(&headers(header::ACCEPT_ENCODING, "gzip;q=0")));
        assert!(!accepts_gzip(&headers(header::ACCEPT_ENCODING, "identity")));
        assert!(!accepts_gzip(&HeaderMap::new()));
    }
}
