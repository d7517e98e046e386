-- ERC-7710 delegations as signed (the whole delegation, JSON), with the end of their time window.
ALTER TABLE delegations ADD COLUMN expires_at INTEGER;
ALTER TABLE delegations ADD COLUMN body TEXT;
ALTER TABLE delegations ADD COLUMN updated_at INTEGER;
CREATE INDEX delegations_by_delegator ON delegations (agent_id, chain_id, delegator);
