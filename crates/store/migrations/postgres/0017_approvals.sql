-- Approvals (issue 27): a policy's threshold above which a write waits for its owner, and an
-- intent's approval. approval_state is NULL for an intent that needs none, else pending, approved,
-- rejected or expired; only a pending approval keeps the runner off the intent.
ALTER TABLE agent_policies ADD COLUMN approval_above_micros BIGINT;
ALTER TABLE intents ADD COLUMN approval_state TEXT;
ALTER TABLE intents ADD COLUMN approval_requested_at BIGINT;
ALTER TABLE intents ADD COLUMN approval_expires_at BIGINT;
ALTER TABLE intents ADD COLUMN approval_decided_at BIGINT;
ALTER TABLE intents ADD COLUMN approval_reason TEXT;
CREATE INDEX intents_by_approval ON intents (account_id, approval_state, approval_requested_at)
    WHERE approval_state IS NOT NULL;
CREATE INDEX intents_approval_due ON intents (approval_expires_at) WHERE approval_state = 'pending';
