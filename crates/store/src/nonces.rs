//! The per-wallet nonce manager's rows: a wallet's transactions by nonce.

use actiongate_core::store::{
    ChainTxRecord, LeaseFence, MinedTx, NonceRequest, NonceStore, Reservation, ReserveItem, SignAt,
    SignedTx, StoreError, StoreErrorKind,
};
use async_trait::async_trait;
use sqlx::sqlite::SqliteConnection;

use crate::error::{closed, err};
use crate::{Backend, Dialect, SqlStore};

macro_rules! chain_tx_columns {
    () => {
        "chain_id, wallet, nonce, execution_key, idx, state, tx_hash, raw_tx, prior_hashes, receipt_status, updated_at"
    };
}

/// Whether `$fence`'s lease (if any) is held at `$now`, checked inside the open transaction `$tx`:
/// the intent's row is written (and so locked until commit on PostgreSQL, where a claim skips it),
/// so no takeover slips between this check and what the transaction records.
macro_rules! lease_held {
    ($tx:ident, $fence:expr, $now:expr) => {
        match $fence {
            None => true,
            Some(f) => {
                sqlx::query(
                    "UPDATE intents SET lease_until = lease_until
                     WHERE id = $1 AND lease_owner = $2 AND status = 'queued' AND lease_until > $3",
                )
                .bind(&f.intent_id)
                .bind(&f.owner)
                .bind($now)
                .execute(&mut *$tx)
                .await
                .map_err(err)?
                .rows_affected()
                    == 1
            }
        }
    };
}

/// Raises the wallet's nonce counter to the node's nonce `$chain_nonce` (never lowers it), inside
/// the open transaction `$tx`, and answers the counter: the wallet's row is locked first, so
/// reservations of one wallet queue here.
macro_rules! raise_counter {
    ($tx:ident, $chain:expr, $wallet:expr, $chain_nonce:expr) => {{
        let next: i64 = sqlx::query_scalar(
            "INSERT INTO wallet_nonces (chain_id, wallet, next_nonce) VALUES ($1, $2, $3)
             ON CONFLICT (chain_id, wallet) DO UPDATE SET next_nonce =
               CASE WHEN wallet_nonces.next_nonce > excluded.next_nonce THEN wallet_nonces.next_nonce ELSE excluded.next_nonce END
             RETURNING next_nonce",
        )
        .bind($chain)
        .bind($wallet)
        .bind($chain_nonce)
        .fetch_one(&mut *$tx)
        .await
        .map_err(err)?;
        next
    }};
}

/// What a reservation's row at a nonce taken before (a voided one, or a stale one of another
/// execution) becomes: the new execution's, signed or reserved, nothing of the old one kept.
macro_rules! chain_tx_taken_over {
    () => {
        " ON CONFLICT (chain_id, wallet, nonce) DO UPDATE SET execution_key = excluded.execution_key,
           idx = excluded.idx, state = excluded.state, tx_hash = excluded.tx_hash, raw_tx = excluded.raw_tx,
           prior_hashes = '', receipt_status = NULL, updated_at = excluded.updated_at"
    };
}

/// A wallet transaction row as stored (`chain_tx_columns!`).
#[derive(sqlx::FromRow)]
pub(crate) struct ChainTxRow {
    chain_id: i64,
    wallet: String,
    nonce: i64,
    execution_key: String,
    idx: i64,
    state: String,
    tx_hash: Option<String>,
    raw_tx: Option<Vec<u8>>,
    prior_hashes: String,
    receipt_status: Option<i64>,
    updated_at: i64,
}

pub(crate) fn chain_tx_from(row: ChainTxRow) -> Result<ChainTxRecord, StoreError> {
    let ChainTxRow {
        chain_id: chain,
        wallet,
        nonce,
        execution_key,
        idx,
        state,
        tx_hash,
        raw_tx,
        prior_hashes: prior,
        receipt_status,
        updated_at,
    } = row;
    Ok(ChainTxRecord {
        chain_id: u64::try_from(chain).map_err(err)?,
        wallet,
        nonce: u64::try_from(nonce).map_err(err)?,
        execution_key,
        idx: u32::try_from(idx).map_err(err)?,
        state: state.parse().map_err(err)?,
        tx_hash,
        raw_tx,
        prior_hashes: prior
            .split(',')
            .filter(|h| !h.is_empty())
            .map(str::to_owned)
            .collect(),
        receipt_status,
        updated_at,
    })
}

/// Signs an execution's transactions at `nonces` when a signer is given: as many as nonces, or an
/// error.
fn signed_at(
    sign: Option<&SignAt<'_>>,
    nonces: &[i64],
) -> Result<Option<Vec<SignedTx>>, StoreError> {
    let Some(sign) = sign else { return Ok(None) };
    let at: Vec<u64> = nonces
        .iter()
        .map(|n| u64::try_from(*n).map_err(err))
        .collect::<Result<_, _>>()?;
    let signed = sign(&at)?;
    if signed.len() != nonces.len() {
        return Err(StoreError::new(
            StoreErrorKind::Other,
            format!(
                "{} transactions signed for {} nonces",
                signed.len(),
                nonces.len()
            ),
        ));
    }
    Ok(Some(signed))
}

/// What a reservation does with the rows its execution already has (not voided), the one rule of
/// both paths of [`NonceStore::reserve_signed_batch`].
enum Found {
    /// None: nonces are picked now.
    Nothing,
    /// Reserved and never signed (an earlier attempt stopped there), with a signer given: signed
    /// now at these nonces.
    Unsigned(Vec<i64>),
    /// Signed already (by another process running the same execution), or no signer given:
    /// answered as stored, never signed again at those nonces.
    AsStored(Reservation),
}

fn found(rows: Vec<ChainTxRow>, signing: bool) -> Result<Found, StoreError> {
    Ok(if rows.is_empty() {
        Found::Nothing
    } else if signing && rows.iter().all(|r| r.state == "reserved") {
        Found::Unsigned(rows.iter().map(|r| r.nonce).collect())
    } else {
        Found::AsStored(Reservation::Existing(
            rows.into_iter()
                .map(chain_tx_from)
                .collect::<Result<_, _>>()?,
        ))
    })
}

/// A row a batch of reservations writes ([`NonceStore::reserve_signed_batch`] together).
struct NewRow<'a> {
    chain: i64,
    wallet: &'a str,
    nonce: i64,
    execution_key: &'a str,
    idx: i64,
    now: i64,
    signed: Option<SignedTx>,
}

/// Rows one INSERT of a batch of reservations writes (nine variables each).
const RESERVE_CHUNK: usize = 256;

#[async_trait]
impl NonceStore for SqlStore {
    async fn reserve_signed(
        &self,
        request: NonceRequest<'_>,
        fence: Option<&LeaseFence>,
        sign: Option<&SignAt<'_>>,
    ) -> Result<Reservation, StoreError> {
        let mut answers = self
            .reserve_signed_batch(&[ReserveItem {
                request,
                fence,
                sign,
            }])
            .await?;
        answers
            .pop()
            .ok_or_else(|| StoreError::new(StoreErrorKind::Other, "a reservation answered nothing"))
    }

    async fn reserve_signed_batch(
        &self,
        items: &[ReserveItem<'_>],
    ) -> Result<Vec<Reservation>, StoreError> {
        on_writer!(self, pool => {
            let mut tx = pool.begin_write().await?;
            // Together, when no two items share an execution key and no wallet of theirs has a voided
            // row (the common case): each item's nonces then come from its wallet's counter alone, so
            // the counters, the items' rows and the lease fences are read and written once for the
            // batch, not once an item (each statement is a round trip to SQLite's thread). Otherwise
            // item by item, below. Both answer the same.
            let mut keys = std::collections::HashSet::new();
            let mut together = items.iter().all(|i| keys.insert(i.request.execution_key));
            let mut wallets: Vec<(i64, &str)> = Vec::new();
            for i in items {
                let w = (i64::try_from(i.request.chain_id).map_err(err)?, i.request.wallet);
                if !wallets.contains(&w) {
                    wallets.push(w);
                }
            }
            for (chain, wallet) in &wallets {
                if !together {
                    break;
                }
                let voided: bool = sqlx::query_scalar(
                    "SELECT EXISTS (SELECT 1 FROM chain_txs WHERE chain_id = $1 AND wallet = $2 AND state = 'voided')",
                )
                .bind(chain).bind(wallet)
                .fetch_one(&mut *tx).await.map_err(err)?;
                together = !voided;
            }
            if together {
                // Each fence checked once, at the latest time of its items: held then, held at each.
                let mut fences: Vec<(&LeaseFence, i64, bool)> = Vec::new();
                for i in items {
                    if let Some(f) = i.fence {
                        match fences.iter_mut().find(|(g, ..)| *g == f) {
                            Some(at) => at.1 = at.1.max(i.request.now),
                            None => fences.push((f, i.request.now, false)),
                        }
                    }
                }
                for (f, now, held) in &mut fences {
                    *held = lease_held!(tx, Some(*f), *now);
                }
                let mut existing: std::collections::HashMap<String, Vec<ChainTxRow>> = std::collections::HashMap::new();
                for chunk in crate::shaped_chunks(items, RESERVE_CHUNK) {
                    let mut q = in_list!(
                        concat!("SELECT ", chain_tx_columns!(), " FROM chain_txs WHERE state <> 'voided' AND execution_key IN ("),
                        chunk.iter().map(|i| i.request.execution_key)
                    );
                    for row in q.build_query_as::<ChainTxRow>().fetch_all(&mut *tx).await.map_err(err)? {
                        existing.entry(row.execution_key.clone()).or_default().push(row);
                    }
                }
                // Each wallet's counter: (wallet, as the batch found and raised it, next).
                let mut counters: Vec<((i64, &str), i64, i64)> = Vec::new();
                let mut answers: Vec<Option<Reservation>> = Vec::with_capacity(items.len());
                let mut rows: Vec<NewRow<'_>> = Vec::new();
                for item in items {
                    let ReserveItem { request, fence, sign } = item;
                    let NonceRequest { chain_id, wallet, execution_key, count, chain_nonce, now, gaps_only } = *request;
                    let chain = i64::try_from(chain_id).map_err(err)?;
                    let chain_nonce = i64::try_from(chain_nonce).map_err(err)?;
                    let held = fence.is_none_or(|f| fences.iter().any(|(g, _, held)| *g == f && *held));
                    if !held {
                        answers.push(Some(Reservation::LeaseLost));
                        continue;
                    }
                    let counter = match counters.iter().position(|(w, ..)| *w == (chain, wallet)) {
                        Some(at) => {
                            counters[at].2 = counters[at].2.max(chain_nonce);
                            at
                        }
                        None => {
                            let next = raise_counter!(tx, chain, wallet, chain_nonce);
                            counters.push(((chain, wallet), next, next));
                            counters.len() - 1
                        }
                    };
                    let mut found_rows = existing.remove(execution_key).unwrap_or_default();
                    found_rows.sort_by_key(|r| r.idx);
                    let nonces: Vec<i64> = match found(found_rows, sign.is_some())? {
                        Found::Nothing => {
                            // No voided nonce to fill: fresh ones from the counter (none when only gaps are asked).
                            let fresh = if gaps_only { 0 } else { i64::from(count) };
                            let next = counters[counter].2;
                            counters[counter].2 = next + fresh;
                            (next..next + fresh).collect()
                        }
                        Found::Unsigned(nonces) => nonces,
                        Found::AsStored(answer) => {
                            answers.push(Some(answer));
                            continue;
                        }
                    };
                    let mut signed = signed_at(*sign, &nonces)?.map(Vec::into_iter);
                    for (idx, nonce) in nonces.into_iter().enumerate() {
                        rows.push(NewRow {
                            chain, wallet, nonce, execution_key, idx: idx as i64, now,
                            signed: signed.as_mut().and_then(Iterator::next),
                        });
                    }
                    answers.push(None);
                }
                for ((chain, wallet), found, next) in &counters {
                    if next != found {
                        sqlx::query("UPDATE wallet_nonces SET next_nonce = $3 WHERE chain_id = $1 AND wallet = $2")
                            .bind(chain).bind(wallet).bind(next)
                            .execute(&mut *tx).await.map_err(err)?;
                    }
                }
                let mut at = std::collections::HashSet::new();
                if !rows.iter().all(|r| at.insert((r.chain, r.wallet, r.nonce))) {
                    return Err(StoreError::new(StoreErrorKind::Other, "two reservations of one batch at one nonce"));
                }
                let mut written: std::collections::HashMap<String, Vec<ChainTxRow>> = std::collections::HashMap::new();
                for chunk in crate::shaped_chunks(&rows, RESERVE_CHUNK) {
                    let mut q = sqlx::QueryBuilder::new(
                        "INSERT INTO chain_txs (chain_id, wallet, nonce, execution_key, idx, state, tx_hash, raw_tx, created_at, updated_at) ",
                    );
                    q.push_values(chunk, |mut b, r| {
                        let t = r.signed.as_ref();
                        b.push_bind(r.chain).push_bind(r.wallet).push_bind(r.nonce).push_bind(r.execution_key).push_bind(r.idx)
                            .push_bind(if t.is_some() { "signed" } else { "reserved" })
                            .push_bind(t.map(|t| t.tx_hash.as_str()))
                            .push_bind(t.map(|t| t.raw_tx.as_slice()))
                            .push_bind(r.now).push_bind(r.now);
                    });
                    q.push(concat!(chain_tx_taken_over!(), " RETURNING ", chain_tx_columns!()));
                    for row in q.build_query_as::<ChainTxRow>().fetch_all(&mut *tx).await.map_err(err)? {
                        written.entry(row.execution_key.clone()).or_default().push(row);
                    }
                }
                let mut answered = Vec::with_capacity(items.len());
                for (item, answer) in items.iter().zip(answers) {
                    answered.push(match answer {
                        Some(answer) => answer,
                        None => {
                            let mut rows = written.remove(item.request.execution_key).unwrap_or_default();
                            rows.sort_by_key(|r| r.idx);
                            rows.into_iter().map(chain_tx_from).collect::<Result<_, _>>().map(Reservation::New)?
                        }
                    });
                }
                tx.commit().await.map_err(err)?;
                return Ok(answered);
            }
            let mut answers = Vec::with_capacity(items.len());
            for item in items {
                let ReserveItem { request, fence, sign } = item;
                let NonceRequest {
                    chain_id,
                    wallet,
                    execution_key,
                    count,
                    chain_nonce,
                    now,
                    gaps_only,
                } = *request;
                let chain = i64::try_from(chain_id).map_err(err)?;
                let chain_nonce = i64::try_from(chain_nonce).map_err(err)?;
                let answer = 'item: {
                    if !lease_held!(tx, *fence, now) {
                        break 'item Reservation::LeaseLost;
                    }
                    let next = raise_counter!(tx, chain, wallet, chain_nonce);
                    let existing: Vec<ChainTxRow> = sqlx::query_as(concat!("SELECT ", chain_tx_columns!(), " FROM chain_txs WHERE execution_key = $1 AND state <> 'voided' ORDER BY idx"))
                        .bind(execution_key)
                        .fetch_all(&mut *tx).await.map_err(err)?;
                    let nonces: Vec<i64> = match found(existing, sign.is_some())? {
                        Found::Nothing => {
                            // Voided nonces the chain has not used yet are filled first, so no gap stays behind.
                            // Only gaps: those below a nonce of the wallet still in use.
                            let voided: Vec<i64> = sqlx::query_scalar(
                                "SELECT nonce FROM chain_txs WHERE chain_id = $1 AND wallet = $2 AND state = 'voided' AND nonce >= $3
                                   AND (NOT $5 OR nonce < (SELECT MAX(nonce) FROM chain_txs WHERE chain_id = $1 AND wallet = $2 AND state <> 'voided'))
                                 ORDER BY nonce LIMIT $4",
                            )
                            .bind(chain).bind(wallet).bind(chain_nonce).bind(i64::from(count)).bind(gaps_only)
                            .fetch_all(&mut *tx).await.map_err(err)?;
                            sqlx::query("DELETE FROM chain_txs WHERE chain_id = $1 AND wallet = $2 AND state = 'voided' AND nonce < $3")
                                .bind(chain).bind(wallet).bind(chain_nonce)
                                .execute(&mut *tx).await.map_err(err)?;
                            let fresh = if gaps_only { 0 } else { i64::from(count) - voided.len() as i64 };
                            if fresh > 0 {
                                sqlx::query("UPDATE wallet_nonces SET next_nonce = $3 WHERE chain_id = $1 AND wallet = $2")
                                    .bind(chain).bind(wallet).bind(next + fresh)
                                    .execute(&mut *tx).await.map_err(err)?;
                            }
                            voided.iter().copied().chain(next..next + fresh).collect()
                        }
                        Found::Unsigned(nonces) => nonces,
                        Found::AsStored(answer) => break 'item answer,
                    };
                    let signed = signed_at(*sign, &nonces)?;
                    for (idx, nonce) in nonces.iter().enumerate() {
                        let t = signed.as_ref().and_then(|s| s.get(idx));
                        sqlx::query(
                            concat!("INSERT INTO chain_txs (chain_id, wallet, nonce, execution_key, idx, state, tx_hash, raw_tx, created_at, updated_at)
                             VALUES ($1, $2, $3, $4, $5, $7, $8, $9, $6, $6)", chain_tx_taken_over!()),
                        )
                        .bind(chain).bind(wallet).bind(nonce).bind(execution_key).bind(idx as i64).bind(now)
                        .bind(if t.is_some() { "signed" } else { "reserved" })
                        .bind(t.map(|t| t.tx_hash.as_str()))
                        .bind(t.map(|t| t.raw_tx.as_slice()))
                        .execute(&mut *tx).await.map_err(err)?;
                    }
                    let rows: Vec<ChainTxRow> = sqlx::query_as(concat!("SELECT ", chain_tx_columns!(), " FROM chain_txs WHERE execution_key = $1 AND state <> 'voided' ORDER BY idx"))
                        .bind(execution_key)
                        .fetch_all(&mut *tx).await.map_err(err)?;
                    rows.into_iter().map(chain_tx_from).collect::<Result<_, _>>().map(Reservation::New)?
                };
                answers.push(answer);
            }
            tx.commit().await.map_err(err)?;
            Ok(answers)
        })
    }

    async fn execution_txs(&self, execution_key: &str) -> Result<Vec<ChainTxRecord>, StoreError> {
        // Read through the writer on SQLite: a transaction recorded a moment ago must be seen.
        on_writer!(self, pool => {
            let rows: Vec<ChainTxRow> = sqlx::query_as(concat!("SELECT ", chain_tx_columns!(), " FROM chain_txs WHERE execution_key = $1 AND state <> 'voided' ORDER BY idx"))
                .bind(execution_key)
                .fetch_all(pool).await.map_err(err)?;
            rows.into_iter().map(chain_tx_from).collect()
        })
    }

    async fn record_signed_txs(
        &self,
        chain_id: u64,
        wallet: &str,
        execution_key: &str,
        signed: &[SignedTx],
        fence: Option<&LeaseFence>,
        now: i64,
    ) -> Result<bool, StoreError> {
        let chain = i64::try_from(chain_id).map_err(err)?;
        on_writer!(self, pool => {
            let mut tx = pool.begin_write().await?;
            if !lease_held!(tx, fence, now) {
                tx.rollback().await.map_err(err)?;
                return Ok(false);
            }
            for t in signed {
                let nonce = i64::try_from(t.nonce).map_err(err)?;
                let done = sqlx::query(
                    "UPDATE chain_txs SET state = 'signed', raw_tx = $5, updated_at = $6,
                       prior_hashes = CASE WHEN tx_hash IS NULL OR tx_hash = $4 THEN prior_hashes
                                           WHEN prior_hashes = '' THEN tx_hash ELSE prior_hashes || ',' || tx_hash END,
                       tx_hash = $4
                     WHERE chain_id = $1 AND wallet = $2 AND nonce = $3 AND execution_key = $7 AND state IN ('reserved', 'signed')",
                )
                .bind(chain).bind(wallet).bind(nonce).bind(&t.tx_hash).bind(&t.raw_tx).bind(now).bind(execution_key)
                .execute(&mut *tx).await.map_err(err)?
                .rows_affected();
                if done != 1 {
                    tx.rollback().await.map_err(err)?;
                    return Err(StoreError::new(StoreErrorKind::Other, format!("no reserved transaction of {execution_key} at nonce {nonce} of {wallet} on chain {chain_id}")));
                }
            }
            tx.commit().await.map_err(err)?;
            Ok(true)
        })
    }

    async fn claim_unmined(
        &self,
        chain_id: u64,
        wallet: &str,
        stale_before: i64,
        now: i64,
        until: i64,
    ) -> Result<Vec<String>, StoreError> {
        self.claim(
            chain_id,
            Unmined::OfWallet(wallet),
            stale_before,
            now,
            until,
        )
        .await
    }

    async fn claim_unmined_fills(
        &self,
        chain_id: u64,
        stale_before: i64,
        now: i64,
        until: i64,
    ) -> Result<Vec<String>, StoreError> {
        self.claim(chain_id, Unmined::Fills, stale_before, now, until)
            .await
    }

    async fn record_mined_txs(
        &self,
        chain_id: u64,
        wallet: &str,
        mined: &[MinedTx],
        now: i64,
    ) -> Result<(), StoreError> {
        if mined.is_empty() {
            return Ok(());
        }
        let chain = i64::try_from(chain_id).map_err(err)?;
        // One UPDATE for a run of receipts, each with its own values. A nonce is mined once: should
        // one be named twice, its last mention counts.
        let mut last: Vec<(i64, &MinedTx)> = Vec::with_capacity(mined.len());
        for m in mined {
            let nonce = i64::try_from(m.nonce).map_err(err)?;
            match last.iter_mut().find(|(n, _)| *n == nonce) {
                Some(at) => at.1 = m,
                None => last.push((nonce, m)),
            }
        }
        on_writer!(self, pool => {
            let mut tx = pool.begin_write().await?;
            for chunk in crate::shaped_chunks(&last, RESERVE_CHUNK) {
                let mut q = sqlx::QueryBuilder::new("WITH v (v_nonce, v_hash, v_status) AS (");
                q.push_values(chunk, |mut b, (nonce, m)| {
                    b.push_bind(*nonce).push_bind(m.tx_hash.as_str()).push_bind(m.status);
                });
                q.push(") UPDATE chain_txs SET state = 'mined', receipt_status = v.v_status, updated_at = ")
                    .push_bind(now)
                    .push(
                        ", prior_hashes = CASE WHEN chain_txs.tx_hash = v.v_hash OR chain_txs.tx_hash IS NULL THEN chain_txs.prior_hashes
                                               WHEN chain_txs.prior_hashes = '' THEN chain_txs.tx_hash
                                               ELSE chain_txs.prior_hashes || ',' || chain_txs.tx_hash END,
                           tx_hash = v.v_hash
                         FROM v WHERE chain_txs.chain_id = ",
                    )
                    .push_bind(chain)
                    .push(" AND chain_txs.wallet = ")
                    .push_bind(wallet)
                    .push(" AND chain_txs.nonce = v.v_nonce");
                q.build().execute(&mut *tx).await.map_err(err)?;
            }
            tx.commit().await.map_err(err)
        })
    }

    async fn void_txs(
        &self,
        execution_key: &str,
        include_signed: bool,
        now: i64,
    ) -> Result<(), StoreError> {
        on_writer!(self, pool => sqlx::query(
            "UPDATE chain_txs SET state = 'voided', updated_at = $2
             WHERE execution_key = $1 AND (state = 'reserved' OR (state = 'signed' AND $3))",
        )
        .bind(execution_key).bind(now).bind(include_signed)
        .execute(pool).await.map(|_| ()).map_err(err))
    }
}

/// Which signed, unmined rows a sweeper claims.
enum Unmined<'a> {
    /// One wallet's (the settlement wallet's sweep).
    OfWallet(&'a str),
    /// The gap fills of every wallet of the chain.
    Fills,
}

/// The claim of [`Unmined`] rows, `$2` selecting them.
macro_rules! claim_sql {
    ($which:literal) => {
        concat!(
            "UPDATE chain_txs SET sweep_until = $5
             WHERE chain_id = $1 AND ",
            $which,
            " AND state = 'signed' AND updated_at < $3
               AND (sweep_until IS NULL OR sweep_until < $4)
             RETURNING execution_key"
        )
    };
}

impl SqlStore {
    /// Claims signed, unmined rows for a sweeper; answers their keys, each once.
    async fn claim(
        &self,
        chain_id: u64,
        which: Unmined<'_>,
        stale_before: i64,
        now: i64,
        until: i64,
    ) -> Result<Vec<String>, StoreError> {
        let chain = i64::try_from(chain_id).map_err(err)?;
        let (sql, selector) = match which {
            Unmined::OfWallet(wallet) => (claim_sql!("wallet = $2"), wallet.to_owned()),
            Unmined::Fills => (
                claim_sql!("execution_key LIKE $2"),
                format!("%{}%", actiongate_core::store::FILL_KEY_PART),
            ),
        };
        let mut keys: Vec<String> = on_writer!(self, pool => sqlx::query_scalar(sql)
            .bind(chain).bind(&selector).bind(stale_before).bind(now).bind(until)
            .fetch_all(pool).await.map_err(err))?;
        keys.sort_unstable();
        keys.dedup();
        Ok(keys)
    }
}
