"""The CI-sized run of bench/bench_journal.py: the same pod with and without the action journal, side by side; the
JSON is whole. No thresholds: the figures are the full run's (docs/benchmarks.md, "Issue 25")."""

from __future__ import annotations

import json
from pathlib import Path

from bench import bench_journal


def test_journal_quick_run_times_both_paths(tmp_path: Path) -> None:
    result = json.loads(bench_journal.main(["--quick", "--out", str(tmp_path)]).read_text())
    assert result["benchmark"] == "journal" and result["quick"] is True
    assert set(result["paths"]) == {"no journal", "journal", "journal, decision told"}
    for figures in result["paths"].values():
        assert figures["n"] == result["rounds"] * result["calls_per_round"]
    assert result["click_p50_ms"] == bench_journal.CLICK_P50_MS
    assert isinstance(result["journal_cost_p50_ms"], float)
    assert isinstance(result["decision_told_cost_p50_ms"], float)
