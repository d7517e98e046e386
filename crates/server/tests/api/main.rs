//! Integration tests of the REST surface: the real server on port 0, on SQLite and on PostgreSQL.
#![allow(clippy::panic)] // Tests fail by panicking.

mod helpers;

mod catalog;
mod errors;
mod health;
mod identity;
mod intents;
mod mcp;
mod openapi;
mod personhood;
