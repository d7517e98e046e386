//! The owner's audit trail (issue 27): the export, streamed page by page (JSON lines or CSV), and
//! the chain's verification. Owner routes: `Authorization: Bearer owner-…`.

use std::sync::Arc;

use actiongate_api_types::audit::{AuditEntryView, AuditVerify};
use actiongate_api_types::{Envelope, ErrorBody, ErrorCode};
use actiongate_core::audit::{Audit, entry_view};
use actiongate_core::{Gateway, OwnerContext};
use axum::Json;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use serde::Deserialize;
use utoipa::IntoParams;

use super::AppState;
use super::error::ApiError;
use super::extract::ApiQuery;
use super::identity::Owner;

/// Query of `GET /api/v1/audit`.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ExportQuery {
    /// Entries at or after this instant (RFC 3339).
    pub from: Option<String>,
    /// Entries before this instant (RFC 3339).
    pub to: Option<String>,
    /// jsonl (default) or csv.
    pub format: Option<String>,
}

#[derive(Clone, Copy, PartialEq)]
enum Format {
    Jsonl,
    Csv,
}

const CSV_HEADER: &str = "seq,at,kind,actor,subject,code,data,prevHash,hash\n";

/// A CSV field: quoted when it holds a comma, a quote or a line break (quotes doubled).
fn csv_field(out: &mut String, text: &str) {
    if text.contains([',', '"', '\n', '\r']) {
        out.push('"');
        out.push_str(&text.replace('"', "\"\""));
        out.push('"');
    } else {
        out.push_str(text);
    }
}

fn render(format: Format, entries: &[AuditEntryView]) -> Bytes {
    let mut out = String::with_capacity(entries.len() * 320);
    for e in entries {
        match format {
            Format::Jsonl => {
                if let Ok(line) = serde_json::to_string(e) {
                    out.push_str(&line);
                    out.push('\n');
                }
            }
            Format::Csv => {
                let data = e.data.to_string();
                let seq = e.seq.to_string();
                let fields = [
                    seq.as_str(),
                    &e.at,
                    &e.kind,
                    &e.actor,
                    &e.subject,
                    e.code.as_deref().unwrap_or(""),
                    &data,
                    &e.prev_hash,
                    &e.hash,
                ];
                for (i, f) in fields.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    csv_field(&mut out, f);
                }
                out.push('\n');
            }
        }
    }
    Bytes::from(out)
}

/// Where a streamed export is.
struct Export {
    gateway: Arc<Gateway>,
    owner: OwnerContext,
    format: Format,
    range: (Option<i64>, Option<i64>),
    after: i64,
    done: bool,
}

/// The account's audit entries in order, streamed a page at a time (never held whole): JSON lines
/// (`application/x-ndjson`, one entry a line) or CSV with a header row.
#[utoipa::path(
    get,
    path = "/api/v1/audit",
    tag = "audit",
    security(("ownerSession" = [])),
    params(ExportQuery),
    responses(
        (status = 200, description = "JSON lines of AuditEntryView, or CSV (seq,at,kind,actor,subject,code,data,prevHash,hash)", body = AuditEntryView, content_type = "application/x-ndjson"),
        (status = 400, description = "INVALID_REQUEST: a bound is not RFC 3339, or an unknown format", body = ErrorBody),
        (status = 401, description = "UNAUTHORIZED: no owner session", body = ErrorBody),
    )
)]
pub async fn export(
    State(state): State<AppState>,
    Owner(owner): Owner,
    ApiQuery(q): ApiQuery<ExportQuery>,
) -> Result<Response, ApiError> {
    stream_export(&state, owner, q).await
}

/// The export of `owner`'s trail as `q` asks (the REST route's and the console's).
pub async fn stream_export(
    state: &AppState,
    owner: OwnerContext,
    q: ExportQuery,
) -> Result<Response, ApiError> {
    let format = match q.format.as_deref() {
        None | Some("jsonl") => Format::Jsonl,
        Some("csv") => Format::Csv,
        Some(other) => {
            return Err(actiongate_core::Error::new(
                ErrorCode::InvalidRequest,
                format!("format {other:?}: jsonl or csv."),
            )
            .into());
        }
    };
    let range = (
        Audit::bound("from", q.from.as_deref())?,
        Audit::bound("to", q.to.as_deref())?,
    );
    // The first page is read before answering: a storage failure is an error answer, not a cut
    // stream. A later page that fails ends the stream early (the client sees it incomplete).
    let first = state
        .gateway
        .audit()
        .page(&owner.account_id, 0, range)
        .await?;
    let views: Vec<AuditEntryView> = first.iter().map(entry_view).collect();
    let mut head = match format {
        Format::Csv => CSV_HEADER.as_bytes().to_vec(),
        Format::Jsonl => Vec::new(),
    };
    head.extend_from_slice(&render(format, &views));
    let export = Export {
        gateway: state.gateway.clone(),
        owner,
        format,
        range,
        after: first.last().map_or(0, |e| e.entry.seq),
        done: first.len() < actiongate_core::audit::PAGE as usize,
    };
    let rest = futures_util::stream::unfold(export, |mut ex| async move {
        if ex.done {
            return None;
        }
        match ex
            .gateway
            .audit()
            .page(&ex.owner.account_id, ex.after, ex.range)
            .await
        {
            Ok(page) if page.is_empty() => None,
            Ok(page) => {
                ex.after = page.last().map_or(ex.after, |e| e.entry.seq);
                ex.done = page.len() < actiongate_core::audit::PAGE as usize;
                let views: Vec<AuditEntryView> = page.iter().map(entry_view).collect();
                Some((Ok::<Bytes, std::io::Error>(render(ex.format, &views)), ex))
            }
            Err(e) => {
                tracing::warn!(code = %e.code, "audit export cut short");
                ex.done = true;
                Some((
                    Err(std::io::Error::other("the audit export was cut short")),
                    ex,
                ))
            }
        }
    });
    let body =
        futures_util::stream::once(async move { Ok::<Bytes, std::io::Error>(Bytes::from(head)) })
            .chain(rest);
    let (content_type, name) = match format {
        Format::Jsonl => ("application/x-ndjson", "audit.jsonl"),
        Format::Csv => ("text/csv; charset=utf-8", "audit.csv"),
    };
    Ok((
        [
            (header::CONTENT_TYPE, content_type.to_owned()),
            (
                header::CONTENT_DISPOSITION,
                format!("attachment; filename=\"{name}\""),
            ),
            (header::CACHE_CONTROL, "no-store".to_owned()),
        ],
        Body::from_stream(body),
    )
        .into_response())
}

/// Walks the account's whole chain: whether every entry follows the one before it and matches its
/// hash, and where it breaks.
#[utoipa::path(
    get,
    path = "/api/v1/audit/verify",
    tag = "audit",
    security(("ownerSession" = [])),
    responses(
        (status = 200, body = Envelope<AuditVerify>),
        (status = 401, description = "UNAUTHORIZED: no owner session", body = ErrorBody),
    )
)]
pub async fn verify(
    State(state): State<AppState>,
    Owner(owner): Owner,
) -> Result<Json<Envelope<AuditVerify>>, ApiError> {
    Ok(Json(Envelope::new(
        state.gateway.audit().verify(&owner.account_id).await?,
    )))
}
