"""Kill -9 under load: no acknowledged intent is lost.

Drives POST /api/v1/agent/execute-intent with CONNECTIONS concurrent keep-alive clients (plain
HTTP/1.1 on asyncio streams, standard library only), sends SIGKILL to the gateway after SECONDS, then asks a restarted
gateway (same database) for every intent it had acknowledged (a 200 with an intentId) and counts
the ones it no longer knows. Prints one JSON line.

    python scripts/bench_kill.py BASE_URL AGENT_KEY SERVER_PID SECONDS CONNECTIONS RESTARTED_URL_FILE ACTION

The caller restarts the gateway after the kill and writes its base URL to RESTARTED_URL_FILE.
"""
import asyncio
import json
import os
import signal
import sys
import time
from urllib.parse import urlsplit


class Conn:
    """One keep-alive HTTP/1.1 connection."""

    def __init__(self, base: str):
        u = urlsplit(base)
        self.host, self.port = u.hostname, u.port
        self.reader = self.writer = None

    async def request(self, method: str, path: str, body: bytes = b"", headers: dict | None = None):
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        head = f"{method} {path} HTTP/1.1\r\nhost: {self.host}:{self.port}\r\ncontent-length: {len(body)}\r\n"
        if body:
            head += "content-type: application/json\r\n"
        for k, v in (headers or {}).items():
            head += f"{k}: {v}\r\n"
        try:
            self.writer.write(head.encode() + b"\r\n" + body)
            await self.writer.drain()
            status_line = await self.reader.readuntil(b"\r\n")
            status = int(status_line.split()[1])
            length = 0
            while (line := await self.reader.readuntil(b"\r\n")) != b"\r\n":
                name, _, value = line.decode().partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value.strip())
            data = await self.reader.readexactly(length)
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError, IndexError):
            self.writer = None
            raise ConnectionError("cut off")
        return status, json.loads(data) if data else None


async def main() -> None:
    base, key, pid, seconds, connections, url_file, action = sys.argv[1:8]
    seconds, connections = float(seconds), int(connections)
    acknowledged: list[str] = []
    failed = 0
    stop = asyncio.Event()

    async def client(n: int) -> None:
        nonlocal failed
        conn, i = Conn(base), 0
        while not stop.is_set():
            i += 1
            body = {"agentApiKey": key, "action": action, "params": {}, "idempotencyKey": f"kill-{n}-{i}"}
            try:
                status, answer = await conn.request("POST", "/api/v1/agent/execute-intent", json.dumps(body).encode())
            except ConnectionError:
                failed += 1
                await asyncio.sleep(0.01)
                continue
            if status == 200 and answer and answer.get("intentId"):
                acknowledged.append(answer["intentId"])
            else:
                failed += 1

    tasks = [asyncio.create_task(client(n)) for n in range(connections)]
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

    async def check(ids: list[str]) -> None:
        conn = Conn(restarted)
        for intent_id in ids:
            status, _ = await conn.request("GET", f"/api/v1/agent/execute-intent/status?intentId={intent_id}", headers={"x-agent-api-key": key})
            if status != 200:
                lost.append(intent_id)

    await asyncio.gather(*(check(acknowledged[i::16]) for i in range(16)))
    print(json.dumps({"acknowledged": len(acknowledged), "beforeKill": killed_at, "refusedOrCut": failed, "lost": len(lost)}))


asyncio.run(main())
