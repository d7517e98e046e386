//! MCP sessions kept in the database (not a domain port: only the MCP surface uses them).

use actiongate_core::store::{McpSessionStore, StoreError};
use async_trait::async_trait;
use sqlx::sqlite::SqliteConnection;

use crate::error::{closed, err};
use crate::{Backend, SqlStore};

#[async_trait]
impl McpSessionStore for SqlStore {
    async fn put_mcp_session(&self, id: &str, state: &str, now: i64) -> Result<(), StoreError> {
        on_writer!(self, pool => sqlx::query(
            "INSERT INTO mcp_sessions (id, state, created_at) VALUES ($1, $2, $3)
             ON CONFLICT (id) DO UPDATE SET state = excluded.state",
        )
        .bind(id)
        .bind(state)
        .bind(now)
        .execute(pool)
        .await
        .map(|_| ())
        .map_err(err))
    }

    async fn get_mcp_session(&self, id: &str) -> Result<Option<String>, StoreError> {
        on_pool!(self, pool => sqlx::query_scalar("SELECT state FROM mcp_sessions WHERE id = $1")
            .bind(id)
            .fetch_optional(pool)
            .await
            .map_err(err))
    }

    async fn delete_mcp_session(&self, id: &str) -> Result<(), StoreError> {
        on_writer!(self, pool => sqlx::query("DELETE FROM mcp_sessions WHERE id = $1")
            .bind(id)
            .execute(pool)
            .await
            .map(|_| ())
            .map_err(err))
    }

    async fn set_mcp_session_owner(&self, id: &str, owner: &str) -> Result<(), StoreError> {
        on_writer!(self, pool => sqlx::query("UPDATE mcp_sessions SET owner = $2 WHERE id = $1")
            .bind(id)
            .bind(owner)
            .execute(pool)
            .await
            .map(|_| ())
            .map_err(err))
    }

    async fn mcp_session_owner(&self, id: &str) -> Result<Option<Option<String>>, StoreError> {
        on_pool!(self, pool => sqlx::query_scalar("SELECT owner FROM mcp_sessions WHERE id = $1")
            .bind(id)
            .fetch_optional(pool)
            .await
            .map_err(err))
    }

    async fn prune_mcp_sessions(&self, before: i64) -> Result<u64, StoreError> {
        on_writer!(self, pool => sqlx::query("DELETE FROM mcp_sessions WHERE created_at < $1")
            .bind(before)
            .execute(pool)
            .await
            .map(|r| r.rows_affected())
            .map_err(err))
    }
}
