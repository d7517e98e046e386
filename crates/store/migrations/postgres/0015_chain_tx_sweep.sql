-- The background sweep of signed, unmined transactions (the x402 settlement wallet's): a row is
-- claimed until `sweep_until` by the one process that re-sends and bumps it, so that two processes
-- never work the same nonce at once.
ALTER TABLE chain_txs ADD COLUMN sweep_until BIGINT;
