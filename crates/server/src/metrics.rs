//! `GET /metrics` in the Prometheus text format: the process's recorder (installed once per
//! process), the HTTP layer that counts requests by route template, status and code with their
//! latency, and the scrape, which first reads what the database knows (queued intents, the
//! runner's lag, unmined transactions). No label carries a key, a session, an address or an id.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use actiongate_api_types::ErrorCode;
use actiongate_core::metrics::{HTTP_DURATION, HTTP_REQUESTS, buckets};
use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderValue, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

use crate::http::AppState;

static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();

/// The process's Prometheus recorder, installed on first use (`None` if another recorder was
/// installed first: then nothing is rendered).
pub fn handle() -> Option<&'static PrometheusHandle> {
    HANDLE
        .get_or_init(|| {
            let mut builder = PrometheusBuilder::new();
            for metric in [
                HTTP_DURATION,
                actiongate_core::metrics::BATCH_COMMIT,
                actiongate_core::metrics::BATCH_SIZE,
            ] {
                if let Some(b) = buckets(metric) {
                    builder = match builder.set_buckets_for_metric(Matcher::Full(metric.into()), b)
                    {
                        Ok(b) => b,
                        Err(e) => {
                            tracing::error!(error = %e, "metrics buckets refused");
                            return None;
                        }
                    };
                }
            }
            match builder.install_recorder() {
                Ok(handle) => Some(handle),
                Err(e) => {
                    tracing::error!(error = %e, "the metrics recorder was not installed");
                    None
                }
            }
        })
        .as_ref()
}

/// Drains the histograms into their buckets now and then, scraped or not (they hold samples until
/// drained); ends when `stop` says so.
pub fn spawn_upkeep(mut stop: tokio::sync::watch::Receiver<bool>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let Some(handle) = handle() else {
            return;
        };
        loop {
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_secs(5)) => handle.run_upkeep(),
                _ = stop.changed() => return,
            }
        }
    })
}

/// Counts each request by its route template (`unmatched` when no route has it), method, status
/// and error code (`-` for a success), and records its latency.
pub async fn count_requests(request: Request, next: Next) -> Response {
    let started = Instant::now();
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |p| p.as_str().to_owned());
    let method = request.method().as_str().to_owned();
    let response = next.run(request).await;
    let code = response
        .extensions()
        .get::<ErrorCode>()
        .map_or("-", |c| c.as_str());
    metrics::counter!(
        HTTP_REQUESTS,
        "route" => route.clone(),
        "method" => method.clone(),
        "status" => response.status().as_u16().to_string(),
        "code" => code,
    )
    .increment(1);
    metrics::histogram!(HTTP_DURATION, "route" => route, "method" => method)
        .record(started.elapsed().as_secs_f64());
    response
}

/// The metrics in the Prometheus text format. The database's figures are read first; when it
/// does not answer, the rest is still served (and the error logged).
pub async fn scrape(State(state): State<AppState>) -> Response {
    render(&state).await
}

pub(crate) async fn render(state: &AppState) -> Response {
    if let Err(e) = state.gateway.record_operations().await {
        tracing::warn!(error = %e, detail = e.detail.as_deref().unwrap_or(""), "metrics: the database figures were not read");
    }
    let body = handle().map(PrometheusHandle::render).unwrap_or_default();
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
        )],
        body,
    )
        .into_response()
}
