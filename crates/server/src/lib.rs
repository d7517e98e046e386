//! The actiongate server: configuration, the REST surface, mail adapters, and the application
//! that wires them to the core.

pub mod app;
pub mod config;
pub mod console;
pub mod http;
pub mod mail;
pub mod mcp;
pub mod metrics;
pub mod serve;
pub mod webhooks;
pub mod worldid;

pub use app::{Application, Deps, StartError};
pub use config::{Config, Overrides};
