"""The suite's files side by side (scripts/test with OPENAB_TEST_WORKERS, pytest-xdist ``--dist loadfile``): files
that start a hub share the machine's Unix users, so tests/conftest.py's scheduler runs them one after another,
while other files still run beside each other."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

_FILE = """
import json, os, time
from pathlib import Path


def test_holds_the_machine() -> None:
    start = time.monotonic()
    time.sleep(1.5)
    Path({out!r}).write_text(json.dumps([os.environ["PYTEST_XDIST_WORKER"], start, time.monotonic()]))
"""


def _spans(tmp_path: Path, names: list[str]) -> dict[str, tuple[str, float, float]]:
    for name in names:
        (tmp_path / f"{name}.py").write_text(_FILE.format(out=str(tmp_path / f"{name}.json")))
    tests = Path(__file__).parent
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "conftest", "-n", "2", "--dist", "loadfile", "-q",
         "-p", "no:cacheprovider", "--rootdir", str(tmp_path), str(tmp_path)],
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": os.pathsep.join([str(tests), os.environ.get("PYTHONPATH", "")]),
                           "OPENAB_LOG_SCAN": "off"},
        capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    return {name: tuple(json.loads((tmp_path / f"{name}.json").read_text())) for name in names}


def test_two_files_that_start_a_hub_never_run_at_once(tmp_path: Path) -> None:
    spans = _spans(tmp_path, ["test_hub_one", "test_hub_two"])
    (first_worker, _, first_end), (second_worker, second_start, _) = sorted(
        spans.values(), key=lambda span: span[1])
    assert first_end <= second_start, spans
    assert first_worker == second_worker, spans


def test_other_files_still_run_side_by_side(tmp_path: Path) -> None:
    # What the test above holds apart would otherwise overlap: two workers, two files, each on its own.
    spans = _spans(tmp_path, ["test_one", "test_two"])
    (first_worker, _, first_end), (second_worker, second_start, _) = sorted(spans.values(), key=lambda span: span[1])
    assert first_worker != second_worker and second_start < first_end, spans
