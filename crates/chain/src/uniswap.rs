//! Uniswap V3 pool arithmetic: the price at a tick (`TickMath.getSqrtRatioAtTick` of v3-core, in
//! the same integer steps), the arithmetic mean tick of an `observe` window (`OracleLibrary.consult`
//! of v3-periphery: rounded toward negative infinity), and a pool price between whole tokens as an
//! exact decimal.

use actiongate_core::prices::UsdPrice;
use alloy::primitives::{U256, U512};

/// The ticks a pool's price may take.
pub const MAX_TICK: i32 = 887_272;

/// `sqrt(1.0001^tick) × 2^96`, as v3-core computes it; `None` beyond ±[`MAX_TICK`].
pub fn sqrt_ratio_at_tick(tick: i32) -> Option<U256> {
    const STEPS: [(u32, u128); 19] = [
        (0x2, 0xfff97272373d413259a46990580e213a),
        (0x4, 0xfff2e50f5f656932ef12357cf3c7fdcc),
        (0x8, 0xffe5caca7e10e4e61c3624eaa0941cd0),
        (0x10, 0xffcb9843d60f6159c9db58835c926644),
        (0x20, 0xff973b41fa98c081472e6896dfb254c0),
        (0x40, 0xff2ea16466c96a3843ec78b326b52861),
        (0x80, 0xfe5dee046a99a2a811c461f1969c3053),
        (0x100, 0xfcbe86c7900a88aedcffc83b479aa3a4),
        (0x200, 0xf987a7253ac413176f2b074cf7815e54),
        (0x400, 0xf3392b0822b70005940c7a398e4b70f3),
        (0x800, 0xe7159475a2c29b7443b29c7fa6e889d9),
        (0x1000, 0xd097f3bdfd2022b8845ad8f792aa5825),
        (0x2000, 0xa9f746462d870fdf8a65dc1f90e061e5),
        (0x4000, 0x70d869a156d2a1b890bb3df62baf32f7),
        (0x8000, 0x31be135f97d08fd981231505542fcfa6),
        (0x10000, 0x9aa508b5b7a84e1c677de54f3e99bc9),
        (0x20000, 0x5d6af8dedb81196699c329225ee604),
        (0x40000, 0x2216e584f5fa1ea926041bedfe98),
        (0x80000, 0x48a170391f7dc42444e8fa2),
    ];
    let abs = tick.unsigned_abs();
    if abs > MAX_TICK.unsigned_abs() {
        return None;
    }
    let mut ratio = match abs & 1 {
        0 => U256::from(1u8) << 128,
        _ => U256::from(0xfffcb933bd6fad37aa2d162d1a594001_u128),
    };
    for (bit, factor) in STEPS {
        if abs & bit != 0 {
            ratio = (ratio * U256::from(factor)) >> 128;
        }
    }
    if tick > 0 {
        ratio = U256::MAX / ratio;
    }
    // Q128.128 to Q64.96, rounded up.
    let rounded = u8::from(ratio % (U256::from(1u8) << 32) != U256::ZERO);
    Some((ratio >> 32) + U256::from(rounded))
}

/// The arithmetic mean tick of a window of `secs` seconds whose tick accumulator moved by `delta`,
/// rounded toward negative infinity as OracleLibrary does.
pub fn mean_tick(delta: i64, secs: u32) -> i64 {
    let secs = i64::from(secs);
    let tick = delta / secs;
    match delta < 0 && delta % secs != 0 {
        true => tick - 1,
        false => tick,
    }
}

/// The mean tick that prices the pool's `base` token at the higher of the two ticks around the
/// exact mean: a token0 is worth 1.0001^tick of token1 (rounded up: toward +∞), a token1 is worth
/// 1.0001^-tick (rounded down: [`mean_tick`]). A limit sees a price never below the average.
pub fn mean_tick_pricing(delta: i64, secs: u32, base_is_token0: bool) -> i64 {
    let floor = mean_tick(delta, secs);
    match base_is_token0 && delta % i64::from(secs) != 0 {
        true => floor + 1,
        false => floor,
    }
}

/// What one whole `base` token is worth in whole units of the pool's other token at
/// `sqrt_price_x96`, with 18 decimals (truncated). `base_is_token0`: which side of the pool the base
/// token is. `None` when the price does not fit.
pub fn whole_price(
    sqrt_price_x96: U256,
    base_is_token0: bool,
    base_decimals: u8,
    other_decimals: u8,
) -> Option<UsdPrice> {
    const DECIMALS: u8 = 18;
    let ten = |e: u8| U512::from(10u8).pow(U512::from(e));
    let square = U512::from(sqrt_price_x96) * U512::from(sqrt_price_x96);
    let q192 = U512::from(1u8) << 192;
    // token1 units per token0 unit = square / 2^192.
    let (num, den) = match base_is_token0 {
        true => (square, q192),
        false => (q192, square),
    };
    let num = num.checked_mul(ten(base_decimals + DECIMALS))?;
    let den = den.checked_mul(ten(other_decimals))?;
    let value = num.checked_div(den)?;
    Some(UsdPrice {
        value: u128::try_from(value).ok()?,
        decimals: DECIMALS,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_match_v3_core() {
        // TickMath's published bounds and the price at tick 0.
        assert_eq!(sqrt_ratio_at_tick(0), Some(U256::from(1u8) << 96));
        assert_eq!(
            sqrt_ratio_at_tick(-MAX_TICK),
            Some(U256::from(4295128739u64))
        );
        assert_eq!(
            sqrt_ratio_at_tick(MAX_TICK),
            "1461446703485210103287273052203988822378723970342"
                .parse::<U256>()
                .ok()
        );
        assert_eq!(sqrt_ratio_at_tick(MAX_TICK + 1), None);
        // Each step up multiplies the price by 1.0001.
        let at = |t| sqrt_ratio_at_tick(t).map(|s| whole_price(s, true, 0, 0));
        assert_eq!(
            at(1).flatten().map(|p| p.to_decimal_string()),
            Some("1.0001".to_owned())
        );
    }

    #[test]
    fn mean_ticks_round_toward_negative_infinity() {
        assert_eq!(mean_tick(600, 60), 10);
        assert_eq!(mean_tick(-600, 60), -10);
        assert_eq!(mean_tick(-601, 60), -11);
        assert_eq!(mean_tick(601, 60), 10);
        // Pricing token0 rounds up, token1 down; exact means are kept.
        assert_eq!(mean_tick_pricing(601, 60, true), 11);
        assert_eq!(mean_tick_pricing(-601, 60, true), -10);
        assert_eq!(mean_tick_pricing(-601, 60, false), -11);
        assert_eq!(mean_tick_pricing(600, 60, true), 10);
    }

    #[test]
    fn prices_between_whole_tokens() {
        // 1.08 USDC (6 decimals) per EURC (6 decimals): the pool's tick for it, either side round.
        let tick = 770; // 1.0001^770 = 1.080037…
        let sqrt = sqrt_ratio_at_tick(tick).unwrap_or_default();
        let p = whole_price(sqrt, true, 6, 6).map(|p| p.to_decimal_string());
        assert!(
            p.as_deref().is_some_and(|p| p.starts_with("1.080037")),
            "{p:?}"
        );
        let inverse = whole_price(sqrt, false, 6, 6).map(|p| p.to_decimal_string());
        assert!(
            inverse
                .as_deref()
                .is_some_and(|p| p.starts_with("0.925893")),
            "{inverse:?}"
        );
        // WETH (18) at 3000 USDC (6): 3000 × 10^6 / 10^18 raw units per raw unit.
        let tick = -196_257; // 1.0001^-196257 = 2.9998e-9
        let sqrt = sqrt_ratio_at_tick(tick).unwrap_or_default();
        let weth = whole_price(sqrt, true, 18, 6).map(|p| p.value / 10u128.pow(18));
        assert_eq!(weth, Some(2999));
    }
}
