//! x402 invoices (paid at most once) and wallets linked to accounts.

use actiongate_core::ledger::{Credit, CreditLedger};
use actiongate_core::states::LedgerKind;
use actiongate_core::store::{
    CreditAccount, InvoiceRecord, PaymentStore, SettleOutcome, StoreError,
};
use async_trait::async_trait;
use sqlx::sqlite::SqliteConnection;

use crate::error::{closed, err};
use crate::rows::{CreditRow, credit_from};
use crate::write::{BatchRows, BatchWriter};
use crate::{Backend, Dialect, SqlStore};

macro_rules! invoice_columns {
    () => {
        "id, sku, credits, amount_atomic, tag_atomic, payer, account_id, agent_id, chain_id, token, recipient, created_at, issued_block, expires_at, paid_at, tx_hash"
    };
}

/// An invoice row as stored (`invoice_columns!`).
#[derive(sqlx::FromRow)]
pub(crate) struct InvoiceRow {
    id: String,
    sku: String,
    credits: i64,
    amount_atomic: i64,
    tag_atomic: i64,
    payer: String,
    account_id: Option<String>,
    agent_id: Option<String>,
    chain_id: i64,
    token: String,
    recipient: String,
    created_at: i64,
    issued_block: Option<i64>,
    expires_at: i64,
    paid_at: Option<i64>,
    tx_hash: Option<String>,
}

pub(crate) fn invoice_from(row: InvoiceRow) -> Result<InvoiceRecord, StoreError> {
    let InvoiceRow {
        id,
        sku,
        credits,
        amount_atomic,
        tag_atomic,
        payer,
        account_id,
        agent_id,
        chain_id: chain,
        token,
        recipient,
        created_at,
        issued_block,
        expires_at,
        paid_at,
        tx_hash,
    } = row;
    Ok(InvoiceRecord {
        id,
        sku,
        credits,
        amount_atomic,
        tag_atomic,
        payer,
        account_id,
        agent_id,
        chain_id: u64::try_from(chain).map_err(err)?,
        token,
        recipient,
        created_at,
        issued_block,
        expires_at,
        paid_at,
        tx_hash,
    })
}

#[async_trait]
impl PaymentStore for SqlStore {
    async fn create_invoice(
        &self,
        i: &InvoiceRecord,
        open_until: i64,
        now: i64,
    ) -> Result<bool, StoreError> {
        let chain = i64::try_from(i.chain_id).map_err(err)?;
        on_writer!(self, pool => {
            let mut tx = pool.begin_write().await?;
            // One statement claims the tag: a free one, or one whose hold ended. Two processes that
            // pick the same tag meet on the primary key; one of them gets no row.
            let claimed = sqlx::query(
                "INSERT INTO invoice_tags (recipient, token, tag, invoice_id, open_until) VALUES ($1, $2, $3, $4, $5)
                 ON CONFLICT (recipient, token, tag) DO UPDATE SET invoice_id = excluded.invoice_id, open_until = excluded.open_until
                 WHERE invoice_tags.open_until <= $6",
            )
            .bind(&i.recipient).bind(&i.token).bind(i.tag_atomic).bind(&i.id).bind(open_until).bind(now)
            .execute(&mut *tx).await.map_err(err)?.rows_affected();
            if claimed == 0 {
                tx.rollback().await.map_err(err)?;
                return Ok(false);
            }
            sqlx::query(
                "INSERT INTO invoices (id, sku, credits, amount_atomic, tag_atomic, payer, account_id, agent_id, chain_id, token, recipient, created_at, issued_block, expires_at)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)",
            )
            .bind(&i.id).bind(&i.sku).bind(i.credits).bind(i.amount_atomic).bind(i.tag_atomic).bind(&i.payer).bind(&i.account_id).bind(&i.agent_id)
            .bind(chain).bind(&i.token).bind(&i.recipient).bind(i.created_at).bind(i.issued_block).bind(i.expires_at)
            .execute(&mut *tx).await.map_err(err)?;
            tx.commit().await.map_err(err)?;
            Ok(true)
        })
    }

    async fn agent_wallet_account(&self, address: &str) -> Result<Option<String>, StoreError> {
        on_writer!(self, pool => sqlx::query_scalar("SELECT account_id FROM agents WHERE wallet_address = $1")
            .bind(address).fetch_optional(pool).await.map_err(err))
    }

    async fn get_invoice(&self, id: &str) -> Result<Option<InvoiceRecord>, StoreError> {
        let row: Option<InvoiceRow> = on_writer!(self, pool => sqlx::query_as(concat!("SELECT ", invoice_columns!(), " FROM invoices WHERE id = $1"))
            .bind(id).fetch_optional(pool).await.map_err(err))?;
        row.map(invoice_from).transpose()
    }

    async fn settle_invoice(
        &self,
        invoice_id: &str,
        tx_hash: &str,
        now: i64,
    ) -> Result<SettleOutcome, StoreError> {
        on_writer!(self, pool => {
            let mut tx = pool.begin_write().await?;
            // The invoice row first: racing retries of one invoice queue here.
            let paid = sqlx::query("UPDATE invoices SET paid_at = $2, tx_hash = $3 WHERE id = $1 AND paid_at IS NULL")
                .bind(invoice_id).bind(now).bind(tx_hash)
                .execute(&mut *tx).await.map_err(err)?.rows_affected();
            let row: InvoiceRow = sqlx::query_as(concat!("SELECT ", invoice_columns!(), " FROM invoices WHERE id = $1"))
                .bind(invoice_id).fetch_one(&mut *tx).await.map_err(err)?;
            let invoice = invoice_from(row)?;
            let account: Option<String> = match &invoice.account_id {
                Some(a) => Some(a.clone()),
                None => sqlx::query_scalar("SELECT account_id FROM wallet_links WHERE address = $1")
                    .bind(&invoice.payer).fetch_optional(&mut *tx).await.map_err(err)?,
            };
            if paid == 0 {
                let same = invoice.tx_hash.as_deref() == Some(tx_hash);
                let balance: i64 = match (&account, same) {
                    (_, false) => 0,
                    (Some(a), true) => sqlx::query_scalar("SELECT balance FROM credit_accounts WHERE account_id = $1")
                        .bind(a).fetch_optional(&mut *tx).await.map_err(err)?.unwrap_or(0),
                    (None, true) => sqlx::query_scalar("SELECT CAST(COALESCE(SUM(credits), 0) AS BIGINT) FROM held_credits WHERE address = $1 AND claimed_at IS NULL")
                        .bind(&invoice.payer).fetch_one(&mut *tx).await.map_err(err)?,
                };
                tx.rollback().await.map_err(err)?;
                return Ok(if same { SettleOutcome::AlreadyPaid { account, balance } } else { SettleOutcome::InvoicePaid });
            }
            // A paid invoice's tag is free again: the hash that paid it pays nothing else.
            sqlx::query("UPDATE invoice_tags SET open_until = 0 WHERE invoice_id = $1")
                .bind(invoice_id).execute(&mut *tx).await.map_err(err)?;
            let used = sqlx::query("INSERT INTO used_payments (tx_hash, invoice_id, created_at) VALUES ($1, $2, $3) ON CONFLICT (tx_hash) DO NOTHING")
                .bind(tx_hash).bind(invoice_id).bind(now)
                .execute(&mut *tx).await.map_err(err)?.rows_affected();
            if used == 0 {
                tx.rollback().await.map_err(err)?;
                return Ok(SettleOutcome::PaymentUsed);
            }
            let reason = format!("bought {} ({} credits) with x402, tx {tx_hash}", invoice.sku, invoice.credits);
            let balance = match &account {
                Some(a) => {
                    let credit = Credit {
                        account_id: a,
                        agent_id: invoice.agent_id.as_deref(),
                        invoice_id: Some(invoice_id),
                        amount: invoice.credits,
                        kind: LedgerKind::Purchase,
                        reason: &reason,
                        at: now,
                    };
                    credit_account!(tx, credit).balance
                }
                None => {
                    sqlx::query("INSERT INTO held_credits (invoice_id, address, credits, created_at) VALUES ($1, $2, $3, $4)")
                        .bind(invoice_id).bind(&invoice.payer).bind(invoice.credits).bind(now)
                        .execute(&mut *tx).await.map_err(err)?;
                    sqlx::query_scalar("SELECT CAST(COALESCE(SUM(credits), 0) AS BIGINT) FROM held_credits WHERE address = $1 AND claimed_at IS NULL")
                        .bind(&invoice.payer).fetch_one(&mut *tx).await.map_err(err)?
                }
            };
            tx.commit().await.map_err(err)?;
            Ok(SettleOutcome::Credited { account, balance })
        })
    }

    async fn link_wallet(
        &self,
        address: &str,
        account_id: &str,
        now: i64,
    ) -> Result<Option<i64>, StoreError> {
        on_writer!(self, pool => {
            let mut tx = pool.begin_write().await?;
            sqlx::query("INSERT INTO wallet_links (address, account_id, linked_at) VALUES ($1, $2, $3) ON CONFLICT (address) DO NOTHING")
                .bind(address).bind(account_id).bind(now)
                .execute(&mut *tx).await.map_err(err)?;
            let owner: String = sqlx::query_scalar("SELECT account_id FROM wallet_links WHERE address = $1")
                .bind(address).fetch_one(&mut *tx).await.map_err(err)?;
            if owner != account_id {
                tx.rollback().await.map_err(err)?;
                return Ok(None);
            }
            let held: Vec<(String, i64)> = sqlx::query_as("SELECT invoice_id, credits FROM held_credits WHERE address = $1 AND claimed_at IS NULL ORDER BY created_at")
                .bind(address).fetch_all(&mut *tx).await.map_err(err)?;
            let mut moved = 0;
            for (invoice_id, credits) in &held {
                let claimed = sqlx::query("UPDATE held_credits SET claimed_by = $2, claimed_at = $3 WHERE invoice_id = $1 AND claimed_at IS NULL")
                    .bind(invoice_id).bind(account_id).bind(now)
                    .execute(&mut *tx).await.map_err(err)?
                    .rows_affected();
                if claimed != 1 {
                    // Claimed meanwhile by a concurrent link of the same wallet.
                    continue;
                }
                let reason = format!("credits bought by {address} before it was linked");
                let credit = Credit {
                    account_id,
                    agent_id: None,
                    invoice_id: Some(invoice_id.as_str()),
                    amount: *credits,
                    kind: LedgerKind::Purchase,
                    reason: &reason,
                    at: now,
                };
                credit_account!(tx, credit);
                moved += credits;
            }
            tx.commit().await.map_err(err)?;
            Ok(Some(moved))
        })
    }

    async fn paid_invoice_of(&self, tx_hash: &str) -> Result<Option<String>, StoreError> {
        on_writer!(self, pool => sqlx::query_scalar("SELECT invoice_id FROM used_payments WHERE tx_hash = $1")
            .bind(tx_hash).fetch_optional(pool).await.map_err(err))
    }

    async fn linked_account(&self, address: &str) -> Result<Option<String>, StoreError> {
        on_writer!(self, pool => sqlx::query_scalar("SELECT account_id FROM wallet_links WHERE address = $1")
            .bind(address).fetch_optional(pool).await.map_err(err))
    }

    async fn put_link_challenge(
        &self,
        nonce: &str,
        account_id: &str,
        address: &str,
        message: &str,
        expires_at: i64,
    ) -> Result<(), StoreError> {
        on_writer!(self, pool => sqlx::query(
            "INSERT INTO wallet_link_challenges (nonce, account_id, address, message, expires_at) VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(nonce).bind(account_id).bind(address).bind(message).bind(expires_at)
        .execute(pool).await.map(|_| ()).map_err(err))
    }

    async fn take_link_challenge(
        &self,
        nonce: &str,
        account_id: &str,
        now: i64,
    ) -> Result<Option<(String, String)>, StoreError> {
        on_writer!(self, pool => sqlx::query_as(
            "UPDATE wallet_link_challenges SET used_at = $3
             WHERE nonce = $1 AND account_id = $2 AND used_at IS NULL AND expires_at > $3 RETURNING address, message",
        )
        .bind(nonce).bind(account_id).bind(now)
        .fetch_optional(pool).await.map_err(err))
    }
}
