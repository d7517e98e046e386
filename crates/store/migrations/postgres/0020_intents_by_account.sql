-- The owner's console lists an account's intents, newest first (issue 27).
CREATE INDEX intents_by_account ON intents (account_id, created_at);
