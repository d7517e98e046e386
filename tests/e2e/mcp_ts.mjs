// The official MCP TypeScript SDK (StreamableHTTPClientTransport) against a running gateway.
//
//   node tests/e2e/mcp_ts.mjs --url http://HOST:PORT/mcp --maildir DIR --email E
//
// The same journey as mcp_python.py: tools listed without a key, the catalog read without one, a
// protected tool refused with 401, onboarding through the two tools, an intent submitted and polled
// to its end, and a different key in arguments refused. Prints one JSON summary line; exits 1 on the
// first broken expectation.
import fs from "node:fs";
import path from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const args = Object.fromEntries(
  process.argv.slice(2).reduce((pairs, v, i, all) => (i % 2 === 0 ? [...pairs, [v.replace(/^--/, ""), all[i + 1]]] : pairs), []),
);

function check(condition, what) {
  if (!condition) {
    console.log(JSON.stringify({ ok: false, failed: what }));
    process.exit(1);
  }
}

async function connect(key) {
  const headers = key ? { Authorization: `Bearer ${key}` } : {};
  const transport = new StreamableHTTPClientTransport(new URL(args.url), { requestInit: { headers } });
  const client = new Client({ name: "actiongate-e2e", version: "1.0.0" });
  await client.connect(transport);
  return client;
}

async function readCode(email) {
  const deadline = Date.now() + 10000;
  while (Date.now() < deadline) {
    for (const sub of ["new", "cur"]) {
      const dir = path.join(args.maildir, sub);
      if (!fs.existsSync(dir)) continue;
      for (const file of fs.readdirSync(dir)) {
        const text = fs.readFileSync(path.join(dir, file), "utf8");
        const m = text.match(/sign-in code is (\d{6})/);
        if (m && text.includes(`To: ${email}`)) return m[1];
      }
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  check(false, `no code mailed to ${email}`);
}

const summary = { sdk: "typescript" };
const anonymous = await connect(null);
const { tools } = await anonymous.listTools();
check(tools.length >= 23, `23 tools, got ${tools.length}`);
check(tools.every((t) => t.inputSchema && t.inputSchema.type === "object"), "input schemas");
summary.tools = tools.length;

const catalog = await anonymous.callTool({ name: "getActionsCatalog", arguments: {} });
check(!catalog.isError && catalog.structuredContent.source === "action_catalog", "catalog without a key");

try {
  await anonymous.callTool({ name: "getCreditsBalance", arguments: {} });
  check(false, "a protected tool answered without a key");
} catch (e) {
  const text = `${e.name}: ${e.message} ${e.code ?? ""}`;
  check(/401|Authentication required|Unauthorized/.test(text), `not a 401: ${text}`);
  summary.unauthenticated = text.slice(0, 160);
}

const started = await anonymous.callTool({ name: "startEmailOnboarding", arguments: { email: args.email } });
check(!started.isError, `start onboarding: ${JSON.stringify(started.structuredContent)}`);
const code = await readCode(args.email);
const done = await anonymous.callTool({
  name: "completeEmailOnboarding",
  arguments: { email: args.email, code, acceptTerms: true },
});
check(!done.isError, `complete onboarding: ${JSON.stringify(done.structuredContent)}`);
const key = done.structuredContent.data.bootstrap.agentApiKey;
await anonymous.close();

const agent = await connect(key);
const submitted = await agent.callTool({
  name: "executeIntent",
  arguments: { action: "get-fx-supported-assets", params: {}, idempotencyKey: "mcp-ts-1" },
});
check(!submitted.isError && submitted.structuredContent.status === "queued", "executeIntent queued");
let status;
for (let i = 0; i < 200; i++) {
  status = await agent.callTool({ name: "getIntentStatus", arguments: { intentId: submitted.structuredContent.intentId } });
  if (["completed", "failed"].includes(status.structuredContent.status)) break;
  await new Promise((r) => setTimeout(r, 50));
}
check(status.structuredContent.status === "completed", `intent ended: ${JSON.stringify(status.structuredContent)}`);
summary.intent = status.structuredContent.status;

const mismatch = await agent.callTool({
  name: "executeIntent",
  arguments: { action: "get-fx-supported-assets", params: {}, agentApiKey: "agent-someone-else" },
});
check(mismatch.isError && mismatch.structuredContent.code === "AGENT_IDENTITY_MISMATCH", "identity mismatch");
summary.mismatch = mismatch.structuredContent.code;
await agent.close();

summary.ok = true;
console.log(JSON.stringify(summary));
