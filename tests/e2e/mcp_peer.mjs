// The peer of `scripts/bench mcp`: the official MCP TypeScript SDK's server, stateful streamable HTTP
// with JSON responses, serving the gateway's own tool list and catalog document (read from files the
// bench takes from the running gateway), so that both servers answer the same bytes.
//
//   node tests/e2e/mcp_peer.mjs --tools tools.json --catalog catalog.json [--port 0]
//
// Prints `peer listening on http://127.0.0.1:PORT/mcp` once it listens. `tools/list` answers the
// tools of tools.json; `tools/call getActionsCatalog` answers the catalog as structured content and
// as JSON text, as the gateway does; any other tool is an error result.
import fs from "node:fs";
import http from "node:http";
import { randomUUID } from "node:crypto";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { CallToolRequestSchema, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const args = Object.fromEntries(
  process.argv.slice(2).reduce((pairs, v, i, all) => (i % 2 === 0 ? [...pairs, [v.replace(/^--/, ""), all[i + 1]]] : pairs), []),
);
const tools = JSON.parse(fs.readFileSync(args.tools, "utf8"));
const catalog = JSON.parse(fs.readFileSync(args.catalog, "utf8"));

function newServer() {
  const server = new Server({ name: "peer", version: "1.0.0" }, { capabilities: { tools: {} } });
  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools }));
  server.setRequestHandler(CallToolRequestSchema, async (request) => {
    if (request.params.name !== "getActionsCatalog") {
      return { isError: true, content: [{ type: "text", text: `no tool ${request.params.name}` }] };
    }
    return { content: [{ type: "text", text: JSON.stringify(catalog) }], structuredContent: catalog };
  });
  return server;
}

const transports = new Map();

async function body(req) {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  return chunks.length ? JSON.parse(Buffer.concat(chunks).toString("utf8")) : undefined;
}

const httpServer = http.createServer(async (req, res) => {
  try {
    const id = req.headers["mcp-session-id"];
    const message = req.method === "POST" ? await body(req) : undefined;
    let transport = id ? transports.get(id) : undefined;
    if (!transport) {
      if (id || message?.method !== "initialize") {
        res.writeHead(id ? 404 : 400).end();
        return;
      }
      transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        enableJsonResponse: true,
        onsessioninitialized: (sid) => transports.set(sid, transport),
      });
      transport.onclose = () => transport.sessionId && transports.delete(transport.sessionId);
      await newServer().connect(transport);
    }
    await transport.handleRequest(req, res, message);
  } catch (e) {
    if (!res.headersSent) res.writeHead(500).end(String(e));
  }
});
httpServer.keepAliveTimeout = 60000;
httpServer.listen(Number(args.port ?? 0), "127.0.0.1", () => {
  console.log(`peer listening on http://127.0.0.1:${httpServer.address().port}/mcp`);
});
