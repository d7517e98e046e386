-- The sweep of unmined gap fills (`<execution>/fill/<ms>` rows of any agent wallet) reads the
-- signed rows of a chain by age: only signed rows are indexed.
CREATE INDEX chain_txs_signed ON chain_txs (chain_id, updated_at) WHERE state = 'signed';
