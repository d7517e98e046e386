-- A write whose venue goes on elsewhere (a bridge's fill on its destination) keeps its leg's state:
-- open while the gateway follows it, then done, failed or untracked, ended once (issue 27:
-- bridge.completed). The open ones are found through a partial index.
ALTER TABLE intent_executions ADD COLUMN leg TEXT;
CREATE INDEX intent_executions_open_legs ON intent_executions (finished_at) WHERE leg = 'open';
