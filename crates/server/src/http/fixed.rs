//! Response bodies made once at start (the catalog, the mirror's tool list and catalog answer):
//! the JSON, its gzip and an ETag, so that a request costs a header check and a reference count.

use std::io::Write;

use axum::body::Bytes;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use sha2::{Digest, Sha256};

/// One body, serialized and compressed once. Each coding has a tag of its own (a strong tag names
/// one representation's bytes).
pub struct FixedBody {
    json: Bytes,
    gzip: Bytes,
    etag: HeaderValue,
    etag_gzip: HeaderValue,
}

impl FixedBody {
    pub fn of<T: Serialize + ?Sized>(value: &T) -> Result<Self, std::io::Error> {
        let json = serde_json::to_vec(value)?;
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        encoder.write_all(&json)?;
        let gzip = encoder.finish()?;
        let digest = hex::encode(&Sha256::digest(&json)[..16]);
        let tag = |t: String| HeaderValue::from_str(&t).map_err(std::io::Error::other);
        Ok(Self {
            json: json.into(),
            gzip: gzip.into(),
            etag: tag(format!("\"{digest}\""))?,
            etag_gzip: tag(format!("\"{digest}-gzip\""))?,
        })
    }

    /// The answer to a GET: 304 when `If-None-Match` names the tag, else the body (gzip when
    /// accepted), with the tag for revalidation.
    pub fn get(&self, headers: &HeaderMap) -> Response {
        let gzip = accepts_gzip(headers);
        let etag = if gzip { &self.etag_gzip } else { &self.etag };
        let common = [
            (header::ETAG, etag.clone()),
            (
                header::CACHE_CONTROL,
                HeaderValue::from_static("public, no-cache"),
            ),
            (header::VARY, HeaderValue::from_static("accept-encoding")),
        ];
        if matches_etag(headers, etag) {
            return (StatusCode::NOT_MODIFIED, common).into_response();
        }
        (common, self.body(gzip)).into_response()
    }

    /// The answer to a POST (a call whose result is fixed): the body, gzip when accepted; no
    /// validators, and preconditions are not evaluated (a POST is not revalidated).
    pub fn post(&self, headers: &HeaderMap) -> Response {
        (
            [(header::VARY, HeaderValue::from_static("accept-encoding"))],
            self.body(accepts_gzip(headers)),
        )
            .into_response()
    }

    fn body(&self, gzip: bool) -> Response {
        let json = (
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        if gzip {
            let gzip = (header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
            ([json, gzip], self.gzip.clone()).into_response()
        } else {
            ([json], self.json.clone()).into_response()
        }
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

/// True when the client accepts gzip: named (`gzip` or `x-gzip`) with a weight above 0, or not named
/// and `*` has a weight above 0 (RFC 9110, 12.5.3: a coding named with q=0 is refused, `*` too).
fn accepts_gzip(headers: &HeaderMap) -> bool {
    let mut named = None;
    let mut any = None;
    let items = headers
        .get_all(header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|list| list.split(','));
    for item in items {
        let mut parts = item.split(';').map(str::trim);
        let coding = parts.next().unwrap_or("");
        let weight = parts
            .filter_map(|p| p.split_once('='))
            .find(|(k, _)| k.trim().eq_ignore_ascii_case("q"))
            .map_or(1.0, |(_, q)| q.trim().parse::<f32>().unwrap_or(0.0));
        if coding.eq_ignore_ascii_case("gzip") || coding.eq_ignore_ascii_case("x-gzip") {
            named = Some(named.unwrap_or(0.0_f32).max(weight));
        } else if coding == "*" {
            any = Some(weight);
        }
    }
    named.or(any).is_some_and(|q| q > 0.0)
}

#[cfg(test)]
mod tests {
    use std::io::Read;

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
        assert!(!accepts_gzip(&headers(
            header::ACCEPT_ENCODING,
            "gzip;q=0.000, *"
        )));
        assert!(accepts_gzip(&headers(header::ACCEPT_ENCODING, "*")));
        assert!(!accepts_gzip(&headers(header::ACCEPT_ENCODING, "*;q=0")));
        assert!(accepts_gzip(&headers(header::ACCEPT_ENCODING, "x-gzip")));
        assert!(!accepts_gzip(&headers(header::ACCEPT_ENCODING, "identity")));
        assert!(!accepts_gzip(&HeaderMap::new()));
    }

    #[test]
    fn the_gzip_is_the_json() {
        let body = FixedBody::of(&serde_json::json!({"a": [1, 2, 3], "b": "text"})).unwrap();
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(&body.gzip[..])
            .read_to_end(&mut out)
            .unwrap();
        assert_eq!(out, body.json.to_vec());
        assert_ne!(body.etag, body.etag_gzip, "a tag per coding");
    }
}
