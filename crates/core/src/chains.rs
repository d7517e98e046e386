//! The chains this deployment knows: names, RPC URLs, token lists and contract addresses, from the
//! `[chains.<id>]` configuration.

use std::collections::BTreeMap;

/// The default chain (SPEC).
pub const DEFAULT_CHAIN_ID: u64 = 8453;

/// A token of a chain's token list.
#[derive(Debug, Clone, PartialEq)]
pub struct Token {
    pub address: String,
    pub decimals: u8,
}

/// One configured chain.
#[derive(Debug, Clone, PartialEq)]
pub struct ChainSettings {
    pub name: String,
    pub rpc_url: Option<String>,
    /// By symbol, upper-case.
    pub tokens: BTreeMap<String, Token>,
    pub contracts: BTreeMap<String, String>,
    /// ERC-4626 vaults by opportunity id (`deposit-earn-position` and its twins).
    pub vaults: BTreeMap<String, String>,
    /// Chainlink feeds by token, keyed by upper-case symbol or lower-case address (the price
    /// layer's `token_key`).
    pub price_feeds: BTreeMap<String, PriceFeed>,
    /// Uniswap V3 pools whose time-weighted price prices a token against the pool's other token
    /// (itself priced by a feed or a fixed price), keyed as `price_feeds`.
    pub price_pools: BTreeMap<String, PricePool>,
    /// FX pairs (`[chains.<id>.fx-pairs]`): the Uniswap V3 pool each pair trades through.
    pub fx_pairs: Vec<FxPair>,
    /// Prediction markets' questions by condition id (`[chains.<id>.prediction-questions]`,
    /// lower-case 0x hex).
    pub prediction_questions: BTreeMap<String, Question>,
    /// Bridge routes from this chain by destination chain id (`[chains.<id>.bridge-routes.<to>]`).
    pub bridge_routes: BTreeMap<u64, BridgeRoute>,
    /// Where a fan-out's redemptions are checked before they are signed (`fanout-check`).
    pub fanout_check: FanoutCheck,
    /// How a wallet's signed transactions are handed to the node (`hand-over`).
    pub hand_over: HandOver,
}

/// How a wallet's queued transactions go to the chain's node (`[chains.<id>] hand-over`;
/// `actiongate_chain::outbox`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HandOver {
    /// Every queued run at once, one after the other: a node that mines on a clock (every real
    /// chain) puts as many as a block holds in each block.
    #[default]
    Eager,
    /// A wallet's next run once its earlier transactions are mined (or 2 s have passed): for a
    /// node that mines each transaction as it arrives (anvil's or hardhat's automine), which then
    /// mines a run a block. The run's rest (not executable before its first) goes to the node while
    /// the run before is mined, its first once that run is mined: anvil 1.7.1 mines empty blocks
    /// for the transactions that turn executable in its pool while a block of the same wallet's is
    /// being mined (docs/benchmarks.md, stops 53 and 62). On a node that mines on a clock it would
    /// hand over one run a block.
    Paced,
}

/// Where a fan-out's redemptions are checked (simulated) before the gateway signs them
/// (`[chains.<id>] fanout-check`; `actiongate_chain::local`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FanoutCheck {
    /// By the chain's node (`eth_simulateV1`).
    #[default]
    Node,
    /// In the gateway's own EVM over the node's state (Ethereum's rules: for chains whose EVM is
    /// Ethereum's); a user whose state cannot be read is checked by the node.
    Local,
    /// Both, on every check at the latest block; the node's answer is used and each disagreement
    /// is logged and counted (`actiongate_local_checks_total`).
    Shadow,
}

/// An Across route from a chain to `<to>`: the destination's SpokePool, the output token on the
/// destination of each input token it carries, the route's fee and its usual fill time.
#[derive(Debug, Clone, PartialEq)]
pub struct BridgeRoute {
    pub destination_spoke: String,
    /// Input token symbol (upper-case, of this chain's list) -> output token address.
    pub tokens: BTreeMap<String, String>,
    pub fee_bps: u32,
    pub fill_seconds: u32,
}

/// What a prediction market's condition asks: the question, its outcomes in order, and when the
/// market ends (seconds since the epoch; no new trade after it).
#[derive(Debug, Clone, PartialEq)]
pub struct Question {
    pub question: String,
    pub outcomes: Vec<String>,
    pub ends_at: Option<u64>,
}

/// A Uniswap V3 pool configured to price a token: `[chains.<id>.price-pools.<TOKEN>]`.
#[derive(Debug, Clone, PartialEq)]
pub struct PricePool {
    pub address: String,
    /// The averaging window of `observe`.
    pub twap_secs: u32,
}

/// The default averaging window of a price pool.
pub const DEFAULT_TWAP_SECS: u32 = 1800;

/// An FX pair: two tokens of the chain's list (upper-case symbols) and the Uniswap V3 pool between
/// them.
#[derive(Debug, Clone, PartialEq)]
pub struct FxPair {
    pub base: String,
    pub quote: String,
    pub pool: String,
}

impl ChainSettings {
    /// The FX pair that trades `a` against `b`, either way round (symbols, any case).
    pub fn fx_pair(&self, a: &str, b: &str) -> Option<&FxPair> {
        self.fx_pairs.iter().find(|p| {
            (p.base.eq_ignore_ascii_case(a) && p.quote.eq_ignore_ascii_case(b))
                || (p.base.eq_ignore_ascii_case(b) && p.quote.eq_ignore_ascii_case(a))
        })
    }
}

/// A Chainlink feed configured for a token: `[chains.<id>.price-feeds.<TOKEN>]`.
#[derive(Debug, Clone, PartialEq)]
pub struct PriceFeed {
    pub address: String,
    /// A round older than this is stale.
    pub max_age_secs: u64,
}

/// The default staleness bound of a feed configured by address alone.
pub const DEFAULT_FEED_MAX_AGE_SECS: u64 = 3600;

/// Every configured chain by id.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Chains(pub BTreeMap<u64, ChainSettings>);

impl Chains {
    pub fn get(&self, id: u64) -> Option<&ChainSettings> {
        self.0.get(&id)
    }

    /// The chain, or `UNKNOWN_CHAIN`: the one refusal of a chain id this gateway does not know.
    pub fn known(&self, id: u64) -> crate::error::Result<&ChainSettings> {
        self.get(id).ok_or_else(|| {
            crate::error::Error::new(
                actiongate_api_types::ErrorCode::UnknownChain,
                format!("Chain {id} is not one this gateway knows."),
            )
        })
    }
}
