//! The credit ledger's rules, as pure functions over the credit rows a transaction has locked: the
//! UTC day and today's free allowance, the price of an intent, a submit's reservation, and the
//! settlement of an intent whose executions have ended (capture per success, release the rest, give
//! a free request back). The store reads the rows under its locks into a [`CreditLedger`], lets it
//! decide, and writes what it answers ([`CreditLedger::changed`], [`CreditLedger::rows`]).

use std::collections::BTreeMap;

use crate::states::{ExecutionState, IntentStatus, LedgerKind};
use crate::store::{CreditAccount, IntentRecord};

/// Milliseconds in a UTC day.
pub const DAY_MS: i64 = 86_400_000;

/// The UTC day number (days since the epoch) of an instant in Unix milliseconds.
pub fn day_of(ms: i64) -> i64 {
    ms.div_euclid(DAY_MS)
}

/// The first instant (Unix milliseconds) of a UTC day.
pub fn day_start(day: i64) -> i64 {
    day.saturating_mul(DAY_MS)
}

impl CreditAccount {
    /// Free requests used on `day`: the count kept is that of `free_day` only, so a new UTC day
    /// starts with the whole allowance.
    pub fn free_used_on(&self, day: i64) -> u32 {
        if self.free_day == day {
            self.free_used
        } else {
            0
        }
    }

    /// How `price` credits are covered on `day`: nothing to pay, else the paid balance when it
    /// holds the whole price, else one of the day's free requests, else refused (a short balance
    /// and an empty one are told apart). The one rule the accepting transaction and preflight share.
    pub fn cover(&self, price: i64, free_per_day: u32, day: i64) -> Cover {
        if price == 0 {
            Cover::Covered {
                reserve: 0,
                free_request: false,
            }
        } else if self.balance >= price {
            Cover::Covered {
                reserve: price,
                free_request: false,
            }
        } else if self.free_used_on(day) < free_per_day {
            Cover::Covered {
                reserve: 0,
                free_request: true,
            }
        } else if self.balance == 0 {
            Cover::AllowanceUsed
        } else {
            Cover::Insufficient {
                balance: self.balance,
                price,
            }
        }
    }
}

/// The price of an intent addressing `users` users at `per_execution` credits each; `None` when it
/// does not fit in an i64 (such an intent is refused, never priced lower).
pub fn price_for(per_execution: i64, users: u64) -> Option<i64> {
    per_execution.checked_mul(i64::try_from(users).ok()?)
}

/// A decision that cannot be made from what was read: a bug of the caller or corrupt rows, never a
/// refusal. The transaction that read the rows is rolled back.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LedgerError {
    #[error("the credit row of account {0} was not locked")]
    AccountNotLocked(String),
    #[error("{0} does not fit its column")]
    OutOfRange(&'static str),
    #[error("credits added must be positive, not {0}")]
    NotPositive(i64),
}

/// Balances before or after a ledger row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Balances {
    pub balance: i64,
    pub reserved: i64,
}

impl From<&CreditAccount> for Balances {
    fn from(a: &CreditAccount) -> Self {
        Balances {
            balance: a.balance,
            reserved: a.reserved,
        }
    }
}

/// One ledger row to write.
#[derive(Debug, Clone, PartialEq)]
pub struct LedgerRow<'a> {
    pub account_id: &'a str,
    pub agent_id: Option<&'a str>,
    pub kind: LedgerKind,
    pub reason: String,
    pub intent_id: Option<&'a str>,
    pub invoice_id: Option<&'a str>,
    pub before: Balances,
    pub after: Balances,
    pub at: i64,
}

/// How a submit's price is covered, once its users are known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cover {
    /// Credits reserved (0: nothing to pay), or a free request used.
    Covered { reserve: i64, free_request: bool },
    /// The paid balance is short (not empty) and today's free requests are used.
    Insufficient { balance: i64, price: i64 },
    /// The paid balance is empty and today's free requests are used.
    AllowanceUsed,
}

/// What a submit reserves: its price, its account, who submits it, and when.
#[derive(Debug, Clone, Copy)]
pub struct Reservation<'a> {
    pub account_id: &'a str,
    pub agent_id: &'a str,
    pub intent_id: &'a str,
    pub action: &'a str,
    pub price: i64,
    pub users: u32,
    pub free_per_day: u32,
    pub at: i64,
}

/// Credits added to an account (a grant, a purchase, held credits claimed).
#[derive(Debug, Clone, Copy)]
pub struct Credit<'a> {
    pub account_id: &'a str,
    pub agent_id: Option<&'a str>,
    pub invoice_id: Option<&'a str>,
    pub amount: i64,
    pub kind: LedgerKind,
    pub reason: &'a str,
    pub at: i64,
}

/// The credit rows a transaction locked, as the decisions change them, with the ledger rows those
/// changes write.
#[derive(Debug, Clone, Default)]
pub struct CreditLedger<'a> {
    accounts: BTreeMap<&'a str, CreditAccount>,
    read: BTreeMap<&'a str, CreditAccount>,
    rows: Vec<LedgerRow<'a>>,
}

impl<'a> CreditLedger<'a> {
    /// The rows as read (and locked).
    pub fn new(accounts: BTreeMap<&'a str, CreditAccount>) -> Self {
        CreditLedger {
            read: accounts.clone(),
            accounts,
            rows: Vec::new(),
        }
    }

    /// An account as the decisions so far left it.
    pub fn account(&self, account_id: &str) -> Option<&CreditAccount> {
        self.accounts.get(account_id)
    }

    fn locked(&mut self, account_id: &str) -> Result<&mut CreditAccount, LedgerError> {
        self.accounts
            .get_mut(account_id)
            .ok_or_else(|| LedgerError::AccountNotLocked(account_id.to_owned()))
    }

    /// How `r` would be covered now ([`CreditAccount::cover`]).
    pub fn cover(&self, r: &Reservation<'_>) -> Result<Cover, LedgerError> {
        let account = self
            .accounts
            .get(r.account_id)
            .ok_or_else(|| LedgerError::AccountNotLocked(r.account_id.to_owned()))?;
        Ok(account.cover(r.price, r.free_per_day, day_of(r.at)))
    }

    /// Reserves what [`CreditLedger::cover`] decided for an accepted submit: credits move from the
    /// balance to the reservation (a `reserve` row), or a free request is counted for today (a
    /// `free` row); nothing to pay changes nothing.
    pub fn reserve(
        &mut self,
        r: &Reservation<'a>,
        reserve: i64,
        free_request: bool,
    ) -> Result<(), LedgerError> {
        if reserve == 0 && !free_request {
            return Ok(());
        }
        let day = day_of(r.at);
        let account = self.locked(r.account_id)?;
        let before = Balances::from(&*account);
        let free_today = account.free_used_on(day);
        account.balance -= reserve;
        account.reserved += reserve;
        account.free_day = day;
        account.free_used = if free_request {
            free_today
                .checked_add(1)
                .ok_or(LedgerError::OutOfRange("free_used"))?
        } else {
            free_today
        };
        let after = Balances::from(&*account);
        self.rows.push(LedgerRow {
            account_id: r.account_id,
            agent_id: Some(r.agent_id),
            kind: if free_request {
                LedgerKind::Free
            } else {
                LedgerKind::Reserve
            },
            reason: format!("{} x{}", r.action, r.users),
            intent_id: Some(r.intent_id),
            invoice_id: None,
            before,
            after,
            at: r.at,
        });
        Ok(())
    }

    /// Settles a queued intent whose executions are in `states`: `None` while any has not ended
    /// (nothing changes). Else the successful executions' price is captured (never more than was
    /// reserved), the rest of the reservation released, and a free request that bought no success
    /// is given back if it was used today; answers how the intent ends: completed when one
    /// succeeded (or it addressed nobody), else failed.
    pub fn settle(
        &mut self,
        intent: &'a IntentRecord,
        states: &[ExecutionState],
        at: i64,
    ) -> Result<Option<IntentStatus>, LedgerError> {
        if states.iter().any(|s| !s.is_ended()) {
            return Ok(None);
        }
        let successes = states
            .iter()
            .filter(|s| **s == ExecutionState::Succeeded)
            .count();
        let successes =
            i64::try_from(successes).map_err(|_| LedgerError::OutOfRange("successes"))?;
        let status = IntentStatus::settled(states);
        let capture = intent
            .price_per_execution
            .saturating_mul(successes)
            .min(intent.reserved_credits);
        let release = intent.reserved_credits - capture;
        let account = self.locked(&intent.account_id)?;
        let start = Balances::from(&*account);
        let refund_free = intent.free_request
            && successes == 0
            && account.free_used_on(day_of(intent.created_at)) > 0;
        account.balance += release;
        account.reserved -= intent.reserved_credits;
        if refund_free {
            account.free_used -= 1;
        }
        let end = Balances::from(&*account);
        let row = |kind, reason, before, after| LedgerRow {
            account_id: &intent.account_id,
            agent_id: Some(&intent.agent_id),
            kind,
            reason,
            intent_id: Some(&intent.id),
            invoice_id: None,
            before,
            after,
            at,
        };
        let captured = Balances {
            balance: start.balance,
            reserved: start.reserved - capture,
        };
        if capture > 0 {
            let reason = format!("{} x{successes} succeeded", intent.action);
            self.rows
                .push(row(LedgerKind::Capture, reason, start, captured));
        }
        if release > 0 {
            let reason = format!("{} unused reservation", intent.action);
            self.rows
                .push(row(LedgerKind::Release, reason, captured, end));
        }
        if refund_free {
            let reason = format!("{} did not succeed", intent.action);
            self.rows
                .push(row(LedgerKind::FreeRefund, reason, end, end));
        }
        Ok(Some(status))
    }

    /// Adds credits to an account's balance, with a row; answers the account as it is then.
    pub fn credit(&mut self, c: &Credit<'a>) -> Result<CreditAccount, LedgerError> {
        if c.amount <= 0 {
            return Err(LedgerError::NotPositive(c.amount));
        }
        let account = self.locked(c.account_id)?;
        let before = Balances::from(&*account);
        account.balance = account
            .balance
            .checked_add(c.amount)
            .ok_or(LedgerError::OutOfRange("balance"))?;
        let now = account.clone();
        self.rows.push(LedgerRow {
            account_id: c.account_id,
            agent_id: c.agent_id,
            kind: c.kind,
            reason: c.reason.to_owned(),
            intent_id: None,
            invoice_id: c.invoice_id,
            before,
            after: Balances::from(&now),
            at: c.at,
        });
        Ok(now)
    }

    /// The accounts the decisions changed, as they are now, in account order.
    pub fn changed(&self) -> Vec<(&'a str, CreditAccount)> {
        self.accounts
            .iter()
            .filter(|(id, now)| self.read.get(*id) != Some(*now))
            .map(|(id, now)| (*id, now.clone()))
            .collect()
    }

    /// The ledger rows the decisions wrote, in order.
    pub fn rows(&self) -> &[LedgerRow<'a>] {
        &self.rows
    }

    /// [`CreditLedger::changed`] and the rows, giving the ledger up.
    pub fn into_writes(self) -> (Vec<(&'a str, CreditAccount)>, Vec<LedgerRow<'a>>) {
        (self.changed(), self.rows)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: i64 = 20_000 * DAY_MS + 3_600_000; // 01:00 UTC on day 20000

    fn account(balance: i64, reserved: i64, free_day: i64, free_used: u32) -> CreditAccount {
        CreditAccount {
            balance,
            reserved,
            free_day,
            free_used,
        }
    }

    fn ledger(a: CreditAccount) -> CreditLedger<'static> {
        CreditLedger::new(BTreeMap::from([("acc", a)]))
    }

    fn reservation(price: i64, at: i64) -> Reservation<'static> {
        Reservation {
            account_id: "acc",
            agent_id: "agent",
            intent_id: "i1",
            action: "swap",
            price,
            users: 1,
            free_per_day: 2,
            at,
        }
    }

    fn intent(price: i64, reserved: i64, free: bool, created_at: i64) -> IntentRecord {
        IntentRecord {
            id: "i1".into(),
            agent_id: "agent".into(),
            account_id: "acc".into(),
            action: "swap".into(),
            lane: crate::states::Lane::ExecuteIntent,
            params: Default::default(),
            chain_id: 8453,
            amount_micros: 0,
            price_per_execution: price,
            reserved_credits: reserved,
            free_request: free,
            status: IntentStatus::Queued,
            total: 1,
            created_at,
            finished_at: None,
            approval: None,
        }
    }

    #[test]
    fn the_utc_day_turns_at_midnight() {
        assert_eq!(day_of(DAY_MS - 1), 0);
        assert_eq!(day_of(DAY_MS), 1);
        assert_eq!(day_of(-1), -1);
        assert_eq!(day_start(day_of(T)), T - 3_600_000);
        let a = account(0, 0, 20_000, 3);
        assert_eq!((a.free_used_on(20_000), a.free_used_on(20_001)), (3, 0));
    }

    #[test]
    fn price_times_users_is_checked() {
        assert_eq!(price_for(10, 3), Some(30));
        assert_eq!(price_for(0, u64::MAX), None);
        assert_eq!(price_for(i64::MAX, 2), None);
        assert_eq!(price_for(i64::MAX, 1), Some(i64::MAX));
    }

    #[test]
    fn the_paid_balance_covers_first_then_a_free_request() {
        let l = ledger(account(10, 0, 0, 0));
        let covered = |reserve, free_request| {
            Ok(Cover::Covered {
                reserve,
                free_request,
            })
        };
        assert_eq!(l.cover(&reservation(10, T)), covered(10, false));
        assert_eq!(l.cover(&reservation(0, T)), covered(0, false));
        assert_eq!(l.cover(&reservation(11, T)), covered(0, true));
        // Today's allowance (2) used: a short balance and an empty one are told apart.
        let l = ledger(account(5, 0, day_of(T), 2));
        assert_eq!(
            l.cover(&reservation(11, T)),
            Ok(Cover::Insufficient {
                balance: 5,
                price: 11
            })
        );
        let l = ledger(account(0, 0, day_of(T), 2));
        assert_eq!(l.cover(&reservation(1, T)), Ok(Cover::AllowanceUsed));
        // The same use counted yesterday leaves today's allowance whole.
        let l = ledger(account(0, 0, day_of(T) - 1, 2));
        assert_eq!(l.cover(&reservation(1, T)), covered(0, true));
        let missing = CreditLedger::default().cover(&reservation(1, T));
        assert_eq!(missing, Err(LedgerError::AccountNotLocked("acc".into())));
    }

    #[test]
    fn a_reservation_moves_credits_or_counts_a_free_request() {
        let mut l = ledger(account(25, 5, 0, 0));
        l.reserve(&reservation(10, T), 10, false).unwrap();
        assert_eq!(l.account("acc"), Some(&account(15, 15, day_of(T), 0)));
        let row = &l.rows()[0];
        assert_eq!(
            (row.kind, row.reason.as_str()),
            (LedgerKind::Reserve, "swap x1")
        );
        assert_eq!(
            (row.before, row.after),
            (
                Balances {
                    balance: 25,
                    reserved: 5
                },
                Balances {
                    balance: 15,
                    reserved: 15
                }
            )
        );
        // A free request on a new day starts the day's count at one.
        let mut l = ledger(account(0, 0, day_of(T) - 1, 7));
        l.reserve(&reservation(10, T), 0, true).unwrap();
        assert_eq!(l.account("acc"), Some(&account(0, 0, day_of(T), 1)));
        assert_eq!(l.rows()[0].kind, LedgerKind::Free);
        // Nothing to pay: nothing changes, no row.
        let mut l = ledger(account(3, 0, 0, 0));
        l.reserve(&reservation(0, T), 0, false).unwrap();
        assert!(l.rows().is_empty() && l.changed().is_empty());
    }

    #[test]
    fn settling_captures_successes_and_releases_the_rest() {
        use ExecutionState::{Failed, Pending, Started, Succeeded};
        // 3 users at 10: 30 reserved; 2 succeeded.
        let i = intent(10, 30, false, T);
        let mut l = ledger(account(70, 30, 0, 0));
        assert_eq!(l.settle(&i, &[Succeeded, Pending, Failed], T), Ok(None));
        assert_eq!(l.settle(&i, &[Succeeded, Started, Failed], T), Ok(None));
        assert!(l.rows().is_empty() && l.changed().is_empty());
        assert_eq!(
            l.settle(&i, &[Succeeded, Succeeded, Failed], T),
            Ok(Some(IntentStatus::Completed))
        );
        assert_eq!(l.account("acc"), Some(&account(80, 0, 0, 0)));
        let rows: Vec<_> = l
            .rows()
            .iter()
            .map(|r| (r.kind, r.reason.as_str(), r.before, r.after))
            .collect();
        let b = |balance, reserved| Balances { balance, reserved };
        assert_eq!(
            rows,
            [
                (
                    LedgerKind::Capture,
                    "swap x2 succeeded",
                    b(70, 30),
                    b(70, 10)
                ),
                (
                    LedgerKind::Release,
                    "swap unused reservation",
                    b(70, 10),
                    b(80, 0)
                ),
            ]
        );
        // Every execution failed: all released, the intent failed.
        let mut l = ledger(account(70, 30, 0, 0));
        assert_eq!(
            l.settle(&i, &[Failed, Failed, Failed], T),
            Ok(Some(IntentStatus::Failed))
        );
        assert_eq!(l.account("acc"), Some(&account(100, 0, 0, 0)));
        // Nobody addressed (not reachable from a submit today): completed, all released.
        let mut l = ledger(account(70, 30, 0, 0));
        assert_eq!(l.settle(&i, &[], T), Ok(Some(IntentStatus::Completed)));
        // A capture never exceeds the reservation.
        let mut l = ledger(account(0, 5, 0, 0));
        let small = intent(10, 5, false, T);
        l.settle(&small, &[Succeeded], T).unwrap();
        assert_eq!(l.account("acc"), Some(&account(0, 0, 0, 0)));
    }

    #[test]
    fn a_free_request_that_bought_nothing_is_given_back_the_same_day() {
        use ExecutionState::{Failed, Succeeded};
        let free = intent(10, 0, true, T);
        let mut l = ledger(account(0, 0, day_of(T), 2));
        assert_eq!(
            l.settle(&free, &[Failed], T + 1),
            Ok(Some(IntentStatus::Failed))
        );
        assert_eq!(l.account("acc"), Some(&account(0, 0, day_of(T), 1)));
        assert_eq!(l.rows()[0].kind, LedgerKind::FreeRefund);
        // A success keeps it used.
        let mut l = ledger(account(0, 0, day_of(T), 2));
        l.settle(&free, &[Succeeded], T + 1).unwrap();
        assert_eq!(l.account("acc"), Some(&account(0, 0, day_of(T), 2)));
        assert!(l.rows().is_empty());
        // Accepted before midnight, ended after: the new day's count is not touched.
        let mut l = ledger(account(0, 0, day_of(T) + 1, 1));
        l.settle(&free, &[Failed], T + DAY_MS).unwrap();
        assert_eq!(l.account("acc"), Some(&account(0, 0, day_of(T) + 1, 1)));
        assert!(l.rows().is_empty());
    }

    #[test]
    fn credits_added_are_positive_and_recorded() {
        let mut l = ledger(account(5, 2, 0, 0));
        let mut c = Credit {
            account_id: "acc",
            agent_id: None,
            invoice_id: Some("inv"),
            amount: 100,
            kind: LedgerKind::Purchase,
            reason: "bought",
            at: T,
        };
        assert_eq!(l.credit(&c), Ok(account(105, 2, 0, 0)));
        let row = &l.rows()[0];
        assert_eq!(
            (
                row.kind,
                row.invoice_id,
                row.before.balance,
                row.after.balance
            ),
            (LedgerKind::Purchase, Some("inv"), 5, 105)
        );
        c.amount = 0;
        assert_eq!(l.credit(&c), Err(LedgerError::NotPositive(0)));
        c.amount = i64::MAX;
        assert_eq!(l.credit(&c), Err(LedgerError::OutOfRange("balance")));
        assert_eq!(l.rows().len(), 1);
    }

    #[test]
    fn only_changed_accounts_are_written() {
        let mut l = CreditLedger::new(BTreeMap::from([
            ("a", account(10, 0, 0, 0)),
            ("b", account(10, 0, 0, 0)),
        ]));
        let mut r = reservation(4, T);
        r.account_id = "b";
        l.reserve(&r, 4, false).unwrap();
        assert_eq!(l.changed(), [("b", account(6, 4, day_of(T), 0))]);
    }
}
