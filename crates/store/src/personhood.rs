//! Personhood proof requests, locks and receipts.

use actiongate_core::store::{
    ConsumeOutcome, PersonhoodChallenge, PersonhoodEffect, PersonhoodOutcome, PersonhoodStore,
    StoreError,
};
use async_trait::async_trait;
use sqlx::sqlite::SqliteConnection;

use crate::error::{closed, err};
use crate::{Backend, Dialect, SqlStore};

macro_rules! challenge_columns {
    () => {
        "nonce, kind, account_id, subject, action, signal, chain_id, challenge_id, idempotency_key, details, \
         created_at, expires_at, used_at"
    };
}

/// A personhood challenge row as stored (`challenge_columns!`).
#[derive(sqlx::FromRow)]
pub(crate) struct ChallengeRow {
    nonce: String,
    kind: String,
    account_id: String,
    subject: String,
    action: String,
    signal: String,
    chain_id: i64,
    challenge_id: Option<String>,
    idempotency_key: Option<String>,
    details: Option<String>,
    created_at: i64,
    expires_at: i64,
    used_at: Option<i64>,
}

pub(crate) fn challenge_from(row: ChallengeRow) -> Result<PersonhoodChallenge, StoreError> {
    let ChallengeRow {
        nonce,
        kind,
        account_id,
        subject,
        action,
        signal,
        chain_id: chain,
        challenge_id,
        idempotency_key,
        details,
        created_at,
        expires_at,
        used_at,
    } = row;
    Ok(PersonhoodChallenge {
        nonce,
        kind,
        account_id,
        subject,
        action,
        signal,
        chain_id: u64::try_from(chain).map_err(err)?,
        challenge_id,
        idempotency_key,
        details,
        created_at,
        expires_at,
        used_at,
    })
}

#[async_trait]
impl PersonhoodStore for SqlStore {
    async fn insert_personhood_challenge(&self, c: &PersonhoodChallenge) -> Result<(), StoreError> {
        let chain = i64::try_from(c.chain_id).map_err(err)?;
        on_writer!(self, pool => sqlx::query(
            "INSERT INTO personhood_challenges (nonce, kind, account_id, subject, action, signal, chain_id, challenge_id,
                 idempotency_key, details, created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
        )
        .bind(&c.nonce)
        .bind(&c.kind)
        .bind(&c.account_id)
        .bind(&c.subject)
        .bind(&c.action)
        .bind(&c.signal)
        .bind(chain)
        .bind(&c.challenge_id)
        .bind(&c.idempotency_key)
        .bind(&c.details)
        .bind(c.created_at)
        .bind(c.expires_at)
        .execute(pool)
        .await
        .map(|_| ())
        .map_err(err))
    }

    async fn get_personhood_challenge(
        &self,
        nonce: &str,
    ) -> Result<Option<PersonhoodChallenge>, StoreError> {
        let row: Option<ChallengeRow> = on_pool!(self, pool => sqlx::query_as(
            concat!("SELECT ", challenge_columns!(), " FROM personhood_challenges WHERE nonce = $1"),
        )
        .bind(nonce)
        .fetch_optional(pool)
        .await
        .map_err(err)?);
        row.map(challenge_from).transpose()
    }

    async fn find_personhood_challenge_by_key(
        &self,
        account_id: &str,
        key: &str,
    ) -> Result<Option<PersonhoodChallenge>, StoreError> {
        let row: Option<ChallengeRow> = on_pool!(self, pool => sqlx::query_as(
            concat!("SELECT ", challenge_columns!(), " FROM personhood_challenges WHERE account_id = $1 AND idempotency_key = $2"),
        )
        .bind(account_id)
        .bind(key)
        .fetch_optional(pool)
        .await
        .map_err(err)?);
        row.map(challenge_from).transpose()
    }

    async fn open_personhood_challenge(
        &self,
        account_id: &str,
        kind: &str,
        subject: &str,
        now: i64,
    ) -> Result<Option<PersonhoodChallenge>, StoreError> {
        let row: Option<ChallengeRow> = on_pool!(self, pool => sqlx::query_as(
            concat!("SELECT ", challenge_columns!(), " FROM personhood_challenges
                 WHERE account_id = $1 AND kind = $2 AND subject = $3 AND used_at IS NULL AND expires_at > $4
                 ORDER BY created_at DESC LIMIT 1"),
        )
        .bind(account_id)
        .bind(kind)
        .bind(subject)
        .bind(now)
        .fetch_optional(pool)
        .await
        .map_err(err)?);
        row.map(challenge_from).transpose()
    }

    async fn complete_personhood(
        &self,
        nonce: &str,
        now: i64,
        effect: &PersonhoodEffect,
    ) -> Result<PersonhoodOutcome, StoreError> {
        on_writer!(self, pool => {
            let mut tx = pool.begin_write().await?;
            let taken = sqlx::query(
                "UPDATE personhood_challenges SET used_at = $2 WHERE nonce = $1 AND used_at IS NULL AND expires_at > $2",
            )
            .bind(nonce)
            .bind(now)
            .execute(&mut *tx)
            .await
            .map_err(err)?
            .rows_affected();
            if taken != 1 {
                tx.rollback().await.map_err(err)?;
                return Ok(PersonhoodOutcome::NonceUsed);
            }
            let outcome = match effect {
                PersonhoodEffect::Lock { kind, subject, nullifier } => {
                    sqlx::query(
                        "INSERT INTO personhood_locks (kind, subject, nullifier, locked_at) VALUES ($1, $2, $3, $4)
                         ON CONFLICT (kind, subject) DO NOTHING",
                    )
                    .bind(kind)
                    .bind(subject)
                    .bind(nullifier)
                    .bind(now)
                    .execute(&mut *tx)
                    .await
                    .map_err(err)?;
                    let (locked, at): (String, i64) = sqlx::query_as(
                        "SELECT nullifier, locked_at FROM personhood_locks WHERE kind = $1 AND subject = $2",
                    )
                    .bind(kind)
                    .bind(subject)
                    .fetch_one(&mut *tx)
                    .await
                    .map_err(err)?;
                    if &locked == nullifier { PersonhoodOutcome::Locked { locked_at: at } } else { PersonhoodOutcome::Mismatch }
                }
                PersonhoodEffect::Receipt { receipt_id, lock_kind, subject, challenge_id, nullifier } => {
                    let locked: Option<String> = sqlx::query_scalar(
                        "SELECT nullifier FROM personhood_locks WHERE kind = $1 AND subject = $2",
                    )
                    .bind(lock_kind)
                    .bind(subject)
                    .fetch_optional(&mut *tx)
                    .await
                    .map_err(err)?;
                    match locked {
                        None => PersonhoodOutcome::NotLocked,
                        Some(l) if &l != nullifier => PersonhoodOutcome::Mismatch,
                        Some(_) => {
                            sqlx::query(
                                "INSERT INTO deposit_receipts (id, subject, challenge_id, nullifier, created_at)
                                 VALUES ($1, $2, $3, $4, $5)",
                            )
                            .bind(receipt_id)
                            .bind(subject)
                            .bind(challenge_id)
                            .bind(nullifier)
                            .bind(now)
                            .execute(&mut *tx)
                            .await
                            .map_err(err)?;
                            PersonhoodOutcome::Receipt { receipt_id: receipt_id.clone() }
                        }
                    }
                }
            };
            if matches!(outcome, PersonhoodOutcome::Mismatch | PersonhoodOutcome::NotLocked) {
                tx.rollback().await.map_err(err)?;
            } else {
                tx.commit().await.map_err(err)?;
            }
            Ok(outcome)
        })
    }

    async fn personhood_lock(&self, kind: &str, subject: &str) -> Result<Option<i64>, StoreError> {
        on_pool!(self, pool => sqlx::query_scalar("SELECT locked_at FROM personhood_locks WHERE kind = $1 AND subject = $2")
            .bind(kind)
            .bind(subject)
            .fetch_optional(pool)
            .await
            .map_err(err))
    }

    async fn consume_receipt(
        &self,
        receipt_id: &str,
        subject: &str,
        details: &str,
        now: i64,
    ) -> Result<ConsumeOutcome, StoreError> {
        on_writer!(self, pool => {
            let mut tx = pool.begin_write().await?;
            let done = sqlx::query(
                "UPDATE deposit_receipts SET consumed_at = $3, consumed = $4
                 WHERE id = $1 AND subject = $2 AND consumed_at IS NULL",
            )
            .bind(receipt_id)
            .bind(subject)
            .bind(now)
            .bind(details)
            .execute(&mut *tx)
            .await
            .map_err(err)?
            .rows_affected();
            if done == 1 {
                tx.commit().await.map_err(err)?;
                return Ok(ConsumeOutcome::Consumed { consumed_at: now });
            }
            let exists: Option<i64> = sqlx::query_scalar("SELECT created_at FROM deposit_receipts WHERE id = $1 AND subject = $2")
                .bind(receipt_id)
                .bind(subject)
                .fetch_optional(&mut *tx)
                .await
                .map_err(err)?;
            Ok(if exists.is_some() { ConsumeOutcome::AlreadyUsed } else { ConsumeOutcome::NotFound })
        })
    }
}
