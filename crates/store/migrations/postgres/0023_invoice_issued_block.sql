-- The payment chain's latest block when an invoice was issued: a payment mined at or below it was
-- sent before the challenge existed (the chain's own order; a node's timestamps may lag the
-- gateway's clock). NULL on invoices made before it was recorded.
ALTER TABLE invoices ADD COLUMN issued_block BIGINT;
