//! The actiongate domain: the catalog, identity (onboarding, agents, sessions), and policy.
//! Ports to the outside world are traits: [`store::Store`], [`mail::Mailer`], [`clock::Clock`].
//!
//! Invariant: this crate knows no HTTP, no SQL and no CLI. Every surface calls [`Gateway`] and renders
//! what it answers; a rule lives here once.

pub mod catalog;
pub mod clock;
pub mod crypto;
pub mod error;
pub mod gateway;
pub mod mail;
pub mod money;
pub mod store;

pub use error::{Error, Result};
pub use gateway::{AgentContext, DefaultPolicy, Gateway, OwnerContext, Settings};
