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
from websockets.asyncio.server import ServerConnection

from bench.baselines import BareHttpProcess, McpPoster, answer_each, bare_ws, relay_extension
from bench.common import arguments, interleaved, plot_latencies, ratio, summary, write_result
from bench.pod_process import PodProcess

NAME = "large"
PAYLOAD_BYTES = 6 << 20
TOOL = "browser_take_screenshot"
MiB = 1 << 20
BASELINE = "raw WebSocket"
PATH = "proxy path"
WHOLE = "parsed whole"
ENDS = "raw WebSocket, endpoints' JSON"
RELAY = "bare relay"


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


def screenshot_answer(payload: str) -> Callable[[], str]:
    """A screenshot's answer, serialized each time it is sent (orjson), as the scripted extension serializes its
    answers."""
    return lambda: orjson.dumps({"jsonrpc": "2.0", "id": 1, "result": screenshot_result(payload)}).decode()


@contextlib.asynccontextmanager
async def serializing_ws(payload: str) -> AsyncIterator[str]:
    """A bare ``websockets`` server answering each frame with a screenshot (:func:`screenshot_answer`): with a
    client that parses the answer, the endpoints' own JSON work around one raw transfer, which the path has too and
    no hop of openab can take away."""

    async def handler(connection: ServerConnection) -> None:
        await answer_each(connection, screenshot_answer(payload))

    async with websockets.serve(handler, "127.0.0.1", 0, max_size=None, compression=None) as server:
        yield f"ws://127.0.0.1:{next(iter(server.sockets)).getsockname()[1]}/"


async def measure(rounds: int, calls: int) -> dict[str, Any]:
    # Base64 of 4.5 MiB of noise: what a full-page JPEG screenshot weighs, and as incompressible.
    payload = base64.b64encode(random.Random(12).randbytes(PAYLOAD_BYTES // 4 * 3)).decode()
    # The bare server answers with the frame the extension sends for a screenshot: the same bytes on the wire.
    frame = json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"connectionId": "c", "message": {
        "jsonrpc": "2.0", "id": 1, "result": screenshot_result(payload)}}})
    growth: dict[str | None, list[int]] = {None: [], "deflate": [], WHOLE: []}

    async def screenshot(_arguments: dict[str, Any]) -> dict[str, Any]:
        return screenshot_result(payload)

    async with contextlib.AsyncExitStack() as stack:
        pod = await stack.enter_async_context(PodProcess())
        # The same gateway parsing every frame whole, as it did before answers' images were passed through.
        before = await stack.enter_async_context(PodProcess(parse_whole=True))
        pods = {None: pod, "deflate": pod, WHOLE: before}
        clients: dict[str | None, McpPoster] = {}
        for kind, serving in pods.items():
            compression = "deflate" if kind == "deflate" else None
            ext = await stack.enter_async_context(extension(serving.ws_url, serving.token, compression))
            ext.add_tool(TOOL, screenshot)
            await ext.initialize()
            session_id = await ext.new_session([{"type": "acp", "name": "browser", "serverId": "b"}])
            endpoint = await serving.ask({"endpoint": session_id})
            clients[kind] = await stack.enter_async_context(McpPoster(endpoint["url"], endpoint["token"]))
            await clients[kind].initialize()
        ws_url = await stack.enter_async_context(bare_ws(frame))
        raw = {compression: await stack.enter_async_context(
            websockets.connect(ws_url, max_size=None, compression=compression)) for compression in (None, "deflate")}
        json_url = await stack.enter_async_context(serializing_ws(payload))
        relay = await stack.enter_async_context(BareHttpProcess(relay=True))
        await stack.enter_async_context(relay_extension(relay.ws_url, screenshot_answer(payload)))
        relay_client = await stack.enter_async_context(McpPoster(relay.url))
        with_json = await stack.enter_async_context(websockets.connect(json_url, max_size=None, compression=None))

        def through_proxy(kind: str | None) -> Callable[[], Awaitable[list[float]]]:
            serving = pods[kind]

            async def run() -> list[float]:
                times = []
                for _ in range(calls):
                    serving.reset_peak()
                    rss = serving.status("VmRSS")
                    start = time.perf_counter()
                    result = await clients[kind].call_tool(TOOL)
                    times.append(time.perf_counter() - start)
                    # Never below 0: the kernel updates a process's RSS counters in batches (up to 64 pages a
                    # thread), so a call that grew nothing can read a few hundred KiB "below" where it started.
                    growth[kind].append(max(0, serving.status("VmHWM") - rss))
                    assert len(result["content"][0]["data"]) == PAYLOAD_BYTES
                return times

            return run

        async def timed(call: Callable[[], Awaitable[int]], size: int) -> list[float]:
            """``calls`` calls of ``call``, each timed alone; it returns the size of what it received."""
            times = []
            for _ in range(calls):
                start = time.perf_counter()
                received = await call()
                times.append(time.perf_counter() - start)
                assert received == size
            return times

        def raw_websocket(compression: str | None) -> Callable[[], Awaitable[list[float]]]:
            async def call() -> int:
                await raw[compression].send("{}")
                return len(await raw[compression].recv())

            return lambda: timed(call, len(frame))

        async def with_endpoints_json() -> int:
            await with_json.send("{}")
            return len(orjson.loads(await with_json.recv())["result"]["content"][0]["data"])

        async def through_bare_relay() -> int:
            return len((await relay_client.call_tool(TOOL))["content"][0]["data"])

        paths: dict[str, Callable[[], Awaitable[list[float]]]] = {
            ENDS: lambda: timed(with_endpoints_json, PAYLOAD_BYTES),
            RELAY: lambda: timed(through_bare_relay, PAYLOAD_BYTES),
            BASELINE: raw_websocket(None), PATH: through_proxy(None), PATH + ", " + WHOLE: through_proxy(WHOLE),
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
    peaks = {"none" if kind is None else kind: {
        "median_mib": round(statistics.median(kept) / MiB, 2), "max_mib": round(max(kept) / MiB, 2),
        "max_x_payload": round(max(kept) / PAYLOAD_BYTES, 2)} for kind, kept in growth.items()}
    peak = peaks["none"]
    return {
        "payload_bytes": PAYLOAD_BYTES,
        "rounds": rounds,
        "calls_per_round": calls,
        "paths": stats,
        "ratio_to_baseline": times,
        "ratio_to_baseline_deflate": ratio(stats[PATH + ", deflate"], stats[BASELINE + ", deflate"]),
        "ratio_to_baseline_parsed_whole": ratio(stats[PATH + ", " + WHOLE], stats[BASELINE]),
        "ratio_to_raw_with_endpoints_json": ratio(stats[PATH], stats[ENDS]),
        "ratio_to_bare_relay": ratio(stats[PATH], stats[RELAY]),
        "bare_relay_to_baseline": ratio(stats[RELAY], stats[BASELINE]),
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
