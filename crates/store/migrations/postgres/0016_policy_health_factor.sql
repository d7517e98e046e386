-- The lowest health factor a borrow or withdrawal may leave an agent's lending position at, in
-- ten-thousandths (issue 24); policies stored before it get the shipped default, 1.5.
ALTER TABLE agent_policies ADD COLUMN min_health_factor_bps BIGINT NOT NULL DEFAULT 15000;
