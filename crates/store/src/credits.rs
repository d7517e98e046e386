//! Credit accounts, grants, the ledger and daily usage.

use actiongate_core::ledger::{Credit, CreditLedger};
use actiongate_core::states::LedgerKind;
use actiongate_core::store::{CreditAccount, CreditStore, LedgerEntry, StoreError};
use async_trait::async_trait;
use sqlx::sqlite::SqliteConnection;

use crate::error::{closed, err};
use crate::rows::{CreditRow, credit_from};
use crate::write::{BatchRows, BatchWriter};
use crate::{Backend, Dialect, SqlStore};

#[async_trait]
impl CreditStore for SqlStore {
    async fn credit_account(&self, account_id: &str) -> Result<Option<CreditAccount>, StoreError> {
        let row: Option<(i64, i64, i64, i32)> = on_pool!(self, pool => sqlx::query_as(
            "SELECT balance, reserved, free_day, free_used FROM credit_accounts WHERE account_id = $1",
        )
        .bind(account_id)
        .fetch_optional(pool)
        .await
        .map_err(err)?);
        Ok(
            row.map(|(balance, reserved, free_day, free_used)| CreditAccount {
                balance,
                reserved,
                free_day,
                free_used: u32::try_from(free_used).unwrap_or(0),
            }),
        )
    }

    async fn grant_credits(
        &self,
        account_id: &str,
        amount: i64,
        kind: &str,
        reason: &str,
        now: i64,
    ) -> Result<CreditAccount, StoreError> {
        on_writer!(self, pool => {
            let mut tx = pool.begin_write().await?;
            let kind: LedgerKind = kind.parse().map_err(err)?;
            let credit = Credit { account_id, agent_id: None, invoice_id: None, amount, kind, reason, at: now };
            let account = credit_account!(tx, credit);
            tx.commit().await.map_err(err)?;
            Ok(account)
        })
    }

    async fn ledger(&self, account_id: &str) -> Result<Vec<LedgerEntry>, StoreError> {
        self.ledger_rows(account_id, None).await
    }

    async fn recent_ledger(
        &self,
        account_id: &str,
        limit: u32,
    ) -> Result<Vec<LedgerEntry>, StoreError> {
        self.ledger_rows(account_id, Some(limit)).await
    }

    async fn daily_usage(&self, agent_id: &str, day: i64) -> Result<i64, StoreError> {
        let used: Option<i64> = on_pool!(self, pool => sqlx::query_scalar(
            "SELECT used_micros FROM agent_daily_usage WHERE agent_id = $1 AND day = $2",
        )
        .bind(agent_id)
        .bind(day)
        .fetch_optional(pool)
        .await
        .map_err(err)?);
        Ok(used.unwrap_or(0))
    }
}

impl SqlStore {
    /// The account's ledger oldest first, or its newest `newest` rows newest first.
    async fn ledger_rows(
        &self,
        account_id: &str,
        newest: Option<u32>,
    ) -> Result<Vec<LedgerEntry>, StoreError> {
        type Row = (
            String,
            String,
            Option<String>,
            Option<String>,
            Option<String>,
            i64,
            i64,
            i64,
            i64,
            i64,
        );
        macro_rules! ledger_select {
            ($tail:literal) => {
                concat!(
                    "SELECT kind, reason, agent_id, intent_id, invoice_id, balance_before, balance_after,
                         reserved_before, reserved_after, created_at
                     FROM credit_ledger WHERE account_id = $1 ",
                    $tail
                )
            };
        }
        let sql = match newest {
            Some(_) => ledger_select!("ORDER BY created_at DESC, id DESC LIMIT $2"),
            None => ledger_select!("ORDER BY created_at, id"),
        };
        let rows: Vec<Row> = on_pool!(self, pool => {
            let q = sqlx::query_as(sql).bind(account_id);
            let q = match newest {
                Some(n) => q.bind(i64::from(n)),
                None => q,
            };
            q.fetch_all(pool).await.map_err(err)?
        });
        rows.into_iter()
            .map(
                |(kind, reason, agent_id, intent_id, invoice_id, bb, ba, rb, ra, created_at)| {
                    Ok(LedgerEntry {
                        kind: kind.parse::<LedgerKind>().map_err(err)?,
                        reason,
                        agent_id,
                        intent_id,
                        invoice_id,
                        balance_before: bb,
                        balance_after: ba,
                        reserved_before: rb,
                        reserved_after: ra,
                        created_at,
                    })
                },
            )
            .collect()
    }
}
