//! `[limits]`: the rate limits of CONTRACT "Rate limits and abuse".

use actiongate_core::limits::LimitSettings;
use serde::Deserialize;

use super::ConfigError;

/// `[limits]` (CONTRACT "Rate limits and abuse"); each key left out keeps its default.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct LimitsSection {
    pub onboarding_per_minute: Option<u32>,
    pub code_checks_per_day: Option<u32>,
    pub mcp_initialize_per_minute: Option<u32>,
    pub credit_challenges_per_minute: Option<u32>,
    pub requests_per_second: Option<u32>,
    pub burst: Option<u32>,
    pub trust_forwarded_for: Option<bool>,
}

pub(super) fn limit_settings(l: &LimitsSection) -> Result<LimitSettings, ConfigError> {
    let d = LimitSettings::default();
    let positive = |key: &str, v: Option<u32>, default: u32| match v {
        Some(0) => Err(ConfigError::Invalid(format!(
            "limits.{key} must be at least 1"
        ))),
        Some(n) => Ok(n),
        None => Ok(default),
    };
    Ok(LimitSettings {
        onboarding_per_minute: positive(
            "onboarding-per-minute",
            l.onboarding_per_minute,
            d.onboarding_per_minute,
        )?,
        code_checks_per_day: positive(
            "code-checks-per-day",
            l.code_checks_per_day,
            d.code_checks_per_day,
        )?,
        mcp_initialize_per_minute: positive(
            "mcp-initialize-per-minute",
            l.mcp_initialize_per_minute,
            d.mcp_initialize_per_minute,
        )?,
        credit_challenges_per_minute: positive(
            "credit-challenges-per-minute",
            l.credit_challenges_per_minute,
            d.credit_challenges_per_minute,
        )?,
        requests_per_second: positive(
            "requests-per-second",
            l.requests_per_second,
            d.requests_per_second,
        )?,
        burst: positive("burst", l.burst, d.burst)?,
        trust_forwarded_for: l.trust_forwarded_for.unwrap_or(d.trust_forwarded_for),
    })
}
