//! The states of what the gateway stores, as types. Each is stored as its string ([`as_str`]) and
//! parsed back when read ([`FromStr`]); a string the code does not know is an error, not a guess.
//!
//! [`as_str`]: IntentStatus::as_str

use std::fmt;
use std::str::FromStr;

/// A stored state string that names no state of its kind.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {kind} {value:?}")]
pub struct UnknownState {
    pub kind: &'static str,
    pub value: String,
}

/// Declares a state enum with its stored strings, `as_str`, `FromStr` and `Display`.
macro_rules! states {
    ($(#[$doc:meta])* $name:ident ($kind:literal) { $($(#[$vdoc:meta])* $variant:ident = $text:literal),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name {
            $($(#[$vdoc])* $variant),+
        }

        impl $name {
            /// Every state, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The stored (and wire) string.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text),+
                }
            }
        }

        impl FromStr for $name {
            type Err = UnknownState;
            fn from_str(s: &str) -> Result<Self, UnknownState> {
                match s {
                    $($text => Ok($name::$variant),)+
                    _ => Err(UnknownState { kind: $kind, value: s.to_owned() }),
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

states! {
    /// Where an intent is: queued until every execution has ended, then completed (at least one
    /// succeeded, or it addressed nobody) or failed.
    IntentStatus ("intent status") {
        Queued = "queued",
        Completed = "completed",
        Failed = "failed",
    }
}

states! {
    /// Where an owner's approval of an intent stands (issue 27): pending until the owner approves or
    /// rejects it or its time runs out; only a pending approval keeps the runner off the intent.
    ApprovalState ("approval state") {
        Pending = "pending",
        Approved = "approved",
        Rejected = "rejected",
        Expired = "expired",
    }
}

impl IntentStatus {
    /// Whether the intent has ended: its status will not change again. The one predicate every
    /// surface that waits for an intent uses.
    pub fn is_ended(self) -> bool {
        self != IntentStatus::Queued
    }

    /// How an intent whose executions ended in `states` ends: completed when one succeeded (or it
    /// addressed nobody), else failed.
    pub fn settled(states: &[ExecutionState]) -> IntentStatus {
        if states.is_empty() || states.contains(&ExecutionState::Succeeded) {
            IntentStatus::Completed
        } else {
            IntentStatus::Failed
        }
    }
}

states! {
    /// Where one execution of an intent is. A write is marked started (by the lease holder) before
    /// its provider is called; a read goes from pending straight to its end.
    ExecutionState ("execution state") {
        Pending = "pending",
        Started = "started",
        Succeeded = "succeeded",
        Failed = "failed",
    }
}

impl ExecutionState {
    /// Whether the execution has ended (succeeded or failed).
    pub fn is_ended(self) -> bool {
        matches!(self, ExecutionState::Succeeded | ExecutionState::Failed)
    }

    /// The state after an end is recorded: only a pending or started execution takes it (an ended
    /// one keeps its end).
    pub fn record(self, ended: ExecutionState) -> Self {
        if self.is_ended() { self } else { ended }
    }

    /// The state an ended execution is in.
    pub fn ended(success: bool) -> Self {
        if success {
            ExecutionState::Succeeded
        } else {
            ExecutionState::Failed
        }
    }
}

states! {
    /// How an action runs: an intent fanned out to the users who delegated (Model A), a direct
    /// execution from the agent's wallet, or unsigned transactions for a wallet to sign (Model B).
    Lane ("lane") {
        ExecuteIntent = "executeIntent",
        Execute = "execute",
        BuildTx = "buildTx",
    }
}

/// The manifest names lanes by their strings.
impl<'de> serde::Deserialize<'de> for Lane {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

states! {
    /// Where a stored delegation is: only an active one is redeemed.
    DelegationStatus ("delegation status") {
        Active = "active",
        Revoked = "revoked",
        Expired = "expired",
        Invalid = "invalid",
    }
}

states! {
    /// Where the leg of a succeeded write that its venue runs elsewhere is (a bridge's fill on its
    /// destination): followed while open, then ended once.
    LegState ("leg state") {
        Open = "open",
        /// Done on the other side (the recipient has the output).
        Done = "done",
        /// Ended without it (a bridge's deposit expired unfilled, refunded or to be).
        Failed = "failed",
        /// No longer followed: nothing to follow was recorded, or it stayed open past a day.
        Untracked = "untracked",
    }
}

states! {
    /// Where a wallet's transaction at a nonce is: its nonce reserved, then signed (its bytes kept
    /// before it is sent), then mined; or voided (its nonce given back for reuse).
    ChainTxState ("transaction state") {
        Reserved = "reserved",
        Signed = "signed",
        Mined = "mined",
        Voided = "voided",
    }
}

states! {
    /// What a credit ledger row records.
    LedgerKind ("ledger kind") {
        /// Credits given by the operator.
        Grant = "grant",
        /// Credits bought (x402).
        Purchase = "purchase",
        /// Credits moved from the balance to the reservation at submit.
        Reserve = "reserve",
        /// A free request used at submit (nothing moves).
        Free = "free",
        /// Reserved credits of successful executions spent.
        Capture = "capture",
        /// Reserved credits given back to the balance.
        Release = "release",
        /// A free request given back (its intent did not succeed).
        FreeRefund = "free_refund",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_round_trip_through_their_strings() {
        for s in IntentStatus::ALL {
            assert_eq!(s.as_str().parse::<IntentStatus>(), Ok(*s));
        }
        for s in ExecutionState::ALL {
            assert_eq!(s.as_str().parse::<ExecutionState>(), Ok(*s));
        }
        for s in LedgerKind::ALL {
            assert_eq!(s.as_str().parse::<LedgerKind>(), Ok(*s));
        }
        for s in Lane::ALL {
            assert_eq!(s.as_str().parse::<Lane>(), Ok(*s));
            let json = serde_json::Value::String(s.as_str().to_owned());
            assert_eq!(serde_json::from_value::<Lane>(json).ok(), Some(*s));
        }
        for s in DelegationStatus::ALL {
            assert_eq!(s.as_str().parse::<DelegationStatus>(), Ok(*s));
        }
        for s in ChainTxState::ALL {
            assert_eq!(s.as_str().parse::<ChainTxState>(), Ok(*s));
        }
        for s in LegState::ALL {
            assert_eq!(s.as_str().parse::<LegState>(), Ok(*s));
        }
        let unknown = "done".parse::<IntentStatus>();
        assert_eq!(
            unknown.map_err(|e| e.to_string()),
            Err("unknown intent status \"done\"".into())
        );
    }

    #[test]
    fn ended_is_decided_by_the_state() {
        assert!(!IntentStatus::Queued.is_ended());
        assert!(IntentStatus::Completed.is_ended() && IntentStatus::Failed.is_ended());
        assert!(!ExecutionState::Pending.is_ended() && !ExecutionState::Started.is_ended());
        assert_eq!(ExecutionState::ended(true), ExecutionState::Succeeded);
        assert_eq!(ExecutionState::ended(false), ExecutionState::Failed);
        let (done, failed) = (ExecutionState::Succeeded, ExecutionState::Failed);
        assert_eq!(ExecutionState::Pending.record(done), done);
        assert_eq!(ExecutionState::Started.record(failed), failed);
        assert_eq!(ExecutionState::Failed.record(done), failed);
    }
}
