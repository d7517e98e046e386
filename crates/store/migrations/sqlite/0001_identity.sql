-- Accounts (owners), pending e-mail codes, agents with their sealed execution wallets,
-- owner sessions and agent policies. Instants are Unix milliseconds; USD amounts micro-dollars;
-- keys, tokens and codes only as keyed hashes.
CREATE TABLE accounts (
    id          TEXT PRIMARY KEY,
    email       TEXT NOT NULL UNIQUE,
    created_at  INTEGER NOT NULL
);

CREATE TABLE email_challenges (
    email       TEXT PRIMARY KEY,
    code_hash   BLOB NOT NULL,
    expires_at  INTEGER NOT NULL,
    attempts    INTEGER NOT NULL DEFAULT 0
);

CREATE TABLE agents (
    id              TEXT PRIMARY KEY,
    account_id      TEXT NOT NULL REFERENCES accounts (id),
    name            TEXT,
    key_hash        BLOB NOT NULL UNIQUE,
    wallet_address  TEXT NOT NULL UNIQUE,
    wallet_sealed   BLOB NOT NULL,
    created_at      INTEGER NOT NULL,
    key_rotated_at  INTEGER
);
CREATE INDEX agents_by_account ON agents (account_id, created_at);

CREATE TABLE owner_sessions (
    token_hash  BLOB PRIMARY KEY,
    account_id  TEXT NOT NULL REFERENCES accounts (id),
    created_at  INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL
);

CREATE TABLE agent_policies (
    agent_id               TEXT PRIMARY KEY REFERENCES agents (id),
    allowed_actions        TEXT NOT NULL,
    daily_limit_micros     INTEGER NOT NULL,
    max_per_action_micros  INTEGER,
    updated_at             INTEGER NOT NULL
);
