"""CI-sized runs of the proxy-path, throughput, idle-scale and large-result benchmarks (bench/bench_proxy_path.py,
bench_throughput.py, bench_idle.py, bench_large.py), so they do not rot: each runs its ``main`` with ``--quick``
and must write a result whose figures are real measurements of every path it names. No thresholds: timing
belongs to the full runs."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import bench_idle, bench_large, bench_proxy_path, bench_throughput


def _document(out: Path, name: str) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((out / f"{name}.json").read_text())
    assert document["benchmark"] == name
    assert document["machine"]["cores"] >= 1 and len(document["machine"]["load_average"]) == 3
    assert (out / f"{name}.png").stat().st_size > 1000
    return document


def _sane(row: dict[str, Any], samples: int | None = None) -> None:
    if samples is not None:
        assert row["n"] == samples
    assert 0 < row["p50_ms"] <= row["p90_ms"] <= row["p99_ms"] < 60_000


def test_the_proxy_path_benchmark_times_each_path_beside_the_wire_alone(tmp_path: Path) -> None:
    bench_proxy_path.main(["--quick", "--out", str(tmp_path)])
    document = _document(tmp_path, "proxy_path")

    paths = document["paths"]
    rows = {"proxy", "proxy, audit off", "proxy, mcp client", "proxy, click", "proxy, read"}
    assert set(paths) == {"baseline", "bare relay", *rows}
    for row in paths.values():
        _sane(row, document["rounds"] * document["calls_per_round"])
    assert set(document["ratio_to_baseline"]) == {"bare relay", *rows}
    assert set(document["ratio_to_bare_relay"]) == rows
    read = document["ratio_to_bare_relay"]["proxy, read"]["p50"]
    assert abs(read - paths["proxy, read"]["p50_ms"] / paths["bare relay"]["p50_ms"]) < 0.01
    assert abs(document["ratio_to_baseline"]["proxy"]["p50"] - paths["proxy"]["p50_ms"] / paths["baseline"]["p50_ms"]) \
        < 0.01
    assert set(document["audit_cost"]) == {"p50", "p99"}
    # The journal's share of a click: the click's p50 over the read's, as the two rows have them.
    journal = document["journal_cost"]["p50"]
    assert abs(journal - paths["proxy, click"]["p50_ms"] / paths["proxy, read"]["p50_ms"]) < 0.01
    assert isinstance(document["target"]["met"], bool)


def test_the_throughput_benchmark_counts_calls_per_session_count(tmp_path: Path) -> None:
    bench_throughput.main(["--quick", "--out", str(tmp_path)])
    document = _document(tmp_path, "throughput")

    assert set(document["sessions"]) == {"1", "8"}
    for row in document["sessions"].values():
        assert row["proxy_calls_per_s"] > 0 and row["baseline_calls_per_s"] > 0
        # The ratio is of the unrounded rates: equal to the rounded ones' within the rounding.
        assert abs(row["ratio"] - row["proxy_calls_per_s"] / row["baseline_calls_per_s"]) < 0.02 * row["ratio"]
        assert [len(rates) for rates in row["rounds_calls_per_s"].values()] == [document["rounds"]] * 2
        for latency in row["latency"].values():
            _sane(latency)
        # Each process's CPU per call: the gateway and the extensions on the proxy path, bare uvicorn on the other.
        assert set(row["cpu_us_per_call"]["proxy"]) == {"gateway", "extensions", "clients (this process)"}
        assert set(row["cpu_us_per_call"]["baseline"]) == {"bare uvicorn", "clients (this process)"}
        assert row["cpu_us_per_call"]["proxy"]["clients (this process)"] > 0
    assert document["target"]["met"] is None  # the target is judged at 64 sessions: full runs only


def test_the_idle_benchmark_weighs_idle_sessions_in_the_gateway_process(tmp_path: Path) -> None:
    bench_idle.main(["--quick", "--out", str(tmp_path)])
    document = _document(tmp_path, "idle")

    [stage] = document["idle"].values()
    # The gateway's own process holds every idle session's socket and state: it grows, by a bounded amount.
    assert stage["gateway_rss_mib"] >= document["gateway_rss_alone_mib"] - 1
    assert -100 < stage["rss_per_idle_session_kib"] < 10_000
    _sane(stage["busy"], document["busy_calls_per_stage"])
    _sane(stage["twin"], document["busy_calls_per_stage"])
    _sane(document["busy_alone"], 2 * document["busy_calls_per_stage"])
    assert set(stage["busy_ratio_to_alone"]) == set(stage["busy_ratio_to_twin"]) == {"p50", "p99"}
    assert set(document["control_ratio_to_twin"]) == {"p50", "p99"}
    assert isinstance(document["target"]["met"], bool)


def test_the_large_result_benchmark_times_a_screenshot_and_weighs_its_peak(tmp_path: Path) -> None:
    bench_large.main(["--quick", "--out", str(tmp_path)])
    document = _document(tmp_path, "large")

    for row in document["paths"].values():
        _sane(row, document["rounds"] * document["calls_per_round"])
    for peak in document["gateway_peak_growth_per_call"].values():
        # A 6 MiB result crosses the gateway's memory, often in memory it already holds from the call before (the
        # peak need not grow at all), and never without end.
        assert 0 <= peak["median_mib"] <= peak["max_mib"] < 200
    assert set(document["paths"]) >= {"raw WebSocket", "bare relay", "proxy path", "proxy path, parsed whole"}
    assert isinstance(document["target"]["met"], bool)
