-- Personhood: issued proof requests (one use per nonce), locks of organizations and agents to the
-- first verified nullifier, and single-use deposit receipts.
CREATE TABLE personhood_challenges (
    nonce            TEXT PRIMARY KEY,
    kind             TEXT NOT NULL,
    account_id       TEXT NOT NULL REFERENCES accounts (id),
    subject          TEXT NOT NULL,
    action           TEXT NOT NULL,
    signal           TEXT NOT NULL,
    chain_id         INTEGER NOT NULL,
    challenge_id     TEXT,
    idempotency_key  TEXT,
    details          TEXT,
    created_at       INTEGER NOT NULL,
    expires_at       INTEGER NOT NULL,
    used_at          INTEGER
);
CREATE UNIQUE INDEX personhood_challenges_idem ON personhood_challenges (account_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL;

CREATE TABLE personhood_locks (
    kind        TEXT NOT NULL,
    subject     TEXT NOT NULL,
    nullifier   TEXT NOT NULL,
    locked_at   INTEGER NOT NULL,
    PRIMARY KEY (kind, subject)
);

CREATE TABLE deposit_receipts (
    id            TEXT PRIMARY KEY,
    subject       TEXT NOT NULL,
    challenge_id  TEXT NOT NULL UNIQUE,
    nullifier     TEXT NOT NULL,
    details       TEXT,
    created_at    INTEGER NOT NULL,
    consumed_at   INTEGER,
    consumed      TEXT
);
