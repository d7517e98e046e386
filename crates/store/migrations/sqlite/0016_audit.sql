-- The audit trail (issue 27). audit_events is the outbox every decision writes in its own
-- transaction; the chaining step moves them into audit_entries, each account's entries chained by
-- a keyed hash of the previous one (audit_heads holds each chain's last seq and hash). Entries are
-- only ever appended; nothing prunes them.
CREATE TABLE audit_events (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    account_id  TEXT NOT NULL,
    at          INTEGER NOT NULL,
    kind        TEXT NOT NULL,
    actor       TEXT NOT NULL,
    subject     TEXT NOT NULL,
    code        TEXT,
    data        TEXT NOT NULL
);
CREATE TABLE audit_entries (
    account_id  TEXT NOT NULL,
    seq         INTEGER NOT NULL,
    at          INTEGER NOT NULL,
    kind        TEXT NOT NULL,
    actor       TEXT NOT NULL,
    subject     TEXT NOT NULL,
    code        TEXT,
    data        TEXT NOT NULL,
    prev_hash   BLOB NOT NULL,
    hash        BLOB NOT NULL,
    PRIMARY KEY (account_id, seq)
);
CREATE INDEX audit_entries_by_time ON audit_entries (account_id, at);
CREATE TABLE audit_heads (
    account_id  TEXT PRIMARY KEY,
    seq         INTEGER NOT NULL,
    hash        BLOB NOT NULL
);
