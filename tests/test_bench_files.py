"""The CI-sized run of bench/bench_files.py: a file each way through the real pod and the real extension in
Chromium, and over the plain socket beside them, with and without permessage-deflate; the JSON is whole and the
phases add up to the chunks the contract says. No thresholds: the figures are the full run's (docs/benchmarks.md).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from browser.harness import CHROMIUM

from bench import bench_files

pytestmark = pytest.mark.skipif(not CHROMIUM, reason="Debian chromium is not installed: apt-get install chromium")


def test_files_quick_run_times_both_directions_beside_the_raw_socket(tmp_path: Path) -> None:
    path = bench_files.main(["--quick", "--out", str(tmp_path)])
    result = json.loads(path.read_text())
    assert result["benchmark"] == "files" and result["quick"] is True
    assert result["file_bytes"] == bench_files.QUICK_SIZE and result["chunk_bytes"] == 512 * 1024
    chunks = -(-bench_files.QUICK_SIZE // result["chunk_bytes"])
    assert set(result["settings"]) == {"deflate", "no deflate"}
    for setting in result["settings"].values():
        assert set(setting["paths"]) == set(bench_files.PATHS)
        for name, figures in setting["paths"].items():
            assert figures["n"] == result["rounds"] >= 2, name
            assert 0 < figures["min_mib_s"] <= figures["p50_mib_s"] <= figures["max_mib_s"], name
        assert all(r > 0 for r in setting["ratio_raw_over_openab"].values())
        assert set(setting["ratio_openab_over_browser_socket"]) == {bench_files.UPLOAD, bench_files.DOWNLOAD}
        assert all(r > 0 for r in setting["ratio_openab_over_browser_socket"].values())
        phases = setting["phases_p50_ms"]
        assert phases[bench_files.UPLOAD]["chunks"] == phases[bench_files.DOWNLOAD]["chunks"] == chunks
        assert all(ms >= 0 for kept in phases.values() for ms in kept.values())
        assert len(setting["extension_work_ms"]) == 8 and all(ms >= 0 for ms in setting["extension_work_ms"].values())
    assert result["machine"]["load_average"]
    assert (tmp_path / "files.png").stat().st_size > 1000
