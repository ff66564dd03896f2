"""The CI-sized run of bench/bench_devtools.py: a page load with and without capture, the tokens of openab's two
developer tools against chrome-devtools-mcp's on the same Chromium, and a form of 8 fields, end to end (real pod,
real extension in Chromium), writing sane JSON. No thresholds: the figures are the full runs' (docs/benchmarks.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from browser.harness import CHROMIUM

from bench import bench_devtools

pytestmark = pytest.mark.skipif(not CHROMIUM, reason="Debian chromium is not installed: apt-get install chromium")


def test_devtools_quick_run_measures_capture_tokens_and_a_form(tmp_path: Path) -> None:
    path = bench_devtools.main(["--quick", "--out", str(tmp_path)])
    result = json.loads(path.read_text())
    assert result["benchmark"] == "devtools" and result["quick"] is True
    loads = result["page load (browser_navigate to tests/site/devtools.html)"]
    for side in ("capture on", "capture off"):
        assert loads[side]["n"] >= 2 and 0 < loads[side]["p50_ms"] < 60_000, side
    tokens = result["tokens on tests/site/devtools.html (o200k_base)"]
    assert tokens["openab"]["total"] > 0 and tokens["chrome-devtools-mcp 1.11.0"]["total"] > 0
    # What a developer needs is in openab's two answers, and the token the page printed is not.
    assert all(tokens["openab"]["kept"].values()) and not tokens["openab"]["shows the printed token"]
    form = result["a form of 8 fields (tests/site/bench/form.html)"]
    assert form["browser_fill_form"]["calls"] == 1 and form["8 browser_type"]["calls"] == 8
