-- Code checks per e-mail address across codes (CONTRACT "Rate limits and abuse": 20 per 24 hours):
-- kept apart from the challenge, so a new code does not reset it.
CREATE TABLE email_check_budget (
    email        TEXT PRIMARY KEY,
    window_start BIGINT NOT NULL,
    checks       INTEGER NOT NULL
);
