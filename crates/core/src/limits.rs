//! Rate limits (CONTRACT "Rate limits and abuse"): token buckets kept in this process's memory, per
//! agent key, per owner session and per client address. A refusal is `RATE_LIMITED` with the
//! seconds after which the next request fits, and changes nothing. Several processes behind a load
//! balancer each keep their own buckets (a client spread over N processes gets up to N times the
//! rate); the e-mail code budget, which must hold across processes, is kept in the database instead.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

use actiongate_api_types::ErrorCode;

use crate::error::{Error, Result};

/// `[limits]`.
#[derive(Debug, Clone, PartialEq)]
pub struct LimitSettings {
    /// Onboarding `start` requests a minute per client address.
    pub onboarding_per_minute: u32,
    /// Wrong code checks per e-mail address per 24 hours, across codes.
    pub code_checks_per_day: u32,
    /// Unauthenticated MCP session starts a minute per client address.
    pub mcp_initialize_per_minute: u32,
    /// Credit challenges (new x402 invoices) a minute per client address on the open purchase route.
    pub credit_challenges_per_minute: u32,
    /// Requests a second per agent key and per owner session.
    pub requests_per_second: u32,
    /// How many requests above the rate a key or session may send at once.
    pub burst: u32,
    /// The client address is the first `X-Forwarded-For` hop (behind a proxy that sets it).
    pub trust_forwarded_for: bool,
}

impl Default for LimitSettings {
    fn default() -> Self {
        Self {
            onboarding_per_minute: 10,
            code_checks_per_day: 20,
            mcp_initialize_per_minute: 60,
            credit_challenges_per_minute: 10,
            requests_per_second: 50,
            burst: 100,
            trust_forwarded_for: false,
        }
    }
}

/// When a bucket is emptied of stale keys (its map holds at most about this many).
const MAX_KEYS: usize = 100_000;

/// Token buckets by key: `capacity` tokens, refilled at `per_second`.
struct Buckets {
    per_second: f64,
    capacity: f64,
    what: &'static str,
    /// The limit's name in the refusals metric.
    limit: &'static str,
    map: Mutex<HashMap<String, (f64, Instant)>>,
}

impl Buckets {
    fn new(per_second: f64, capacity: u32, what: &'static str, limit: &'static str) -> Self {
        Self {
            per_second,
            capacity: f64::from(capacity.max(1)),
            what,
            limit,
            map: Mutex::new(HashMap::new()),
        }
    }

    /// Takes one token for `key`, or answers how many seconds until one is there.
    fn take(&self, key: &str, now: Instant) -> Result<()> {
        let mut map = self
            .map
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if map.len() >= MAX_KEYS && !map.contains_key(key) {
            // Keys idle long enough to be full again weigh nothing: forget them.
            let full_after = self.capacity / self.per_second;
            map.retain(|_, (_, at)| now.duration_since(*at).as_secs_f64() < full_after);
        }
        let (tokens, at) = map.get(key).copied().unwrap_or((self.capacity, now));
        let elapsed = now.saturating_duration_since(at).as_secs_f64();
        let tokens = (tokens + elapsed * self.per_second).min(self.capacity);
        if tokens >= 1.0 {
            map.insert(key.to_owned(), (tokens - 1.0, now));
            return Ok(());
        }
        crate::metrics::rate_limited(self.limit);
        let wait = ((1.0 - tokens) / self.per_second).ceil().max(1.0);
        // A wait beyond u64 is no wait anyone gets: the rate is at least one a day.
        let seconds = if wait.is_finite() {
            wait as u64
        } else {
            86_400
        };
        Err(Error::new(
            ErrorCode::RateLimited,
            format!(
                "Too many requests {}; wait {seconds} s and try again.",
                self.what
            ),
        )
        .with_retry_after(seconds))
    }
}

/// The process's rate limits.
pub struct Limits {
    settings: LimitSettings,
    onboarding: Buckets,
    mcp_initialize: Buckets,
    credit_challenges: Buckets,
    requests: Buckets,
}

impl Limits {
    pub fn new(settings: LimitSettings) -> Self {
        let per_minute = |n: u32| f64::from(n.max(1)) / 60.0;
        Self {
            onboarding: Buckets::new(
                per_minute(settings.onboarding_per_minute),
                settings.onboarding_per_minute,
                "to start onboarding from this address",
                "onboarding",
            ),
            mcp_initialize: Buckets::new(
                per_minute(settings.mcp_initialize_per_minute),
                settings.mcp_initialize_per_minute,
                "to open MCP sessions from this address",
                "mcp-initialize",
            ),
            credit_challenges: Buckets::new(
                per_minute(settings.credit_challenges_per_minute),
                settings.credit_challenges_per_minute,
                "to open credit invoices from this address",
                "credit-challenge",
            ),
            requests: Buckets::new(
                f64::from(settings.requests_per_second.max(1)),
                settings.burst.max(settings.requests_per_second),
                "with this key",
                "requests",
            ),
            settings,
        }
    }

    pub fn settings(&self) -> &LimitSettings {
        &self.settings
    }

    /// One onboarding `start` from `client` (an address).
    pub fn onboarding(&self, client: &str) -> Result<()> {
        self.onboarding.take(client, Instant::now())
    }

    /// One unauthenticated MCP session start from `client`.
    pub fn mcp_initialize(&self, client: &str) -> Result<()> {
        self.mcp_initialize.take(client, Instant::now())
    }

    /// One new credit invoice asked for on the open purchase route from `client`.
    pub fn credit_challenge(&self, client: &str) -> Result<()> {
        self.credit_challenges.take(client, Instant::now())
    }

    /// One request of an agent key or owner session, named by its hash (never the secret itself).
    pub fn request(&self, credential_hash: &str) -> Result<()> {
        self.requests.take(credential_hash, Instant::now())
    }

    /// One paid retry on the open purchase route from `client` (each reads the chain): held to the
    /// per-key rate, per client address.
    pub fn open_payment(&self, client: &str) -> Result<()> {
        self.requests
            .take(&format!("address {client}"), Instant::now())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_bucket_lets_its_burst_through_then_refills_at_its_rate() {
        let b = Buckets::new(2.0, 4, "in this test", "test");
        let t0 = Instant::now();
        for _ in 0..4 {
            assert!(b.take("k", t0).is_ok());
        }
        let refused = b.take("k", t0).err();
        assert_eq!(
            refused.as_ref().map(|e| (e.code, e.retry_after)),
            Some((ErrorCode::RateLimited, Some(1)))
        );
        // Another key has its own bucket.
        assert!(b.take("other", t0).is_ok());
        // Half a second later one token is back, and only one.
        let t1 = t0 + Duration::from_millis(500);
        assert!(b.take("k", t1).is_ok());
        assert!(b.take("k", t1).is_err());
    }

    #[test]
    fn a_slow_bucket_says_how_long_to_wait() {
        // 10 a minute: the 11th waits 6 s.
        let b = Buckets::new(10.0 / 60.0, 10, "in this test", "test");
        let t0 = Instant::now();
        for _ in 0..10 {
            assert!(b.take("a", t0).is_ok());
        }
        assert_eq!(b.take("a", t0).err().and_then(|e| e.retry_after), Some(6));
    }
}
