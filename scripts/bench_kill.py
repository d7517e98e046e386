"""Kill -9 under load: no acknowledged intent is lost.

Drives POST /api/v1/agent/execute-intent with CONNECTIONS concurrent clients (httpx, from the
venv scripts/test installs), sends SIGKILL to the gateway after SECONDS, then asks a restarted
gateway (same database) for every intent it had acknowledged (a 200 with an intentId) and counts
the ones it no longer knows. Prints one JSON line.

    python scripts/bench_kill.py BASE_URL AGENT_KEY SERVER_PID SECONDS CONNECTIONS RESTARTED_URL_FILE

The caller restarts the gateway after the kill and writes its base URL to RESTARTED_URL_FILE.
"""
import asyncio
import json
import os
import signal
import sys
import time

import httpx


async def main() -> None:
    base, key, pid, seconds, connections, url_file = sys.argv[1:7]
    seconds, connections = float(seconds), int(connections)
    acknowledged: list[str] = []
    failed = 0
    stop = asyncio.Event()

    async def client(n: int, http: httpx.AsyncClient) -> None:
        nonlocal failed
        i = 0
        while not stop.is_set():
            i += 1
            body = {"agentApiKey": key, "action": "get-fx-supported-assets", "params": {}, "idempotencyKey": f"kill-{n}-{i}"}
            try:
                r = await http.post(f"{base}/api/v1/agent/execute-intent", json=body)
            except httpx.HTTPError:
                failed += 1
                continue
            if r.status_code == 200 and r.json().get("intentId"):
                acknowledged.append(r.json()["intentId"])
            else:
                failed += 1

    async with httpx.AsyncClient(timeout=5.0, limits=httpx.Limits(max_connections=connections)) as http:
        tasks = [asyncio.create_task(client(n, http)) for n in range(connections)]
        await asyncio.sleep(seconds)
        os.kill(int(pid), signal.SIGKILL)
        killed_at = len(acknowledged)
        await asyncio.sleep(0.5)
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)

    # The caller restarts the gateway on the same database and writes its URL.
    deadline = time.time() + 60
    while time.time() < deadline and not (os.path.exists(url_file) and open(url_file).read().strip()):
        await asyncio.sleep(0.1)
    restarted = open(url_file).read().strip()
    lost = []
    async with httpx.AsyncClient(timeout=10.0) as http:
        sem = asyncio.Semaphore(16)

        async def check(intent_id: str) -> None:
            async with sem:
                r = await http.get(
                    f"{restarted}/api/v1/agent/execute-intent/status",
                    params={"intentId": intent_id},
                    headers={"x-agent-api-key": key},
                )
                if r.status_code != 200:
                    lost.append(intent_id)

        await asyncio.gather(*(check(i) for i in acknowledged))
    print(json.dumps({"acknowledged": len(acknowledged), "beforeKill": killed_at, "refusedOrCut": failed, "lost": len(lost)}))


asyncio.run(main())
