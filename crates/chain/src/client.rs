//! One provider builder owns timeouts, retries and the rate limit for every chain; the gateway holds
//! one client per configured chain that has an RPC URL.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use actiongate_core::chains::{ChainSettings, Chains};
use actiongate_core::error::Error;
use alloy::eips::BlockNumberOrTag;
use alloy::primitives::{Address, B256, Bytes};
use alloy::providers::{DynProvider, Provider, ProviderBuilder};
use alloy::rpc::client::BatchRequest;
use alloy::rpc::client::ClientBuilder;
use alloy::rpc::json_rpc::{RpcRecv, RpcSend};
use alloy::transports::http::reqwest;
use alloy::transports::layers::{RateLimitRetryPolicy, RetryBackoffLayer, RetryPolicy};
use alloy::transports::{TransportError, TransportErrorKind};

use crate::gather::Gather;
use crate::head::Head;
use crate::local::LocalEvm;
use crate::plan::Call;
use crate::receipts::ReceiptWatch;

/// How the gateway talks to chains.
#[derive(Debug, Clone)]
pub struct ChainOptions {
    /// Bound on one JSON-RPC request.
    pub request_timeout: Duration,
    /// Retries of a request refused for rate limiting or a transient failure.
    pub max_retries: u32,
    /// Base backoff between retries.
    pub retry_backoff: Duration,
    /// Compute units per second the RPC endpoint allows (alloy's rate limit budget).
    pub compute_units_per_second: u64,
    /// How long a sent transaction is waited for before it is reported not mined.
    pub receipt_timeout: Duration,
    /// After this long unmined, a transaction is re-signed at the same nonce with higher fees.
    pub bump_after: Duration,
}

impl Default for ChainOptions {
    fn default() -> Self {
        Self {
            request_timeout: Duration::from_secs(10),
            max_retries: 5,
            retry_backoff: Duration::from_millis(250),
            compute_units_per_second: 330,
            receipt_timeout: Duration::from_secs(600),
            bump_after: Duration::from_secs(45),
        }
    }
}

/// A configured chain and its RPC client.
pub struct ChainClient {
    pub chain_id: u64,
    pub settings: ChainSettings,
    pub provider: DynProvider,
    /// How often a receipt is polled (short on a local node).
    pub poll: Duration,
    /// Wakes the executions waiting for receipts as their blocks come.
    pub receipts: Arc<ReceiptWatch>,
    /// Head reads shared for a poll interval (the fee estimate, each wallet's mined count).
    pub head: Head,
    /// A fan-out's plan reads, gathered by block ([`crate::plan::batch`]).
    pub views: Gather<BlockNumberOrTag, (Address, Bytes), Result<Bytes, Error>>,
    /// A fan-out's simulations, gathered by block ([`crate::sender::simulate`]).
    pub simulations: Gather<BlockNumberOrTag, Simulation, Result<Vec<u64>, Error>>,
    /// Receipt lookups, gathered ([`crate::receipts::status`]).
    pub receipt_lookups: Gather<(), B256, Result<Option<bool>, Error>>,
    /// The gateway's own EVM over this chain's state, for a fan-out's checks ([`crate::local`]).
    pub local: Arc<LocalEvm>,
}

/// A simulation's sender and calls.
pub type Simulation = (Address, Vec<Call>);

/// Every configured chain that has an RPC URL.
#[derive(Clone, Default)]
pub struct ChainClients {
    clients: BTreeMap<u64, Arc<ChainClient>>,
    pub options: ChainOptions,
}

/// A chain's RPC URL is not usable.
#[derive(Debug, thiserror::Error)]
#[error("chain {chain_id}: {reason}")]
pub struct ClientError {
    pub chain_id: u64,
    pub reason: String,
}

impl ChainClients {
    /// Builds one client per chain with an RPC URL. Nothing is called yet.
    pub fn connect(chains: &Chains, options: ChainOptions) -> Result<Self, ClientError> {
        let mut clients = BTreeMap::new();
        for (&chain_id, settings) in &chains.0 {
            let Some(url) = &settings.rpc_url else {
                continue;
            };
            let fail = |reason: String| ClientError { chain_id, reason };
            let url: reqwest::Url = url
                .parse()
                .map_err(|e| fail(format!("rpc-url is not a URL: {e}")))?;
            let http = reqwest::Client::builder()
                .timeout(options.request_timeout)
                .build()
                .map_err(|e| fail(format!("HTTP client: {e}")))?;
            let is_local = matches!(url.host_str(), Some("127.0.0.1" | "localhost" | "::1"));
            let retry = RetryBackoffLayer::new_with_policy(
                options.max_retries,
                options.retry_backoff.as_millis() as u64,
                options.compute_units_per_second,
                NodePolicy,
            );
            let client = ClientBuilder::default()
                .layer(retry)
                .layer(RpcMetricsLayer { chain_id })
                .http_with_client(http, url);
            let provider = ProviderBuilder::new()
                .disable_recommended_fillers()
                .connect_client(client)
                .erased();
            let poll = if is_local {
                Duration::from_millis(50)
            } else {
                Duration::from_secs(1)
            };
            clients.insert(
                chain_id,
                Arc::new(ChainClient {
                    chain_id,
                    settings: settings.clone(),
                    receipts: ReceiptWatch::new(provider.clone(), settings.rpc_url.clone(), poll),
                    local: Arc::new(LocalEvm::new(
                        chain_id,
                        provider.clone(),
                        settings.rpc_url.clone(),
                    )),
                    provider,
                    poll,
                    head: Head::new(poll),
                    views: Gather::new("views"),
                    simulations: Gather::new("simulations"),
                    receipt_lookups: Gather::new("receipts"),
                }),
            );
        }
        Ok(Self { clients, options })
    }

    pub fn get(&self, chain_id: u64) -> Option<&Arc<ChainClient>> {
        self.clients.get(&chain_id)
    }

    /// The client of `chain_id`, or `CHAIN_NOT_CONFIGURED` when it has no RPC URL here.
    pub fn require(&self, chain_id: u64) -> Result<&ChainClient, actiongate_core::error::Error> {
        self.get(chain_id).map(AsRef::as_ref).ok_or_else(|| {
            actiongate_core::error::Error::new(
                actiongate_api_types::ErrorCode::ChainNotConfigured,
                format!("Chain {chain_id} has no RPC URL configured here."),
            )
        })
    }

    pub fn iter(&self) -> impl Iterator<Item = &Arc<ChainClient>> {
        self.clients.values()
    }
}

/// The most calls in one JSON-RPC batch request. Nodes cap batches (geth at 1,000 calls; anvil
/// answers a request past its body limit `Invalid request`, seen with a few hundred signed
/// transactions in one batch, each then re-sent on its own again and again), so a longer batch goes
/// as several requests, one after the other, in order.
pub const MAX_BATCH_CALLS: usize = 64;

/// Calls `method` once for each of `params` in JSON-RPC batches of at most [`MAX_BATCH_CALLS`],
/// one after the other (a plain call when there is one), and answers each call in order; a batch
/// that fails as a whole fails each of its calls with its error.
pub async fn batch_calls<P: RpcSend, R: RpcRecv>(
    client: &ChainClient,
    method: &'static str,
    mut params: Vec<P>,
) -> Vec<Result<R, TransportError>> {
    let mut answers = Vec::with_capacity(params.len());
    while params.len() > MAX_BATCH_CALLS {
        let rest = params.split_off(MAX_BATCH_CALLS);
        answers.extend(batch_once(client, method, params).await);
        params = rest;
    }
    answers.extend(batch_once(client, method, params).await);
    answers
}

/// One JSON-RPC batch of `params` (a plain call when there is one).
async fn batch_once<P: RpcSend, R: RpcRecv>(
    client: &ChainClient,
    method: &'static str,
    mut params: Vec<P>,
) -> Vec<Result<R, TransportError>> {
    if params.is_empty() {
        return Vec::new();
    }
    if params.len() == 1
        && let Some(p) = params.pop()
    {
        return vec![client.provider.client().request(method, p).await];
    }
    let mut request = BatchRequest::new(client.provider.client());
    let waiting: Vec<_> = params
        .iter()
        .map(|p| request.add_call::<_, R>(method, p))
        .collect();
    if let Err(e) = request.send().await {
        let failure = e.to_string();
        return waiting
            .iter()
            .map(|_| Err(TransportErrorKind::custom_str(&failure)))
            .collect();
    }
    let mut answers = Vec::with_capacity(waiting.len());
    for waiter in waiting {
        answers.push(match waiter {
            Ok(waiter) => waiter.await,
            Err(e) => Err(e),
        });
    }
    answers
}

/// Retries what a node refuses for a moment: a rate limit (after the backoff the node asks for, or
/// the configured one), and a read of a block that stopped being the latest while the node read it
/// (a node that keeps no past states answers `BlockOutOfRangeError`): asked again at once, the new
/// head is there to read.
#[derive(Debug, Clone, Copy)]
struct NodePolicy;

impl RetryPolicy for NodePolicy {
    fn should_retry(&self, error: &TransportError) -> bool {
        head_moved(error) || RateLimitRetryPolicy::default().should_retry(error)
    }

    fn backoff_hint(&self, error: &TransportError) -> Option<Duration> {
        // Past the block it read: the new head is there now. A node a block behind (`header not
        // found`) waits the configured backoff, as a rate limit does.
        if error
            .as_error_resp()
            .is_some_and(|r| r.message.contains("BlockOutOfRangeError"))
        {
            return Some(Duration::from_millis(1));
        }
        RateLimitRetryPolicy::default().backoff_hint(error)
    }
}

/// A read refused because the block it was made at is no longer (or not yet) held by the node that
/// answered: the head moved between the tag's resolution and the read (anvil keeps only the latest
/// state when it prunes history: `BlockOutOfRangeError`), or a load-balanced node is a block behind
/// (geth's `header not found`). The same request asked again reads the new head ([`NodePolicy`]).
fn head_moved(e: &TransportError) -> bool {
    e.as_error_resp().is_some_and(|r| {
        r.message.contains("BlockOutOfRangeError") || r.message.contains("header not found")
    })
}

/// Counts each JSON-RPC exchange with a node and its failures, by chain
/// ([`actiongate_core::metrics::rpc`]); placed under the retry layer, so each attempt counts.
#[derive(Debug, Clone, Copy)]
struct RpcMetricsLayer {
    chain_id: u64,
}

impl<S> tower::Layer<S> for RpcMetricsLayer {
    type Service = RpcMetrics<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RpcMetrics {
            inner,
            chain_id: self.chain_id,
        }
    }
}

#[derive(Debug, Clone)]
struct RpcMetrics<S> {
    inner: S,
    chain_id: u64,
}

impl<S> tower::Service<alloy::rpc::json_rpc::RequestPacket> for RpcMetrics<S>
where
    S: tower::Service<
            alloy::rpc::json_rpc::RequestPacket,
            Response = alloy::rpc::json_rpc::ResponsePacket,
            Error = alloy::transports::TransportError,
            Future = alloy::transports::TransportFut<'static>,
        > + Send
        + 'static,
{
    type Response = alloy::rpc::json_rpc::ResponsePacket;
    type Error = alloy::transports::TransportError;
    type Future = alloy::transports::TransportFut<'static>;

    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: alloy::rpc::json_rpc::RequestPacket) -> Self::Future {
        let chain_id = self.chain_id;
        let methods: Vec<String> = request.method_names().map(str::to_owned).collect();
        let answer = self.inner.call(request);
        Box::pin(async move {
            let started = std::time::Instant::now();
            let answer = answer.await;
            // Each request to the node, its calls and how long it took (at trace level).
            tracing::trace!(
                chain_id,
                method = methods.first().map_or("", String::as_str),
                calls = methods.len(),
                ms = started.elapsed().as_secs_f64() * 1e3,
                "an RPC request answered"
            );
            let failed = answer.as_ref().map_or(true, |r| r.is_error());
            actiongate_core::metrics::rpc(chain_id, methods.iter().map(String::as_str), failed);
            if failed {
                // The node's own words only: a transport error may carry the URL (and its key).
                let said = match &answer {
                    Ok(packet) => packet
                        .responses()
                        .iter()
                        .filter_map(|r| r.payload.as_error())
                        .map(|e| format!("{} {}", e.code, e.message))
                        .collect::<Vec<_>>()
                        .join("; "),
                    Err(e) => e.as_error_resp().map_or_else(
                        || "no answer".to_owned(),
                        |e| format!("{} {}", e.code, e.message),
                    ),
                };
                tracing::debug!(
                    chain_id,
                    methods = methods.join(","),
                    said,
                    "an RPC call failed"
                );
            }
            answer
        })
    }
}
