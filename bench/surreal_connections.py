#!/usr/bin/env python3
"""How much one client gets out of a SurrealDB server over 1 WebSocket
connection against several (`storage.surrealdb.connections`).

A SurrealDB 3.3 server runs all of one connection's requests in one task, so
the same number of queries in flight goes through one server core over one
connection and through all of them over several. This drives the server with
a fixed number of queries in flight, spread over N connections, and reports
queries a second and the latency of each.

    python3 bench/surreal_connections.py ws://127.0.0.1:8000 --connections 1 4 --in-flight 16 --seconds 20

Each query is what a busy agent turn sends: a row written (a 1 KB body,
indexed by agent and time) and the agent's latest five rows read back.
Needs `websockets` (pip) and a server started with `--user root --pass root`.
"""

import argparse
import asyncio
import itertools
import json
import random
import statistics
import time

import websockets

WRITE_AND_READ = """
CREATE note CONTENT { agent: $agent, at: time::now(), body: $body };
SELECT id, at FROM note WHERE agent = $agent ORDER BY at DESC LIMIT 5;
"""


class Connection:
    """One WebSocket RPC connection; requests answered by id, in any order."""

    def __init__(self, ws):
        self.ws = ws
        self.ids = itertools.count(1)
        self.waiting = {}
        self.reader = asyncio.create_task(self.read())

    @classmethod
    async def open(cls, url, database):
        ws = await websockets.connect(f"{url}/rpc", subprotocols=["json"], max_size=None, ping_interval=None)
        conn = cls(ws)
        await conn.call("signin", [{"user": "root", "pass": "root"}])
        await conn.call("use", ["bench", database])
        return conn

    async def read(self):
        async for message in self.ws:
            answer = json.loads(message)
            future = self.waiting.pop(answer.get("id"), None)
            if future is not None:
                future.set_result(answer)

    async def call(self, method, params):
        request_id = next(self.ids)
        future = asyncio.get_running_loop().create_future()
        self.waiting[request_id] = future
        await self.ws.send(json.dumps({"id": request_id, "method": method, "params": params}))
        answer = await future
        if "error" in answer:
            raise RuntimeError(answer["error"])
        return answer["result"]


async def run(url, connections, in_flight, seconds):
    database = f"c{connections}_{random.randrange(1 << 30)}"
    conns = [await Connection.open(url, database) for _ in range(connections)]
    await conns[0].call("query", ["DEFINE INDEX note_agent_at ON note FIELDS agent, at;"])
    body = "x" * 1024
    latencies = []
    deadline = time.monotonic() + seconds

    async def worker(n):
        conn = conns[n % connections]
        while time.monotonic() < deadline:
            started = time.monotonic()
            await conn.call("query", [WRITE_AND_READ, {"agent": f"agent-{n % 8}", "body": body}])
            latencies.append(time.monotonic() - started)

    await asyncio.gather(*(worker(n) for n in range(in_flight)))
    for conn in conns:
        await conn.ws.close()
    latencies.sort()
    return {
        "connections": connections,
        "in_flight": in_flight,
        "queries_per_s": len(latencies) / seconds,
        "p50_ms": 1000 * statistics.median(latencies),
        "p99_ms": 1000 * latencies[int(0.99 * (len(latencies) - 1))],
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url", help="ws://host:port of the server")
    parser.add_argument("--connections", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--in-flight", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=20)
    args = parser.parse_args()
    print("| connections | queries in flight | queries a second | p50 ms | p99 ms |")
    print("| ---: | ---: | ---: | ---: | ---: |")
    for connections in args.connections:
        result = asyncio.run(run(args.url, connections, args.in_flight, args.seconds))
        print(
            f"| {result['connections']} | {result['in_flight']} | {result['queries_per_s']:.1f} "
            f"| {result['p50_ms']:.1f} | {result['p99_ms']:.1f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
