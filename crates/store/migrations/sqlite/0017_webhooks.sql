-- Webhooks (issue 27): an account's endpoints, and the outbox of deliveries the audit chaining
-- writes in its own transaction (one per endpoint and event: the id is the endpoint's and the
-- event's). A delivery is pending (tried at next_at; a claim moves next_at past its attempt),
-- delivered, or failed after a day of retries.
CREATE TABLE webhooks (
    id             TEXT PRIMARY KEY,
    account_id     TEXT NOT NULL,
    url            TEXT NOT NULL,
    events         TEXT NOT NULL,
    secret_sealed  BLOB NOT NULL,
    created_at     INTEGER NOT NULL
);
CREATE INDEX webhooks_by_account ON webhooks (account_id);
CREATE TABLE webhook_deliveries (
    id            TEXT PRIMARY KEY,
    webhook_id    TEXT NOT NULL,
    account_id    TEXT NOT NULL,
    event_id      TEXT NOT NULL,
    kind          TEXT NOT NULL,
    payload       TEXT NOT NULL,
    state         TEXT NOT NULL,
    attempts      INTEGER NOT NULL,
    next_at       INTEGER NOT NULL,
    last_status   INTEGER,
    last_error    TEXT,
    created_at    INTEGER NOT NULL,
    delivered_at  INTEGER
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_at) WHERE state = 'pending';
CREATE INDEX webhook_deliveries_by_webhook ON webhook_deliveries (webhook_id, created_at);
