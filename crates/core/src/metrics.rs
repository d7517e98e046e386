//! What the gateway counts, each metric's name and labels written once, recorded through the
//! `metrics` facade (the server installs the Prometheus recorder and serves `GET /metrics`; with no
//! recorder installed these calls do nothing). Labels never carry a key, a session, an address or
//! an id: only bounded vocabularies (a status, a code, a chain id, a route template).

use std::time::Duration;

use crate::execution::ExecutionOutcome;
use crate::states::IntentStatus;

/// HTTP requests by route template, method, status and error code.
pub const HTTP_REQUESTS: &str = "actiongate_http_requests_total";
/// HTTP request latency by route template and method.
pub const HTTP_DURATION: &str = "actiongate_http_request_duration_seconds";
/// MCP tool calls by tool and outcome (`ok` or the refusal's code).
pub const MCP_TOOL_CALLS: &str = "actiongate_mcp_tool_calls_total";
/// Intents that ended, by status.
pub const INTENTS_ENDED: &str = "actiongate_intents_ended_total";
/// Intents by status now (the ones not ended: `queued`), read from the database at each scrape.
pub const INTENTS: &str = "actiongate_intents";
/// Age of the oldest queued intent at the scrape (0 when none waits): how far the runner lags.
pub const RUNNER_LAG: &str = "actiongate_runner_lag_seconds";
/// Executions by outcome (`succeeded`, `failed`, `pending`) and kind (`read`, `write`).
pub const EXECUTIONS: &str = "actiongate_executions_total";
/// Group commit: drafts and settles written per transaction.
pub const BATCH_SIZE: &str = "actiongate_submit_batch_size";
/// Natural batching ([`crate::gather::Gather`]): requests run per batch, by kind (`outbox`,
/// `reservations`, `views`, `simulations`, `receipts`, `mined`, `starts`, `ends`, `grants`,
/// `wallets`).
pub const GATHERED_BATCH_SIZE: &str = "actiongate_gathered_batch_size";
/// Group commit: time from the transaction's start to its commit.
pub const BATCH_COMMIT: &str = "actiongate_submit_commit_seconds";
/// Submissions accepted (a new intent written; replays of an idempotency key are not counted).
pub const INTENTS_ACCEPTED: &str = "actiongate_intents_accepted_total";
/// JSON-RPC calls to chain nodes by chain and method (each attempt, retries included).
pub const RPC_CALLS: &str = "actiongate_rpc_calls_total";
/// JSON-RPC exchanges that failed (transport error or an error answer) by chain.
pub const RPC_ERRORS: &str = "actiongate_rpc_errors_total";
/// Signed transactions not mined yet, by chain, read from the database at each scrape.
pub const UNMINED_TXS: &str = "actiongate_unmined_transactions";
/// A fan-out's checks in the gateway's own EVM, by chain and result: `agreed` or `disagreed` with
/// the node's (`fanout-check = "shadow"`), `unchecked` (it could not run there: a state read failed, or the node refuses the transaction as a whole, and the node checked it; or, in `shadow`, the node did not answer).
pub const LOCAL_CHECKS: &str = "actiongate_local_checks_total";
/// The state those checks read from the node, by chain and when: `ahead` (foreseen from an earlier
/// check of the same shape of calls and read in one round before the EVM ran) or `on_demand` (asked
/// while the EVM waited).
pub const LOCAL_CHECK_READS: &str = "actiongate_local_check_reads_total";
/// Requests refused by a rate limit, by the limit (`agent-key`, `onboarding`, …).
pub const RATE_LIMITED: &str = "actiongate_rate_limited_total";

/// The histograms' bucket bounds, by metric.
pub fn buckets(metric: &str) -> Option<&'static [f64]> {
    const SECONDS: &[f64] = &[
        0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
    ];
    const SIZES: &[f64] = &[1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0];
    match metric {
        HTTP_DURATION | BATCH_COMMIT => Some(SECONDS),
        BATCH_SIZE | GATHERED_BATCH_SIZE => Some(SIZES),
        _ => None,
    }
}

/// A gathered batch of `size` requests of `kind` ran.
pub fn gathered(kind: &'static str, size: usize) {
    metrics::histogram!(GATHERED_BATCH_SIZE, "kind" => kind).record(size as f64);
}

pub fn intent_ended(status: IntentStatus) {
    metrics::counter!(INTENTS_ENDED, "status" => status.as_str()).increment(1);
}

pub fn execution(outcome: &ExecutionOutcome, read: bool) {
    let result = if outcome.pending {
        "pending"
    } else if outcome.held {
        "held"
    } else if outcome.success {
        "succeeded"
    } else {
        "failed"
    };
    let kind = if read { "read" } else { "write" };
    metrics::counter!(EXECUTIONS, "outcome" => result, "kind" => kind).increment(1);
}

/// One group commit that wrote `size` drafts and settles, `accepted` of them new intents.
pub fn batch(size: usize, accepted: usize, commit: Duration) {
    metrics::histogram!(BATCH_SIZE).record(size as f64);
    metrics::histogram!(BATCH_COMMIT).record(commit.as_secs_f64());
    metrics::counter!(INTENTS_ACCEPTED).increment(accepted as u64);
}

/// One JSON-RPC exchange with chain `chain` (a batch counts its calls).
/// One exchange with a node: the methods it carried (several in a batch), and whether it failed.
pub fn rpc<'a>(chain: u64, methods: impl Iterator<Item = &'a str>, failed: bool) {
    let chain = chain.to_string();
    for method in methods {
        metrics::counter!(RPC_CALLS, "chain" => chain.clone(), "method" => method.to_owned())
            .increment(1);
    }
    if failed {
        metrics::counter!(RPC_ERRORS, "chain" => chain).increment(1);
    }
}

/// One check in the gateway's own EVM ([`LOCAL_CHECKS`]).
pub fn local_check(chain: u64, result: &'static str) {
    metrics::counter!(LOCAL_CHECKS, "chain" => chain.to_string(), "result" => result).increment(1);
}

/// `n` state reads of local checks, `ahead` or `on_demand` ([`LOCAL_CHECK_READS`]).
pub fn local_check_reads(chain: u64, read: &'static str, n: usize) {
    metrics::counter!(LOCAL_CHECK_READS, "chain" => chain.to_string(), "read" => read)
        .increment(n as u64);
}

pub fn rate_limited(limit: &'static str) {
    metrics::counter!(RATE_LIMITED, "limit" => limit).increment(1);
}

/// The figures read from the database at each scrape; `chains` are the configured chains (each
/// gets its unmined count, 0 when it has none).
pub fn operations(ops: &crate::store::Operations, now_ms: i64, chains: &[u64]) {
    metrics::gauge!(INTENTS, "status" => IntentStatus::Queued.as_str()).set(ops.queued as f64);
    let lag_ms = ops
        .oldest_queued_at
        .map_or(0, |at| now_ms.saturating_sub(at).max(0));
    metrics::gauge!(RUNNER_LAG).set(lag_ms as f64 / 1000.0);
    let mut all: Vec<u64> = chains.to_vec();
    all.extend(ops.unmined.iter().map(|(c, _)| *c));
    all.sort_unstable();
    all.dedup();
    for chain in all {
        let count = ops
            .unmined
            .iter()
            .find(|(c, _)| *c == chain)
            .map_or(0, |(_, n)| *n);
        metrics::gauge!(UNMINED_TXS, "chain" => chain.to_string()).set(count as f64);
    }
}
