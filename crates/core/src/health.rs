//! The policy's health-factor rule on a lending position ([`check_health`]): a write that leaves a
//! position with debt must keep its health factor at or above the agent's `minHealthFactor`. The
//! venue reads the position ([`crate::execution::Provider::health_change`]); submit, build-tx,
//! preflight and venue readiness judge it here.

use actiongate_api_types::ErrorCode;

use crate::error::{Error, Result};
use crate::execution::HealthChange;

/// A health factor (ten-thousandths) for people: `1.5`, `1.3725`.
fn health_text(bps: u128) -> String {
    let (whole, frac) = (bps / 10_000, bps % 10_000);
    let frac = format!("{frac:04}");
    let frac = frac.trim_end_matches('0');
    if frac.is_empty() {
        whole.to_string()
    } else {
        format!("{whole}.{frac}")
    }
}

/// The health factor of weighted collateral over debt, in ten-thousandths (rounded down);
/// `None` without debt.
fn health_bps(weighted_collateral: u128, debt: u128) -> Option<u128> {
    (debt > 0).then(|| weighted_collateral.saturating_mul(10_000) / debt)
}

/// The policy's health-factor rule on a venue's change: a position left with debt must keep its
/// health factor at or above the minimum. The answer is what preflight reports.
pub(crate) fn check_health(change: &HealthChange, min_bps: i64) -> Result<String> {
    let min = u128::try_from(min_bps).unwrap_or(0);
    let before = health_bps(change.weighted_collateral_before, change.debt_before);
    let Some(after) = health_bps(change.weighted_collateral_after, change.debt_after) else {
        return Ok(format!("{} keeps no debt", change.owner));
    };
    let now = before.map_or_else(
        || "no debt now".to_owned(),
        |b| format!("now {}", health_text(b)),
    );
    if after < min {
        return Err(Error::new(
            ErrorCode::PolicyHealthFactor,
            format!(
                "This would leave {}'s lending health factor at {} ({now}), below this agent's minimum of {}; borrow or withdraw less, or repay first.",
                change.owner,
                health_text(after),
                health_text(min)
            ),
        ));
    }
    Ok(format!(
        "leaves {}'s health factor at {} ({now}), at or above {}",
        change.owner,
        health_text(after),
        health_text(min)
    ))
}

#[cfg(test)]
mod tests {
    use super::check_health;
    use crate::execution::HealthChange;
    use actiongate_api_types::ErrorCode;

    fn change(before: (u128, u128), after: (u128, u128)) -> HealthChange {
        HealthChange {
            owner: "0xabc".into(),
            weighted_collateral_before: before.0,
            debt_before: before.1,
            weighted_collateral_after: after.0,
            debt_after: after.1,
        }
    }

    #[test]
    fn a_position_left_below_the_minimum_is_refused_and_one_at_it_passes() {
        // 24,900 USD of weighted collateral: 15,000 USD of debt is 1.66, 16,600 is exactly 1.5.
        let ok = check_health(&change((24_900, 0), (24_900, 16_600)), 15_000);
        assert_eq!(
            ok.map_err(|e| e.code),
            Ok("leaves 0xabc's health factor at 1.5 (no debt now), at or above 1.5".to_owned())
        );
        let low = check_health(&change((24_900, 15_000), (24_900, 16_601)), 15_000);
        let err = low.expect_err("below the minimum");
        assert_eq!(err.code, ErrorCode::PolicyHealthFactor);
        assert!(
            err.message.contains("at 1.4999 (now 1.66)") && err.message.contains("minimum of 1.5"),
            "{}",
            err.message
        );
        // A withdrawal that lowers the weighted collateral counts the same way.
        let withdraw = check_health(&change((24_900, 15_000), (20_000, 15_000)), 15_000);
        assert_eq!(
            withdraw.map_err(|e| e.code),
            Err(ErrorCode::PolicyHealthFactor)
        );
        // No debt after: nothing to liquidate, whatever the collateral.
        assert!(check_health(&change((10, 0), (0, 0)), 15_000).is_ok());
    }
}
