-- Delegators are matched case-insensitively (an address's case is only its checksum).
DROP INDEX delegations_by_delegator;
CREATE INDEX delegations_by_delegator ON delegations (agent_id, chain_id, lower(delegator));
