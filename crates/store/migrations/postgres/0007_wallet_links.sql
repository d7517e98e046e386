-- EIP-4361 sign-in messages issued to link a wallet to an account: one use each, until they expire.
CREATE TABLE wallet_link_challenges (
    nonce       TEXT PRIMARY KEY,
    account_id  TEXT NOT NULL REFERENCES accounts (id),
    address     TEXT NOT NULL,
    message     TEXT NOT NULL,
    expires_at  BIGINT NOT NULL,
    used_at     BIGINT
);
