-- MCP sessions of the handshake era, so that any gateway process can serve a session another opened.
CREATE TABLE mcp_sessions (
    id          TEXT PRIMARY KEY,
    state       TEXT NOT NULL,
    created_at  INTEGER NOT NULL
);
