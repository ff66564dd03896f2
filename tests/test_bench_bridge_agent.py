"""CI-sized runs of the bridge and agent-turn benchmarks (bench/bench_bridge_path.py, bench_bridge_startup.py,
bench_agent_turn.py), so they do not rot: each runs its ``main`` with ``--quick`` and must write a result whose
figures are real measurements of every path it names. No thresholds: timing belongs to the full runs."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agents.harness import installed

from bench import bench_agent_turn, bench_bridge_path, bench_bridge_startup


def _result(path: Path, name: str) -> dict[str, Any]:
    assert path == path.parent / f"{name}.json"
    document: dict[str, Any] = json.loads(path.read_text())
    assert document["benchmark"] == name
    assert document["machine"]["cores"] >= 1 and len(document["machine"]["load_average"]) == 3
    return document


def _sane(row: dict[str, Any], samples: int) -> None:
    assert row["n"] == samples
    assert 0 < row["p50_ms"] <= row["p90_ms"] <= row["p99_ms"] < 60_000


def test_the_bridge_path_benchmark_times_the_bridge_beside_mcp_proxy(tmp_path: Path) -> None:
    document = _result(bench_bridge_path.main(["--quick", "--out", str(tmp_path)]), "bridge_path")

    paths = document["paths"]
    assert any(name.startswith("openab browser-bridge") for name in paths)
    for row in paths.values():
        _sane(row, document["rounds"] * document["calls_per_round"])
    if document["mcp_proxy"] is None:  # not installed here: the openab path alone, and no verdict
        assert len(paths) == 1 and "ratio_openab_to_mcp_proxy" not in document
    else:
        assert len(paths) == 2 and document["mcp_proxy_version"].startswith("mcp-proxy")
        assert set(document["ratio_openab_to_mcp_proxy"]) == {"p50", "p99"}
        assert isinstance(document["target_met"], bool)
    assert (tmp_path / "bridge_path.png").stat().st_size > 1000


def test_the_startup_benchmark_times_the_relay_to_its_tool_list(tmp_path: Path) -> None:
    document = _result(bench_bridge_startup.main(["--quick", "--out", str(tmp_path)]), "bridge_startup")

    paths = document["paths"]
    tools = paths["openab browser-bridge: exec to tools/list answered"]
    for row in paths.values():
        _sane(row, document["rounds"] * document["runs_per_round"])
    # Listing the tools takes the relay's start plus a round trip: never less than the interpreter's own start.
    assert tools["p50_ms"] > paths["`python -c pass`: exec to exit"]["p50_ms"]
    assert document["target_met"] == (tools["p50_ms"] < 100)
    assert (tmp_path / "bridge_startup.png").stat().st_size > 1000


@pytest.mark.agents
def test_the_agent_turn_benchmark_times_codex_through_openab_and_direct(tmp_path: Path) -> None:
    if not installed("codex-acp"):
        pytest.skip("codex-acp is not installed: run `npm ci` in tests/agents (scripts/test does it)")
    document = _result(bench_agent_turn.main(["--quick", "--out", str(tmp_path)]), "agent_turn")

    measures = document["measures"]
    assert set(measures) == {"cold: prompt to first tool call", "cold: whole turn",
                             "warm: prompt to first tool call", "warm: whole turn"}
    rounds, warm = document["rounds"], document["warm_turns_per_session"]
    for name, row in measures.items():
        count = rounds * (warm if name.startswith("warm") else 1)
        _sane(row["openab"], count)
        _sane(row["direct"], count)
        assert set(row["ratio"]) == {"p50", "p99"}
    first, whole = measures["cold: prompt to first tool call"], measures["cold: whole turn"]
    for path in ("openab", "direct"):  # the tool call comes before the turn's answer, on both paths
        assert first[path]["p50_ms"] < whole[path]["p50_ms"]
    assert (tmp_path / "agent_turn.png").stat().st_size > 1000
