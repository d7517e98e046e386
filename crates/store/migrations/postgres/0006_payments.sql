-- Buying credits with x402: invoices (one open challenge each), the transaction hashes that paid one
-- (a hash pays one invoice, ever), wallets linked to accounts, and credits held for a wallet that is
-- not linked yet (they join its account when it is).
CREATE TABLE invoices (
    id             TEXT PRIMARY KEY,
    sku            TEXT NOT NULL,
    credits        BIGINT NOT NULL,
    amount_atomic  BIGINT NOT NULL,
    payer          TEXT NOT NULL,
    account_id     TEXT REFERENCES accounts (id),
    agent_id       TEXT,
    chain_id       BIGINT NOT NULL,
    token          TEXT NOT NULL,
    recipient      TEXT NOT NULL,
    created_at     BIGINT NOT NULL,
    expires_at     BIGINT NOT NULL,
    paid_at        BIGINT,
    tx_hash        TEXT
);
CREATE TABLE used_payments (
    tx_hash     TEXT PRIMARY KEY,
    invoice_id  TEXT NOT NULL REFERENCES invoices (id),
    created_at  BIGINT NOT NULL
);
CREATE TABLE wallet_links (
    address     TEXT PRIMARY KEY,
    account_id  TEXT NOT NULL REFERENCES accounts (id),
    linked_at   BIGINT NOT NULL
);
CREATE TABLE held_credits (
    invoice_id  TEXT PRIMARY KEY REFERENCES invoices (id),
    address     TEXT NOT NULL,
    credits     BIGINT NOT NULL,
    created_at  BIGINT NOT NULL,
    claimed_by  TEXT,
    claimed_at  BIGINT
);
CREATE INDEX held_credits_by_address ON held_credits (address) WHERE claimed_at IS NULL;
