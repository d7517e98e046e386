//! What things cost: credits per action by billing tier, the free daily allowance, and the USD value
//! of params the gateway can price itself (configured token prices).

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

/// USD prices of tokens by symbol, in micro-dollars per whole token (`[prices]`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PriceBook(pub BTreeMap<String, i64>);

impl PriceBook {
    /// The USD value (micro-dollars) of the params, where a (token, amount) pair of them can be
    /// priced: `tokenIn`/`amountIn`, or `token`/`amount`. `None` when nothing can be priced.
    pub fn estimate_micros(&self, params: &serde_json::Value) -> Option<i64> {
        [("tokenIn", "amountIn"), ("token", "amount")]
            .iter()
            .find_map(|(t, a)| {
                let symbol = params.get(*t)?.as_str()?.to_ascii_uppercase();
                let price = *self.0.get(&symbol)?;
                let amount = params.get(*a)?.as_str()?;
                value_micros(amount, price)
            })
    }
}

/// `amount` (a decimal string in token units) × `price` (micro-dollars per unit), rounded up, in
/// integer arithmetic. `None` for a malformed amount or an overflow.
pub fn value_micros(amount: &str, price_micros: i64) -> Option<i64> {
    const SCALE: u32 = 18;
    let (whole, frac) = amount.split_once('.').unwrap_or((amount, ""));
    if whole.is_empty()
        || !whole.chars().all(|c| c.is_ascii_digit())
        || !frac.chars().all(|c| c.is_ascii_digit())
    {
        return None;
    }
    if frac.len() > SCALE as usize {
        return None;
    }
    let scaled: u128 = format!("{whole}{frac:0<18}")
        .trim_start_matches('0')
        .parse()
        .unwrap_or(0);
    let price = u128::try_from(price_micros).ok()?;
    let product = scaled.checked_mul(price)?;
    let unit = 10u128.pow(SCALE);
    let micros = product.div_ceil(unit);
    i64::try_from(micros).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_exact_and_round_up() {
        assert_eq!(value_micros("2.5", 3_000_000_000), Some(7_500_000_000));
        assert_eq!(value_micros("0.000000000000000001", 1_000_000), Some(1));
        assert_eq!(value_micros("10", 1_000_000), Some(10_000_000));
        assert_eq!(value_micros("1e3", 1), None);
        assert_eq!(value_micros("-1", 1), None);
        assert_eq!(value_micros("", 1), None);
        assert_eq!(value_micros("1.", 1_000_000), Some(1_000_000));
    }

    #[test]
    fn params_are_priced_from_the_book() {
        let book = PriceBook(BTreeMap::from([
            ("WETH".to_owned(), 3_000_000_000),
            ("USDC".to_owned(), 1_000_000),
        ]));
        let p = serde_json::json!({"tokenIn": "weth", "tokenOut": "USDC", "amountIn": "0.5"});
        assert_eq!(book.estimate_micros(&p), Some(1_500_000_000));
        let p = serde_json::json!({"token": "USDC", "to": "0x", "amount": "12.25"});
        assert_eq!(book.estimate_micros(&p), Some(12_250_000));
        assert_eq!(
            book.estimate_micros(&serde_json::json!({"token": "DOGE", "amount": "1"})),
            None
        );
    }

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
