//! Provider implementations that need nothing outside the gateway.

pub mod internal;
