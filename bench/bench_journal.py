"""Issue 25: what the action journal costs a state-changing call, against the same pod with no journal, same run.

The path: the session's proxy endpoint (``httpx2`` POSTs with keep-alive, as bench_proxy_path.py) -> tunnel ->
``/acp`` -> the test suite's scripted extension, whose ``browser_click`` answers at once, so what is timed is the
pod's own work. Each call has arguments of its own (a counter), so every call is a new step that runs: a re-issue
answered from the journal would be cheaper, not dearer. Both pods keep the audit log as shipped; the journal adds
a ``running`` record, the step's bookkeeping and the panel's notifications.

- ``no journal``: the pod as before issue 25 (its proxy's MCP servers made with no journal);
- ``journal``: the pod as shipped, the browser answering at once;
- ``journal, decision told``: the same, the browser telling the guard's decision before it answers, as the real
  extension does on every journalled step (``_openab/step``, issue 34): the pod's second ``running`` record.

Target (the issue): the journal's cost per call (the p50s' difference) under 5% of a click's p50 in the real
browser (docs/benchmarks.md, issue 16's click a turn apart: 25.7 ms, the fastest click figure there; 5% is 1.29 ms).

Run: ``python bench/bench_journal.py [--quick] [--out DIR]``.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fake_extension import connect_extension, text_result
from gateway_harness import run_gateway

from bench.baselines import McpPoster
from bench.common import arguments, interleaved, plot_latencies, summary, timed, write_result
from openab_browser.core.acp.server import STEP_METHOD
from openab_browser.core.mcp.access import HttpEndpoint
from openab_browser.core.mcp.proxy import BrowserProxy
from openab_browser.core.mcp_vocabulary import META_ACTION

NAME = "journal"
TOOL = "browser_click"
CLICK_P50_MS = 25.7  # docs/benchmarks.md: a click by ref, a turn apart, in Chromium through the pod (issue 16)
TARGET_SHARE = 0.05


@contextlib.asynccontextmanager
async def click_endpoint(*, journal: bool, tell: bool = False) -> AsyncIterator[HttpEndpoint]:
    """A pod, a scripted extension's session in it with a click that answers at once (with ``tell``, after telling
    the pod the guard's decision, as the real extension does), and its proxy endpoint."""
    told = {"session": ""}

    async def click(_arguments: dict[str, Any]) -> dict[str, Any]:
        if tell:
            inner = ext.server_requests[-1]["params"]["params"]
            await ext.notify(STEP_METHOD, {"sessionId": told["session"], "action": inner["_meta"][META_ACTION],
                                           "guard": "allowed", "rule": "routine"})
        return text_result("clicked")

    async with run_gateway() as gw, connect_extension(gw.ws_url, gw.token) as ext:
        ext.add_tool(TOOL, click)
        await ext.initialize()
        session_id = told["session"] = await ext.new_session([{"type": "acp", "name": "browser", "serverId": "b"}])
        await gw.pod.tunnels.wait_attached(session_id, timeout=10)
        session = gw.pod.sessions.get(session_id)
        proxy = gw.pod.browser
        assert session is not None and isinstance(proxy, BrowserProxy)
        if not journal:
            proxy.journal = None  # read when the session's endpoint is made, just below
        entry = (await proxy.open(session)).entry
        assert isinstance(entry, HttpEndpoint)
        yield entry


async def measure(rounds: int, calls: int, warm: int) -> dict[str, Any]:
    counter = itertools.count()
    async with contextlib.AsyncExitStack() as stack:
        plain = await stack.enter_async_context(click_endpoint(journal=False))
        shipped = await stack.enter_async_context(click_endpoint(journal=True))
        telling = await stack.enter_async_context(click_endpoint(journal=True, tell=True))
        without = await stack.enter_async_context(McpPoster(plain.url, plain.token))
        with_journal = await stack.enter_async_context(McpPoster(shipped.url, shipped.token))
        with_told = await stack.enter_async_context(McpPoster(telling.url, telling.token))
        for poster in (without, with_journal, with_told):
            await poster.initialize()
        paths: dict[str, Callable[[], Awaitable[object]]] = {
            "no journal": lambda: without.call_tool(TOOL, {"n": next(counter)}),
            "journal": lambda: with_journal.call_tool(TOOL, {"n": next(counter)}),
            "journal, decision told": lambda: with_told.call_tool(TOOL, {"n": next(counter)}),
        }
        for one in paths.values():
            for _ in range(warm):
                result = await one()
                assert "clicked" in str(result), result
        samples = await interleaved(rounds, {name: timed(calls, one) for name, one in paths.items()})
    stats = {name: summary(values) for name, values in samples.items()}
    cost_ms = round(stats["journal"]["p50_ms"] - stats["no journal"]["p50_ms"], 4)
    share = round(cost_ms / CLICK_P50_MS, 4)
    return {
        "rounds": rounds,
        "calls_per_round": calls,
        "paths": stats,
        "journal_cost_p50_ms": cost_ms,
        "journal_cost_ratio": round(stats["journal"]["p50_ms"] / stats["no journal"]["p50_ms"], 3),
        "decision_told_cost_p50_ms": round(stats["journal, decision told"]["p50_ms"] - stats["journal"]["p50_ms"], 4),
        "click_p50_ms": CLICK_P50_MS,
        "share_of_click_p50": share,
        "target": {"share_max": TARGET_SHARE, "met": share < TARGET_SHARE},
        "_samples": samples,
    }


def main(argv: Sequence[str] | None = None) -> Path:
    args = arguments(__doc__.splitlines()[0], argv)
    rounds, calls, warm = (2, 10, 5) if args.quick else (30, 100, 100)
    result = asyncio.run(measure(rounds, calls, warm))
    samples = result.pop("_samples")
    result["quick"] = bool(args.quick)
    path = write_result(NAME, result, args.out)
    plot_latencies(NAME, samples, args.out, title="one state-changing call: with and without the action journal")
    return path


if __name__ == "__main__":
    main()
