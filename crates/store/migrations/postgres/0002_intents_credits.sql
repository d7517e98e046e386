-- Credits (one ledger per account), intents with their per-user executions, idempotency records,
-- per-agent daily usage, and the delegations the fan-out gate reads.

CREATE TABLE credit_accounts (
    account_id  TEXT PRIMARY KEY REFERENCES accounts (id),
    balance     BIGINT NOT NULL DEFAULT 0 CHECK (balance >= 0),
    reserved    BIGINT NOT NULL DEFAULT 0 CHECK (reserved >= 0),
    free_day    BIGINT NOT NULL DEFAULT 0,
    free_used   INTEGER NOT NULL DEFAULT 0 CHECK (free_used >= 0),
    updated_at  BIGINT NOT NULL
);
INSERT INTO credit_accounts (account_id, updated_at) SELECT id, created_at FROM accounts;

-- Every change of a balance (and every free request used) is a row here.
CREATE TABLE credit_ledger (
    id               TEXT PRIMARY KEY,
    account_id       TEXT NOT NULL REFERENCES accounts (id),
    agent_id         TEXT,
    kind             TEXT NOT NULL,
    reason           TEXT NOT NULL,
    intent_id        TEXT,
    invoice_id       TEXT,
    balance_before   BIGINT NOT NULL,
    balance_after    BIGINT NOT NULL,
    reserved_before  BIGINT NOT NULL,
    reserved_after   BIGINT NOT NULL,
    created_at       BIGINT NOT NULL
);
CREATE INDEX credit_ledger_by_account ON credit_ledger (account_id, created_at);

CREATE TABLE intents (
    id                   TEXT PRIMARY KEY,
    agent_id             TEXT NOT NULL REFERENCES agents (id),
    account_id           TEXT NOT NULL REFERENCES accounts (id),
    action               TEXT NOT NULL,
    lane                 TEXT NOT NULL,
    params               TEXT NOT NULL,
    chain_id             BIGINT NOT NULL,
    amount_micros        BIGINT NOT NULL,
    price_per_execution  BIGINT NOT NULL,
    reserved_credits     BIGINT NOT NULL,
    free_request         BOOLEAN NOT NULL,
    status               TEXT NOT NULL,
    total                INTEGER NOT NULL,
    lease_owner          TEXT,
    lease_until          BIGINT,
    error_code           TEXT,
    error_message        TEXT,
    created_at           BIGINT NOT NULL,
    finished_at          BIGINT
);
CREATE INDEX intents_queued ON intents (created_at) WHERE status = 'queued';
CREATE INDEX intents_by_agent ON intents (agent_id, created_at);

-- One row per (intent, addressed user), written before the execution is attempted.
CREATE TABLE intent_executions (
    intent_id       TEXT NOT NULL REFERENCES intents (id),
    seq             INTEGER NOT NULL,
    execution_key   TEXT NOT NULL UNIQUE,
    user_did        TEXT NOT NULL,
    wallet_address  TEXT NOT NULL,
    chain_id        BIGINT NOT NULL,
    state           TEXT NOT NULL,
    tx_hash         TEXT,
    error_code      TEXT,
    error_message   TEXT,
    data            TEXT,
    started_at      BIGINT,
    finished_at     BIGINT,
    PRIMARY KEY (intent_id, seq)
);

CREATE TABLE idempotency_keys (
    agent_id      TEXT NOT NULL REFERENCES agents (id),
    key           TEXT NOT NULL,
    request_hash  BYTEA NOT NULL,
    intent_id     TEXT NOT NULL REFERENCES intents (id),
    created_at    BIGINT NOT NULL,
    PRIMARY KEY (agent_id, key)
);

CREATE TABLE agent_daily_usage (
    agent_id     TEXT NOT NULL REFERENCES agents (id),
    day          BIGINT NOT NULL,
    used_micros  BIGINT NOT NULL,
    PRIMARY KEY (agent_id, day)
);

CREATE TABLE delegations (
    hash        TEXT PRIMARY KEY,
    agent_id    TEXT NOT NULL REFERENCES agents (id),
    delegator   TEXT NOT NULL,
    chain_id    BIGINT NOT NULL,
    status      TEXT NOT NULL,
    created_at  BIGINT NOT NULL
);
CREATE INDEX delegations_by_agent ON delegations (agent_id, chain_id, status);
