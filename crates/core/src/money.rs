//! USD amounts. The wire carries JSON numbers; inside they are integer micro-dollars, so that sums
//! and limits are exact.

use crate::error::Error;

/// The largest USD amount the gateway accepts anywhere (one trillion).
pub const MAX_USD: f64 = 1e12;

/// Converts a wire USD amount to micro-dollars, refusing NaN, infinities, negatives and absurd sizes.
pub fn usd_to_micros(field: &str, value: f64) -> Result<i64, Error> {
    if !value.is_finite() || !(0.0..=MAX_USD).contains(&value) {
        return Err(Error::invalid(format!(
            "{field} must be a number between 0 and {MAX_USD}"
        )));
    }
    Ok((value * 1e6).round() as i64)
}

/// Micro-dollars back to a wire number.
pub fn micros_to_usd(micros: i64) -> f64 {
    micros as f64 / 1e6
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_cents_exactly() {
        for v in [0.0, 0.01, 1000.0, 49999.99, 123456.789012] {
            let m = usd_to_micros("x", v).unwrap_or(-1);
            assert_eq!(micros_to_usd(m), v);
        }
        assert!(usd_to_micros("x", -1.0).is_err());
        assert!(usd_to_micros("x", f64::NAN).is_err());
        assert!(usd_to_micros("x", 1e13).is_err());
    }
}
