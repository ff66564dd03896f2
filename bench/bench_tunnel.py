"""Speed and memory of the protocol engine and of one hop through the tunnel.

Run: ``python bench/bench_tunnel.py`` (from the repository, with the venv active). Prints a Markdown table for
docs/benchmarks.md. Everything runs on 127.0.0.1: a real gateway under uvicorn and the scripted extension from
the test suite on a real WebSocket.
"""

from __future__ import annotations

import asyncio
import gc
import json
import resource
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from fake_extension import connect_extension, text_result
from gateway_harness import run_gateway

from openab_browser.core.jsonrpc import Peer


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def bench_engine(messages: int = 200_000) -> dict[str, float]:
    """Messages per second the sans-I/O peer classifies and answers (no I/O at all)."""
    peer = Peer(max_open_requests=messages + 1)
    frames = [
        json.dumps({"jsonrpc": "2.0", "id": n, "method": "session/prompt", "params": {"sessionId": "s", "n": n}})
        for n in range(messages)
    ]
    start = time.perf_counter()
    for frame in frames:
        [request] = peer.receive(frame)
        peer.send_result(request.id, {"ok": True})  # type: ignore[union-attr]
    peer.data_to_send()
    elapsed = time.perf_counter() - start
    return {"messages_per_s": messages / elapsed}


async def bench_tunnel(calls: int = 1000, big_calls: int = 20) -> dict[str, float]:
    big = "A" * (6 << 20)  # a 6 MiB base64 screenshot, about 4.5 MB of JPEG

    async def small(arguments: dict[str, Any]) -> dict[str, Any]:
        return text_result("ok")

    async def screenshot(arguments: dict[str, Any]) -> dict[str, Any]:
        return {"content": [{"type": "image", "data": big, "mimeType": "image/jpeg"}]}

    async with run_gateway() as gw, connect_extension(gw.ws_url, gw.token) as ext:
        ext.add_tool("browser_small", small)
        ext.add_tool("browser_screenshot", screenshot)
        await ext.initialize()
        session_id = await ext.new_session([{"type": "acp", "name": "browser", "id": "bench"}])
        await gw.pod.tunnels.wait_attached(session_id, timeout=10)
        call = gw.pod.tunnels.call_tool
        for _ in range(50):  # warm up
            await call(session_id, "browser_small", {})
        latencies = []
        for _ in range(calls):
            start = time.perf_counter()
            await call(session_id, "browser_small", {})
            latencies.append(time.perf_counter() - start)
        start = time.perf_counter()
        await asyncio.gather(*(call(session_id, "browser_small", {}) for _ in range(calls)))
        concurrent = time.perf_counter() - start
        gc.collect()
        rss_before = peak_rss_mib()
        big_times = []
        for _ in range(big_calls):
            start = time.perf_counter()
            result = await call(session_id, "browser_screenshot", {})
            big_times.append(time.perf_counter() - start)
            # The pod relays a long base64 string as the JSON it came in (an orjson.Fragment), not as a str.
            assert len(orjson.dumps(result["content"][0]["data"])) == len(big) + 2
        rss_after = peak_rss_mib()
    latencies.sort()
    return {
        "p50_ms": statistics.median(latencies) * 1000,
        "p99_ms": latencies[int(len(latencies) * 0.99)] * 1000,
        "concurrent_calls_per_s": calls / concurrent,
        "screenshot_6mib_ms": statistics.median(big_times) * 1000,
        "screenshot_mib_per_s": 6 / statistics.median(big_times),
        "peak_rss_growth_mib": rss_after - rss_before,
        "peak_rss_mib": rss_after,
    }


def main() -> None:
    # The tunnel runs first: peak RSS is a high-water mark, and the engine run builds 200k frames in memory.
    tunnel = asyncio.run(bench_tunnel())
    engine = bench_engine()
    rows = [
        ("JSON-RPC peer, classify + answer (no I/O)", f"{engine['messages_per_s']:,.0f} messages/s"),
        ("tool call through the tunnel, sequential, p50", f"{tunnel['p50_ms']:.2f} ms"),
        ("tool call through the tunnel, sequential, p99", f"{tunnel['p99_ms']:.2f} ms"),
        ("tool calls through the tunnel, 1000 concurrent", f"{tunnel['concurrent_calls_per_s']:,.0f} calls/s"),
        ("6 MiB screenshot result through the tunnel, median", f"{tunnel['screenshot_6mib_ms']:.0f} ms"),
        ("  as throughput", f"{tunnel['screenshot_mib_per_s']:.0f} MiB/s"),
        ("peak RSS growth over 20 screenshot results", f"{tunnel['peak_rss_growth_mib']:.0f} MiB"),
        ("peak RSS of gateway + extension after them (one process)", f"{tunnel['peak_rss_mib']:.0f} MiB"),
    ]
    print("| measure | result |\n|---|---|")
    for name, value in rows:
        print(f"| {name} | {value} |")


if __name__ == "__main__":
    main()
