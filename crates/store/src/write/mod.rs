//! Writing what a batch decided ([`BatchRows`]) inside its transaction: one [`BatchWriter`] per
//! backend.

use actiongate_core::acceptance::Acceptance;
use actiongate_core::ledger::LedgerRow;
use actiongate_core::states::IntentStatus;
use actiongate_core::store::{AuditEvent, CreditAccount, ExecutionFinish, StoreError};

/// Everything a batch writes, decided in memory by the core ([`CreditLedger::settle`],
/// [`acceptance::decide`]) and written at its end by [`BatchWriter::write_rows`], inside the
/// batch's transaction.
#[derive(Default)]
pub(crate) struct BatchRows<'a> {
    /// Reads that ended: (intent, seq, how, when), each written only if it has not ended already.
    /// Their intents are locked by the transaction, queued, and leased to the owner recording them.
    /// Reads are side-effect free, so they are never marked started first.
    pub(crate) reads: Vec<(&'a str, u32, &'a ExecutionFinish, i64)>,
    /// Intents that ended (locked by the transaction, and queued), with their status.
    pub(crate) finished: Vec<(&'a str, IntentStatus)>,
    /// When the intents of `finished` ended (the batch's time).
    pub(crate) finished_at: i64,
    /// The intents, executions and daily usage the accepted drafts write.
    pub(crate) accepted: Acceptance<'a>,
    /// Credit rows that changed, as they are now.
    pub(crate) credits: Vec<(&'a str, CreditAccount)>,
    pub(crate) ledger: Vec<LedgerRow<'a>>,
    /// The audit events of the batch's decisions ([`actiongate_core::audit::batch_events`]), each
    /// with its account.
    pub(crate) events: Vec<AuditEvent>,
}

/// Writes a batch's rows ([`BatchRows`]) on a connection inside its open transaction.
pub(crate) trait BatchWriter {
    async fn write_rows(&mut self, rows: &BatchRows<'_>) -> Result<(), StoreError>;
}

mod postgres;
mod sqlite;
