"""Issue 12, target 3: tool calls per second with 1, 8, 64 and 256 sessions calling at once.

Three processes, as in a pod: the gateway (``bench/pod_process.py``), the scripted extensions (one WebSocket and
one session each, answering at once), and this one, the agents: per session one ``httpx2`` client on its own
keep-alive socket to that session's own endpoint, calling ``browser_small`` in a loop. The baseline, in
alternating rounds: the same clients, as many, each on its own socket, against a bare Starlette endpoint on
uvicorn in a process of its own (``bench/baselines.py``). Target: at 64 sessions >= 3,000 calls/s and >= 0.5x
the baseline.

Run: ``python bench/bench_throughput.py [--quick] [--out DIR]``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
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
_POD = {"max_connections": 4096, "max_connections_per_peer": 4096}


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


async def measure(sessions: Sequence[int], rounds: int, seconds: float) -> dict[str, Any]:
    results: dict[str, Any] = {}
    plotted: dict[str, list[float]] = {}
    async with contextlib.AsyncExitStack() as stack:
        pod = await stack.enter_async_context(PodProcess(**_POD))
        bare = await stack.enter_async_context(BareHttpProcess())
        extensions = await stack.enter_async_context(ExtensionsProcess(pod.ws_url, pod.token, max(sessions)))
        proxied: list[McpPoster] = []
        for session_id in extensions.session_ids:
            endpoint = await pod.ask({"endpoint": session_id})
            client = await stack.enter_async_context(McpPoster(endpoint["url"], endpoint["token"]))
            await client.initialize()
            proxied.append(client)
        direct = [await stack.enter_async_context(McpPoster(bare.url)) for _ in range(max(sessions))]
        for client in (*proxied, *direct):  # warm: every socket open, every session's first call made
            await client.call_tool(TOOL)
        for count in sessions:
            tallies = {"proxy": Tally({"gateway": pod.pid, "extensions": extensions.pid}),
                       "baseline": Tally({"bare uvicorn": bare.pid})}
            await interleaved(rounds, {"proxy": one_round(proxied[:count], seconds, tallies["proxy"]),
                                       "baseline": one_round(direct[:count], seconds, tallies["baseline"])})
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
            plotted[f"proxy, {count} sessions"] = tallies["proxy"].latencies
            plotted[f"baseline, {count} clients"] = tallies["baseline"].latencies
    at_64 = results.get("64")
    return {
        "rounds": rounds,
        "seconds_per_round": seconds,
        "sessions": results,
        "target": {"at_64_sessions_min_calls_per_s": 3000, "at_64_sessions_min_ratio": 0.5,
                   "met": None if at_64 is None else at_64["proxy_calls_per_s"] >= 3000 and at_64["ratio"] >= 0.5},
        "_samples": plotted,
    }


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = arguments(__doc__.splitlines()[0], argv)
    sessions, rounds, seconds = ((1, 8), 2, 0.3) if args.quick else (SESSIONS, 4, 3.0)
    result = asyncio.run(measure(sessions, rounds, seconds))
    samples = result.pop("_samples")
    write_result(NAME, result, args.out)
    plot_latencies(NAME, samples, args.out, title="call latency under load: proxy sessions vs bare uvicorn")
    return result


if __name__ == "__main__":
    main()
