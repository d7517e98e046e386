//! Token amounts: human decimal strings converted with the token's decimals into exact integers, and
//! back. Never floats.

use alloy::primitives::U256;

/// Why an amount string is refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AmountError {
    #[error("is not a decimal number such as \"25.5\"")]
    NotDecimal,
    #[error("has more than {0} decimals")]
    TooPrecise(u8),
    #[error("is too large")]
    TooLarge,
    #[error("must be greater than zero")]
    Zero,
}

/// Parses `"25.5"` with `decimals` into base units (25_500_000 for 6 decimals). Zero is refused.
pub fn parse_units(text: &str, decimals: u8) -> Result<U256, AmountError> {
    let (whole, frac) = text.split_once('.').unwrap_or((text, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty()
        || !digits(whole)
        || !digits(frac)
        || (text.contains('.') && frac.is_empty())
    {
        return Err(AmountError::NotDecimal);
    }
    let frac = frac.trim_end_matches('0');
    if frac.len() > usize::from(decimals) {
        return Err(AmountError::TooPrecise(decimals));
    }
    let scaled = format!(
        "{whole}{frac}{}",
        "0".repeat(usize::from(decimals) - frac.len())
    );
    let value = U256::from_str_radix(&scaled, 10).map_err(|_| AmountError::TooLarge)?;
    if value.is_zero() {
        return Err(AmountError::Zero);
    }
    Ok(value)
}

/// Formats base units as a decimal string without trailing zeros (`"25.5"`).
pub fn format_units(value: U256, decimals: u8) -> String {
    let digits = value.to_string();
    let d = usize::from(decimals);
    if d == 0 {
        return digits;
    }
    let padded = format!("{digits:0>width$}", width = d + 1);
    let (whole, frac) = padded.split_at(padded.len() - d);
    let frac = frac.trim_end_matches('0');
    if frac.is_empty() {
        whole.to_owned()
    } else {
        format!("{whole}.{frac}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_exactly() {
        assert_eq!(parse_units("25.5", 6), Ok(U256::from(25_500_000u64)));
        assert_eq!(
            parse_units("1", 18),
            Ok(U256::from(10u64).pow(U256::from(18u64)))
        );
        assert_eq!(parse_units("0.000001", 6), Ok(U256::from(1u64)));
        assert_eq!(parse_units("0.10", 1), Ok(U256::from(1u64)));
        assert_eq!(parse_units("0.0000001", 6), Err(AmountError::TooPrecise(6)));
        assert_eq!(parse_units("0", 6), Err(AmountError::Zero));
        for bad in ["", ".5", "5.", "1e6", "-1", "1,5", " 1"] {
            assert_eq!(parse_units(bad, 6), Err(AmountError::NotDecimal), "{bad:?}");
        }
        assert_eq!(parse_units(&"9".repeat(90), 6), Err(AmountError::TooLarge));
    }

    #[test]
    fn formats_back() {
        assert_eq!(format_units(U256::from(25_500_000u64), 6), "25.5");
        assert_eq!(format_units(U256::from(1u64), 6), "0.000001");
        assert_eq!(format_units(U256::ZERO, 6), "0");
        assert_eq!(format_units(U256::from(7u64), 0), "7");
        assert_eq!(format_units(U256::from(3_000_000u64), 6), "3");
    }
}
