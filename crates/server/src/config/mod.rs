//! Server configuration: built-in defaults, then the TOML file named by `--config`, then
//! `ACTIONGATE_*` environment variables, then flags (the last two resolved by clap in the binary,
//! which hands the result over as [`Overrides`]).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use actiongate_core::chains::{BridgeRoute, ChainSettings, Chains, FxPair, Question, Token};
use actiongate_core::prices::{
    DEFAULT_FEED_MAX_AGE_SECS, DEFAULT_TWAP_SECS, PriceBook, PriceFeed, PricePool, is_address,
    token_key,
};
use actiongate_core::purchases::PurchaseSettings;
use actiongate_core::{DefaultPolicy, Settings};

mod limits;

pub use limits::LimitsSection;
use limits::limit_settings;
use serde::Deserialize;

/// Values given on the command line or in the environment; each beats the file.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    pub config: Option<PathBuf>,
    pub dev: bool,
    pub listen: Option<SocketAddr>,
    pub data_dir: Option<PathBuf>,
    pub database_url: Option<String>,
    pub smtp_url: Option<String>,
    pub master_key_file: Option<PathBuf>,
    pub metrics_listen: Option<SocketAddr>,
}

/// The TOML file. Keys are the flag names (`listen`, `data-dir`, …) plus sections.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct FileConfig {
    pub dev: Option<bool>,
    pub listen: Option<SocketAddr>,
    /// Serve `GET /metrics` on this address only (not on `listen`).
    pub metrics_listen: Option<SocketAddr>,
    pub data_dir: Option<PathBuf>,
    pub database_url: Option<String>,
    pub smtp_url: Option<String>,
    /// PEM certificates trusted for the SMTP server beside the web PKI roots (a private CA).
    pub smtp_ca_file: Option<PathBuf>,
    pub master_key_file: Option<PathBuf>,
    pub mail_from: Option<String>,
    #[serde(default)]
    pub policy: PolicySection,
    #[serde(default)]
    pub onboarding: OnboardingSection,
    /// `[chains.<id>]`: chains, tokens, contracts and RPC URLs.
    #[serde(default)]
    pub chains: BTreeMap<String, ChainConfig>,
    #[serde(default)]
    pub credits: CreditsSection,
    /// `[prices]`: USD per whole token, by symbol, for the gateway's own estimate.
    #[serde(default)]
    pub prices: BTreeMap<String, f64>,
    #[serde(default)]
    pub intents: IntentsSection,
    #[serde(default)]
    pub delegation: DelegationSection,
    #[serde(default)]
    pub approvals: ApprovalsSection,
    #[serde(default)]
    pub webhooks: WebhooksSection,
    /// Data of the internal provider's reads; default `catalog/internal-data.toml` (built in).
    pub internal_data_file: Option<PathBuf>,
    #[serde(default)]
    pub mcp: McpSection,
    #[serde(default)]
    pub limits: LimitsSection,
    #[serde(default)]
    pub personhood: PersonhoodSection,
    #[serde(default)]
    pub evm: EvmSection,
    #[serde(default)]
    pub x402: X402Section,
    #[serde(default)]
    pub earn: EarnSection,
}

/// `[earn]`: how vaults' share prices are sampled for their APR.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct EarnSection {
    /// How often every configured vault's share price is read (default 900).
    pub sample_seconds: Option<u64>,
    /// The window an APR is measured over (default 604800, a week).
    pub apr_window_seconds: Option<u64>,
    /// The shortest span between two samples an APR is computed from (default 3600).
    pub min_span_seconds: Option<u64>,
}

/// `[x402]`: selling credits for a stablecoin.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct X402Section {
    /// The chain payments are made on (default 8453).
    pub chain_id: Option<u64>,
    /// The stablecoin's symbol in that chain's token list (default USDC; 6 decimals).
    pub token: Option<String>,
    /// Where payments go; purchases are off until it is set.
    pub recipient: Option<String>,
    /// Confirmations a payment needs (default 1).
    pub confirmations: Option<u64>,
    /// How long a challenge's invoice stays open (default 900).
    pub invoice_ttl_seconds: Option<u64>,
    /// Packages by sku: `credits_100 = { credits = 100, price = "2.00" }` (defaults: SPEC's three).
    pub packages: Option<BTreeMap<String, PackageConfig>>,
    /// The stablecoin's EIP-712 domain name and version (default "USD Coin" / "2"; Base Sepolia's
    /// USDC is "USDC" / "2").
    pub token_name: Option<String>,
    pub token_version: Option<String>,
    /// How long a standard x402 authorization may stay valid (default 300).
    pub max_timeout_seconds: Option<u64>,
}

/// One credit package.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PackageConfig {
    pub credits: i64,
    /// In the stablecoin, a decimal string with at most 6 decimals.
    pub price: String,
}

/// `[evm]`: how the gateway talks to chains and waits for its transactions.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct EvmSection {
    /// Bound on one JSON-RPC request (default 10).
    pub request_timeout_seconds: Option<u64>,
    /// Retries of a rate-limited or failed request (default 5).
    pub max_retries: Option<u32>,
    /// Compute units per second the RPC endpoints allow (default 330).
    pub compute_units_per_second: Option<u64>,
    /// How long a sent transaction is waited for (default 600).
    pub receipt_timeout_seconds: Option<u64>,
    /// After this long unmined, a transaction is re-signed at its nonce with higher fees (default 45).
    pub bump_after_seconds: Option<u64>,
}

/// `[personhood]`: the World ID relying party.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct PersonhoodSection {
    pub rp_id: Option<String>,
    pub app_id: Option<String>,
    /// production or staging.
    pub environment: Option<String>,
    /// The verify API; the rp_id is appended as the last path segment.
    pub verify_url: Option<String>,
    pub ttl_seconds: Option<u64>,
}

/// `[mcp]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct McpSection {
    /// `Host` values the MCP endpoint accepts (DNS-rebinding protection); default: loopback names only.
    /// `["*"]` accepts any host.
    pub allowed_hosts: Option<Vec<String>>,
}

/// `[credits]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct CreditsSection {
    /// Credits per execution by billing tier.
    pub prices: Option<BTreeMap<String, i64>>,
    pub free_per_day: Option<u32>,
}

/// `[intents]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct IntentsSection {
    pub idempotency_window_seconds: Option<u64>,
    pub lease_seconds: Option<u64>,
    pub direct_timeout_seconds: Option<u64>,
    /// How many executions of one fan-out intent run at once.
    pub fanout_concurrency: Option<usize>,
    /// Intent runner workers per process.
    pub workers: Option<usize>,
}

/// `[webhooks]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct WebhooksSection {
    /// Post to private, loopback and link-local addresses too (tests, a private network); never on
    /// a gateway that faces the internet.
    pub allow_private: Option<bool>,
    /// A ledger entry that takes an account's balance below this many credits is `credits.low`
    /// (default 100).
    pub credits_low_below: Option<i64>,
}

/// `[approvals]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ApprovalsSection {
    /// How long an intent waits for its owner's approval before it ends APPROVAL_EXPIRED
    /// (default 3600).
    pub ttl_seconds: Option<u64>,
}

/// `[delegation]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct DelegationSection {
    /// How often active delegations are checked onchain for a revocation made anywhere (and for a
    /// closed time window); 0 turns the sweep off.
    pub sweep_seconds: Option<u64>,
}

/// `[policy]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicySection {
    #[serde(default)]
    pub default: Option<DefaultPolicySection>,
}

/// `[policy.default]`: the policy a new agent starts with.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DefaultPolicySection {
    /// Omitted: every enabled read action.
    pub allowed_actions: Option<Vec<String>>,
    #[serde(default = "default_daily_limit")]
    pub daily_limit_usd: f64,
    pub max_amount_usd_per_action: Option<f64>,
    /// The lowest health factor a borrow or withdrawal may leave a lending position at (1.5).
    #[serde(default = "default_health_factor")]
    pub min_health_factor: f64,
}

fn default_health_factor() -> f64 {
    1.5
}

fn default_daily_limit() -> f64 {
    1000.0
}

/// `[onboarding]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct OnboardingSection {
    pub code_ttl_seconds: Option<u64>,
    pub code_max_attempts: Option<u32>,
    pub session_ttl_seconds: Option<u64>,
}

/// `[chains.<id>]`.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct ChainConfig {
    pub name: String,
    pub rpc_url: Option<String>,
    #[serde(default)]
    pub tokens: BTreeMap<String, TokenConfig>,
    #[serde(default)]
    pub contracts: BTreeMap<String, String>,
    /// ERC-4626 vaults by opportunity id.
    #[serde(default)]
    pub vaults: BTreeMap<String, String>,
    /// Chainlink `AggregatorV3Interface` feeds by token (symbol or address): a feed address, or
    /// `{ feed, max-age-seconds }`.
    #[serde(default)]
    pub price_feeds: BTreeMap<String, PriceFeedConfig>,
    /// Uniswap V3 pools pricing a token by their time-weighted average against their other token:
    /// `{ pool, twap-seconds }` by token (symbol or address).
    #[serde(default)]
    pub price_pools: BTreeMap<String, PricePoolConfig>,
    /// FX pairs: `"BASE/QUOTE" = "<Uniswap V3 pool>"`, both symbols of the token list.
    #[serde(default)]
    pub fx_pairs: BTreeMap<String, String>,
    /// Prediction markets' questions by condition id: `{ question, outcomes, ends-at }`.
    #[serde(default)]
    pub prediction_questions: BTreeMap<String, QuestionConfig>,
    /// Bridge routes by destination chain id: `{ destination-spoke, tokens, fee-bps, fill-seconds }`.
    #[serde(default)]
    pub bridge_routes: BTreeMap<String, BridgeRouteConfig>,
    /// Where a fan-out's redemptions are checked before they are signed: `node` (default),
    /// `local` (the gateway's own EVM over the node's state) or `shadow` (both, compared).
    #[serde(default)]
    pub fanout_check: actiongate_core::chains::FanoutCheck,
    /// How a wallet's transactions are handed to the node: `eager` (default) or `paced` (a run
    /// once the wallet's earlier ones are mined; for a node that mines on arrival).
    #[serde(default)]
    pub hand_over: actiongate_core::chains::HandOver,
}

/// A route of `[chains.<id>.bridge-routes.<toChainId>]`.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct BridgeRouteConfig {
    /// The destination chain's Across SpokePool.
    pub destination_spoke: String,
    /// Input token symbol (of this chain's list) = output token address on the destination.
    pub tokens: BTreeMap<String, String>,
    /// The route's fee in basis points of the input amount (0 to 10,000).
    #[serde(default)]
    pub fee_bps: u32,
    /// How long a fill usually takes, for quotes.
    #[serde(default = "default_fill_seconds")]
    pub fill_seconds: u32,
}

fn default_fill_seconds() -> u32 {
    10
}

/// A question of `[chains.<id>.prediction-questions."<conditionId>"]`.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct QuestionConfig {
    pub question: String,
    /// The outcomes in the condition's order; `["Yes", "No"]` when omitted.
    pub outcomes: Option<Vec<String>>,
    /// RFC 3339: no new trade after it.
    pub ends_at: Option<String>,
}

/// A pool of `[chains.<id>.price-pools]`.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct PricePoolConfig {
    pub pool: String,
    pub twap_seconds: Option<u32>,
}

/// A price feed of `[chains.<id>.price-feeds]`.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum PriceFeedConfig {
    Address(String),
    #[serde(rename_all = "kebab-case")]
    Feed {
        feed: String,
        max_age_seconds: Option<u64>,
    },
}

/// A token of a chain's token list.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TokenConfig {
    pub address: String,
    pub decimals: u8,
}

/// The resolved configuration the server runs with. Its `Debug` names no URL: a database or SMTP
/// URL can carry a password, and an RPC URL an API key.
#[derive(Clone)]
pub struct Config {
    pub dev: bool,
    pub listen: SocketAddr,
    /// Where `GET /metrics` is served: this address alone, or (none) the main listener.
    pub metrics_listen: Option<SocketAddr>,
    pub data_dir: PathBuf,
    pub database_url: String,
    pub smtp_url: Option<String>,
    pub smtp_ca_file: Option<PathBuf>,
    pub master_key_file: PathBuf,
    pub mail_from: String,
    pub settings: Settings,
    pub runner_workers: usize,
    pub internal_data_file: Option<PathBuf>,
    /// Empty: any host.
    pub mcp_allowed_hosts: Vec<String>,
    pub personhood_verify_url: String,
    pub evm: actiongate_chain::ChainOptions,
    pub earn: actiongate_chain::EarnOptions,
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("dev", &self.dev)
            .field("listen", &self.listen)
            .field("metrics_listen", &self.metrics_listen)
            .field("data_dir", &self.data_dir)
            .field("master_key_file", &self.master_key_file)
            .field("runner_workers", &self.runner_workers)
            .field("chains", &self.settings.chains.0.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

/// A configuration that cannot run.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("config file {path} is invalid: {source}")]
    Parse {
        path: PathBuf,
        source: Box<toml::de::Error>,
    },
    #[error("{0}")]
    Invalid(String),
}

impl Config {
    /// Reads the file (if any) and applies the overrides.
    pub fn load(overrides: Overrides) -> Result<Self, ConfigError> {
        let file = match &overrides.config {
            Some(path) => {
                let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
                    path: path.clone(),
                    source,
                })?;
                toml::from_str::<FileConfig>(&text).map_err(|source| ConfigError::Parse {
                    path: path.clone(),
                    source: Box::new(source),
                })?
            }
            None => FileConfig::default(),
        };
        Self::resolve(overrides, file)
    }

    /// Merges defaults, file and overrides.
    pub fn resolve(o: Overrides, f: FileConfig) -> Result<Self, ConfigError> {
        let dev = o.dev || f.dev.unwrap_or(false);
        let data_dir = o
            .data_dir
            .or(f.data_dir)
            .unwrap_or_else(|| PathBuf::from("./.actiongate"));
        let listen = o
            .listen
            .or(f.listen)
            .unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 8080)));
        let database_url = o
            .database_url
            .or(f.database_url)
            .unwrap_or_else(|| sqlite_url(&data_dir.join("actiongate.db")));
        let smtp_url = o.smtp_url.or(f.smtp_url);
        if let Some(url) = &smtp_url {
            parse_smtp_url(url)?;
        }
        let master_key_file = o
            .master_key_file
            .or(f.master_key_file)
            .unwrap_or_else(|| data_dir.join("master.key"));

        let mut settings = Settings::default();
        if let Some(p) = f.policy.default {
            settings.default_policy = DefaultPolicy {
                allowed_actions: p.allowed_actions,
                daily_limit_usd: p.daily_limit_usd,
                max_amount_usd_per_action: p.max_amount_usd_per_action,
                min_health_factor: p.min_health_factor,
            };
        }
        onboarding_settings(&mut settings, &f.onboarding)?;

        settings.chains = chain_settings(f.chains)?;
        credit_settings(&mut settings, f.credits, &f.x402)?;
        settings.prices = price_book(f.prices)?;
        intent_settings(&mut settings, &f.intents, &f.delegation)?;
        if let Some(s) = f.approvals.ttl_seconds {
            if s == 0 {
                return Err(ConfigError::Invalid(
                    "approvals.ttl-seconds must be at least 1".into(),
                ));
            }
            settings.approval_ttl = seconds(s)?;
        }
        if let Some(allow) = f.webhooks.allow_private {
            settings.webhooks_allow_private = allow;
        }
        if let Some(n) = f.webhooks.credits_low_below {
            settings.credits_low_below = n;
        }
        settings.personhood = personhood_settings(&f.personhood)?;
        settings.limits = limit_settings(&f.limits)?;
        Ok(Self {
            dev,
            listen,
            data_dir,
            database_url,
            smtp_url,
            smtp_ca_file: f.smtp_ca_file,
            master_key_file,
            mail_from: f
                .mail_from
                .unwrap_or_else(|| "actiongate <no-reply@actiongate.localhost>".into()),
            settings,
            runner_workers: f.intents.workers.unwrap_or(4).max(1),
            metrics_listen: o.metrics_listen.or(f.metrics_listen),
            evm: evm_options(&f.evm),
            earn: earn_options(&f.earn)?,
            internal_data_file: f.internal_data_file,
            personhood_verify_url: f
                .personhood
                .verify_url
                .unwrap_or_else(|| "https://developer.world.org/api/v4/verify".to_owned()),
            mcp_allowed_hosts: match f.mcp.allowed_hosts {
                Some(hosts) if hosts.iter().any(|h| h == "*") => Vec::new(),
                Some(hosts) => hosts,
                None => vec!["localhost".into(), "127.0.0.1".into(), "::1".into()],
            },
        })
    }
}

/// `[onboarding]`.
fn onboarding_settings(settings: &mut Settings, o: &OnboardingSection) -> Result<(), ConfigError> {
    if let Some(s) = o.code_ttl_seconds {
        settings.email_code_ttl = seconds(s)?;
    }
    if let Some(n) = o.code_max_attempts {
        if n == 0 {
            return Err(ConfigError::Invalid(
                "onboarding.code-max-attempts must be at least 1".into(),
            ));
        }
        settings.email_code_max_attempts = n;
    }
    if let Some(s) = o.session_ttl_seconds {
        settings.session_ttl = seconds(s)?;
    }
    Ok(())
}

/// `[chains.<id>]` over the built-in chains.
fn chain_settings(file: BTreeMap<String, ChainConfig>) -> Result<Chains, ConfigError> {
    let mut chains = builtin_chains();
    for (id, chain) in file {
        let id: u64 = id.parse().map_err(|_| {
            ConfigError::Invalid(format!("[chains.{id}]: the key must be a chain id number"))
        })?;
        chains.insert(id, chain);
    }
    Ok(Chains(
        chains
            .into_iter()
            .map(|(id, c)| {
                let tokens: BTreeMap<String, Token> = c
                    .tokens
                    .into_iter()
                    .map(|(sym, t)| {
                        (
                            sym.to_ascii_uppercase(),
                            Token {
                                address: t.address,
                                decimals: t.decimals,
                            },
                        )
                    })
                    .collect();
                let price_feeds = c
                    .price_feeds
                    .into_iter()
                    .map(|(token, feed)| {
                        let (address, max_age) = match feed {
                            PriceFeedConfig::Address(a) => (a, None),
                            PriceFeedConfig::Feed {
                                feed,
                                max_age_seconds,
                            } => (feed, max_age_seconds),
                        };
                        let feed = PriceFeed {
                            address,
                            max_age_secs: max_age.unwrap_or(DEFAULT_FEED_MAX_AGE_SECS),
                        };
                        (token_key(&token), feed)
                    })
                    .collect();
                let price_pools = c
                    .price_pools
                    .into_iter()
                    .map(|(token, p)| {
                        let pool = PricePool {
                            address: p.pool,
                            twap_secs: p.twap_seconds.unwrap_or(DEFAULT_TWAP_SECS),
                        };
                        match (pool.twap_secs, is_address(&pool.address)) {
                            (0, _) => Err(ConfigError::Invalid(format!(
                                "[chains.{id}.price-pools.{token}]: twap-seconds must be above zero"
                            ))),
                            (_, false) => Err(ConfigError::Invalid(format!(
                                "[chains.{id}.price-pools.{token}]: pool {:?} is not a 0x address",
                                pool.address
                            ))),
                            _ => Ok((token_key(&token), pool)),
                        }
                    })
                    .collect::<Result<_, _>>()?;
                let fx_pairs = c
                    .fx_pairs
                    .into_iter()
                    .map(|(pair, pool)| {
                        let (base, quote) = pair
                            .split_once('/')
                            .map(|(b, q)| (b.to_ascii_uppercase(), q.to_ascii_uppercase()))
                            .filter(|(b, q)| {
                                b != q
                                    && [b, q]
                                        .iter()
                                        .all(|s| tokens_of(&tokens).contains(&s.as_str()))
                            })
                            .ok_or_else(|| {
                                ConfigError::Invalid(format!(
                                    "[chains.{id}.fx-pairs]: {pair:?} must be BASE/QUOTE, two different symbols of [chains.{id}.tokens]"
                                ))
                            })?;
                        if !is_address(&pool) {
                            return Err(ConfigError::Invalid(format!(
                                "[chains.{id}.fx-pairs]: the pool of {pair:?}, {pool:?}, is not a 0x address"
                            )));
                        }
                        Ok(FxPair { base, quote, pool })
                    })
                    .collect::<Result<_, ConfigError>>()?;
                let prediction_questions = c
                    .prediction_questions
                    .into_iter()
                    .map(|(condition, q)| {
                        let valid = condition.len() == 66
                            && condition.starts_with("0x")
                            && condition[2..].chars().all(|c| c.is_ascii_hexdigit());
                        if !valid {
                            return Err(ConfigError::Invalid(format!(
                                "[chains.{id}.prediction-questions]: {condition:?} is not a condition id (0x and 64 hex digits)"
                            )));
                        }
                        let ends_at = q
                            .ends_at
                            .map(|t| {
                                time::OffsetDateTime::parse(
                                    &t,
                                    &time::format_description::well_known::Rfc3339,
                                )
                                .map(|t| u64::try_from(t.unix_timestamp()).unwrap_or(0))
                                .map_err(|_| {
                                    ConfigError::Invalid(format!(
                                        "[chains.{id}.prediction-questions.{condition:?}]: ends-at {t:?} is not RFC 3339"
                                    ))
                                })
                            })
                            .transpose()?;
                        Ok((
                            condition.to_ascii_lowercase(),
                            Question {
                                question: q.question,
                                outcomes: q
                                    .outcomes
                                    .unwrap_or_else(|| vec!["Yes".into(), "No".into()]),
                                ends_at,
                            },
                        ))
                    })
                    .collect::<Result<_, ConfigError>>()?;
                let bridge_routes = c
                    .bridge_routes
                    .into_iter()
                    .map(|(to, r)| {
                        let here = format!("[chains.{id}.bridge-routes.{to}]");
                        let to: u64 = to.parse().map_err(|_| {
                            ConfigError::Invalid(format!("{here}: {to:?} is not a chain id"))
                        })?;
                        let mut addresses = vec![("destination-spoke", &r.destination_spoke)];
                        addresses.extend(r.tokens.values().map(|a| ("tokens", a)));
                        if let Some((what, bad)) = addresses.iter().find(|(_, a)| !is_address(a)) {
                            return Err(ConfigError::Invalid(format!(
                                "{here}: {what} {bad:?} is not a 0x address"
                            )));
                        }
                        if let Some(symbol) = r.tokens.keys().find(|s| !tokens.contains_key(&s.to_ascii_uppercase())) {
                            return Err(ConfigError::Invalid(format!(
                                "{here}: {symbol} is not in chain {id}'s token list ({})",
                                tokens_of(&tokens).join(", ")
                            )));
                        }
                        if r.fee_bps > 10_000 {
                            return Err(ConfigError::Invalid(format!(
                                "{here}: fee-bps {} is above 10000",
                                r.fee_bps
                            )));
                        }
                        Ok((
                            to,
                            BridgeRoute {
                                destination_spoke: r.destination_spoke,
                                tokens: r
                                    .tokens
                                    .into_iter()
                                    .map(|(k, v)| (k.to_ascii_uppercase(), v))
                                    .collect(),
                                fee_bps: r.fee_bps,
                                fill_seconds: r.fill_seconds,
                            },
                        ))
                    })
                    .collect::<Result<_, ConfigError>>()?;
                Ok((
                    id,
                    ChainSettings {
                        name: c.name,
                        rpc_url: c.rpc_url,
                        tokens,
                        contracts: c.contracts,
                        vaults: c.vaults,
                        price_feeds,
                        price_pools,
                        fx_pairs,
                        prediction_questions,
                        bridge_routes,
                        fanout_check: c.fanout_check,
                        hand_over: c.hand_over,
                    },
                ))
            })
            .collect::<Result<_, ConfigError>>()?,
    ))
}

fn tokens_of(tokens: &BTreeMap<String, Token>) -> Vec<&str> {
    tokens.keys().map(String::as_str).collect()
}

/// `[credits]` and `[x402]`.
fn credit_settings(
    settings: &mut Settings,
    credits: CreditsSection,
    x: &X402Section,
) -> Result<(), ConfigError> {
    if let Some(prices) = credits.prices {
        if let Some((tier, p)) = prices.iter().find(|(_, p)| **p < 0) {
            return Err(ConfigError::Invalid(format!(
                "credits.prices.{tier} must not be negative (got {p})"
            )));
        }
        settings.credits.prices = prices;
    }
    if let Some(n) = credits.free_per_day {
        settings.credits.free_per_day = n;
    }
    purchase_settings(&mut settings.purchase, x)
}

/// `[x402]`: selling credits for a stablecoin.
fn purchase_settings(p: &mut PurchaseSettings, x: &X402Section) -> Result<(), ConfigError> {
    if let Some(c) = x.chain_id {
        p.chain_id = c;
    }
    if let Some(t) = &x.token {
        p.token = t.to_ascii_uppercase();
    }
    if let Some(r) = &x.recipient {
        p.recipient = Some(
            actiongate_core::purchases::checksum_address("x402.recipient", r)
                .map_err(|e| ConfigError::Invalid(e.message))?,
        );
    }
    if let Some(c) = x.confirmations {
        p.confirmations = c.max(1);
    }
    match (&x.token_name, x.chain_id) {
        (Some(n), _) => p.token_name = n.clone(),
        (None, Some(84532)) => p.token_name = "USDC".into(),
        _ => {}
    }
    if let Some(v) = &x.token_version {
        p.token_version = v.clone();
    }
    if let Some(t) = x.max_timeout_seconds {
        p.max_timeout_seconds = t.max(30);
    }
    if let Some(s) = x.invoice_ttl_seconds {
        p.invoice_ttl = seconds(s)?;
    }
    if let Some(packages) = &x.packages {
        p.packages = packages
            .iter()
            .map(|(sku, k)| {
                let price = actiongate_core::money::usd_to_micros(
                    &format!("x402.packages.{sku}.price"),
                    k.price.parse::<f64>().unwrap_or(-1.0),
                )
                .map_err(|e| ConfigError::Invalid(e.message))?;
                if k.credits <= 0 || price <= 0 {
                    return Err(ConfigError::Invalid(format!(
                        "x402.packages.{sku}: credits and price must be positive"
                    )));
                }
                Ok(actiongate_core::purchases::Package {
                    sku: sku.clone(),
                    credits: k.credits,
                    price_atomic: price,
                })
            })
            .collect::<Result<_, _>>()?;
    }
    Ok(())
}

/// `[prices]`: USD per whole token, by symbol or address.
fn price_book(prices: BTreeMap<String, f64>) -> Result<PriceBook, ConfigError> {
    let mut book = Vec::new();
    for (token, usd) in prices {
        let micros = actiongate_core::money::usd_to_micros(&format!("prices.{token}"), usd)
            .map_err(|e| ConfigError::Invalid(e.message))?;
        book.push((token, micros));
    }
    Ok(PriceBook::new(book))
}

/// `[intents]` and `[delegation]`.
fn intent_settings(
    settings: &mut Settings,
    intents: &IntentsSection,
    delegation: &DelegationSection,
) -> Result<(), ConfigError> {
    if let Some(s) = intents.idempotency_window_seconds {
        settings.idempotency_window = seconds(s)?;
    }
    if let Some(s) = intents.lease_seconds {
        if s == 0 {
            return Err(ConfigError::Invalid(
                "intents.lease-seconds must be at least 1".into(),
            ));
        }
        settings.lease = seconds(s)?;
    }
    if let Some(s) = intents.direct_timeout_seconds {
        settings.direct_timeout = seconds(s)?;
    }
    if let Some(n) = intents.fanout_concurrency {
        if n == 0 {
            return Err(ConfigError::Invalid(
                "intents.fanout-concurrency must be at least 1".into(),
            ));
        }
        settings.fanout_concurrency = n;
    }
    if let Some(s) = delegation.sweep_seconds {
        settings.delegation_sweep = seconds(s)?;
    }
    Ok(())
}

/// `[earn]`: how the ERC-4626 vaults' share prices are sampled for their APR.
fn earn_options(e: &EarnSection) -> Result<actiongate_chain::EarnOptions, ConfigError> {
    let d = actiongate_chain::EarnOptions::default();
    let secs = |v: Option<u64>, default: std::time::Duration, key: &str| match v {
        Some(0) => Err(ConfigError::Invalid(format!(
            "[earn] {key} must be above 0"
        ))),
        Some(s) => Ok(std::time::Duration::from_secs(s)),
        None => Ok(default),
    };
    Ok(actiongate_chain::EarnOptions {
        sample_every: secs(e.sample_seconds, d.sample_every, "sample-seconds")?,
        window: secs(e.apr_window_seconds, d.window, "apr-window-seconds")?,
        min_span: secs(e.min_span_seconds, d.min_span, "min-span-seconds")?,
    })
}

/// `[evm]`: timeouts, retries, rate limit and fee bumps of every chain client.
fn evm_options(evm: &EvmSection) -> actiongate_chain::ChainOptions {
    let d = actiongate_chain::ChainOptions::default();
    let secs = |v: Option<u64>, default: std::time::Duration| {
        v.map_or(default, std::time::Duration::from_secs)
    };
    actiongate_chain::ChainOptions {
        request_timeout: secs(evm.request_timeout_seconds, d.request_timeout),
        max_retries: evm.max_retries.unwrap_or(d.max_retries),
        retry_backoff: d.retry_backoff,
        compute_units_per_second: evm
            .compute_units_per_second
            .unwrap_or(d.compute_units_per_second),
        receipt_timeout: secs(evm.receipt_timeout_seconds, d.receipt_timeout),
        bump_after: secs(evm.bump_after_seconds, d.bump_after),
    }
}

/// `[personhood]`.
fn personhood_settings(
    p: &PersonhoodSection,
) -> Result<actiongate_core::personhood::PersonhoodSettings, ConfigError> {
    let d = actiongate_core::personhood::PersonhoodSettings::default();
    let environment = p.environment.clone().unwrap_or(d.environment);
    if environment != "production" && environment != "staging" {
        return Err(ConfigError::Invalid(
            "personhood.environment must be production or staging".into(),
        ));
    }
    Ok(actiongate_core::personhood::PersonhoodSettings {
        rp_id: p.rp_id.clone().unwrap_or(d.rp_id),
        app_id: p.app_id.clone().unwrap_or(d.app_id),
        environment,
        ttl: match p.ttl_seconds {
            Some(s) => seconds(s)?,
            None => d.ttl,
        },
    })
}

fn seconds(s: u64) -> Result<time::Duration, ConfigError> {
    let s = i64::try_from(s).map_err(|_| ConfigError::Invalid("duration too large".into()))?;
    Ok(time::Duration::seconds(s))
}

/// The `sqlite://` URL of a file path.
pub fn sqlite_url(path: &Path) -> String {
    format!("sqlite://{}", path.display())
}

/// How mail reaches the SMTP server, by the URL's scheme: plain only when the URL says `smtp://`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SmtpSecurity {
    /// `smtp://` (default port 25): no TLS (a relay on the same host or network, a test sink).
    Plain,
    /// `smtp+starttls://` (default port 587): STARTTLS required; no message goes out in clear.
    StartTls,
    /// `smtps://` (default port 465): TLS from the first byte.
    Tls,
}

/// Where and how mail is sent (`smtp-url`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SmtpTarget {
    pub security: SmtpSecurity,
    pub host: String,
    pub port: u16,
}

/// `smtp://host:port`, `smtp+starttls://host:port` or `smtps://host:port` → the target.
pub fn parse_smtp_url(url: &str) -> Result<SmtpTarget, ConfigError> {
    let bad = || {
        // Not the URL itself: it may carry a password.
        ConfigError::Invalid(
            "smtp-url must look like smtp://host:port, smtp+starttls://host:port or smtps://host:port (no user, password or path)".to_owned(),
        )
    };
    let (security, default_port, rest) = [
        ("smtp://", SmtpSecurity::Plain, 25),
        ("smtp+starttls://", SmtpSecurity::StartTls, 587),
        ("smtps://", SmtpSecurity::Tls, 465),
    ]
    .into_iter()
    .find_map(|(scheme, security, port)| {
        url.strip_prefix(scheme).map(|rest| (security, port, rest))
    })
    .ok_or_else(bad)?;
    let rest = rest.trim_end_matches('/');
    let (host, port) = match rest.rsplit_once(':') {
        Some((h, p)) => (h, p.parse::<u16>().map_err(|_| bad())?),
        None => (rest, default_port),
    };
    if host.is_empty() || host.contains('@') || host.contains('/') {
        return Err(bad());
    }
    Ok(SmtpTarget {
        security,
        host: host.to_owned(),
        port,
    })
}

/// Chain 8453 (Base) and 84532 (Base Sepolia) with their public token addresses and no RPC URL.
fn builtin_chains() -> BTreeMap<u64, ChainConfig> {
    let token = |address: &str, decimals| TokenConfig {
        address: address.into(),
        decimals,
    };
    let feed = |address: &str, max_age| PriceFeedConfig::Feed {
        feed: address.into(),
        max_age_seconds: Some(max_age),
    };
    let weth = "0x4200000000000000000000000000000000000006";
    BTreeMap::from([
        (
            8453,
            ChainConfig {
                name: "base".into(),
                rpc_url: None,
                tokens: BTreeMap::from([
                    (
                        "USDC".into(),
                        token("0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913", 6),
                    ),
                    ("WETH".into(), token(weth, 18)),
                ]),
                // Uniswap's published Base deployments: the V2 router, V3's factory, SwapRouter02
                // and QuoterV2 (swap, swap-v3 and fx-swap run once the chain has an RPC URL).
                contracts: BTreeMap::from([
                    (
                        "UniswapV2Router02".into(),
                        "0x4752ba5DBc23f44D87826276BF6Fd6b1C372aD24".into(),
                    ),
                    (
                        "UniswapV3Factory".into(),
                        "0x33128a8fC17869897dcE68Ed026d694621f6FDfD".into(),
                    ),
                    (
                        "SwapRouter02".into(),
                        "0x2626664c2603336E57B271c5C0b26F421741e481".into(),
                    ),
                    (
                        "QuoterV2".into(),
                        "0x3d4e44Eb1374240CE5F1B871ab261CD16335B76a".into(),
                    ),
                    // Aave v3 on Base as aave-address-book publishes it (AaveV3Base: POOL,
                    // AAVE_PROTOCOL_DATA_PROVIDER, ORACLE, WETH_GATEWAY): the lending actions and
                    // earn discovery run once the chain has an RPC URL.
                    (
                        "AavePool".into(),
                        "0xA238Dd80C259a72e81d7e4664a9801593F98d1c5".into(),
                    ),
                    (
                        "AavePoolDataProvider".into(),
                        "0x0F43731EB8d45A581f4a36DD74F5f358bc90C73A".into(),
                    ),
                    (
                        "AaveOracle".into(),
                        "0x2Cc0Fc26eD4563A5ce5e8bdcfe1A2878676Ae156".into(),
                    ),
                    (
                        "AaveWrappedTokenGateway".into(),
                        "0xa0d9C1E9E48Ca30c8d8C3B5D69FF5dc1f6DFfC24".into(),
                    ),
                ]),
                vaults: BTreeMap::new(),
                // Chainlink's published Base feeds; each bound is its heartbeat with a margin
                // (ETH/USD updates at least every 20 minutes, USDC/USD every 24 hours).
                price_feeds: BTreeMap::from([
                    (
                        "WETH".into(),
                        feed("0x71041dddad3595F9CEd3DcCFBe3D1F4b0a16Bb70", 1800),
                    ),
                    (
                        "USDC".into(),
                        feed("0x7e860098F58bBFC8648a4311b374B1D669a2bc6B", 90_000),
                    ),
                ]),
                price_pools: BTreeMap::new(),
                fx_pairs: BTreeMap::new(),
                prediction_questions: BTreeMap::new(),
                bridge_routes: BTreeMap::new(),
                fanout_check: Default::default(),
                hand_over: Default::default(),
            },
        ),
        (
            84532,
            ChainConfig {
                name: "base-sepolia".into(),
                rpc_url: None,
                tokens: BTreeMap::from([
                    (
                        "USDC".into(),
                        token("0x036CbD53842c5426634e7929541eC2318f3dCF7e", 6),
                    ),
                    ("WETH".into(), token(weth, 18)),
                ]),
                contracts: BTreeMap::new(),
                vaults: BTreeMap::new(),
                price_feeds: BTreeMap::new(),
                price_pools: BTreeMap::new(),
                fx_pairs: BTreeMap::new(),
                prediction_questions: BTreeMap::new(),
                bridge_routes: BTreeMap::new(),
                fanout_check: Default::default(),
                hand_over: Default::default(),
            },
        ),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_beat_the_file_and_the_file_beats_defaults() {
        let file: FileConfig = toml::from_str(
            r#"
            listen = "127.0.0.1:9000"
            data-dir = "/tmp/ag"
            [policy.default]
            allowedActions = ["swap"]
            dailyLimitUsd = 50
            [chains.84532]
            name = "devnet"
            rpc-url = "http://127.0.0.1:8545"
            "#,
        )
        .expect("from str");
        let cfg = Config::resolve(Overrides::default(), file.clone()).expect("resolve");
        assert_eq!(cfg.listen.port(), 9000);
        assert_eq!(cfg.database_url, "sqlite:///tmp/ag/actiongate.db");
        assert_eq!(cfg.master_key_file, PathBuf::from("/tmp/ag/master.key"));
        assert_eq!(cfg.settings.default_policy.daily_limit_usd, 50.0);
        let chains = &cfg.settings.chains;
        assert_eq!(
            chains.get(84532).and_then(|c| c.rpc_url.clone()).as_deref(),
            Some("http://127.0.0.1:8545")
        );
        assert!(
            chains
                .get(8453)
                .is_some_and(|c| c.rpc_url.is_none() && c.tokens.contains_key("USDC"))
        );
        // Base's published Aave v3 contracts are built in, so an RPC URL is all the family needs.
        let base = chains
            .get(8453)
            .map(|c| c.contracts.clone())
            .unwrap_or_default();
        assert_eq!(
            base.get("AavePool").map(String::as_str),
            Some("0xA238Dd80C259a72e81d7e4664a9801593F98d1c5")
        );
        assert!(
            [
                "AavePoolDataProvider",
                "AaveOracle",
                "AaveWrappedTokenGateway"
            ]
            .iter()
            .all(|k| base.contains_key(*k))
        );

        let o = Overrides {
            listen: Some(SocketAddr::from(([127, 0, 0, 1], 0))),
            ..Overrides::default()
        };
        let cfg = Config::resolve(o, file).expect("resolve");
        assert_eq!(cfg.listen.port(), 0);
    }

    #[test]
    fn debug_output_names_no_url_and_limits_are_read() {
        let file: FileConfig = toml::from_str(
            r#"
            database-url = "postgres://gw:db-password@db.internal/gw"
            smtp-url = "smtp://mail.internal:25"
            [chains.84532]
            name = "devnet"
            rpc-url = "https://rpc.example/v2/rpc-api-key"
            [limits]
            requests-per-second = 7
            trust-forwarded-for = true
            "#,
        )
        .expect("parse");
        let cfg = Config::resolve(Overrides::default(), file).expect("resolve");
        let shown = format!("{cfg:?}");
        for secret in ["db-password", "rpc-api-key"] {
            assert!(!shown.contains(secret), "{secret} in {shown}");
        }
        // A refused SMTP URL is not echoed back (it may carry a password).
        let bad: FileConfig =
            toml::from_str("smtp-url = \"smtps://mailer:smtp-password@mail.internal\"\n")
                .expect("parse");
        let refused = Config::resolve(Overrides::default(), bad)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            refused.contains("smtp-url") && !refused.contains("smtp-password"),
            "{refused}"
        );
        let l = &cfg.settings.limits;
        assert_eq!(
            (l.requests_per_second, l.burst, l.trust_forwarded_for),
            (7, 100, true)
        );
        let zero: FileConfig = toml::from_str("[limits]\nburst = 0\n").expect("parse");
        assert!(Config::resolve(Overrides::default(), zero).is_err());
    }

    #[test]
    fn price_feeds_and_fixed_prices_are_read_by_symbol_or_address() {
        let file: FileConfig = toml::from_str(
            r#"
            [prices]
            usdc = 1.0
            "0x000000000000000000000000000000000000bEEF" = 2.5
            [chains.84532]
            name = "devnet"
            [chains.84532.price-feeds]
            weth = { feed = "0x00000000000000000000000000000000000000F1", max-age-seconds = 60 }
            "0x00000000000000000000000000000000000000AA" = "0x00000000000000000000000000000000000000F2"
            "#,
        )
        .expect("from str");
        let cfg = Config::resolve(Overrides::default(), file).expect("resolve");
        let book = &cfg.settings.prices.0;
        assert_eq!(book.get("USDC"), Some(&1_000_000));
        assert_eq!(
            book.get("0x000000000000000000000000000000000000beef"),
            Some(&2_500_000)
        );
        let feeds = cfg
            .settings
            .chains
            .get(84532)
            .map(|c| c.price_feeds.clone());
        let feeds = feeds.unwrap_or_default();
        assert_eq!(
            feeds.get("WETH"),
            Some(&PriceFeed {
                address: "0x00000000000000000000000000000000000000F1".into(),
                max_age_secs: 60
            })
        );
        assert_eq!(
            feeds
                .get("0x00000000000000000000000000000000000000aa")
                .map(|f| f.max_age_secs),
            Some(DEFAULT_FEED_MAX_AGE_SECS)
        );
        // Chain 8453 knows Chainlink's published feeds.
        let base = Config::resolve(Overrides::default(), FileConfig::default()).expect("resolve");
        let base = base
            .settings
            .chains
            .get(8453)
            .map(|c| c.price_feeds.clone());
        assert_eq!(
            base.unwrap_or_default().keys().collect::<Vec<_>>(),
            ["USDC", "WETH"]
        );
    }

    #[test]
    fn price_pools_and_fx_pairs_are_read_and_checked() {
        let text = |pair: &str, twap: u32| {
            format!(
                r#"
                [chains.84532]
                name = "devnet"
                [chains.84532.tokens.USDC]
                address = "0x00000000000000000000000000000000000000C1"
                decimals = 6
                [chains.84532.tokens.EURC]
                address = "0x00000000000000000000000000000000000000E1"
                decimals = 6
                [chains.84532.price-pools]
                eurc = {{ pool = "0x00000000000000000000000000000000000000B1", twap-seconds = {twap} }}
                "0x00000000000000000000000000000000000000E2" = {{ pool = "0x00000000000000000000000000000000000000B2" }}
                [chains.84532.fx-pairs]
                "{pair}" = "0x00000000000000000000000000000000000000B1"
                "#
            )
        };
        let resolve = |t: String| {
            let file: FileConfig = toml::from_str(&t).expect("from str");
            Config::resolve(Overrides::default(), file)
        };
        let cfg = resolve(text("eurc/usdc", 60)).expect("resolve");
        let chain = cfg.settings.chains.get(84532).cloned().unwrap_or_else(|| {
            panic!("chain 84532 is configured");
        });
        assert_eq!(
            chain.price_pools.get("EURC"),
            Some(&PricePool {
                address: "0x00000000000000000000000000000000000000B1".into(),
                twap_secs: 60
            })
        );
        assert_eq!(
            chain
                .price_pools
                .get("0x00000000000000000000000000000000000000e2")
                .map(|p| p.twap_secs),
            Some(DEFAULT_TWAP_SECS)
        );
        assert_eq!(
            chain.fx_pairs,
            vec![FxPair {
                base: "EURC".into(),
                quote: "USDC".into(),
                pool: "0x00000000000000000000000000000000000000B1".into(),
            }]
        );
        assert!(chain.fx_pair("usdc", "EURC").is_some());
        // A pair must name two different tokens of the list; a window must be above zero.
        let not_a_pool = text("EURC/USDC", 60).replace(
            "\"EURC/USDC\" = \"0x00000000000000000000000000000000000000B1\"",
            "\"EURC/USDC\" = \"pool\"",
        );
        assert_ne!(not_a_pool, text("EURC/USDC", 60));
        for bad in [
            text("EURC/GBPC", 60),
            text("USDC/USDC", 60),
            text("EURC", 60),
            text("EURC/USDC", 0),
            not_a_pool,
        ] {
            assert!(resolve(bad.clone()).is_err(), "{bad}");
        }
        // Chain 8453 knows Uniswap's published Base routers.
        let base = Config::resolve(Overrides::default(), FileConfig::default()).expect("resolve");
        let contracts = base.settings.chains.get(8453).map(|c| c.contracts.clone());
        let contracts = contracts.unwrap_or_default();
        for name in [
            "UniswapV2Router02",
            "SwapRouter02",
            "QuoterV2",
            "UniswapV3Factory",
        ] {
            assert!(contracts.contains_key(name), "{name}");
        }
    }

    #[test]
    fn bad_values_are_refused_with_a_reason() {
        assert!(toml::from_str::<FileConfig>("lissten = \"x\"").is_err());
        let o = Overrides {
            smtp_url: Some("http://x".into()),
            ..Overrides::default()
        };
        assert!(Config::resolve(o, FileConfig::default()).is_err());
        assert_eq!(
            parse_smtp_url("smtp://127.0.0.1:2525")
                .ok()
                .map(|t| (t.host, t.port)),
            Some(("127.0.0.1".into(), 2525))
        );
    }

    #[test]
    fn the_smtp_scheme_says_how_mail_is_protected() {
        let target = |url: &str| parse_smtp_url(url).ok().map(|t| (t.security, t.port));
        assert_eq!(target("smtp://relay"), Some((SmtpSecurity::Plain, 25)));
        assert_eq!(
            target("smtp+starttls://mail.example.com"),
            Some((SmtpSecurity::StartTls, 587))
        );
        assert_eq!(
            target("smtps://mail.example.com"),
            Some((SmtpSecurity::Tls, 465))
        );
        assert_eq!(
            target("smtps://mail.example.com:2465"),
            Some((SmtpSecurity::Tls, 2465))
        );
        for bad in ["smtp+tls://x", "smtps://user:pw@x", "smtps://", "imap://x"] {
            assert!(parse_smtp_url(bad).is_err(), "{bad}");
        }
    }
}
