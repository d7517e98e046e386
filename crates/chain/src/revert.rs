//! Revert data decoded for a person: `Error(string)`, `Panic(uint256)`, the custom errors of
//! [`crate::bindings::KnownErrors`], else the raw selector.

use actiongate_api_types::ErrorCode;
use alloy::primitives::Bytes;
use alloy::sol_types::{SolInterface, decode_revert_reason};

use crate::bindings::KnownErrors::KnownErrorsErrors;

/// The code of a refused simulation, by its revert data and [`reason`]: the Delegation Framework's
/// refusals have their own (an enforcer's `…Enforcer:` reason is a caveat's refusal; a disabled
/// delegation is revoked); anything else is `EXECUTION_REVERTED`.
pub fn code(data: Option<&Bytes>, reason: &str) -> ErrorCode {
    let disabled = data.is_some_and(|d| {
        matches!(
            KnownErrorsErrors::abi_decode(d),
            Ok(KnownErrorsErrors::CannotUseADisabledDelegation(_))
        )
    });
    if disabled {
        ErrorCode::DelegationRevoked
    } else if reason.contains("Enforcer:") {
        ErrorCode::DelegationCaveatRefused
    } else {
        ErrorCode::ExecutionReverted
    }
}

/// A sentence for the revert data of a failed call.
pub fn reason(data: Option<&Bytes>, fallback: &str) -> String {
    let Some(data) = data.filter(|d| !d.is_empty()) else {
        return if fallback.is_empty() {
            "reverted without a reason".to_owned()
        } else {
            fallback.to_owned()
        };
    };
    if let Some(text) = decode_revert_reason(data) {
        return text;
    }
    if let Ok(known) = KnownErrorsErrors::abi_decode(data) {
        return match known {
            KnownErrorsErrors::ERC20InsufficientBalance(e) => {
                format!(
                    "ERC20InsufficientBalance: {} holds {} and needs {}",
                    e.sender, e.balance, e.needed
                )
            }
            KnownErrorsErrors::ERC20InsufficientAllowance(e) => {
                format!(
                    "ERC20InsufficientAllowance: {} may spend {} and needs {}",
                    e.spender, e.allowance, e.needed
                )
            }
            KnownErrorsErrors::ERC20InvalidReceiver(e) => {
                format!("ERC20InvalidReceiver: {}", e.receiver)
            }
            KnownErrorsErrors::ERC20InvalidSender(e) => format!("ERC20InvalidSender: {}", e.sender),
            KnownErrorsErrors::ERC4626ExceededMaxDeposit(e) => {
                format!(
                    "ERC4626ExceededMaxDeposit: {} assets for {}, at most {}",
                    e.assets, e.receiver, e.max
                )
            }
            KnownErrorsErrors::ERC4626ExceededMaxWithdraw(e) => {
                format!(
                    "ERC4626ExceededMaxWithdraw: {} assets for {}, at most {}",
                    e.assets, e.owner, e.max
                )
            }
            KnownErrorsErrors::ERC4626ExceededMaxRedeem(e) => {
                format!(
                    "ERC4626ExceededMaxRedeem: {} shares for {}, at most {}",
                    e.shares, e.owner, e.max
                )
            }
            KnownErrorsErrors::SafeERC20FailedOperation(e) => {
                format!("SafeERC20FailedOperation: token {}", e.token)
            }
            KnownErrorsErrors::CannotUseADisabledDelegation(_) => {
                "DelegationManager: CannotUseADisabledDelegation (the delegator disabled it)".into()
            }
            KnownErrorsErrors::InvalidDelegate(_) => {
                "DelegationManager: InvalidDelegate (the redeemer is not the delegate)".into()
            }
            KnownErrorsErrors::InvalidDelegator(_) => "DelegationManager: InvalidDelegator".into(),
            KnownErrorsErrors::InvalidAuthority(_) => "DelegationManager: InvalidAuthority".into(),
            KnownErrorsErrors::InvalidEOASignature(_) => {
                "DelegationManager: InvalidEOASignature".into()
            }
            KnownErrorsErrors::InvalidERC1271Signature(_) => {
                "DelegationManager: InvalidERC1271Signature".into()
            }
            KnownErrorsErrors::EmptySignature(_) => "DelegationManager: EmptySignature".into(),
            KnownErrorsErrors::BatchDataLengthMismatch(_) => {
                "DelegationManager: BatchDataLengthMismatch".into()
            }
            KnownErrorsErrors::EnforcedPause(_) => {
                "DelegationManager: EnforcedPause (the manager is paused)".into()
            }
        };
    }
    format!("reverted with data {data}")
}
