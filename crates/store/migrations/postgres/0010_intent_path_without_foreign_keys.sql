-- The foreign keys of the rows every submit writes, dropped. Each was checked by a query of its own
-- per inserted row (five per accepted intent, one more per ledger row): measured at 2400 submits/s,
-- a fifth of the batch connection's CPU, which is the bound of the submit path on PostgreSQL (peak
-- 5200/s with them, 7100/s without, same run). They guarded against nothing the code can do: no
-- agent, account or intent is ever deleted, and the one statement that writes these rows takes their
-- agent and account from rows the same transaction has just read (the agent's key and policy
-- confirmed, the credit row locked) and their intent from the rows it inserts with them.
-- SQLite keeps them (checked in-process, at a fraction of the cost).
ALTER TABLE intents DROP CONSTRAINT intents_agent_id_fkey, DROP CONSTRAINT intents_account_id_fkey;
ALTER TABLE intent_executions DROP CONSTRAINT intent_executions_intent_id_fkey;
ALTER TABLE idempotency_keys DROP CONSTRAINT idempotency_keys_agent_id_fkey, DROP CONSTRAINT idempotency_keys_intent_id_fkey;
ALTER TABLE credit_ledger DROP CONSTRAINT credit_ledger_account_id_fkey;
