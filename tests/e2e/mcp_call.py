"""One MCP tool call through the official MCP Python SDK.

    ACTIONGATE_KEY=agent-… python tests/e2e/mcp_call.py --url http://HOST:PORT/mcp --tool NAME --args '{…}'

Connects with the key from ACTIONGATE_KEY as the bearer (never on the command line), calls the tool
and prints one JSON line: {"isError": bool, "structuredContent": …}.
"""

import argparse
import asyncio
import json
import os

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--tool", required=True)
    parser.add_argument("--args", default="{}")
    args = parser.parse_args()
    key = os.environ.get("ACTIONGATE_KEY", "")
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    http = httpx2.AsyncClient(headers=headers, timeout=60)
    async with Client(streamable_http_client(args.url, http_client=http)) as client:
        result = await client.call_tool(args.tool, json.loads(args.args))
        print(json.dumps({"isError": bool(result.is_error), "structuredContent": result.structured_content}), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
