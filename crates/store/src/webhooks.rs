//! Webhook endpoints and their deliveries: the outbox rows the audit chaining writes
//! (`audit::insert_deliveries`), claimed by one process at a time and ended after each attempt.

use actiongate_core::store::{
    DeliveryEnd, DeliveryRecord, StoreError, WebhookRecord, WebhookStore,
};
use async_trait::async_trait;
use sqlx::Row;
use sqlx::sqlite::SqliteConnection;

use crate::error::{closed, err};
use crate::{Backend, Dialect, SqlStore};

macro_rules! delivery_columns {
    () => {
        "d.id, d.webhook_id, d.event_id, d.kind, d.payload, d.state, d.attempts, d.next_at, \
         d.last_status, d.last_error, d.created_at, d.delivered_at"
    };
}

/// Writes a delivery of each webhook event of `$entries` to each endpoint of its account
/// subscribed to the event's type, inside the open transaction `$tx`; one delivery per (endpoint,
/// event) ever. `$accounts` are the entries' accounts: their endpoints are read once, and the
/// deliveries written in multi-row statements.
macro_rules! insert_deliveries {
    ($tx:ident, $linker:expr, $accounts:expr, $entries:expr) => {{
        let entries: &[actiongate_core::store::AuditEntry] = $entries;
        let mut q = in_list!(
            "SELECT id, account_id, events FROM webhooks WHERE account_id IN (",
            $accounts
        );
        let rows = q
            .build()
            .fetch_all(&mut *$tx)
            .await
            .map_err(crate::error::err)?;
        let mut endpoints = crate::webhooks::Endpoints::default();
        for row in &rows {
            endpoints.add(
                row.try_get("account_id").map_err(crate::error::err)?,
                row.try_get("id").map_err(crate::error::err)?,
                row.try_get("events").map_err(crate::error::err)?,
            );
        }
        let deliveries = endpoints.deliveries($linker, entries);
        for chunk in deliveries.chunks(crate::webhooks::DELIVERY_CHUNK) {
            let mut q = sqlx::QueryBuilder::new(
                "INSERT INTO webhook_deliveries (id, webhook_id, account_id, event_id, kind, payload, state, attempts, next_at, created_at) ",
            );
            q.push_values(chunk, |mut b, d| {
                b.push_bind(&d.id)
                    .push_bind(d.webhook_id)
                    .push_bind(d.account_id)
                    .push_bind(&d.event_id)
                    .push_bind(&d.kind)
                    .push_bind(&d.payload)
                    .push("'pending'")
                    .push("0")
                    .push_bind(d.at)
                    .push_bind(d.at);
            });
            q.push(" ON CONFLICT (id) DO NOTHING");
            q.build()
                .execute(&mut *$tx)
                .await
                .map_err(crate::error::err)?;
        }
    }};
}

/// Deliveries one INSERT writes (eight variables each).
pub(crate) const DELIVERY_CHUNK: usize = 1000;

/// The webhook endpoints of some accounts: their ids and the event types each is subscribed to
/// (the stored JSON array of names).
#[derive(Default)]
pub(crate) struct Endpoints {
    by_account: std::collections::HashMap<String, Vec<(String, String)>>,
}

/// One delivery to write.
pub(crate) struct NewDelivery<'a> {
    pub id: String,
    pub webhook_id: &'a str,
    pub account_id: &'a str,
    pub event_id: String,
    pub kind: String,
    pub payload: String,
    pub at: i64,
}

impl Endpoints {
    pub(crate) fn add(&mut self, account_id: String, id: String, events: String) {
        self.by_account
            .entry(account_id)
            .or_default()
            .push((id, events));
    }

    /// A delivery of each webhook event of each entry to each endpoint of the entry's account that
    /// is subscribed to the event's type.
    pub(crate) fn deliveries<'a>(
        &'a self,
        linker: &dyn actiongate_core::store::ChainLinker,
        entries: &'a [actiongate_core::store::AuditEntry],
    ) -> Vec<NewDelivery<'a>> {
        let mut out = Vec::new();
        for entry in entries {
            let Some(endpoints) = self.by_account.get(&entry.entry.account_id) else {
                continue;
            };
            for (kind, payload) in linker.events_of(entry) {
                let event_id = actiongate_core::audit::event_id(entry, &kind);
                let name = format!("\"{kind}\"");
                for (webhook_id, events) in endpoints {
                    if events.contains(&name) {
                        out.push(NewDelivery {
                            id: format!("{webhook_id}:{event_id}"),
                            webhook_id,
                            account_id: &entry.entry.account_id,
                            event_id: event_id.clone(),
                            kind: kind.clone(),
                            payload: payload.clone(),
                            at: entry.entry.at,
                        });
                    }
                }
            }
        }
        out
    }
}

fn delivery_from_row<R: Row>(row: &R) -> Result<DeliveryRecord, StoreError>
where
    for<'a> &'a str: sqlx::ColumnIndex<R>,
    String: for<'r> sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    Option<String>: for<'r> sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    i64: for<'r> sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    Option<i64>: for<'r> sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
{
    Ok(DeliveryRecord {
        id: row.try_get("id").map_err(err)?,
        webhook_id: row.try_get("webhook_id").map_err(err)?,
        event_id: row.try_get("event_id").map_err(err)?,
        kind: row.try_get("kind").map_err(err)?,
        payload: row.try_get("payload").map_err(err)?,
        state: row.try_get("state").map_err(err)?,
        attempts: u32::try_from(row.try_get::<i64, _>("attempts").map_err(err)?).map_err(err)?,
        next_at: row.try_get("next_at").map_err(err)?,
        last_status: row
            .try_get::<Option<i64>, _>("last_status")
            .map_err(err)?
            .map(|s| u16::try_from(s).unwrap_or(0)),
        last_error: row.try_get("last_error").map_err(err)?,
        created_at: row.try_get("created_at").map_err(err)?,
        delivered_at: row.try_get("delivered_at").map_err(err)?,
    })
}

fn webhook_from_row<R: Row>(row: &R) -> Result<WebhookRecord, StoreError>
where
    for<'a> &'a str: sqlx::ColumnIndex<R>,
    String: for<'r> sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    i64: for<'r> sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    Vec<u8>: for<'r> sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
{
    let events: String = row.try_get("events").map_err(err)?;
    Ok(WebhookRecord {
        id: row.try_get("id").map_err(err)?,
        account_id: row.try_get("account_id").map_err(err)?,
        url: row.try_get("url").map_err(err)?,
        events: serde_json::from_str(&events).map_err(err)?,
        secret_sealed: row.try_get("secret_sealed").map_err(err)?,
        created_at: row.try_get("created_at").map_err(err)?,
    })
}

#[async_trait]
impl WebhookStore for SqlStore {
    async fn put_webhook(&self, w: &WebhookRecord) -> Result<(), StoreError> {
        let events = serde_json::to_string(&w.events).map_err(err)?;
        on_writer!(self, pool => sqlx::query(
            "INSERT INTO webhooks (id, account_id, url, events, secret_sealed, created_at) VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(&w.id)
        .bind(&w.account_id)
        .bind(&w.url)
        .bind(&events)
        .bind(&w.secret_sealed)
        .bind(w.created_at)
        .execute(pool)
        .await
        .map(|_| ())
        .map_err(err))
    }

    async fn list_webhooks(&self, account_id: &str) -> Result<Vec<WebhookRecord>, StoreError> {
        on_pool!(self, pool => {
            let rows = sqlx::query(
                "SELECT id, account_id, url, events, secret_sealed, created_at FROM webhooks
                 WHERE account_id = $1 ORDER BY created_at, id",
            )
            .bind(account_id)
            .fetch_all(pool)
            .await
            .map_err(err)?;
            rows.iter().map(webhook_from_row).collect()
        })
    }

    async fn delete_webhook(&self, account_id: &str, id: &str) -> Result<bool, StoreError> {
        on_writer!(self, pool => {
            let mut tx = pool.begin_write().await?;
            let deleted = sqlx::query("DELETE FROM webhooks WHERE id = $1 AND account_id = $2")
                .bind(id)
                .bind(account_id)
                .execute(&mut *tx)
                .await
                .map_err(err)?
                .rows_affected()
                == 1;
            if deleted {
                sqlx::query("DELETE FROM webhook_deliveries WHERE webhook_id = $1 AND state = 'pending'")
                    .bind(id)
                    .execute(&mut *tx)
                    .await
                    .map_err(err)?;
            }
            tx.commit().await.map_err(err)?;
            Ok(deleted)
        })
    }

    async fn set_webhook_secret(
        &self,
        account_id: &str,
        id: &str,
        sealed: &[u8],
    ) -> Result<bool, StoreError> {
        on_writer!(self, pool => sqlx::query(
            "UPDATE webhooks SET secret_sealed = $3 WHERE id = $1 AND account_id = $2",
        )
        .bind(id)
        .bind(account_id)
        .bind(sealed)
        .execute(pool)
        .await
        .map(|r| r.rows_affected() == 1)
        .map_err(err))
    }

    async fn list_deliveries(
        &self,
        webhook_id: &str,
        limit: u32,
    ) -> Result<Vec<DeliveryRecord>, StoreError> {
        on_pool!(self, pool => {
            let rows = sqlx::query(concat!(
                "SELECT ", delivery_columns!(), " FROM webhook_deliveries d
                 WHERE d.webhook_id = $1 ORDER BY d.created_at DESC, d.id DESC LIMIT $2"
            ))
            .bind(webhook_id)
            .bind(i64::from(limit))
            .fetch_all(pool)
            .await
            .map_err(err)?;
            rows.iter().map(delivery_from_row).collect()
        })
    }

    async fn claim_deliveries(
        &self,
        now: i64,
        claim_until: i64,
        limit: u32,
    ) -> Result<Vec<(DeliveryRecord, String, Vec<u8>)>, StoreError> {
        on_writer!(self, pool => {
            let sql = pool.claim_deliveries_sql();
            let mut tx = pool.begin_write().await?;
            let ids: Vec<String> = sqlx::query_scalar(sql)
                .bind(now)
                .bind(i64::from(limit))
                .fetch_all(&mut *tx)
                .await
                .map_err(err)?;
            let mut out = Vec::with_capacity(ids.len());
            for id in &ids {
                sqlx::query("UPDATE webhook_deliveries SET next_at = $2 WHERE id = $1")
                    .bind(id)
                    .bind(claim_until)
                    .execute(&mut *tx)
                    .await
                    .map_err(err)?;
                let row = sqlx::query(concat!(
                    "SELECT ", delivery_columns!(), ", w.url, w.secret_sealed
                     FROM webhook_deliveries d JOIN webhooks w ON w.id = d.webhook_id WHERE d.id = $1"
                ))
                .bind(id)
                .fetch_optional(&mut *tx)
                .await
                .map_err(err)?;
                if let Some(row) = row {
                    let mut d = delivery_from_row(&row)?;
                    // The claim moved it; the attempt's schedule is what it was.
                    d.next_at = now;
                    out.push((
                        d,
                        row.try_get::<String, _>("url").map_err(err)?,
                        row.try_get::<Vec<u8>, _>("secret_sealed").map_err(err)?,
                    ));
                }
            }
            tx.commit().await.map_err(err)?;
            Ok(out)
        })
    }

    async fn end_delivery(
        &self,
        id: &str,
        attempts: u32,
        end: &DeliveryEnd,
        now: i64,
    ) -> Result<(), StoreError> {
        let (state, status, error, next_at, delivered_at) = match end {
            DeliveryEnd::Delivered { status } => ("delivered", Some(*status), None, now, Some(now)),
            DeliveryEnd::Retry { status, error, at } => {
                ("pending", *status, Some(error.as_str()), *at, None)
            }
            DeliveryEnd::GivenUp { status, error } => {
                ("failed", *status, Some(error.as_str()), now, None)
            }
        };
        on_writer!(self, pool => sqlx::query(
            "UPDATE webhook_deliveries SET state = $2, attempts = $3, last_status = $4, last_error = $5,
                 next_at = $6, delivered_at = $7
             WHERE id = $1 AND state = 'pending'",
        )
        .bind(id)
        .bind(state)
        .bind(i64::from(attempts))
        .bind(status.map(i64::from))
        .bind(error)
        .bind(next_at)
        .bind(delivered_at)
        .execute(pool)
        .await
        .map(|_| ())
        .map_err(err))
    }
}
