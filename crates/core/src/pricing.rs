//! What things cost in credits: credits per action by billing tier, the free daily allowance, and
//! the daily limit's fit. What a write is worth in USD is [`crate::prices`].

use std::collections::BTreeMap;

/// `[credits]`.
#[derive(Debug, Clone, PartialEq)]
pub struct CreditSettings {
    /// Credits per execution by billingTier (`write`, `read_rpc`, `read_offchain`); a tier not listed,
    /// and a null tier, cost nothing.
    pub prices: BTreeMap<String, i64>,
    /// Free requests per account per UTC day, used only when the paid balance cannot cover an action.
    pub free_per_day: u32,
}

impl Default for CreditSettings {
    fn default() -> Self {
        Self {
            prices: BTreeMap::from([
                ("write".to_owned(), 10),
                ("read_rpc".to_owned(), 1),
                ("read_offchain".to_owned(), 1),
            ]),
            free_per_day: 20,
        }
    }
}

impl CreditSettings {
    /// Credits one execution of an action of this tier costs.
    pub fn price(&self, tier: Option<&str>) -> i64 {
        tier.and_then(|t| self.prices.get(t)).copied().unwrap_or(0)
    }
}

/// Whether `amount` more fits under a daily limit with `used` already accepted today.
pub fn fits_daily_limit(used: i64, amount: i64, limit: i64) -> bool {
    used.saturating_add(amount) <= limit
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credit_prices_by_tier() {
        let c = CreditSettings::default();
        assert_eq!(
            (
                c.price(Some("write")),
                c.price(Some("read_rpc")),
                c.price(None)
            ),
            (10, 1, 0)
        );
    }
}
