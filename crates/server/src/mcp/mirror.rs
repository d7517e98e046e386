//! A plain-HTTP mirror of the MCP tools for runtimes without an MCP client: `GET /mcp/tools` and
//! `POST /mcp/tool/{name}` (the arguments as the body, the same bearer auth, the same result).

use actiongate_api_types::catalog::{McpToolInfo, McpToolList};
use actiongate_api_types::{Envelope, ErrorBody, ErrorCode};
use actiongate_core::Error;
use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value};

use rmcp::model::Tool;

use super::tools::{Auth, TOOLS, auth_of};
use crate::http::AppState;
use crate::http::error::ApiError;
use crate::http::extract::{ApiBytes, bearer};

// Served from bytes made once at start (GatewayMcp::new), gzip when accepted, with an ETag.
/// Every MCP tool with its schemas and whether it needs an agent key.
#[utoipa::path(
    get,
    path = "/mcp/tools",
    tag = "mcp",
    responses(
        (status = 200, description = "Every tool (gzip when accepted; ETag for revalidation)", body = Envelope<McpToolList>),
        (status = 304, description = "Not modified since the ETag in If-None-Match"),
    )
)]
pub async fn list_tools(State(state): State<AppState>, headers: HeaderMap) -> Response {
    state.mcp.mirror_tools().get(&headers)
}

/// The mirror's listing of `tools`.
pub(super) fn listing(tools: &[Tool]) -> McpToolList {
    McpToolList {
        tools: tools
            .iter()
            .map(|t| McpToolInfo {
                requires_auth: auth_of(&t.name) != Auth::Open,
                name: t.name.to_string(),
                description: t.description.as_deref().unwrap_or_default().to_owned(),
                input_schema: Value::Object((*t.input_schema).clone()),
                output_schema: t
                    .output_schema
                    .as_ref()
                    .map(|o| Value::Object((**o).clone())),
            })
            .collect(),
    }
}

/// Calls one MCP tool. Answers the MCP tool result (`content`, `structuredContent`, `isError`); a
/// refusal carries the HTTP status of its code.
#[utoipa::path(
    post,
    path = "/mcp/tool/{name}",
    tag = "mcp",
    params(("name" = String, Path, description = "A tool name from GET /mcp/tools")),
    request_body(content = Object, description = "The tool's arguments; may be empty"),
    responses(
        (status = 200, description = "The MCP tool result (getActionsCatalog's gzip when accepted)", body = Object),
        (status = 401, description = "UNAUTHORIZED: a protected tool without a valid agent key", body = ErrorBody),
        (status = 404, description = "NOT_FOUND: no such tool", body = ErrorBody),
    )
)]
pub async fn call_tool(
    State(state): State<AppState>,
    Path(name): Path<String>,
    headers: HeaderMap,
    ApiBytes(body): ApiBytes,
) -> Result<Response, ApiError> {
    let spec = TOOLS
        .iter()
        .find(|t| t.tool.name() == name)
        .ok_or_else(|| {
            ApiError::new(
                ErrorCode::NotFound,
                format!("No MCP tool named {name:?}; see GET /mcp/tools."),
            )
        })?;
    let key = bearer(&headers).map(str::to_owned);
    match spec.auth {
        Auth::Owner => state
            .gateway
            .identity()
            .recognize_owner(key.as_deref())
            .await
            .map(drop)?,
        // The tool authenticates again, and that call spends the key's rate.
        Auth::Agent => state
            .gateway
            .identity()
            .recognize_agent(key.as_deref())
            .await
            .map(drop)?,
        Auth::Open => {}
    }
    let args: Map<String, Value> = if body.iter().all(u8::is_ascii_whitespace) {
        Map::new()
    } else {
        serde_json::from_slice(&body).map_err(|e| {
            Error::invalid(format!(
                "The body must be a JSON object of tool arguments: {e}"
            ))
        })?
    };
    if let Some(body) = state.mcp.mirror_constant(spec.tool) {
        super::count_constant(spec.tool);
        return Ok(body.post(&headers));
    }
    let result = state.mcp.call(spec, args, key).await;
    let status = match (result.is_error, &result.structured_content) {
        (Some(true), Some(body)) => body
            .get("code")
            .cloned()
            .and_then(|c| serde_json::from_value::<ErrorCode>(c).ok())
            .and_then(|c| StatusCode::from_u16(c.http_status()).ok())
            .unwrap_or(StatusCode::BAD_REQUEST),
        _ => StatusCode::OK,
    };
    Ok((status, Json(result)).into_response())
}
