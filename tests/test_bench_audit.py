"""The CI-sized run of bench/bench_audit.py: one audit record, the file kept open against opened per record, side
by side; both files hold the same bytes. No thresholds: the figures are the full run's (docs/benchmarks.md)."""

from __future__ import annotations

import json
from pathlib import Path

from bench import bench_audit


def test_audit_quick_run_times_both_paths(tmp_path: Path) -> None:
    result = json.loads(bench_audit.main(["--quick", "--out", str(tmp_path)]).read_text())
    assert result["benchmark"] == "audit" and result["quick"] is True
    assert set(result["paths"]) == {"kept open", "opened per record"}
    for figures in result["paths"].values():
        assert figures["n"] == result["rounds"] * result["records_per_round"]
    assert isinstance(result["saved_per_record_us"], float)
