//! The actiongate domain: the catalog, identity (onboarding, agents, sessions), policy, intents and
//! their checks, the credit ledger's rules, and the intent runner.
//! Ports to the outside world are traits: [`store::Store`], [`mail::Mailer`], [`clock::Clock`].
//!
//! Invariant: this crate knows no HTTP, no SQL and no CLI. Every surface calls [`Gateway`] and renders
//! what it answers; a rule lives here once.

pub mod acceptance;
pub mod catalog;
pub mod chains;
pub mod clock;
pub mod crypto;
pub mod delegation_chain;
pub mod delegations;
pub mod error;
pub mod execution;
pub mod gateway;
pub mod intents;
pub mod ledger;
pub mod mail;
pub mod money;
pub mod payments;
pub mod personhood;
pub mod pricing;
pub mod providers;
pub mod purchases;
pub mod runner;
pub mod states;
pub mod store;
pub mod wallets;

pub use error::{Error, Result};
pub use gateway::{AgentContext, DefaultPolicy, Gateway, OwnerContext, Ports, Settings};
