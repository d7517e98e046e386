//! A stand-in venue for the `transfer` and `swap` actions (the API tests' fan-out): it records every
//! execution by its execution key, the way a venue keeps client order ids, so that the tests can
//! count effects and the runner can reconcile after a crash. With a log file, the record survives
//! the process (each effect is appended and fsynced before the execution answers). It sends nothing
//! anywhere, and says so: its "transaction hashes" are a hash of the execution key.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use actiongate_api_types::ErrorCode;
use actiongate_core::catalog::Lane;
use actiongate_core::execution::{ExecutionContext, ExecutionOutcome, Provider, Reconciled};
use async_trait::async_trait;
use sha2::{Digest, Sha256};

#[derive(Default)]
pub struct StandInVenue {
    /// Every execution key executed, in order (duplicates would show here).
    pub effects: Mutex<Vec<String>>,
    /// Wallets whose executions the venue refuses.
    pub refuse: Mutex<BTreeSet<String>>,
    /// Wallets whose delegation the venue reports disabled (their fan-out executions answer
    /// `DELEGATION_REVOKED`, as the chain does for a delegation disabled onchain).
    pub disabled: Mutex<BTreeSet<String>>,
    /// How long each execution takes.
    pub delay: Mutex<Duration>,
    /// Executions running now, and the most that ever ran at once.
    in_flight: AtomicUsize,
    most_in_flight: AtomicUsize,
    /// Where effects are also appended, one execution key a line.
    log: Option<PathBuf>,
}

impl StandInVenue {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// A venue whose record of effects lives in `log` (and is read back from it).
    pub fn persistent(log: PathBuf, delay: Duration) -> Arc<Self> {
        let effects = read_log(&log);
        Arc::new(Self {
            effects: Mutex::new(effects),
            delay: Mutex::new(delay),
            log: Some(log),
            ..Self::default()
        })
    }

    /// The most executions that ever ran at once.
    pub fn most_in_flight(&self) -> usize {
        self.most_in_flight.load(Ordering::SeqCst)
    }

    pub fn effects(&self) -> Vec<String> {
        self.effects.lock().map(|e| e.clone()).unwrap_or_default()
    }

    fn commit(&self, key: &str) {
        if let Some(path) = &self.log {
            let appended = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .and_then(|mut f| {
                    f.write_all(format!("{key}\n").as_bytes())
                        .and_then(|()| f.sync_all())
                });
            if let Err(e) = appended {
                panic!("stand-in venue log {}: {e}", path.display());
            }
        }
        if let Ok(mut e) = self.effects.lock() {
            e.push(key.to_owned());
        }
    }

    fn tx_hash(key: &str) -> String {
        format!("0x{}", hex::encode(Sha256::digest(key.as_bytes())))
    }

    /// A fan-out execution's grant, as the core must hand it over: `None` when it is in order.
    fn grant_refusal(&self, ctx: &ExecutionContext) -> Option<ExecutionOutcome> {
        let wallet = &ctx.subject.wallet_address;
        if ctx.lane == Lane::ExecuteIntent {
            // The core resolves each user's delegation before a fan-out execution reaches a venue.
            let Some(grant) = ctx.grant.as_ref().filter(|g| &g.delegator == wallet) else {
                return Some(ExecutionOutcome::failed(
                    ErrorCode::Internal,
                    "stand-in venue: a fan-out execution without its user's delegation",
                ));
            };
            let disabled = self
                .disabled
                .lock()
                .map(|d| d.contains(wallet))
                .unwrap_or(false);
            if disabled {
                return Some(ExecutionOutcome::failed(
                    ErrorCode::DelegationRevoked,
                    format!("stand-in venue: delegation {} is disabled", grant.hash),
                ));
            }
        }
        None
    }

    fn outcome(&self, ctx: &ExecutionContext) -> ExecutionOutcome {
        let refused = self
            .refuse
            .lock()
            .map(|r| r.contains(&ctx.subject.wallet_address))
            .unwrap_or(false);
        if refused {
            return ExecutionOutcome::failed(
                ErrorCode::ExecutionReverted,
                "stand-in venue refused this wallet",
            );
        }
        ExecutionOutcome {
            success: true,
            tx_hash: Some(Self::tx_hash(&ctx.execution_key)),
            data: None,
            error: None,
            pending: false,
            held: false,
        }
    }
}

#[async_trait]
impl Provider for StandInVenue {
    fn lanes(&self) -> Vec<(&'static str, Lane)> {
        vec![
            ("transfer", Lane::ExecuteIntent),
            ("transfer", Lane::Execute),
            ("swap", Lane::ExecuteIntent),
        ]
    }

    async fn execute(&self, ctx: &ExecutionContext) -> ExecutionOutcome {
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.most_in_flight.fetch_max(now, Ordering::SeqCst);
        let delay = self.delay.lock().map(|d| *d).unwrap_or_default();
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        if let Some(refused) = self.grant_refusal(ctx) {
            return refused;
        }
        let outcome = self.outcome(ctx);
        if outcome.success {
            self.commit(&ctx.execution_key);
        }
        outcome
    }

    async fn reconcile(&self, ctx: &ExecutionContext) -> Reconciled {
        let seen = self
            .effects
            .lock()
            .map(|e| e.contains(&ctx.execution_key))
            .unwrap_or(false);
        if seen {
            Reconciled::Done(self.outcome(ctx))
        } else {
            Reconciled::NotSent
        }
    }
}

/// Every execution key in a venue log, in order.
pub fn read_log(path: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .map(|t| {
            t.lines()
                .filter(|l| !l.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}
