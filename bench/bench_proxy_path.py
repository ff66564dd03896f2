"""Issue 12, target 1: one tool call through a session's proxy endpoint against what the wire alone costs.

The path: an MCP client with keep-alive -> the session's loopback Streamable HTTP endpoint -> tunnel -> ``/acp``
-> the test suite's scripted extension, which answers at once. The baseline, per sample: one HTTP round trip to
a bare Starlette endpoint on uvicorn plus one WebSocket request/response to a bare ``websockets`` echo server,
driven by the same client libraries (``httpx2``, which the mcp SDK uses, and ``websockets``, the extension's
stand-in's). Target: the path's p50 <= 1.5x and p99 <= 2x the baseline's.

Measured side by side, in alternating rounds, all in one process (the servers as the clients, so each path pays
for both ends alike):

- ``baseline``: the HTTP round trip + the WebSocket round trip above;
- ``proxy``: the same ``httpx2`` POSTs to the proxy (the pod as shipped, audit log on): what the gateway adds;
- ``proxy, audit off``: the same with ``audit_log=False``: what the audit record costs a call;
- ``proxy, mcp client``: the official ``mcp`` client (``Client.call_tool``) on the shipped pod: what an agent
  built on the SDK sees, the SDK's own work included;
- ``proxy, click``: ``browser_click`` with distinct arguments each call: a step of the action journal (its
  ``running`` record, the panel told, the step's own task) on top of the audit record;
- ``proxy, read``: ``browser_snapshot``, a catalogue tool that only reads: the same path less the journal;
- ``bare relay``: the path's shape with nothing of ours (``bench.baselines.bare_relay_app``): the same POST sent on
  as one frame to a ``websockets`` "extension" that answers it with the tool's result (serialized then), that frame
  the HTTP body. No ids, no sessions, no audit: the least any gateway of this shape on uvicorn does, so what the pod
  and its scripted extension add is the proxy's figure over this one.

Run: ``python bench/bench_proxy_path.py [--quick] [--out DIR]``.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx2
import orjson
import websockets
from fake_extension import connect_extension, text_result
from gateway_harness import run_gateway
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from bench.baselines import McpPoster, bare_http, bare_ws, relay_extension, relay_ws_url
from bench.common import arguments, interleaved, plot_latencies, ratio, summary, timed, write_result
from openab_browser.core.acp.schema import MARKS_RUNNING_META
from openab_browser.core.event_loop import loop_factory, run
from openab_browser.core.mcp.access import HttpEndpoint

NAME = "proxy_path"
TOOL = "browser_small"
CLICK = "browser_click"  # the catalogue's: a journalled step
READ = "browser_snapshot"  # the catalogue's: read-only, never journalled
# A tools/call as an agent sends it, on the bare WebSocket: the frame the extension's stand-in reads.
_WS_FRAME = ('{"jsonrpc":"2.0","id":1,"method":"mcp/message","params":{"connectionId":"c","method":"tools/call",'
             '"params":{"name":"browser_small","arguments":{}}}}')
RELAY = "bare relay"


@contextlib.asynccontextmanager
async def proxy_endpoint(**settings: Any) -> AsyncIterator[HttpEndpoint]:
    """A pod with ``settings``, a scripted extension's session in it, and that session's proxy endpoint."""

    async def small(_arguments: dict[str, Any]) -> dict[str, Any]:
        return text_result("ok")

    async with run_gateway(**settings) as gw, connect_extension(gw.ws_url, gw.token) as ext:
        for name in (TOOL, CLICK, READ):
            ext.add_tool(name, small)
        await ext.initialize()
        # As the panel opens it: it marks a journalled step running from the step's call (lib/acp.js).
        session_id = await ext.new_session([{"type": "acp", "name": "browser", "serverId": "b"}],
                                           _meta={MARKS_RUNNING_META: True})
        await gw.pod.tunnels.wait_attached(session_id, timeout=10)
        session = gw.pod.sessions.get(session_id)
        assert session is not None and gw.pod.browser is not None
        entry = (await gw.pod.browser.open(session)).entry
        assert isinstance(entry, HttpEndpoint)
        yield entry


async def measure(rounds: int, calls: int, warm: int) -> dict[str, Any]:
    async with contextlib.AsyncExitStack() as stack:
        http_url = await stack.enter_async_context(bare_http())
        ws_url = await stack.enter_async_context(bare_ws())
        bare_poster = await stack.enter_async_context(McpPoster(http_url))
        # permessage-deflate offered, as the extension's stand-in (and Chrome) offers it.
        ws = await stack.enter_async_context(websockets.connect(ws_url))
        relay_url = await stack.enter_async_context(bare_http(relay=True))
        answer = {"jsonrpc": "2.0", "id": 1, "result": text_result("ok")}
        await stack.enter_async_context(relay_extension(relay_ws_url(relay_url), lambda: orjson.dumps(answer).decode()))
        relay = await stack.enter_async_context(McpPoster(relay_url))
        shipped = await stack.enter_async_context(proxy_endpoint())
        quiet = await stack.enter_async_context(proxy_endpoint(audit_log=False))
        proxy = await stack.enter_async_context(McpPoster(shipped.url, shipped.token))
        proxy_quiet = await stack.enter_async_context(McpPoster(quiet.url, quiet.token))
        await proxy.initialize()
        await proxy_quiet.initialize()
        sdk_http = await stack.enter_async_context(
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {shipped.token}"}, timeout=30))
        sdk = await stack.enter_async_context(
            Client(streamable_http_client(shipped.url, http_client=sdk_http), mode="legacy"))

        async def baseline() -> None:
            await bare_poster.call_tool(TOOL)
            await ws.send(_WS_FRAME)
            await ws.recv()

        refs = itertools.count()

        async def click() -> None:  # distinct arguments: each call is a step of its own, never a journal's answer
            await proxy.call_tool(CLICK, {"ref": f"e{next(refs)}"})

        paths: dict[str, Callable[[], Awaitable[object]]] = {
            "baseline": baseline,
            "proxy": lambda: proxy.call_tool(TOOL),
            "proxy, audit off": lambda: proxy_quiet.call_tool(TOOL),
            "proxy, mcp client": lambda: sdk.call_tool(TOOL, {}),
            "proxy, click": click,
            "proxy, read": lambda: proxy.call_tool(READ),
            RELAY: lambda: relay.call_tool(TOOL),
        }
        for one in paths.values():  # warm: connections, caches, the first-call imports
            for _ in range(warm):
                await one()
        samples = await interleaved(rounds, {name: timed(calls, one) for name, one in paths.items()})
    stats = {name: summary(values) for name, values in samples.items()}
    base = stats["baseline"]
    ratios = {name: ratio(stats[name], base) for name in paths if name != "baseline"}
    return {
        "rounds": rounds,
        "calls_per_round": calls,
        "paths": stats,
        "ratio_to_baseline": ratios,
        "audit_cost": ratio(stats["proxy"], stats["proxy, audit off"]),
        "journal_cost": ratio(stats["proxy, click"], stats["proxy, read"]),
        # What the pod (and the scripted extension) add over a gateway that does nothing but relay.
        "ratio_to_bare_relay": {name: ratio(stats[name], stats[RELAY]) for name in paths
                                if name.startswith("proxy")},
        "target": {"p50_max": 1.5, "p99_max": 2.0,
                   "met": ratios["proxy"]["p50"] <= 1.5 and ratios["proxy"]["p99"] <= 2.0},
        "_samples": samples,
    }


def _options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--event-loop", choices=["auto", "uvloop", "asyncio"], default="auto",
                        help="the loop the pod, the wire and the clients all run on (default: the pod's own, auto)")


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = arguments(__doc__.splitlines()[0], argv, _options)
    rounds, calls, warm = (2, 10, 5) if args.quick else (30, 100, 100)
    loop_name, _ = loop_factory(args.event_loop)
    result = {"event_loop": loop_name, **run(measure(rounds, calls, warm), args.event_loop)}
    samples = result.pop("_samples")
    write_result(NAME, result, args.out)
    plot_latencies(NAME, samples, args.out, title="one tool call: proxy path vs HTTP + WebSocket round trips")
    return result


if __name__ == "__main__":
    main()
