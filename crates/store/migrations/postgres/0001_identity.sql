-- Accounts (owners), pending e-mail codes, agents with their sealed execution wallets,
-- owner sessions and agent policies. Instants are Unix milliseconds; USD amounts micro-dollars;
-- keys, tokens and codes only as keyed hashes.
CREATE TABLE accounts (
    id          TEXT PRIMARY KEY,
    email       TEXT NOT NULL UNIQUE,
    created_at  BIGINT NOT NULL
);

CREATE TABLE email_challenges (
    email       TEXT PRIMARY KEY,
    code_hash   BYTEA NOT NULL,
    expires_at  BIGINT NOT NULL,
    attempts    INTEGER NOT NULL DEFAULT 0
);

CREATE TABLE agents (
    id              TEXT PRIMARY KEY,
    account_id      TEXT NOT NULL REFERENCES accounts (id),
    name            TEXT,
    key_hash        BYTEA NOT NULL UNIQUE,
    wallet_address  TEXT NOT NULL UNIQUE,
    wallet_sealed   BYTEA NOT NULL,
    created_at      BIGINT NOT NULL,
    key_rotated_at  BIGINT
);
CREATE INDEX agents_by_account ON agents (account_id, created_at);

CREATE TABLE owner_sessions (
    token_hash  BYTEA PRIMARY KEY,
    account_id  TEXT NOT NULL REFERENCES accounts (id),
    created_at  BIGINT NOT NULL,
    expires_at  BIGINT NOT NULL
);

CREATE TABLE agent_policies (
    agent_id               TEXT PRIMARY KEY REFERENCES agents (id),
    allowed_actions        TEXT NOT NULL,
    daily_limit_micros     BIGINT NOT NULL,
    max_per_action_micros  BIGINT,
    updated_at             BIGINT NOT NULL
);
