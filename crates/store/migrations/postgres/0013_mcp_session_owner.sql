-- The bearer that opened an MCP session (a keyed hash; NULL: opened without one): only that bearer
-- may resume its stream (GET) or end it (DELETE).
ALTER TABLE mcp_sessions ADD COLUMN owner TEXT;
