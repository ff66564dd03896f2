"""What every benchmark shares: the machine it ran on, rounds interleaved with a baseline, percentiles, the
JSON it writes and the plot of its latency distributions.

These machines are shared and noisy, so no figure stands alone: each path is measured beside its baseline in
the same run, in alternating rounds (A B, B A, A B ...) so drift and neighbours hit both alike, and the result
is the ratio. Every script takes ``--quick`` (the CI-sized run: seconds, no thresholds) and ``--out DIR``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import importlib.metadata
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "RESULTS",
    "Samples",
    "arguments",
    "interleaved",
    "machine",
    "plot_latencies",
    "ratio",
    "summary",
    "write_result",
]

RESULTS = Path(__file__).resolve().parent / "results"

# Seconds per sample, by the name of the path measured.
Samples = dict[str, list[float]]

_PACKAGES = ("openab", "uvicorn", "websockets", "httpx2", "httpx", "starlette", "orjson", "mcp", "mcp-proxy")


def arguments(
    description: str, argv: Sequence[str] | None = None,
    more: Callable[[argparse.ArgumentParser], None] | None = None,
) -> argparse.Namespace:
    """Every benchmark's ``--quick`` and ``--out``, and the options ``more`` adds."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--quick", action="store_true", help="the CI-sized run: seconds, no thresholds")
    parser.add_argument("--out", type=Path, default=RESULTS, help=f"where the JSON and PNG go (default {RESULTS})")
    if more is not None:
        more(parser)
    return parser.parse_args(argv)


def machine() -> dict[str, Any]:
    """The machine, the versions and the moment, written beside every figure."""
    model = ""
    with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as cpuinfo:
        for line in cpuinfo:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    versions: dict[str, str] = {}
    for package in _PACKAGES:
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            continue
    return {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "cpu": model or platform.processor(),
        "cores": os.cpu_count(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "python": platform.python_version(),
        "system": f"{platform.system()} {platform.release()} {platform.machine()}",
        "versions": versions,
    }


def summary(samples: Sequence[float]) -> dict[str, float]:
    """Milliseconds: p50, p90, p99 and the mean, with the count."""
    ordered = sorted(samples)
    if len(ordered) < 2:
        raise ValueError("a distribution needs at least two samples")
    cuts = statistics.quantiles(ordered, n=100, method="inclusive")
    return {
        "n": len(ordered),
        "p50_ms": round(statistics.median(ordered) * 1000, 4),
        "p90_ms": round(cuts[89] * 1000, 4),
        "p99_ms": round(cuts[98] * 1000, 4),
        "mean_ms": round(statistics.fmean(ordered) * 1000, 4),
    }


def ratio(path: Mapping[str, float], baseline: Mapping[str, float]) -> dict[str, float]:
    """The path's p50 and p99 over the baseline's."""
    return {key: round(path[f"{key}_ms"] / baseline[f"{key}_ms"], 3) for key in ("p50", "p99")}


def timed(calls: int, one: Callable[[], Awaitable[object]]) -> Callable[[], Awaitable[list[float]]]:
    """A path for :func:`interleaved`: ``one`` awaited ``calls`` times, each one's latency in seconds."""

    async def run() -> list[float]:
        latencies = []
        for _ in range(calls):
            start = time.perf_counter()
            await one()
            latencies.append(time.perf_counter() - start)
        return latencies

    return run


def timed_sync(calls: int, one: Callable[[], object]) -> Callable[[], Awaitable[list[float]]]:
    """:func:`timed` for a synchronous ``one`` (a record written, a key checked): no await in what is timed."""

    async def run() -> list[float]:
        latencies = []
        for _ in range(calls):
            start = time.perf_counter()
            one()
            latencies.append(time.perf_counter() - start)
        return latencies

    return run


async def interleaved(rounds: int, paths: Mapping[str, Callable[[], Awaitable[list[float]]]]) -> Samples:
    """Run each path once per round, the order reversed every other round; returns every path's samples."""
    samples: Samples = {name: [] for name in paths}
    order = list(paths)
    for number in range(rounds):
        for name in order if number % 2 == 0 else reversed(order):
            samples[name] += await paths[name]()
    return samples


def write_result(name: str, result: Mapping[str, Any], out: Path) -> Path:
    """``<out>/<name>.json`` with the machine beside the figures; prints the same JSON."""
    out.mkdir(parents=True, exist_ok=True)
    document = {"benchmark": name, "machine": machine(), **result}
    path = out / f"{name}.json"
    path.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(document, indent=2))
    return path


def plot_latencies(name: str, samples: Samples, out: Path, *, title: str) -> Path | None:
    """The latency distributions (empirical CDF, log-scaled time) of each path, as ``<out>/<name>.png``.
    Skipped, with a word on stderr, where matplotlib is not installed (it is in the ``dev`` extra)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot (pip install -e '.[dev]')", file=sys.stderr)
        return None
    out.mkdir(parents=True, exist_ok=True)
    figure, axes = plt.subplots(figsize=(7, 4), dpi=110)
    for label, values in samples.items():
        ordered = sorted(v * 1000 for v in values)
        if not ordered:
            continue
        axes.plot(ordered, [(i + 1) / len(ordered) for i in range(len(ordered))], label=label)
    axes.set_xscale("log")
    axes.set_xlabel("latency (ms, log scale)")
    axes.set_ylabel("fraction of calls at or below")
    axes.set_title(title)
    axes.grid(True, which="both", alpha=0.3)
    axes.legend()
    figure.tight_layout()
    path = out / f"{name}.png"
    figure.savefig(path)
    plt.close(figure)
    return path


async def stop_child(child: asyncio.subprocess.Process | None, timeout: float = 30.0) -> None:
    """End a helper process of a benchmark the way they all end: its stdin closes, it stops; killed after
    ``timeout`` seconds if it has not."""
    if child is None:
        return
    assert child.stdin is not None
    child.stdin.close()
    try:
        await asyncio.wait_for(child.wait(), timeout)
    except TimeoutError:
        child.kill()
        await child.wait()


@contextlib.asynccontextmanager
async def serving_in_loop(app: Any, start_timeout: float = 30.0) -> AsyncIterator[int]:
    """``app`` under plain uvicorn on 127.0.0.1 in this event loop, for a peer or baseline of a benchmark (the
    gateway has its own guarded configuration); yields the port."""
    import uvicorn

    from openab_browser.gateway.server import serving

    config = uvicorn.Config(app, host="127.0.0.1", port=0, lifespan="on", log_level="warning")
    async with serving(uvicorn.Server(config), start_timeout=start_timeout) as (_host, port):
        yield port
