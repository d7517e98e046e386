//! What a write is worth: the gateway's own USD price of the value an action moves (CONTRACT "Prices
//! behind the limits"). Sources, in order: an onchain Chainlink feed configured for the token
//! (`[chains.<id>.price-feeds]`; a round older than its `max-age-seconds` is stale, and a stale feed
//! prices nothing), then a fixed `[prices]` entry, then the time-weighted average price of a Uniswap
//! V3 pool configured for the token (`[chains.<id>.price-pools]`) times the USD price of the pool's
//! other token (from its feed or fixed price). Tokens are matched by symbol or address, in any
//! case; the native coin is priced as its wrapped token (`WETH` of the chain's token list); a vault
//! amount through the vault's asset. Prices are exact decimals: the decision never sees a float.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use actiongate_api_types::ErrorCode;
use async_trait::async_trait;
use serde_json::Value;

use crate::chains::ChainSettings;
pub use crate::chains::{DEFAULT_FEED_MAX_AGE_SECS, DEFAULT_TWAP_SECS, PriceFeed, PricePool};
use crate::error::{Error, Result};

/// A USD price of one whole token: `value / 10^decimals` USD.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UsdPrice {
    pub value: u128,
    pub decimals: u8,
}

impl UsdPrice {
    /// From micro-dollars per whole token (`[prices]`).
    pub fn from_micros(micros: i64) -> Option<Self> {
        Some(Self {
            value: u128::try_from(micros).ok()?,
            decimals: 6,
        })
    }

    /// This price times `ratio` (a price of one whole token in whole units of a token priced
    /// `self`), kept exact up to 18 decimals; `None` when it does not fit.
    pub fn times(self, ratio: UsdPrice) -> Option<Self> {
        let (a, b) = (self.at_most(18), ratio.at_most(18));
        Some(
            Self {
                value: a.value.checked_mul(b.value)?,
                decimals: a.decimals + b.decimals,
            }
            .at_most(18),
        )
    }

    /// The same price with at most `decimals` decimals (truncated).
    fn at_most(self, decimals: u8) -> Self {
        match self.decimals > decimals {
            true => Self {
                value: self.value / 10u128.pow(u32::from(self.decimals - decimals)),
                decimals,
            },
            false => self,
        }
    }

    /// The price as a decimal string, for people and the wire (never for a decision).
    pub fn to_decimal_string(self) -> String {
        let digits = self.value.to_string();
        let d = usize::from(self.decimals);
        if d == 0 {
            return digits;
        }
        let padded = format!("{digits:0>width$}", width = d + 1);
        let (whole, frac) = padded.split_at(padded.len() - d);
        let frac = frac.trim_end_matches('0');
        match frac.is_empty() {
            true => whole.to_owned(),
            false => format!("{whole}.{frac}"),
        }
    }
}

/// The USD value in micro-dollars of `amount` (a decimal string in token units) at `price`, rounded
/// up, in integer arithmetic. `None` when the amount is not a plain decimal or the value does not
/// fit (the caller refuses: an amount that does not fit is not priced at 0).
pub fn value_micros(amount: &str, price: UsdPrice) -> Option<i64> {
    let (whole, frac) = amount.split_once('.').unwrap_or((amount, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty() || !digits(whole) || !digits(frac) {
        return None;
    }
    let frac = frac.trim_end_matches('0');
    let scaled: u128 = match format!("{whole}{frac}").trim_start_matches('0') {
        "" => 0,
        n => n.parse().ok()?,
    };
    let product = scaled.checked_mul(price.value)?;
    // amount = scaled / 10^f; value = product / 10^(f + decimals) USD = product × 10^6 / 10^(f + d) micros.
    let shift = u32::try_from(frac.len()).ok()? + u32::from(price.decimals);
    let micros = if shift >= 6 {
        product.div_ceil(10u128.checked_pow(shift - 6)?)
    } else {
        product.checked_mul(10u128.checked_pow(6 - shift)?)?
    };
    i64::try_from(micros).ok()
}

/// How many smallest units of a token with `decimals` decimals `micros` micro-dollars buy at
/// `price`, rounded down (the price first rounded up to at most 8 decimals), so a cap in tokens is
/// never worth more than the USD cap it comes from. `None` when the price is 0 or it does not fit.
pub fn units_for_micros(micros: i64, price: UsdPrice, decimals: u8) -> Option<u128> {
    let (value, price_decimals) = match price.decimals > 8 {
        true => (
            price
                .value
                .div_ceil(10u128.checked_pow(u32::from(price.decimals - 8))?),
            8,
        ),
        false => (price.value, price.decimals),
    };
    let den = value.checked_mul(1_000_000).filter(|d| *d > 0)?;
    // floor(micros × 10^shift / den), one power of ten at a time (the product alone may not fit
    // where the quotient does).
    let micros = u128::try_from(micros).ok()?;
    let (mut q, mut r) = (micros / den, micros % den);
    for _ in 0..u32::from(decimals) + u32::from(price_decimals) {
        let r10 = r.checked_mul(10)?;
        q = q.checked_mul(10)?.checked_add(r10 / den)?;
        r = r10 % den;
    }
    Some(q)
}

/// Where a price came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PriceSource {
    Chainlink,
    Config,
    UniswapV3Twap,
}

impl PriceSource {
    pub fn as_str(self) -> &'static str {
        match self {
            PriceSource::Chainlink => "chainlink",
            PriceSource::Config => "config",
            PriceSource::UniswapV3Twap => "uniswap-v3-twap",
        }
    }
}

/// `[prices]`: fixed USD prices in micro-dollars per whole token, by upper-case symbol or lower-case
/// address.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PriceBook(pub BTreeMap<String, i64>);

impl PriceBook {
    /// Builds the book from configured entries (symbol or 0x address, any case).
    pub fn new(entries: impl IntoIterator<Item = (String, i64)>) -> Self {
        Self(
            entries
                .into_iter()
                .map(|(k, v)| (token_key(&k), v))
                .collect(),
        )
    }

    /// The fixed price of the token known by any of `keys` (already normalised by [`token_key`]).
    fn price(&self, keys: &[String]) -> Option<i64> {
        keys.iter().find_map(|k| self.0.get(k).copied())
    }
}

/// How a symbol or an address is keyed in the price tables: an address lower-case, a symbol
/// upper-case.
pub fn token_key(text: &str) -> String {
    match is_address(text) {
        true => text.to_ascii_lowercase(),
        false => text.to_ascii_uppercase(),
    }
}

/// Whether `text` is a 0x address (40 hex digits, any case).
pub fn is_address(text: &str) -> bool {
    text.len() == 42 && text.starts_with("0x") && text[2..].bytes().all(|b| b.is_ascii_hexdigit())
}

/// One answer of a Chainlink `AggregatorV3Interface` feed: `latestRoundData` and `decimals`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FeedRound {
    pub answer: i128,
    pub decimals: u8,
    /// Seconds since the epoch.
    pub updated_at: u64,
}

/// The time-weighted average price of one token in a Uniswap V3 pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolTwap {
    /// The pool's other token (its address, lower-case).
    pub other: String,
    /// What one whole token is worth in whole units of the other, averaged over the window.
    pub ratio: UsdPrice,
}

/// The onchain reads prices need (the chain crate implements them).
#[async_trait]
pub trait PriceReads: Send + Sync {
    /// The latest round of the feed at `feed` on `chain_id`.
    async fn feed_round(&self, chain_id: u64, feed: &str) -> Result<FeedRound>;
    /// The address of the asset of the ERC-4626 vault at `vault`.
    async fn vault_asset(&self, chain_id: u64, vault: &str) -> Result<String>;
    /// What `holder`'s whole position in the vault is worth in asset units (a decimal string):
    /// `convertToAssets(balanceOf(holder))`.
    async fn vault_position(&self, chain_id: u64, vault: &str, holder: &str) -> Result<String>;
    /// The collateral token (its address) of the prediction market at `market`.
    async fn market_collateral(&self, chain_id: u64, market: &str) -> Result<String>;
    /// What `owner` supplies or owes of `token` (a token param: symbol, `ETH` or address) in the
    /// chain's lending pool, in token units (a decimal string).
    async fn lending_position(
        &self,
        chain_id: u64,
        token: &str,
        owner: &str,
        side: PositionSide,
    ) -> Result<String>;
    /// The price of `token` (an address) in the Uniswap V3 pool at `pool`, averaged over the last
    /// `secs` seconds (`observe`); fails when the pool's history does not reach that far back.
    async fn pool_twap(
        &self,
        chain_id: u64,
        pool: &str,
        token: &str,
        secs: u32,
    ) -> Result<PoolTwap>;
}

/// A token as the price tables know it: its list symbol and its address, each where known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenRef {
    pub symbol: Option<String>,
    pub address: Option<String>,
}

impl TokenRef {
    /// Resolves a token param (a symbol of the chain's token list, the native coin `ETH`, or a 0x
    /// address) against the chain's list; the native coin is its wrapped token.
    pub fn resolve(text: &str, chain: &ChainSettings) -> Self {
        if is_address(text) {
            let symbol = chain
                .tokens
                .iter()
                .find(|(_, t)| t.address.eq_ignore_ascii_case(text))
                .map(|(s, _)| s.clone());
            return Self {
                symbol,
                address: Some(text.to_ascii_lowercase()),
            };
        }
        let mut symbol = text.to_ascii_uppercase();
        if symbol == "ETH" {
            symbol = "WETH".to_owned();
        }
        let address = chain
            .tokens
            .get(&symbol)
            .map(|t| t.address.to_ascii_lowercase());
        Self {
            symbol: Some(symbol),
            address,
        }
    }

    fn keys(&self) -> Vec<String> {
        [self.symbol.as_deref(), self.address.as_deref()]
            .into_iter()
            .flatten()
            .map(token_key)
            .collect()
    }

    /// How a person names it.
    pub fn name(&self) -> &str {
        self.symbol
            .as_deref()
            .or(self.address.as_deref())
            .unwrap_or("?")
    }
}

/// A token's price with where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quote {
    pub price: UsdPrice,
    pub source: PriceSource,
    /// When the source last updated it (seconds since the epoch); `None` for a fixed price.
    pub updated_at: Option<u64>,
}

/// A price as a read shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PriceRead {
    pub quote: Quote,
    /// Why the price should not be relied on (a stale feed); empty when it can.
    pub issues: Vec<String>,
}

/// How an action's value is found, from its catalog entry (`value` in the manifest).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ValueRule {
    /// Moves no value (a vote, a claim, a cancel): priced 0 by its definition.
    Nothing,
    /// The `amount` param, in units of the token the `token` param names.
    Token { token: String, amount: String },
    /// The `amount` param, in units of the native coin (priced as its wrapped token).
    Native { amount: String },
    /// The `amount` param (or `max`: the holder's whole position), in units of the asset of the
    /// ERC-4626 vault the `vault` param names (an id of `[chains.<id>.vaults]`).
    VaultAsset { vault: String, amount: String },
    /// The `amount` param in units of the collateral of the prediction market the `market` param
    /// names (read onchain); with `price`, the `amount` param times the `price` param (an order's
    /// size in shares at its limit price, [`crate::orders::decimal_product`]).
    MarketCollateral {
        market: String,
        amount: String,
        price: Option<String>,
    },
    /// The `amount` param in units of the token the `token` param names, where `max` is a lending
    /// position in it: what the `owner` param (else the wallet the write runs for) supplies or owes.
    Position {
        token: String,
        amount: String,
        side: PositionSide,
        owner: Option<String>,
    },
}

/// The prefix of an earn opportunity that is an Aave reserve (`aave-v3:USDC`).
pub const LENDING_OPPORTUNITY: &str = "aave-v3:";

/// Which side of a lending position `max` means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PositionSide {
    /// What the wallet supplies (a withdrawal's `max`).
    Supplied,
    /// What the wallet owes (a repayment's `max`).
    Debt,
}

impl ValueRule {
    /// The params a rule reads, for the catalog's check that they exist.
    pub fn params(&self) -> Vec<&str> {
        match self {
            ValueRule::Nothing => vec![],
            ValueRule::Token { token, amount } => vec![token, amount],
            ValueRule::Native { amount } => vec![amount],
            ValueRule::VaultAsset { vault, amount } => vec![vault, amount],
            ValueRule::Position { token, amount, .. } => vec![token, amount],
            ValueRule::MarketCollateral {
                market,
                amount,
                price,
            } => [market, amount]
                .into_iter()
                .chain(price)
                .map(String::as_str)
                .collect(),
        }
    }
}

/// What the gateway priced a write at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Valuation {
    pub micros: i64,
    /// The token's price, `None` for an action that moves no value.
    pub quote: Option<(TokenRef, Quote)>,
}

/// How long a feed's answer is reused.
const FEED_CACHE_TTL: Duration = Duration::from_secs(3);
const FEED_CACHE_MAX: usize = 4096;

/// Answers read onchain, each reused for [`FEED_CACHE_TTL`]; emptied when it holds
/// [`FEED_CACHE_MAX`].
struct ShortCache<K, V>(Mutex<HashMap<K, (Instant, V)>>);

impl<K: std::hash::Hash + Eq, V: Clone> ShortCache<K, V> {
    fn new() -> Self {
        Self(Mutex::new(HashMap::new()))
    }

    fn entries(&self) -> std::sync::MutexGuard<'_, HashMap<K, (Instant, V)>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn get(&self, key: &K) -> Option<V> {
        self.entries()
            .get(key)
            .filter(|(at, _)| at.elapsed() < FEED_CACHE_TTL)
            .map(|(_, v)| v.clone())
    }

    fn put(&self, key: K, value: V) {
        let mut entries = self.entries();
        if entries.len() >= FEED_CACHE_MAX {
            entries.clear();
        }
        entries.insert(key, (Instant::now(), value));
    }
}

/// The price layer: the configured sources and a short cache of feed rounds per (chain, feed).
pub struct Prices {
    book: PriceBook,
    reads: Option<std::sync::Arc<dyn PriceReads>>,
    /// Feed rounds by (chain, feed).
    feeds: ShortCache<(u64, String), FeedRound>,
    /// Pool prices by (chain, pool, token).
    twaps: ShortCache<(u64, String, String), PoolTwap>,
}

fn unavailable(message: impl Into<String>) -> Error {
    Error::new(ErrorCode::PriceUnavailable, message)
}

impl Prices {
    pub fn new(book: PriceBook, reads: Option<std::sync::Arc<dyn PriceReads>>) -> Self {
        Self {
            book,
            reads,
            feeds: ShortCache::new(),
            twaps: ShortCache::new(),
        }
    }

    pub fn book(&self) -> &PriceBook {
        &self.book
    }

    fn reads(&self) -> Result<&dyn PriceReads> {
        self.reads
            .as_deref()
            .ok_or_else(|| unavailable("No chain is configured to read prices from."))
    }

    async fn feed_round(&self, chain_id: u64, feed: &str) -> Result<FeedRound> {
        let key = (chain_id, feed.to_ascii_lowercase());
        if let Some(round) = self.feeds.get(&key) {
            return Ok(round);
        }
        let round = self.reads()?.feed_round(chain_id, feed).await?;
        self.feeds.put(key, round);
        Ok(round)
    }

    async fn pool_twap(&self, chain_id: u64, pool: &PricePool, token: &str) -> Result<PoolTwap> {
        let key = (
            chain_id,
            pool.address.to_ascii_lowercase(),
            token.to_owned(),
        );
        if let Some(twap) = self.twaps.get(&key) {
            return Ok(twap);
        }
        let twap = self
            .reads()?
            .pool_twap(chain_id, &pool.address, token, pool.twap_secs)
            .await?;
        self.twaps.put(key, twap.clone());
        Ok(twap)
    }

    /// The price of `token` on `chain_id` at `now_secs`: its feed when one is configured (stale or
    /// broken: unavailable, never a fallback), else its fixed price. What a write is priced with.
    pub async fn quote(
        &self,
        chain_id: u64,
        chain: &ChainSettings,
        token: &TokenRef,
        now_secs: u64,
    ) -> Result<Quote> {
        let read = self.read(chain_id, chain, token, now_secs).await?;
        match read.issues.into_iter().next() {
            Some(issue) => Err(unavailable(issue)),
            None => Ok(read.quote),
        }
    }

    /// The price of `token` as a market read shows it: a stale feed's last answer is given, marked
    /// stale with the reason in `issues` (a write is never priced with it, [`Prices::quote`]).
    pub async fn read(
        &self,
        chain_id: u64,
        chain: &ChainSettings,
        token: &TokenRef,
        now_secs: u64,
    ) -> Result<PriceRead> {
        if let Some(read) = self.direct(chain_id, chain, token, now_secs).await? {
            return Ok(read);
        }
        let keys = token.keys();
        let pool = keys.iter().find_map(|k| chain.price_pools.get(k));
        let (Some(pool), Some(address)) = (pool, token.address.as_deref()) else {
            return Err(unavailable(format!(
                "The gateway has no price for {} on chain {chain_id}: configure a feed ([chains.{chain_id}.price-feeds]), a price ([prices]) or a pool ([chains.{chain_id}.price-pools]).",
                token.name()
            )));
        };
        let twap = self
            .pool_twap(chain_id, pool, address)
            .await
            .map_err(|e| {
                unavailable(format!(
                    "The time-weighted price of {} in the pool {} on chain {chain_id} cannot be read: {}",
                    token.name(),
                    pool.address,
                    e.message
                ))
            })?;
        let other = TokenRef::resolve(&twap.other, chain);
        let Some(base) = self.direct(chain_id, chain, &other, now_secs).await? else {
            return Err(unavailable(format!(
                "The pool pricing {} trades it against {}, which has no feed or fixed price on chain {chain_id}.",
                token.name(),
                other.name()
            )));
        };
        let price =
            base.quote.price.times(twap.ratio).ok_or_else(|| {
                unavailable(format!("The price of {} does not fit.", token.name()))
            })?;
        Ok(PriceRead {
            quote: Quote {
                price,
                source: PriceSource::UniswapV3Twap,
                updated_at: Some(now_secs),
            },
            issues: base.issues,
        })
    }

    /// A token's price from its own feed or its fixed price; `None` when it has neither.
    async fn direct(
        &self,
        chain_id: u64,
        chain: &ChainSettings,
        token: &TokenRef,
        now_secs: u64,
    ) -> Result<Option<PriceRead>> {
        let keys = token.keys();
        if let Some(feed) = keys.iter().find_map(|k| chain.price_feeds.get(k)) {
            let round = self
                .feed_round(chain_id, &feed.address)
                .await
                .map_err(|e| {
                    unavailable(format!(
                        "The price feed of {} on chain {chain_id} cannot be read: {}",
                        token.name(),
                        e.message
                    ))
                })?;
            let value = u128::try_from(round.answer)
                .ok()
                .filter(|v| *v > 0)
                .ok_or_else(|| {
                    unavailable(format!(
                        "The price feed of {} on chain {chain_id} answers {}, not a price.",
                        token.name(),
                        round.answer
                    ))
                })?;
            let age = now_secs.saturating_sub(round.updated_at);
            let issues = match age > feed.max_age_secs {
                true => vec![format!(
                    "The price feed of {} on chain {chain_id} is stale: its last round is {age} s old (at most {} s).",
                    token.name(),
                    feed.max_age_secs
                )],
                false => vec![],
            };
            return Ok(Some(PriceRead {
                quote: Quote {
                    price: UsdPrice {
                        value,
                        decimals: round.decimals,
                    },
                    source: PriceSource::Chainlink,
                    updated_at: Some(round.updated_at),
                },
                issues,
            }));
        }
        Ok(self
            .book
            .price(&keys)
            .and_then(UsdPrice::from_micros)
            .map(|price| PriceRead {
                quote: Quote {
                    price,
                    source: PriceSource::Config,
                    updated_at: None,
                },
                issues: vec![],
            }))
    }

    /// What a write of an action valued by `rule` with these params is worth. `holder`: the wallet
    /// whose vault position `max` means, when the write has one wallet.
    pub async fn value(
        &self,
        rule: &ValueRule,
        params: &Value,
        chain_id: u64,
        chain: &ChainSettings,
        holder: Option<&str>,
        now_secs: u64,
    ) -> Result<Valuation> {
        let text = |name: &str| -> Result<String> {
            params
                .get(name)
                .and_then(Value::as_str)
                .map(str::to_owned)
                .ok_or_else(|| unavailable(format!("params.{name} is needed to price this write.")))
        };
        let (token, amount) = match rule {
            ValueRule::Nothing => {
                return Ok(Valuation {
                    micros: 0,
                    quote: None,
                });
            }
            ValueRule::Token { token, amount } => {
                (TokenRef::resolve(&text(token)?, chain), text(amount)?)
            }
            ValueRule::Native { amount } => (TokenRef::resolve("ETH", chain), text(amount)?),
            // An Aave opportunity (`aave-v3:<asset>`) is an amount of its asset; `max` its supply.
            ValueRule::VaultAsset { vault, amount }
                if text(vault).is_ok_and(|id| id.starts_with(LENDING_OPPORTUNITY)) =>
            {
                let id = text(vault)?;
                let token = id.trim_start_matches(LENDING_OPPORTUNITY).to_owned();
                let mut amount = text(amount)?;
                if amount == "max" {
                    let Some(holder) = holder else {
                        return Err(unavailable(
                            "amount \"max\" cannot be priced here (a fan-out withdraws a different position for each user): state the amount.",
                        ));
                    };
                    amount = self
                        .reads()?
                        .lending_position(chain_id, &token, holder, PositionSide::Supplied)
                        .await?;
                }
                (TokenRef::resolve(&token, chain), amount)
            }
            ValueRule::VaultAsset { vault, amount } => {
                let id = text(vault)?;
                let address = chain.vaults.get(&id).ok_or_else(|| {
                    unavailable(format!("{id:?} is not a vault of chain {chain_id}."))
                })?;
                let asset = self.reads()?.vault_asset(chain_id, address).await?;
                let mut amount = text(amount)?;
                if amount == "max" {
                    let Some(holder) = holder else {
                        return Err(unavailable(
                            "amount \"max\" cannot be priced here (a fan-out withdraws a different position for each user): state the amount.",
                        ));
                    };
                    amount = self
                        .reads()?
                        .vault_position(chain_id, address, holder)
                        .await?;
                }
                (TokenRef::resolve(&asset, chain), amount)
            }
            ValueRule::MarketCollateral {
                market,
                amount,
                price,
            } => {
                let mut amount = text(amount)?;
                if let Some(price) = price {
                    let per = crate::orders::decimal_price(params.get(price.as_str()))?;
                    amount = crate::orders::decimal_product(&amount, &per).ok_or_else(|| {
                        unavailable(format!("{amount} at {per} does not fit a price."))
                    })?;
                }
                let collateral = self
                    .reads()?
                    .market_collateral(chain_id, &text(market)?)
                    .await?;
                (TokenRef::resolve(&collateral, chain), amount)
            }
            ValueRule::Position {
                token,
                amount,
                side,
                owner,
            } => {
                let token = text(token)?;
                let mut amount = text(amount)?;
                if amount == "max" {
                    let whose = owner
                        .as_deref()
                        .and_then(|o| params.get(o))
                        .and_then(Value::as_str)
                        .or(holder);
                    let Some(whose) = whose else {
                        return Err(unavailable(
                            "amount \"max\" cannot be priced here (a fan-out moves a different position for each user): state the amount.",
                        ));
                    };
                    amount = self
                        .reads()?
                        .lending_position(chain_id, &token, whose, *side)
                        .await?;
                }
                (TokenRef::resolve(&token, chain), amount)
            }
        };
        let quote = self.quote(chain_id, chain, &token, now_secs).await?;
        let micros = value_micros(&amount, quote.price).ok_or_else(|| {
            unavailable(format!(
                "{amount} {} cannot be priced: the amount is not a plain decimal or its value does not fit.",
                token.name()
            ))
        })?;
        Ok(Valuation {
            micros,
            quote: Some((token, quote)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chains::Token;

    fn price(value: u128, decimals: u8) -> UsdPrice {
        UsdPrice { value, decimals }
    }

    #[test]
    fn values_are_exact_and_round_up() {
        let eth = price(3_000_000_000, 6);
        assert_eq!(value_micros("2.5", eth), Some(7_500_000_000));
        assert_eq!(
            value_micros("0.000000000000000001", price(1_000_000, 6)),
            Some(1)
        );
        assert_eq!(value_micros("10", price(1_000_000, 6)), Some(10_000_000));
        assert_eq!(value_micros("1.", price(1_000_000, 6)), Some(1_000_000));
        assert_eq!(value_micros("0", eth), Some(0));
        // Chainlink's 8 decimals.
        assert_eq!(
            value_micros("2", price(300_012_345_678, 8)),
            Some(6_000_246_914)
        );
        // A price with no decimals, and fewer than six.
        assert_eq!(value_micros("1.5", price(2, 0)), Some(3_000_000));
        for bad in ["1e3", "-1", "", ".5", "1.2.3", "max", " 1"] {
            assert_eq!(value_micros(bad, eth), None, "{bad:?}");
        }
        // Too large to hold: not priced (never 0).
        assert_eq!(value_micros(&"9".repeat(40), eth), None);
        assert_eq!(value_micros("100000000000000000000", eth), None);
    }

    #[test]
    fn usd_caps_become_token_units_rounded_down() {
        // 100 USD of a 6-decimals token at 1.08 USD (Chainlink's 8 decimals): 92.592592.
        assert_eq!(
            units_for_micros(100_000_000, price(108_000_000, 8), 6),
            Some(92_592_592)
        );
        // 100 USD of ETH (18 decimals) at 3000: 0.0333… ETH in wei.
        assert_eq!(
            units_for_micros(100_000_000, price(3_000_000_000, 6), 18),
            Some(33_333_333_333_333_333)
        );
        // A price with 18 decimals is rounded up first: never more tokens than the cap buys.
        let fine = price(1_080_000_000_000_000_001, 18);
        assert_eq!(units_for_micros(100_000_000, fine, 6), Some(92_592_591));
        assert_eq!(units_for_micros(1, price(0, 8), 6), None);
        assert_eq!(units_for_micros(-1, price(1, 0), 6), None);
        assert_eq!(units_for_micros(i64::MAX, price(1, 8), 30), None);
        // A large cap in an 18-decimals token: the product would not fit, the quotient does.
        assert_eq!(
            units_for_micros(10_000_000_000_000, price(300_000_000_000, 8), 18),
            Some(3_333_333_333_333_333_333_333)
        );
    }

    #[test]
    fn decimal_strings_for_people() {
        assert_eq!(
            price(300_012_345_678, 8).to_decimal_string(),
            "3000.12345678"
        );
        assert_eq!(price(1_000_000, 6).to_decimal_string(), "1");
        assert_eq!(price(5, 8).to_decimal_string(), "0.00000005");
        assert_eq!(price(7, 0).to_decimal_string(), "7");
    }

    const USDC: &str = "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913";
    const WETH: &str = "0x4200000000000000000000000000000000000006";

    fn chain() -> ChainSettings {
        ChainSettings {
            name: "base".into(),
            rpc_url: None,
            tokens: BTreeMap::from([
                (
                    "USDC".to_owned(),
                    Token {
                        address: USDC.into(),
                        decimals: 6,
                    },
                ),
                (
                    "WETH".to_owned(),
                    Token {
                        address: WETH.into(),
                        decimals: 18,
                    },
                ),
            ]),
            contracts: BTreeMap::new(),
            vaults: BTreeMap::new(),
            price_feeds: BTreeMap::new(),
            price_pools: BTreeMap::new(),
            fx_pairs: vec![],
            prediction_questions: BTreeMap::new(),
            bridge_routes: BTreeMap::new(),
            fanout_check: Default::default(),
            hand_over: Default::default(),
        }
    }

    fn book() -> Prices {
        Prices::new(
            PriceBook::new([
                ("usdc".to_owned(), 1_000_000),
                ("weth".to_owned(), 3_000_000_000),
            ]),
            None,
        )
    }

    async fn priced(p: &Prices, rule: &ValueRule, params: Value) -> Result<i64, ErrorCode> {
        p.value(rule, &params, 8453, &chain(), None, 0)
            .await
            .map(|v| v.micros)
            .map_err(|e| e.code)
    }

    #[tokio::test]
    async fn tokens_are_priced_by_symbol_or_address_in_any_case() {
        let p = book();
        let rule = ValueRule::Token {
            token: "tokenIn".into(),
            amount: "amountIn".into(),
        };
        for token in [
            "USDC",
            "usdc",
            USDC,
            &USDC.to_ascii_lowercase(),
            &USDC.to_ascii_uppercase().replacen("0X", "0x", 1),
        ] {
            let got = priced(
                &p,
                &rule,
                serde_json::json!({"tokenIn": token, "amountIn": "12.5"}),
            )
            .await;
            assert_eq!(got, Ok(12_500_000), "{token}");
        }
        // The native coin is its wrapped token.
        let native = ValueRule::Native {
            amount: "amount".into(),
        };
        assert_eq!(
            priced(&p, &native, serde_json::json!({"amount": "0.5"})).await,
            Ok(1_500_000_000)
        );
        let eth = serde_json::json!({"tokenIn": "eth", "amountIn": "1"});
        assert_eq!(priced(&p, &rule, eth).await, Ok(3_000_000_000));
        // A fixed price may name an address the list does not have.
        let other = "0x000000000000000000000000000000000000bEEF";
        let p = Prices::new(PriceBook::new([(other.to_owned(), 2_000_000)]), None);
        let params = serde_json::json!({"tokenIn": other.to_ascii_lowercase(), "amountIn": "3"});
        assert_eq!(priced(&p, &rule, params).await, Ok(6_000_000));
    }

    #[tokio::test]
    async fn what_cannot_be_priced_is_refused_not_zero() {
        let p = book();
        let rule = ValueRule::Token {
            token: "token".into(),
            amount: "amount".into(),
        };
        for params in [
            serde_json::json!({"token": "DOGE", "amount": "1"}),
            serde_json::json!({"token": "0x000000000000000000000000000000000000dEaD", "amount": "1"}),
            serde_json::json!({"token": "USDC", "amount": "9".repeat(40)}),
            serde_json::json!({"token": "USDC"}),
        ] {
            let got = priced(&p, &rule, params.clone()).await;
            assert_eq!(got, Err(ErrorCode::PriceUnavailable), "{params}");
        }
        // A vault needs the chain; none here.
        let vault = ValueRule::VaultAsset {
            vault: "opportunityId".into(),
            amount: "amount".into(),
        };
        let got = priced(
            &p,
            &vault,
            serde_json::json!({"opportunityId": "x", "amount": "1"}),
        )
        .await;
        assert_eq!(got, Err(ErrorCode::PriceUnavailable));
        // Moving nothing is worth nothing, by definition.
        assert_eq!(
            priced(&p, &ValueRule::Nothing, serde_json::json!({})).await,
            Ok(0)
        );
    }

    struct Feed(FeedRound);

    #[async_trait]
    impl PriceReads for Feed {
        async fn feed_round(&self, _: u64, _: &str) -> Result<FeedRound> {
            Ok(self.0)
        }
        async fn vault_asset(&self, _: u64, _: &str) -> Result<String> {
            Ok(USDC.to_owned())
        }
        async fn vault_position(&self, _: u64, _: &str, _: &str) -> Result<String> {
            Ok("40.5".to_owned())
        }
        async fn lending_position(
            &self,
            _: u64,
            _: &str,
            _: &str,
            _: PositionSide,
        ) -> Result<String> {
            Ok("12.25".to_owned())
        }
        async fn market_collateral(&self, _: u64, _: &str) -> Result<String> {
            Ok(USDC.to_owned())
        }
        async fn pool_twap(&self, _: u64, _: &str, _: &str, _: u32) -> Result<PoolTwap> {
            // 1 EURC = 1.0812 USDC in the pool.
            Ok(PoolTwap {
                other: USDC.to_ascii_lowercase(),
                ratio: UsdPrice {
                    value: 1_081_200_000_000_000_000,
                    decimals: 18,
                },
            })
        }
    }

    #[tokio::test]
    async fn a_pool_prices_a_token_against_a_priced_one() {
        const EURC: &str = "0x60a3e35cc302bfa44cb288bc5a4f316fdb1adb42";
        let mut c = chain();
        c.tokens.insert(
            "EURC".into(),
            Token {
                address: EURC.into(),
                decimals: 6,
            },
        );
        c.price_pools.insert(
            "EURC".into(),
            PricePool {
                address: "0xpool".into(),
                twap_secs: 1800,
            },
        );
        c.price_feeds.insert(
            "USDC".into(),
            PriceFeed {
                address: "0xfeed".into(),
                max_age_secs: 60,
            },
        );
        // USDC at 0.99980000 from its feed.
        let round = FeedRound {
            answer: 99_980_000,
            decimals: 8,
            updated_at: 1_000,
        };
        let p = Prices::new(PriceBook::default(), Some(std::sync::Arc::new(Feed(round))));
        let eurc = TokenRef::resolve("eurc", &c);
        let read = p.read(8453, &c, &eurc, 1_010).await.map_err(|e| e.code);
        let read = read.map(|r| (r.quote.price.to_decimal_string(), r.quote.source, r.issues));
        assert_eq!(
            read,
            Ok(("1.08098376".to_owned(), PriceSource::UniswapV3Twap, vec![]))
        );
        let rule = ValueRule::Token {
            token: "token".into(),
            amount: "amount".into(),
        };
        let params = serde_json::json!({"token": EURC, "amount": "100"});
        let v = p.value(&rule, &params, 8453, &c, None, 1_010).await;
        assert_eq!(v.map(|v| v.micros).map_err(|e| e.code), Ok(108_098_376));
        // The other token's feed gone stale: the pool's price is not used for a write.
        let stale = p.value(&rule, &params, 8453, &c, None, 1_061).await;
        assert_eq!(stale.map_err(|e| e.code), Err(ErrorCode::PriceUnavailable));
        // A feed of its own comes first.
        c.price_feeds.insert(
            "EURC".into(),
            PriceFeed {
                address: "0xeurfeed".into(),
                max_age_secs: 60,
            },
        );
        let read = p.read(8453, &c, &eurc, 1_010).await.map(|r| r.quote.source);
        assert_eq!(read.map_err(|e| e.code), Ok(PriceSource::Chainlink));
    }

    #[test]
    fn prices_multiply_exactly() {
        let usd = price(99_980_000, 8);
        let ratio = price(1_081_200_000_000_000_000, 18);
        assert_eq!(
            usd.times(ratio).map(|p| p.to_decimal_string()),
            Some("1.08098376".into())
        );
        assert_eq!(price(u128::MAX, 0).times(price(2, 0)), None);
    }

    #[tokio::test]
    async fn a_configured_feed_decides_and_a_stale_one_prices_nothing() {
        let mut c = chain();
        c.price_feeds.insert(
            "WETH".into(),
            PriceFeed {
                address: "0xfeed".into(),
                max_age_secs: 60,
            },
        );
        let round = FeedRound {
            answer: 250_000_000_000,
            decimals: 8,
            updated_at: 1_000,
        };
        // The fixed price (3000) is not used while the feed answers.
        let p = Prices::new(
            PriceBook::new([("WETH".to_owned(), 3_000_000_000)]),
            Some(std::sync::Arc::new(Feed(round))),
        );
        let rule = ValueRule::Native {
            amount: "amount".into(),
        };
        let params = serde_json::json!({"amount": "2"});
        let v = p
            .value(&rule, &params, 8453, &c, None, 1_060)
            .await
            .map_err(|e| e.code);
        assert_eq!(v.as_ref().map(|v| v.micros), Ok(5_000_000_000));
        assert_eq!(
            v.map(|v| v.quote.map(|(_, q)| q.source)),
            Ok(Some(PriceSource::Chainlink))
        );
        let stale = p.value(&rule, &params, 8453, &c, None, 1_061).await;
        assert_eq!(stale.map_err(|e| e.code), Err(ErrorCode::PriceUnavailable));
        // A vault amount is priced through its asset; max through the holder's position.
        c.vaults.insert("usdc-vault".into(), "0xvault".into());
        let vault = ValueRule::VaultAsset {
            vault: "opportunityId".into(),
            amount: "amount".into(),
        };
        let max = serde_json::json!({"opportunityId": "usdc-vault", "amount": "max"});
        let p = Prices::new(book().book, Some(std::sync::Arc::new(Feed(round))));
        let got = p.value(&vault, &max, 8453, &c, Some("0xholder"), 0).await;
        let got = got.map(|v| v.micros).map_err(|e| e.code);
        assert_eq!(got, Ok(40_500_000));
        let fan_out = p.value(&vault, &max, 8453, &c, None, 0).await;
        assert_eq!(
            fan_out.map_err(|e| e.code),
            Err(ErrorCode::PriceUnavailable)
        );
        // A lending position's max (12.25 USDC owed here) is read for the owner param, else the
        // holder; a fan-out without either cannot price it.
        let debt = ValueRule::Position {
            token: "asset".into(),
            amount: "amount".into(),
            side: PositionSide::Debt,
            owner: Some("onBehalfOf".into()),
        };
        let all = serde_json::json!({"asset": "USDC", "amount": "max"});
        let got = p.value(&debt, &all, 8453, &c, Some("0xholder"), 0).await;
        assert_eq!(got.map(|v| v.micros).map_err(|e| e.code), Ok(12_250_000));
        let theirs = serde_json::json!({"asset": "USDC", "amount": "max", "onBehalfOf": "0xother"});
        let got = p.value(&debt, &theirs, 8453, &c, None, 0).await;
        assert_eq!(got.map(|v| v.micros).map_err(|e| e.code), Ok(12_250_000));
        let nobody = p.value(&debt, &all, 8453, &c, None, 0).await;
        assert_eq!(nobody.map_err(|e| e.code), Err(ErrorCode::PriceUnavailable));
        // An Aave opportunity of the earn actions is its asset; max its supply.
        let aave = serde_json::json!({"opportunityId": "aave-v3:USDC", "amount": "5"});
        let got = p.value(&vault, &aave, 8453, &c, None, 0).await;
        assert_eq!(got.map(|v| v.micros).map_err(|e| e.code), Ok(5_000_000));
        let aave_max = serde_json::json!({"opportunityId": "aave-v3:USDC", "amount": "max"});
        let got = p
            .value(&vault, &aave_max, 8453, &c, Some("0xholder"), 0)
            .await;
        assert_eq!(got.map(|v| v.micros).map_err(|e| e.code), Ok(12_250_000));
        let stated = serde_json::json!({"asset": "USDC", "amount": "3"});
        let got = p.value(&debt, &stated, 8453, &c, None, 0).await;
        assert_eq!(got.map(|v| v.micros).map_err(|e| e.code), Ok(3_000_000));
    }
}
