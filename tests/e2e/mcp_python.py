"""The official MCP Python SDK against a running gateway.

    python tests/e2e/mcp_python.py --url http://HOST:PORT/mcp --maildir DIR --email E [--mode auto|legacy]

Connects without a key (lists tools, reads the catalog, is refused a protected tool with 401),
onboards through the two onboarding tools (the code read from the SMTP sink's maildir), then with
the new key submits an intent, polls it to a terminal status, and is refused a different key in
arguments. Prints one JSON summary line; exits non-zero on the first broken expectation.
"""

import argparse
import asyncio
import json
import mailbox
import re
import sys
import time

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

EXPECTED_TOOLS = {
    "getActionsCatalog", "getProviderActions", "getAgentActions", "executeIntent", "agentRun", "getIntentStatus",
    "buildTx", "walletExecute", "getCreditsBalance", "delegationCreate", "delegationActivate", "delegationStatus",
    "delegationInspect", "delegationBalance", "delegationRedeem", "delegationRevoke", "delegationPersonhoodBegin",
    "delegationPersonhoodComplete", "delegationPersonhoodDepositBegin", "delegationPersonhoodDepositComplete",
    "getVenueReadiness", "startEmailOnboarding", "completeEmailOnboarding",
}


def check(condition, what):
    if not condition:
        print(json.dumps({"ok": False, "failed": what}), flush=True)
        sys.exit(1)


def client(url, key, mode):
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    http = httpx2.AsyncClient(headers=headers, timeout=30)
    return Client(streamable_http_client(url, http_client=http), mode=mode)


def read_code(maildir, email, deadline=10.0):
    end = time.time() + deadline
    while time.time() < end:
        for message in mailbox.Maildir(maildir, create=False):
            if email in (message.get("To") or ""):
                body = message.get_payload(decode=True) or b""
                found = re.search(rb"sign-in code is (\d{6})", body)
                if found:
                    return found.group(1).decode()
        time.sleep(0.05)
    check(False, f"no code mailed to {email}")


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--maildir", required=True)
    parser.add_argument("--email", required=True)
    parser.add_argument("--mode", default="auto")
    args = parser.parse_args()
    summary = {"mode": args.mode}

    async with client(args.url, None, args.mode) as anonymous:
        tools = (await anonymous.list_tools()).tools
        names = {t.name for t in tools}
        check(EXPECTED_TOOLS <= names, f"missing tools: {sorted(EXPECTED_TOOLS - names)}")
        check(all(t.input_schema.get("type") == "object" for t in tools), "every tool has an object input schema")
        check(all(t.description for t in tools), "every tool has a description")
        check(all(t.output_schema and t.output_schema.get("type") == "object" for t in tools), "every tool has an output schema")
        summary["tools"] = len(tools)

        catalog = await anonymous.call_tool("getActionsCatalog", {})
        check(not catalog.is_error, "the catalog needs no key")
        check(catalog.structured_content["source"] == "action_catalog", "catalog document as structured content")
        check(json.loads(catalog.content[0].text)["source"] == "action_catalog", "and as JSON text")

        try:
            await anonymous.call_tool("getCreditsBalance", {})
            check(False, "a protected tool answered without a key")
        except Exception as e:  # the SDK surfaces the HTTP 401
            text = f"{type(e).__name__}: {e}"
            check("401" in text or "Unauthorized" in text or "Authentication required" in text, f"not a 401: {text}")
            summary["unauthenticated"] = text[:160]

    async with client(args.url, None, args.mode) as anonymous:
        started = await anonymous.call_tool("startEmailOnboarding", {"email": args.email})
        check(not started.is_error, f"start onboarding: {started.structured_content}")
        code = read_code(args.maildir, args.email)
        refused = await anonymous.call_tool(
            "completeEmailOnboarding", {"email": args.email, "code": code, "acceptTerms": False})
        check(refused.is_error and refused.structured_content["code"] == "TERMS_NOT_ACCEPTED", "terms must be accepted")
        done = await anonymous.call_tool(
            "completeEmailOnboarding", {"email": args.email, "code": code, "acceptTerms": True})
        check(not done.is_error, f"complete onboarding: {done.structured_content}")
        key = done.structured_content["data"]["bootstrap"]["agentApiKey"]
        check(key.startswith("agent-"), "an agent key")

    async with client(args.url, key, args.mode) as agent:
        submitted = await agent.call_tool(
            "executeIntent", {"action": "get_fx_supported_assets", "params": {}, "idempotencyKey": "mcp-py-1"})
        check(not submitted.is_error, f"executeIntent: {submitted.structured_content}")
        check(submitted.structured_content["status"] == "queued", "submit answers queued")
        intent_id = submitted.structured_content["intentId"]
        status = None
        for _ in range(200):
            status = await agent.call_tool("getIntentStatus", {"intentId": intent_id})
            check(not status.is_error, f"getIntentStatus: {status.structured_content}")
            if status.structured_content["status"] in ("completed", "failed"):
                break
            await asyncio.sleep(0.05)
        check(status.structured_content["status"] == "completed", f"intent ended: {status.structured_content}")
        check(status.structured_content["results"][0]["success"] is True, "the read succeeded")
        summary["intent"] = status.structured_content["status"]

        mismatch = await agent.call_tool(
            "executeIntent", {"action": "get-fx-supported-assets", "params": {}, "agentApiKey": "agent-someone-else"})
        check(mismatch.is_error, "a different key in arguments is refused")
        check(mismatch.structured_content["code"] == "AGENT_IDENTITY_MISMATCH", f"code: {mismatch.structured_content}")
        summary["mismatch"] = mismatch.structured_content["code"]

        # Parity: the same request gives the same decision, code and data on REST and MCP.
        base = args.url.rsplit("/mcp", 1)[0]
        async with httpx2.AsyncClient(base_url=base, timeout=30) as rest:
            h = {"x-agent-api-key": key}
            pairs = [
                ("getAgentActions", {}, await rest.get("/api/v1/agent/actions", params={"agentApiKey": key})),
                ("getCreditsBalance", {}, await rest.get("/api/v1/agent/credits/balance", headers=h)),
                ("getIntentStatus", {"intentId": intent_id},
                 await rest.get("/api/v1/agent/execute-intent/status", params={"intentId": intent_id}, headers=h)),
                ("executeIntent", {"action": "swap", "params": {}},
                 await rest.post("/api/v1/agent/execute-intent", json={"agentApiKey": key, "action": "swap", "params": {}})),
                ("executeIntent", {"action": "launch-rocket", "params": {}},
                 await rest.post("/api/v1/agent/execute-intent",
                                 json={"agentApiKey": key, "action": "launch-rocket", "params": {}})),
                ("executeIntent", {"action": "get-earn-provider", "params": {}},
                 await rest.post("/api/v1/agent/execute-intent",
                                 json={"agentApiKey": key, "action": "get-earn-provider", "params": {}})),
                ("delegationStatus", {"chainId": 8453},
                 await rest.get("/api/v1/agent/delegation/check", params={"chainId": 8453}, headers=h)),
                ("delegationInspect", {"delegationHash": "0x" + "ab" * 32},
                 await rest.get("/api/v1/agent/delegation/inspect", params={"delegationHash": "0x" + "ab" * 32}, headers=h)),
                ("delegationCreate", {"delegator": "0x" + "11" * 20, "action": "launch-rocket"},
                 await rest.post("/api/v1/agent/delegation/create", headers=h,
                                 json={"delegator": "0x" + "11" * 20, "action": "launch-rocket"})),
            ]
            for name, arguments, response in pairs:
                result = await agent.call_tool(name, arguments)
                check(result.structured_content == response.json(),
                      f"parity of {name} {arguments}: MCP {result.structured_content} vs REST {response.json()}")
                check(bool(result.is_error) == (response.status_code >= 400), f"parity of the refusal flag of {name}")
            summary["parity"] = len(pairs)
            # Venue readiness: the same answer but for the instant it was read.
            for venue in ("uniswap-v2", "no-such-venue"):
                result = await agent.call_tool("getVenueReadiness", {"venue": venue, "lane": "execute"})
                response = await rest.get("/api/v1/agent/venues/readiness", headers=h,
                                          params={"venue": venue, "lane": "execute"})
                ours, theirs = result.structured_content, response.json()
                for body in (ours, theirs):
                    (body.get("data") or {}).pop("checkedAt", None)
                check(ours == theirs, f"parity of getVenueReadiness {venue}: MCP {ours} vs REST {theirs}")
                check(bool(result.is_error) == (response.status_code >= 400), "parity of the refusal flag")
            summary["venue"] = theirs.get("code")


        balance = await agent.call_tool("getCreditsBalance", {})
        check(not balance.is_error and balance.structured_content["data"]["freeRequestsUsedToday"] == 1, "one free read")

    summary["ok"] = True
    print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
