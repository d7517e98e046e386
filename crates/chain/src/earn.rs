//! Earn discovery, live (catalog family `earn-router`): the opportunities of every configured chain,
//! read from their sources now. Aave v3 reserves (APR: the reserve's liquidity rate; TVL: the
//! supplied aTokens at the pool's oracle price) and the configured ERC-4626 vaults (APR: the change
//! of the share price over a window this gateway samples; TVL: `totalAssets` at the price layer's
//! price). `get-earn-opportunities` (and its older twin `get-earning-opportunities`) filter them by
//! SPEC's parameters; `get-earn-provider` describes a provider from the same reads.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use actiongate_api_types::ErrorCode;
use actiongate_core::catalog::Lane;
use actiongate_core::clock::Clock;
use actiongate_core::error::Error;
use actiongate_core::execution::{ExecutionContext, ExecutionOutcome, Provider, Reconciled};
use actiongate_core::prices::{Prices, TokenRef};
use alloy::eips::BlockNumberOrTag;
use alloy::primitives::{Address, U256};
use alloy::providers::Provider as _;
use async_trait::async_trait;
use serde_json::{Value, json};

use crate::amount::format_units;
use crate::bindings::IERC4626;
use crate::client::{ChainClient, ChainClients};
use crate::plan::{VAULT_PROVIDER, aave, resolve_token, rpc_error, view};
use crate::sender::outcome_of;

const ACTIONS: [&str; 3] = [
    "get-earn-opportunities",
    "get-earning-opportunities",
    "get-earn-provider",
];

/// The provider id that stands for every earn source.
pub const ROUTER: &str = "earn-router";
/// An Aave opportunity's id: this prefix and the reserve's symbol (or address).
pub const AAVE_PREFIX: &str = actiongate_core::prices::LENDING_OPPORTUNITY;

/// The lanes a deposit into either kind of opportunity runs on (`deposit-earn-position` routes an
/// Aave id to `supply-lending`; both fan out, execute and build).
const LANES: [&str; 3] = ["executeIntent", "execute", "buildTx"];

/// How the share prices of vaults are sampled (`[earn]`).
#[derive(Debug, Clone, Copy)]
pub struct EarnOptions {
    /// How often the background sampler reads every vault's share price.
    pub sample_every: Duration,
    /// The window a vault's APR is measured over (samples older than it are dropped).
    pub window: Duration,
    /// The shortest span between two samples that an APR is computed from.
    pub min_span: Duration,
}

impl Default for EarnOptions {
    fn default() -> Self {
        Self {
            sample_every: Duration::from_secs(900),
            window: Duration::from_secs(7 * 86_400),
            min_span: Duration::from_secs(3_600),
        }
    }
}

/// One share price reading: the chain's block time and the assets one whole share is worth.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Sample {
    at: u64,
    assets_per_share: U256,
}

/// A vault's samples, oldest first.
#[derive(Default)]
struct Samples(Mutex<HashMap<(u64, Address), VecDeque<Sample>>>);

impl Samples {
    /// Records `s` for the vault and answers the sample the APR is measured from: the newest one at
    /// least `window` old, else the oldest one (either before `s`). Older ones are dropped.
    fn record(&self, key: (u64, Address), s: Sample, window: u64) -> Option<Sample> {
        let mut all = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let list = all.entry(key).or_default();
        if list.back().is_none_or(|last| last.at < s.at) {
            list.push_back(s);
        }
        while list.get(1).is_some_and(|next| next.at + window <= s.at) {
            list.pop_front();
        }
        list.front().copied().filter(|f| f.at < s.at)
    }
}

/// The annual rate, in percent, of a share price that went from `then` to `now` over `span`
/// seconds (simple, not compounded); `None` when it cannot be told.
fn apr_percent(then: U256, now: U256, span: u64) -> Option<f64> {
    if then.is_zero() || span == 0 {
        return None;
    }
    let (then, now) = (f64::from(then), f64::from(now));
    let apr = (now / then - 1.0) * (365.0 * 86_400.0 / span as f64) * 100.0;
    apr.is_finite().then_some(apr)
}

/// A decimal string of at most 2 places (a USD amount, from the markets read) as a number.
fn number(v: &Value) -> Option<f64> {
    v.as_str().and_then(|s| s.parse::<f64>().ok())
}

fn round(v: f64, places: i32) -> f64 {
    let scale = 10f64.powi(places);
    (v * scale).round() / scale
}

/// Earn discovery over the configured chains.
pub struct EarnReads {
    clients: ChainClients,
    prices: Arc<Prices>,
    clock: Arc<dyn Clock>,
    options: EarnOptions,
    samples: Samples,
}

/// The filters of SPEC's earn discovery reads.
#[derive(Debug, Default)]
struct Filters {
    asset: Option<String>,
    limit: usize,
    min_apr: Option<f64>,
    chain_id: Option<u64>,
    min_tvl_usd: Option<f64>,
    provider_id: Option<String>,
    strategy_type: Option<String>,
    execution_support: Option<String>,
}

fn invalid(field: &str, message: impl std::fmt::Display) -> Error {
    Error::new(
        ErrorCode::InvalidParams,
        format!("params.{field}: {message}"),
    )
}

impl Filters {
    fn of(params: &Value) -> Result<Self, Error> {
        let text = |f: &str| params.get(f).and_then(Value::as_str).map(str::to_owned);
        let provider_id = text("providerId");
        if let Some(p) = &provider_id
            && ![ROUTER, aave::PROVIDER, VAULT_PROVIDER].contains(&p.as_str())
        {
            return Err(invalid(
                "providerId",
                format!(
                    "{p:?} is not an earn provider here (known: {ROUTER}, {}, {VAULT_PROVIDER})",
                    aave::PROVIDER
                ),
            ));
        }
        Ok(Self {
            asset: text("asset").map(|a| a.to_ascii_uppercase()),
            limit: params
                .get("limit")
                .and_then(Value::as_u64)
                .map_or(20, |l| usize::try_from(l).unwrap_or(100).clamp(1, 100)),
            min_apr: params.get("minApr").and_then(Value::as_f64),
            chain_id: params.get("chainId").and_then(Value::as_u64),
            min_tvl_usd: params.get("minTvlUsd").and_then(Value::as_f64),
            provider_id: provider_id.filter(|p| p != ROUTER),
            strategy_type: text("strategyType"),
            execution_support: text("executionSupport").filter(|e| e != "any"),
        })
    }

    fn keeps(&self, o: &Value) -> bool {
        let str_of = |f: &str| o[f].as_str().unwrap_or_default();
        let asset_ok = self.asset.as_deref().is_none_or(|a| {
            let have = str_of("asset").to_ascii_uppercase();
            // The native coin is supplied as its wrapped token.
            have == a || (a == "ETH" && have == "WETH")
        });
        asset_ok
            && self
                .min_apr
                .is_none_or(|m| o["apr"].as_f64().is_some_and(|apr| apr >= m))
            && self
                .min_tvl_usd
                .is_none_or(|m| o["tvlUsd"].as_f64().is_some_and(|tvl| tvl >= m))
            && self
                .provider_id
                .as_deref()
                .is_none_or(|p| str_of("providerId") == p)
            && self
                .strategy_type
                .as_deref()
                .is_none_or(|s| str_of("strategyType") == s)
            && self.execution_support.as_deref().is_none_or(|lane| {
                o["executionSupport"]
                    .as_array()
                    .is_some_and(|l| l.iter().any(|x| x == lane))
            })
    }
}

impl EarnReads {
    pub fn new(
        clients: ChainClients,
        prices: Arc<Prices>,
        clock: Arc<dyn Clock>,
        options: EarnOptions,
    ) -> Self {
        Self {
            clients,
            prices,
            clock,
            options,
            samples: Samples::default(),
        }
    }

    /// Samples every configured vault's share price now and then every `sample_every`, for as long
    /// as the process runs; a node that does not answer is tried again at the next turn.
    pub fn spawn_sampler(
        self: &Arc<Self>,
        mut stop: tokio::sync::watch::Receiver<bool>,
    ) -> tokio::task::JoinHandle<()> {
        let this = self.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(this.options.sample_every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = tick.tick() => {}
                    _ = stop.changed() => return,
                }
                for client in this.clients.iter() {
                    for (id, text) in &client.settings.vaults {
                        let Ok(vault) = text.parse::<Address>() else {
                            continue;
                        };
                        if *stop.borrow() {
                            return;
                        }
                        if let Err(e) = this.vault(client, id, vault).await {
                            tracing::debug!(chain_id = client.chain_id, vault = id, error = %e.message, "vault not sampled");
                        }
                    }
                }
            }
        })
    }

    /// The chain's latest block time.
    async fn block_time(&self, client: &ChainClient) -> Result<u64, Error> {
        let block = client
            .provider
            .get_block_by_number(BlockNumberOrTag::Latest)
            .await
            .map_err(|e| rpc_error(client, e))?
            .ok_or_else(|| rpc_error(client, "no latest block"))?;
        Ok(block.header.timestamp)
    }

    /// A configured vault as an opportunity, its share price sampled now.
    async fn vault(&self, client: &ChainClient, id: &str, vault: Address) -> Result<Value, Error> {
        let asset_at = view(client, vault, IERC4626::assetCall {}).await?;
        let asset = resolve_token(client, "vault", &asset_at.to_string()).await?;
        let (share_decimals, total, at) = tokio::try_join!(
            view(client, vault, IERC4626::decimalsCall {}),
            view(client, vault, IERC4626::totalAssetsCall {}),
            self.block_time(client),
        )?;
        let one_share = U256::from(10u64).pow(U256::from(share_decimals));
        let assets_per_share = view(
            client,
            vault,
            IERC4626::convertToAssetsCall { shares: one_share },
        )
        .await?;
        let now = Sample {
            at,
            assets_per_share,
        };
        let window = self.options.window.as_secs();
        let oldest = self.samples.record((client.chain_id, vault), now, window);
        let (apr, span) = match oldest {
            Some(then) if at - then.at >= self.options.min_span.as_secs() => (
                apr_percent(then.assets_per_share, assets_per_share, at - then.at),
                Some(at - then.at),
            ),
            _ => (None, None),
        };
        let (symbol, decimals) = (asset.symbol(), asset.decimals());
        let now_secs = u64::try_from(self.clock.now().unix_timestamp()).unwrap_or_default();
        let tvl = self
            .prices
            .quote(
                client.chain_id,
                &client.settings,
                &TokenRef::resolve(&asset_at.to_string(), &client.settings),
                now_secs,
            )
            .await
            .ok()
            .and_then(|q| {
                let amount = format_units(total, decimals);
                actiongate_core::prices::value_micros(&amount, q.price)
            })
            .map(|micros| round(micros as f64 / 1e6, 2));
        let mut notes = vec![
            format!("Smart-contract risk of the ERC-4626 vault at {vault}."),
            "Past yield does not promise future yield; the share price can fall.".to_owned(),
        ];
        match span {
            Some(s) => notes.push(format!(
                "APR from the share price change over the last {s} s, sampled by this gateway."
            )),
            None => notes.push(format!(
                "No APR yet: this gateway has not sampled the share price over {} s.",
                self.options.min_span.as_secs()
            )),
        }
        if tvl.is_none() {
            notes.push(format!(
                "TVL unknown: the gateway cannot price {symbol} now."
            ));
        }
        Ok(json!({
            "opportunityId": id,
            "providerId": VAULT_PROVIDER,
            "chainId": client.chain_id,
            "asset": symbol,
            "assetAddress": asset_at,
            "address": vault,
            "apr": apr.map(|a| round(a, 4)),
            "aprWindowSeconds": span,
            "tvlUsd": tvl,
            "totalAssets": format_units(total, decimals),
            "strategyType": "vault",
            "executionSupport": LANES,
            "depositAction": "deposit-earn-position",
            "riskNotes": notes,
        }))
    }

    /// The pool's reserves that take supply now as opportunities.
    async fn reserves(&self, client: &ChainClient) -> Result<Vec<Value>, Error> {
        let markets = aave::markets(client).await?;
        let pool = markets["pool"].clone();
        let list = markets["markets"].as_array().cloned().unwrap_or_default();
        Ok(list
            .iter()
            .filter(|m| m["active"] == true && m["frozen"] == false && m["paused"] == false)
            .map(|m| {
                let symbol = m["symbol"].as_str().unwrap_or_default();
                let id = format!("{AAVE_PREFIX}{symbol}");
                let mut notes = vec![
                    "Variable rate: it follows the reserve's utilisation.".to_owned(),
                    "A withdrawal needs the reserve's idle liquidity; a fully borrowed reserve delays it.".to_owned(),
                    format!("Smart-contract risk of Aave v3 at {}.", pool.as_str().unwrap_or_default()),
                ];
                if m["ltvBps"].as_u64().unwrap_or(0) > 0 {
                    notes.push("The supply counts as collateral; a borrow against it can be liquidated.".to_owned());
                }
                json!({
                    "opportunityId": id,
                    "providerId": aave::PROVIDER,
                    "chainId": client.chain_id,
                    "asset": symbol,
                    "assetAddress": m["asset"],
                    "address": pool,
                    "apr": number(&m["supplyApr"]).map(|a| round(a * 100.0, 4)),
                    "aprWindowSeconds": Value::Null,
                    "tvlUsd": number(&m["totalSuppliedUsd"]),
                    "strategyType": "lending",
                    "executionSupport": LANES,
                    "depositAction": "deposit-earn-position",
                    "supplyAction": "supply-lending",
                    "riskNotes": notes,
                })
            })
            .collect())
    }

    /// Every opportunity of the chains the filters allow, read now; a chain whose node does not
    /// answer is named in `unavailable` instead.
    async fn discover(&self, filters: &Filters) -> (Vec<Value>, Vec<Value>) {
        let mut found = Vec::new();
        let mut unavailable = Vec::new();
        let wants = |p: &str| filters.provider_id.as_deref().is_none_or(|w| w == p);
        for client in self.clients.iter() {
            if filters.chain_id.is_some_and(|c| c != client.chain_id) {
                continue;
            }
            let mut read = Vec::new();
            if wants(aave::PROVIDER) && aave::configured(client) {
                match self.reserves(client).await {
                    Ok(list) => read.extend(list),
                    Err(e) => unavailable.push(json!({"chainId": client.chain_id, "providerId": aave::PROVIDER, "reason": e.message})),
                }
            }
            if wants(VAULT_PROVIDER) {
                for (id, text) in &client.settings.vaults {
                    let Ok(vault) = text.parse::<Address>() else {
                        continue;
                    };
                    match self.vault(client, id, vault).await {
                        Ok(o) => read.push(o),
                        Err(e) => unavailable.push(json!({"chainId": client.chain_id, "providerId": VAULT_PROVIDER, "opportunityId": id, "reason": e.message})),
                    }
                }
            }
            found.extend(read);
        }
        (found, unavailable)
    }

    async fn opportunities(&self, params: &Value) -> Result<Value, Error> {
        let filters = Filters::of(params)?;
        let (all, unavailable) = self.discover(&filters).await;
        let mut kept: Vec<Value> = all.into_iter().filter(|o| filters.keeps(o)).collect();
        // Highest APR first (unknown last), then the deepest.
        kept.sort_by(|a, b| {
            let key = |o: &Value| {
                (
                    o["apr"].as_f64().unwrap_or(f64::NEG_INFINITY),
                    o["tvlUsd"].as_f64().unwrap_or(f64::NEG_INFINITY),
                )
            };
            key(b)
                .partial_cmp(&key(a))
                .unwrap_or(std::cmp::Ordering::Equal)
        });
        let total = kept.len();
        kept.truncate(filters.limit);
        Ok(json!({
            "opportunities": kept,
            "count": total,
            "aprUnit": "percent",
            "unavailable": unavailable,
        }))
    }

    async fn provider(&self, params: &Value) -> Result<Value, Error> {
        let id = params
            .get("providerId")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let (description, strategies) = match id {
            ROUTER => (
                "Yield discovery across Aave v3 reserves and ERC-4626 vaults, read live; deposits route to the chosen one.",
                vec!["lending", "vault"],
            ),
            aave::PROVIDER => (
                "Aave v3 lending pools: supply an asset to earn the reserve's variable rate.",
                vec!["lending"],
            ),
            VAULT_PROVIDER => (
                "ERC-4626 vaults configured per chain: deposit the asset, receive shares.",
                vec!["vault"],
            ),
            other => {
                return Err(Error::new(
                    ErrorCode::NotFound,
                    format!(
                        "No earn provider {other:?}; known: {}, {ROUTER}, {VAULT_PROVIDER}.",
                        aave::PROVIDER
                    ),
                ));
            }
        };
        let filters = Filters {
            provider_id: Some(id.to_owned()).filter(|p| p != ROUTER),
            limit: usize::MAX,
            ..Filters::default()
        };
        let (all, unavailable) = self.discover(&filters).await;
        let mut chains = BTreeSet::new();
        let mut assets: BTreeMap<String, ()> = BTreeMap::new();
        for o in &all {
            chains.extend(o["chainId"].as_u64());
            if let Some(a) = o["asset"].as_str() {
                assets.insert(a.to_owned(), ());
            }
        }
        Ok(json!({
            "providerId": id,
            "description": description,
            "chains": chains,
            "assets": assets.keys().collect::<Vec<_>>(),
            "strategies": strategies,
            "lanes": LANES,
            "opportunities": all.len(),
            "unavailable": unavailable,
        }))
    }
}

#[async_trait]
impl Provider for EarnReads {
    fn lanes(&self) -> Vec<(&'static str, Lane)> {
        ACTIONS.iter().map(|a| (*a, Lane::ExecuteIntent)).collect()
    }

    async fn execute(&self, ctx: &ExecutionContext) -> ExecutionOutcome {
        let answer = match ctx.action.as_str() {
            "get-earn-provider" => self.provider(&ctx.params).await,
            _ => self.opportunities(&ctx.params).await,
        };
        match answer {
            Ok(data) => ExecutionOutcome::read(data),
            Err(e) => outcome_of(e),
        }
    }

    async fn reconcile(&self, _ctx: &ExecutionContext) -> Reconciled {
        // A read sends nothing: it runs again.
        Reconciled::NotSent
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_vaults_apr_comes_from_its_share_price_over_the_sampled_span() {
        // 1.00 to 1.01 over 36.5 days: 10 % a year.
        let apr = apr_percent(
            U256::from(1_000_000u64),
            U256::from(1_010_000u64),
            365 * 86_400 / 10,
        );
        assert!(apr.is_some_and(|a| (a - 10.0).abs() < 1e-9), "{apr:?}");
        assert_eq!(apr_percent(U256::ZERO, U256::from(1u64), 10), None);
        let samples = Samples::default();
        let key = (1, Address::ZERO);
        let s = |at, p: u64| Sample {
            at,
            assets_per_share: U256::from(p),
        };
        // The first sample has nothing before it; later ones answer the oldest in the window.
        assert_eq!(samples.record(key, s(100, 10), 1_000), None);
        assert_eq!(samples.record(key, s(600, 11), 1_000), Some(s(100, 10)));
        // 100 and 600 are both a window old at 1,700: the newer of them is the start.
        assert_eq!(samples.record(key, s(1_700, 12), 1_000), Some(s(600, 11)));
        // A repeat at the same block time records nothing new.
        assert_eq!(samples.record(key, s(1_700, 13), 1_000), Some(s(600, 11)));
        // Sparse samples: the last one before a long gap is still the start.
        assert_eq!(
            samples.record(key, s(90_000, 14), 1_000),
            Some(s(1_700, 12))
        );
    }

    #[test]
    fn filters_keep_what_they_name() {
        let o = json!({"asset": "WETH", "apr": 2.5, "tvlUsd": 1000.0, "providerId": "aave-v3",
                       "strategyType": "lending", "executionSupport": LANES});
        let f = |p: Value| Filters::of(&p).map(|f| f.keeps(&o));
        assert_eq!(f(json!({})).ok(), Some(true));
        assert_eq!(f(json!({"asset": "eth"})).ok(), Some(true));
        assert_eq!(f(json!({"asset": "USDC"})).ok(), Some(false));
        assert_eq!(f(json!({"minApr": 2.5})).ok(), Some(true));
        assert_eq!(f(json!({"minApr": 2.6})).ok(), Some(false));
        assert_eq!(f(json!({"minTvlUsd": 1001})).ok(), Some(false));
        assert_eq!(f(json!({"providerId": "earn-router"})).ok(), Some(true));
        assert_eq!(f(json!({"providerId": "erc4626-vaults"})).ok(), Some(false));
        assert_eq!(f(json!({"strategyType": "vault"})).ok(), Some(false));
        assert_eq!(f(json!({"executionSupport": "buildTx"})).ok(), Some(true));
        assert_eq!(f(json!({"executionSupport": "any"})).ok(), Some(true));
        assert_eq!(
            f(json!({"providerId": "nope"})).map_err(|e| e.code),
            Err(ErrorCode::InvalidParams)
        );
    }
}
