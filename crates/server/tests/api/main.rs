//! Integration tests of the REST surface: the real server on port 0, on SQLite and on PostgreSQL.
#![allow(clippy::panic, clippy::expect_used)] // Tests fail by panicking, saying what failed.

mod helpers;

mod approvals;
mod audit;
mod catalog;
mod console;
mod errors;
mod health;
mod identity;
mod intents;
mod limits;
mod mail_tls;
mod malformed;
mod mcp;
mod mcp_sessions;
mod metrics;
mod openapi;
mod personhood;
mod pruning;
mod venues;
mod webhooks;
