"""One tool call through a session's proxy endpoint, as an agent makes it: the official `mcp` client with
keep-alive -> the loopback Streamable HTTP endpoint -> tunnel -> `/acp` -> a scripted extension that answers at
once. Prints a Markdown table for docs/benchmarks.md.

Run: ``python bench/bench_proxy_call.py`` (from the repository, with the venv active).
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import httpx2
from fake_extension import connect_extension, text_result
from gateway_harness import run_gateway
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from openab.core.mcp.access import HttpEndpoint

CALLS = 300


async def main() -> None:
    async def small(_arguments: dict[str, Any]) -> dict[str, Any]:
        return text_result("ok")

    async with run_gateway() as gw, connect_extension(gw.ws_url, gw.token) as ext:
        ext.add_tool("browser_small", small)
        await ext.initialize()
        session_id = await ext.new_session([{"type": "acp", "name": "browser", "serverId": "b"}])
        await gw.pod.tunnels.wait_attached(session_id, timeout=10)
        session = gw.pod.sessions.get(session_id)
        assert session is not None and gw.pod.browser is not None
        entry = (await gw.pod.browser.open(session)).entry
        assert isinstance(entry, HttpEndpoint)
        headers = {"Authorization": f"Bearer {entry.token}"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=30) as http,
            Client(streamable_http_client(entry.url, http_client=http), mode="legacy") as client,
        ):
            for _ in range(30):  # warm: connection, caches
                await client.call_tool("browser_small", {})
            latencies = []
            for _ in range(CALLS):
                start = time.perf_counter()
                await client.call_tool("browser_small", {})
                latencies.append(time.perf_counter() - start)
    latencies.sort()
    print("| measure | result |\n|---|---|")
    print(f"| tool call through the proxy (official `mcp` client), p50 | {statistics.median(latencies) * 1e3:.2f} ms |")
    print(f"| tool call through the proxy, p99 | {latencies[int(len(latencies) * 0.99)] * 1e3:.2f} ms |")


if __name__ == "__main__":
    asyncio.run(main())
