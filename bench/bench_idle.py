"""Issue 12, target 4: what idle extensions cost the gateway, in memory and in a busy neighbour's latency.

The gateway runs in a process of its own (``bench/pod_process.py``, its memory read from ``/proc``); the idle
extensions in another (each its own WebSocket and one attached session, agents started lazily: none runs);
the busy session's extension and its agent's client (``httpx2`` at the session's endpoint, ``browser_small``
answered at once) in this one. Stages: the busy session alone, then with 1,000 idle sessions attached, then
4,000 (a pod holds at most 4,096 sessions, so 10,000 cannot attach), then alone again after they left; RSS
after each stage, settled.

The busy session's latency is compared with a twin: a second gateway process, the same busy session on it and
never an idle one, driven in the same rounds, alternating (20 rounds a stage, the order reversed every other
round), so both see the same machine at the same moments. The stage without idle sessions is the control: its
ratio says how far apart two equal pods read on this machine. Target: <= 100 KiB of gateway RSS per idle
session, and the busy session's p99 with 1,000 of them <= 1.2x its twin's.

With ``--before DIR`` (a checkout of the tree before a change, ``git worktree add DIR REV``) it measures only
the memory: the gateway's RSS per idle session at 1,000 sessions (``--sessions``), for this tree, the one in
DIR and this tree without deflate, each in a fresh gateway process, in alternating order, ``--repeats`` times;
min / median / max of each, and of this tree's over DIR's. ``--after DIR`` measures another checkout in place of
this one (two clean checkouts: nothing uncommitted in this one measured).

Run: ``python bench/bench_idle.py [--quick] [--out DIR] [--before DIR [--after DIR] [--sessions N] [--repeats N]]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import resource
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fake_extension import connect_extension, text_result

from bench.baselines import McpPoster
from bench.common import arguments, interleaved, plot_latencies, ratio, summary, write_result
from bench.pod_process import ExtensionsProcess, PodProcess

NAME = "idle"
TOOL = "browser_small"
KiB = 1024
# Sockets the pod's front door takes from one address (all of ours are 127.0.0.1): above the most we open.
_POD: dict[str, Any] = {"max_connections": 20_000, "max_connections_per_peer": 20_000}


def stages_allowed(wanted: Sequence[int]) -> tuple[list[int], str | None]:
    """The stages this machine's open-file limit allows (two descriptors per session: each end, one per
    process, plus headroom), and why a larger one was left out."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:  # children inherit the raised limit
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        soft = hard
    allowed = [count for count in wanted if count + 512 <= soft]
    skipped = [count for count in wanted if count not in allowed]
    return allowed, (f"ulimit -n is {soft}: {skipped} idle sessions need more" if skipped else None)


async def settled_rss(pod: PodProcess) -> int:
    """The gateway's RSS once it has stopped moving (sockets' buffers freed, the last frames handled)."""
    last = pod.status("VmRSS")
    for _ in range(20):
        await asyncio.sleep(0.5)
        now = pod.status("VmRSS")
        if abs(now - last) < 64 * KiB:
            return now
        last = now
    return last


async def busy_calls(client: McpPoster, calls: int) -> list[float]:
    latencies = []
    for _ in range(calls):
        start = time.perf_counter()
        await client.call_tool(TOOL)
        latencies.append(time.perf_counter() - start)
    return latencies


async def busy_session(stack: contextlib.AsyncExitStack, pod: PodProcess) -> McpPoster:
    """One session on ``pod`` whose browser answers ``browser_small`` at once, and its agent's client, warmed."""
    async def small(_arguments: dict[str, Any]) -> dict[str, Any]:
        return text_result("ok")

    ext = await stack.enter_async_context(connect_extension(pod.ws_url, pod.token))
    ext.add_tool(TOOL, small)
    await ext.initialize()
    session_id = await ext.new_session([{"type": "acp", "name": "browser", "serverId": "b"}])
    endpoint = await pod.ask({"endpoint": session_id})
    client = await stack.enter_async_context(McpPoster(endpoint["url"], endpoint["token"]))
    await client.initialize()
    await busy_calls(client, 100)
    return client


async def beside_twin(busy: McpPoster, twin: McpPoster, calls: int, rounds: int) -> dict[str, list[float]]:
    """``calls`` on each, in alternating rounds."""
    per_round = max(2, calls // rounds)
    return await interleaved(rounds, {"busy": lambda: busy_calls(busy, per_round),
                                      "twin": lambda: busy_calls(twin, per_round)})


async def measure(stages: Sequence[int], calls: int, skipped: str | None, rounds: int = 20) -> dict[str, Any]:
    samples: dict[str, list[float]] = {}
    measured: dict[str, Any] = {}
    async with contextlib.AsyncExitStack() as stack:
        pod = await stack.enter_async_context(PodProcess(**_POD))
        twin_pod = await stack.enter_async_context(PodProcess(**_POD))
        busy = await busy_session(stack, pod)
        twin = await busy_session(stack, twin_pod)
        control = await beside_twin(busy, twin, calls, rounds)
        samples["alone"], samples["twin, alone stage"] = control["busy"], control["twin"]
        rss_alone = await settled_rss(pod)
        idle = 0
        async with contextlib.AsyncExitStack() as idle_stack:
            for count in stages:
                started = time.perf_counter()
                extensions = await idle_stack.enter_async_context(
                    ExtensionsProcess(pod.ws_url, pod.token, count - idle, batch=128))
                attach_seconds = time.perf_counter() - started
                idle = count
                sessions = (await pod.ask({"sessions": True}))["sessions"]
                assert sessions == idle + 1, f"{sessions} sessions in the pod, {idle + 1} expected"
                rss = await settled_rss(pod)
                stage = await beside_twin(busy, twin, calls, rounds)
                samples[f"with {count} idle"], samples[f"twin, {count} idle stage"] = stage["busy"], stage["twin"]
                measured[str(count)] = {
                    "gateway_rss_mib": round(rss / (1 << 20), 1),
                    "rss_per_idle_session_kib": round((rss - rss_alone) / count / KiB, 1),
                    "attach_seconds": round(attach_seconds, 1),
                    "extensions_process_pid": extensions.pid,
                    "busy": summary(stage["busy"]),
                    "twin": summary(stage["twin"]),
                    "busy_ratio_to_twin": ratio(summary(stage["busy"]), summary(stage["twin"])),
                }
        after = await beside_twin(busy, twin, calls, rounds)  # alone again: the drift of the run, both sides
        samples["alone"] += after["busy"]
        samples["twin, alone stage"] += after["twin"]
        rss_after = await settled_rss(pod)
    alone = summary(samples["alone"])
    control_ratio = ratio(alone, summary(samples["twin, alone stage"]))
    for stage in measured.values():
        stage["busy_ratio_to_alone"] = ratio(stage["busy"], alone)
    first = measured[str(stages[0])] if stages else None
    return {
        "busy_calls_per_stage": calls,
        "rounds_per_stage": rounds,
        "gateway_rss_alone_mib": round(rss_alone / (1 << 20), 1),
        "gateway_rss_after_idle_left_mib": round(rss_after / (1 << 20), 1),
        "busy_alone": alone,
        "control_ratio_to_twin": control_ratio,
        "idle": measured,
        "not_measured": skipped,
        "target": {"rss_per_idle_session_max_kib": 100, "busy_p99_max_ratio_to_twin": 1.2,
                   "met": None if first is None else first["rss_per_idle_session_kib"] <= 100
                   and first["busy_ratio_to_twin"]["p99"] <= 1.2},
        "_samples": samples,
    }


async def idle_memory(count: int, **pod: Any) -> float:
    """KiB of gateway RSS per idle session: a fresh gateway (``pod``: PodProcess's arguments), settled before
    and after ``count`` idle sessions attach."""
    async with PodProcess(**_POD, **pod) as gateway:
        before = await settled_rss(gateway)
        async with ExtensionsProcess(gateway.ws_url, gateway.token, count, batch=128):
            sessions = (await gateway.ask({"sessions": True}))["sessions"]
            assert sessions == count, f"{sessions} sessions in the pod, {count} expected"
            return (await settled_rss(gateway) - before) / count / KiB


def _spread(values: Sequence[float]) -> dict[str, float]:
    return {"min": round(min(values), 2), "median": round(statistics.median(values), 2),
            "max": round(max(values), 2)}


async def memory_before_after(before: Path, count: int, repeats: int, after: Path | None = None) -> dict[str, Any]:
    this: dict[str, Any] = {} if after is None else {"tree": after}
    arms: dict[str, dict[str, Any]] = {"this tree": this, "before": {"tree": before},
                                       "this tree, no deflate": {**this, "ws_deflate": False}}
    per_session: dict[str, list[float]] = {name: [] for name in arms}
    for repeat in range(repeats):
        order = list(arms) if repeat % 2 == 0 else list(reversed(arms))
        for name in order:
            per_session[name].append(await idle_memory(count, **arms[name]))
    ratios = [now / then for now, then in zip(per_session["this tree"], per_session["before"], strict=True)]
    return {
        "before": str(before),
        "after": None if after is None else str(after),
        "idle_sessions": count,
        "repeats": repeats,
        "rss_per_idle_session_kib": {name: _spread(values) for name, values in per_session.items()},
        "rounds_kib": {name: [round(value, 1) for value in values] for name, values in per_session.items()},
        "ratio_to_before": _spread(ratios),
    }


def _before_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--before", type=Path, help="a checkout of the tree before a change: memory only, both")
    parser.add_argument("--after", type=Path, help="with --before: a checkout measured in place of this one")
    parser.add_argument("--sessions", type=int, default=1_000, help="idle sessions with --before (default 1000)")
    parser.add_argument("--repeats", type=int, default=3, help="rounds of each tree with --before (default 3)")


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = arguments(__doc__.splitlines()[0], argv, _before_options)
    if args.before is not None:
        stages_allowed([args.sessions])  # raises the open-file limit for the children
        compared = asyncio.run(memory_before_after(args.before, args.sessions, args.repeats, args.after))
        write_result(NAME + "_before_after", compared, args.out)
        return compared
    wanted, calls = ((20,), 100) if args.quick else ((1_000, 4_000), 4_000)
    stages, skipped = stages_allowed(wanted)
    if not args.quick:
        # 10,000 cannot attach: a pod holds at most 4,096 sessions (SessionStore), and says so to the 4,097th.
        skipped = "; ".join(filter(None, [skipped, "10000 idle sessions: a pod holds at most 4096 sessions "
                                          "(SessionStore.max_sessions); the 4097th session/new is refused with "
                                          "-32000 'Too many sessions in this pod (max 4096)'"]))
    result = asyncio.run(measure(stages, calls, skipped, rounds=4 if args.quick else 20))
    samples = result.pop("_samples")
    write_result(NAME, result, args.out)
    plot_latencies(NAME, samples, args.out, title="a busy session's calls beside idle sessions, and its twin's")
    return result


if __name__ == "__main__":
    main()
