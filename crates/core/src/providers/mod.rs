//! Provider implementations that need nothing outside the gateway: chain-free reads, and the
//! order book of held prediction orders.

pub mod internal;
pub mod orders;
