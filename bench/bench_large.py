"""Issue 12, target 5: a 6 MiB image through the whole proxy path against a raw 6 MiB WebSocket transfer.

The path: an MCP client (``httpx2``, keep-alive) -> the session's loopback endpoint -> tunnel -> ``/acp`` -> the
test suite's scripted extension, whose screenshot tool answers with a 6 MiB base64 image. The gateway runs in a
process of its own (``bench/pod_process.py``) so its memory is its own: before each call its peak RSS
(``VmHWM``) is reset to the present RSS, and the growth is the peak after the call minus the RSS before it.
The baseline, in alternating rounds: one WebSocket request answered with the same 6 MiB frame by a bare
``websockets`` server. Target: the path <= 1.5x the baseline's time, the gateway's peak growth <= 3x the payload.

Run: ``python bench/bench_large.py [--quick] [--out DIR]``.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import random
import statistics
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import orjson
import websockets
from fake_extension import FakeExtension, connect_extension

from bench.baselines import McpPoster, bare_ws
from bench.common import arguments, interleaved, plot_latencies, ratio, summary, write_result
from bench.pod_process import PodProcess

NAME = "large"
PAYLOAD_BYTES = 6 << 20
TOOL = "browser_take_screenshot"
MiB = 1 << 20
BASELINE = "raw WebSocket"
PATH = "proxy path"


def screenshot_result(payload: str) -> dict[str, Any]:
    return {"content": [{"type": "image", "data": payload, "mimeType": "image/jpeg"}]}


@contextlib.asynccontextmanager
async def extension(url: str, token: str, compression: str | None) -> AsyncIterator[FakeExtension]:
    """The test suite's scripted extension, with ``compression`` as its WebSocket offers it (Chrome offers
    permessage-deflate, which the gateway accepts), and writing its frames with orjson: Chrome's
    ``JSON.stringify`` writes 6 MiB in milliseconds, Python's own json takes tens of them."""
    async with connect_extension(url, token, compression=compression) as fake:

        async def send(message: dict[str, Any] | str) -> None:
            await fake.ws.send(message if isinstance(message, str) else orjson.dumps(message).decode())

        fake.send = send  # type: ignore[method-assign]
        yield fake


async def measure(rounds: int, calls: int) -> dict[str, Any]:
    # Base64 of 4.5 MiB of noise: what a full-page JPEG screenshot weighs, and as incompressible.
    payload = base64.b64encode(random.Random(12).randbytes(PAYLOAD_BYTES // 4 * 3)).decode()
    # The bare server answers with the frame the extension sends for a screenshot: the same bytes on the wire.
    frame = json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"connectionId": "c", "message": {
        "jsonrpc": "2.0", "id": 1, "result": screenshot_result(payload)}}})
    growth: dict[str | None, list[int]] = {None: [], "deflate": []}

    async def screenshot(_arguments: dict[str, Any]) -> dict[str, Any]:
        return screenshot_result(payload)

    async with contextlib.AsyncExitStack() as stack:
        pod = await stack.enter_async_context(PodProcess())
        clients: dict[str | None, McpPoster] = {}
        for compression in (None, "deflate"):
            ext = await stack.enter_async_context(extension(pod.ws_url, pod.token, compression))
            ext.add_tool(TOOL, screenshot)
            await ext.initialize()
            session_id = await ext.new_session([{"type": "acp", "name": "browser", "serverId": "b"}])
            endpoint = await pod.ask({"endpoint": session_id})
            clients[compression] = await stack.enter_async_context(McpPoster(endpoint["url"], endpoint["token"]))
            await clients[compression].initialize()
        ws_url = await stack.enter_async_context(bare_ws(frame))
        raw = {compression: await stack.enter_async_context(
            websockets.connect(ws_url, max_size=None, compression=compression)) for compression in (None, "deflate")}

        def through_proxy(compression: str | None) -> Callable[[], Awaitable[list[float]]]:
            async def run() -> list[float]:
                times = []
                for _ in range(calls):
                    pod.reset_peak()
                    before = pod.status("VmRSS")
                    start = time.perf_counter()
                    result = await clients[compression].call_tool(TOOL)
                    times.append(time.perf_counter() - start)
                    growth[compression].append(pod.status("VmHWM") - before)
                    assert len(result["content"][0]["data"]) == PAYLOAD_BYTES
                return times

            return run

        def raw_websocket(compression: str | None) -> Callable[[], Awaitable[list[float]]]:
            async def run() -> list[float]:
                times = []
                for _ in range(calls):
                    start = time.perf_counter()
                    await raw[compression].send("{}")
                    received = await raw[compression].recv()
                    times.append(time.perf_counter() - start)
                    assert len(received) == len(frame)
                return times

            return run

        paths: dict[str, Callable[[], Awaitable[list[float]]]] = {
            BASELINE: raw_websocket(None), PATH: through_proxy(None),
            BASELINE + ", deflate": raw_websocket("deflate"), PATH + ", deflate": through_proxy("deflate"),
        }
        for run in paths.values():  # warm: buffers, the allocator's arenas
            await run()
        for kept in growth.values():
            kept.clear()
        samples = await interleaved(rounds, paths)
        rss_after = pod.status("VmRSS")
    stats = {name: summary(values) for name, values in samples.items()}
    times = ratio(stats[PATH], stats[BASELINE])
    peaks = {"none" if compression is None else compression: {
        "median_mib": round(statistics.median(kept) / MiB, 2), "max_mib": round(max(kept) / MiB, 2),
        "max_x_payload": round(max(kept) / PAYLOAD_BYTES, 2)} for compression, kept in growth.items()}
    peak = peaks["none"]
    return {
        "payload_bytes": PAYLOAD_BYTES,
        "rounds": rounds,
        "calls_per_round": calls,
        "paths": stats,
        "ratio_to_baseline": times,
        "ratio_to_baseline_deflate": ratio(stats[PATH + ", deflate"], stats[BASELINE + ", deflate"]),
        "gateway_peak_growth_per_call": peaks,
        "gateway_rss_after_mib": round(rss_after / MiB, 1),
        "target": {"time_max": 1.5, "peak_growth_max_x_payload": 3.0,
                   "met": times["p50"] <= 1.5 and peak["max_x_payload"] <= 3.0},
        "_samples": samples,
    }


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = arguments(__doc__.splitlines()[0], argv)
    rounds, calls = (2, 2) if args.quick else (20, 3)
    result = asyncio.run(measure(rounds, calls))
    samples = result.pop("_samples")
    write_result(NAME, result, args.out)
    plot_latencies(NAME, samples, args.out, title="a 6 MiB result: proxy path vs one raw WebSocket transfer")
    return result


if __name__ == "__main__":
    main()
