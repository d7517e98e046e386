-- The per-wallet nonce manager: the next nonce of each wallet, and every transaction by its nonce,
-- reserved before it is signed and kept signed before it is sent (so a crash never loses a nonce or
-- sends an execution twice).
CREATE TABLE wallet_nonces (
    chain_id    INTEGER NOT NULL,
    wallet      TEXT NOT NULL,
    next_nonce  INTEGER NOT NULL,
    PRIMARY KEY (chain_id, wallet)
);
CREATE TABLE chain_txs (
    chain_id        INTEGER NOT NULL,
    wallet          TEXT NOT NULL,
    nonce           INTEGER NOT NULL,
    execution_key   TEXT NOT NULL,
    idx             INTEGER NOT NULL,
    state           TEXT NOT NULL,
    tx_hash         TEXT,
    raw_tx          BLOB,
    prior_hashes    TEXT NOT NULL DEFAULT '',
    receipt_status  INTEGER,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    PRIMARY KEY (chain_id, wallet, nonce)
);
CREATE UNIQUE INDEX chain_txs_execution ON chain_txs (execution_key, idx) WHERE state <> 'voided';
CREATE INDEX chain_txs_pending ON chain_txs (chain_id, wallet, state);
