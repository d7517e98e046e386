//! The EVM chain layer on alloy: one provider builder for every configured chain (timeouts, retries,
//! rate limit), contract bindings with `sol!`, token amounts as exact integers, transaction plans for
//! each EVM action, the per-wallet nonce manager that sends from agent wallets, and the EVM provider
//! the runner and build-tx call through `actiongate_core::execution::Provider`.

pub mod amount;
pub mod bindings;
pub mod client;
pub mod delegation;
pub mod earn;
pub mod head;
pub mod local;
pub mod market;
pub mod outbox;
pub mod payments;
pub mod plan;
pub mod prices;
pub mod probe;
pub mod provider;
pub mod receipts;
pub mod revert;
pub mod sender;
pub mod uniswap;

// Natural batching and per-key locks live in the core (the runner gathers its writes too).
pub use actiongate_core::{gather, locks};
pub use client::{ChainClients, ChainOptions};
pub use delegation::FrameworkChains;
pub use earn::{EarnOptions, EarnReads};
pub use market::MarketReads;
pub use prices::ChainPrices;
pub use provider::EvmProvider;
