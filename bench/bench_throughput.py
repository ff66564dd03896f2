"""Issue 12, target 3: tool calls per second with 1, 8, 64 and 256 sessions calling at once.

Three processes, as in a pod: the gateway (``bench/pod_process.py``), the scripted extensions (one WebSocket and
one session each, answering at once), and this one, the agents: per session one ``httpx2`` client on its own
keep-alive socket to that session's own endpoint, calling ``browser_small`` in a loop. The baseline, in
alternating rounds: the same clients, as many, each on its own socket, against a bare Starlette endpoint on
uvicorn in a process of its own (``bench/baselines.py``). Target: at 64 sessions >= 3,000 calls/s and >= 0.5x
the baseline.

With ``--before DIR`` (a checkout of the tree before a change, ``git worktree add DIR REV``) a second gateway
runs DIR's code, with extensions and clients of its own, as a third path in the same alternating rounds; each
round's rates give the ratios (this tree over the baseline, DIR's over the baseline, this tree over DIR's), as
min / median / max over the rounds. ``--after DIR`` runs another checkout's gateway in place of this one (two
clean checkouts: nothing uncommitted in this one measured). ``--sessions`` picks the counts, ``--rounds`` and
``--seconds`` the rounds.

Run: ``python bench/bench_throughput.py [--quick] [--out DIR] [--before DIR] [--after DIR] [--sessions 64 ...]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.baselines import BareHttpProcess, McpPoster
from bench.common import arguments, interleaved, plot_latencies, summary, write_result
from bench.pod_process import ExtensionsProcess, PodProcess

NAME = "throughput"
TOOL = "browser_small"
SESSIONS = (1, 8, 64, 256)
# Sockets the pod's front door takes from one address (all of ours are 127.0.0.1): above the most we open.
_POD: dict[str, Any] = {"max_connections": 4096, "max_connections_per_peer": 4096}


def cpu_seconds(pid: int) -> float:
    """User + system CPU a process has used: unlike rates, hardly moved by what else the machine runs."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class Tally:
    """One path's rounds: their rates, their calls' latencies, and the CPU each process spent on them."""

    processes: dict[str, int]  # name -> pid
    rates: list[float] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)
    calls: int = 0
    cpu: dict[str, float] = field(default_factory=dict)

    def cpu_us_per_call(self) -> dict[str, float]:
        return {name: round(seconds / max(self.calls, 1) * 1e6, 1) for name, seconds in self.cpu.items()}


async def drive(clients: Sequence[McpPoster], seconds: float, tally: Tally) -> None:
    """Every client calls in a loop for ``seconds``; the round's rate, latencies and CPU go to ``tally``."""
    latencies = tally.latencies
    done = 0
    stop = time.perf_counter() + seconds

    async def loop(client: McpPoster) -> None:
        nonlocal done
        while (start := time.perf_counter()) < stop:
            await client.call_tool(TOOL)
            latencies.append(time.perf_counter() - start)
            done += 1

    processes = {**tally.processes, "clients (this process)": os.getpid()}
    cpu_before = {name: cpu_seconds(pid) for name, pid in processes.items()}
    start = time.perf_counter()
    await asyncio.gather(*(loop(client) for client in clients))
    tally.rates.append(done / (time.perf_counter() - start))
    tally.calls += done
    for name, pid in processes.items():
        tally.cpu[name] = tally.cpu.get(name, 0.0) + cpu_seconds(pid) - cpu_before[name]


def one_round(clients: Sequence[McpPoster], seconds: float, tally: Tally) -> Callable[[], Awaitable[list[float]]]:
    """A round for :func:`interleaved`, kept in ``tally``."""

    async def run() -> list[float]:
        await drive(clients, seconds, tally)
        return []

    return run


async def _pod_clients(stack: contextlib.AsyncExitStack, count: int, tree: Path | None,
                       ) -> tuple[PodProcess, ExtensionsProcess, list[McpPoster]]:
    """A gateway (``tree``'s, or this one's), ``count`` scripted extensions on it and an agent's client per
    session."""
    pod = await stack.enter_async_context(PodProcess(**_POD) if tree is None else PodProcess(tree=tree, **_POD))
    extensions = await stack.enter_async_context(ExtensionsProcess(pod.ws_url, pod.token, count))
    clients: list[McpPoster] = []
    for session_id in extensions.session_ids:
        endpoint = await pod.ask({"endpoint": session_id})
        client = await stack.enter_async_context(McpPoster(endpoint["url"], endpoint["token"]))
        await client.initialize()
        clients.append(client)
    return pod, extensions, clients


def _spread(values: Sequence[float]) -> dict[str, float]:
    return {"min": round(min(values), 3), "median": round(statistics.median(values), 3),
            "max": round(max(values), 3)}


async def measure(sessions: Sequence[int], rounds: int, seconds: float, before: Path | None = None,
                  after: Path | None = None, uvloop_baseline: bool = False) -> dict[str, Any]:
    results: dict[str, Any] = {}
    plotted: dict[str, list[float]] = {}
    async with contextlib.AsyncExitStack() as stack:
        gateways = {"proxy": await _pod_clients(stack, max(sessions), after)}
        if before is not None:
            gateways["before"] = await _pod_clients(stack, max(sessions), before)
        bare = await stack.enter_async_context(BareHttpProcess())
        direct = [await stack.enter_async_context(McpPoster(bare.url)) for _ in range(max(sessions))]
        bare_uv = await stack.enter_async_context(BareHttpProcess(uvloop=True)) if uvloop_baseline else None
        direct_uv = [await stack.enter_async_context(McpPoster(bare_uv.url)) for _ in range(max(sessions))
                     ] if bare_uv is not None else []
        for client in (*(c for _, _, clients in gateways.values() for c in clients), *direct, *direct_uv):
            await client.call_tool(TOOL)  # warm: every socket open, every session's first call made
        for count in sessions:
            tallies = {name: Tally({"gateway": pod.pid, "extensions": extensions.pid})
                       for name, (pod, extensions, _) in gateways.items()}
            tallies["baseline"] = Tally({"bare uvicorn": bare.pid})
            paths = {name: one_round(clients[:count], seconds, tallies[name])
                     for name, (_, _, clients) in gateways.items()}
            paths["baseline"] = one_round(direct[:count], seconds, tallies["baseline"])
            if bare_uv is not None:
                tallies["baseline on uvloop"] = Tally({"bare uvicorn": bare_uv.pid})
                paths["baseline on uvloop"] = one_round(direct_uv[:count], seconds, tallies["baseline on uvloop"])
            await interleaved(rounds, paths)
            proxy, baseline = max(tallies["proxy"].rates), max(tallies["baseline"].rates)
            cpu = {name: tally.cpu_us_per_call() for name, tally in tallies.items()}
            results[str(count)] = {
                "proxy_calls_per_s": round(proxy),
                "baseline_calls_per_s": round(baseline),
                "ratio": round(proxy / baseline, 3),
                "rounds_calls_per_s": {name: [round(rate) for rate in tally.rates] for name, tally in tallies.items()},
                "latency": {name: summary(tally.latencies) for name, tally in tallies.items()},
                # What a call costs each process in CPU: the server side's is the rate two free cores would allow.
                "cpu_us_per_call": cpu,
                "server_cpu_ratio": round(cpu["proxy"]["gateway"] / max(cpu["baseline"]["bare uvicorn"], 0.1), 2),
            }
            pairs = [("proxy", "baseline")]
            if before is not None:
                pairs += [("before", "baseline"), ("proxy", "before")]
            if bare_uv is not None:
                pairs += [("proxy", "baseline on uvloop"), *([("before", "baseline on uvloop")] if before else [])]
                results[str(count)]["server_cpu_ratio_uvloop_baseline"] = round(
                    cpu["proxy"]["gateway"] / max(cpu["baseline on uvloop"]["bare uvicorn"], 0.1), 2)
            rates = {name: tally.rates for name, tally in tallies.items()}  # each round against the same round's
            results[str(count)]["round_ratios"] = {
                f"{top} / {bottom}": _spread([a / b for a, b in zip(rates[top], rates[bottom], strict=True)])
                for top, bottom in pairs
            }
            if before is not None:
                results[str(count)]["gateway_cpu_us_per_call_before"] = cpu["before"]["gateway"]
            for name, tally in tallies.items():
                plotted[f"{name}, {count} sessions"] = tally.latencies
    at_64 = results.get("64")
    return {
        "rounds": rounds,
        "seconds_per_round": seconds,
        "before": None if before is None else str(before),
        "after": None if after is None else str(after),
        "sessions": results,
        "target": {"at_64_sessions_min_calls_per_s": 3000, "at_64_sessions_min_ratio": 0.5,
                   "met": None if at_64 is None else at_64["proxy_calls_per_s"] >= 3000 and at_64["ratio"] >= 0.5},
        "_samples": plotted,
    }


def _options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--before", type=Path, help="a checkout of the tree before a change, run as a third path")
    parser.add_argument("--after", type=Path, help="a checkout whose gateway runs in place of this one's")
    parser.add_argument("--sessions", type=int, nargs="+", help=f"session counts (default {list(SESSIONS)})")
    parser.add_argument("--rounds", type=int, help="alternating rounds per count (default 4)")
    parser.add_argument("--seconds", type=float, help="seconds per round (default 3)")
    parser.add_argument("--uvloop-baseline", action="store_true",
                        help="also bare uvicorn on uvloop (uvicorn.run's pick where installed), a path of its own")


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = arguments(__doc__.splitlines()[0], argv, _options)
    sessions, rounds, seconds = ((1, 8), 2, 0.3) if args.quick else (SESSIONS, 4, 3.0)
    sessions = args.sessions or sessions
    rounds, seconds = args.rounds or rounds, args.seconds or seconds
    result = asyncio.run(measure(sessions, rounds, seconds, args.before, args.after, args.uvloop_baseline))
    samples = result.pop("_samples")
    write_result(NAME, result, args.out)
    plot_latencies(NAME, samples, args.out, title="call latency under load: proxy sessions vs bare uvicorn")
    return result


if __name__ == "__main__":
    main()
