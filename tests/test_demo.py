"""`openab demo` as a person runs it: a real headless Chromium with the real extension, the built-in agent,
one task on the local demo page, the transcript on stdout and the screenshot on disk."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from openab.gateway.demo_browser import chromium_path

OPENAB = [sys.executable, "-m", "openab.gateway.cli"]


@pytest.mark.skipif(chromium_path() is None, reason="Chromium is not installed (apt-get install chromium)")
def test_demo_runs_a_task_through_the_real_browser_and_saves_the_screenshot(tmp_path: Path) -> None:
    shot = tmp_path / "shot.jpg"
    done = subprocess.run(
        [*OPENAB, "demo", "--screenshot", str(shot), "--timeout", "120"],
        capture_output=True, text=True, timeout=240, cwd=tmp_path, stdin=subprocess.DEVNULL,
    )

    assert done.returncode == 0, done.stdout + done.stderr
    transcript = done.stdout
    # The page changed because the agent typed and clicked in Chromium; the agent read that back.
    assert 'textbox "Your name"' in transcript and "Hello, Ada! The agent clicked the button." in transcript
    assert "--- end of turn: end_turn ---" in transcript
    data = shot.read_bytes()
    assert data[:3] == b"\xff\xd8\xff" and len(data) > 2000, "a real JPEG of the page"


def test_demo_without_chromium_says_how_to_get_it_or_load_the_extension_by_hand(tmp_path: Path) -> None:
    done = subprocess.run(
        [*OPENAB, "demo", "--chromium", str(tmp_path / "no-chromium"), "--timeout", "30"],
        capture_output=True, text=True, timeout=120, cwd=tmp_path, stdin=subprocess.DEVNULL,
    )

    assert done.returncode == 1
    assert "apt-get install chromium" in done.stdout
    assert "chrome://extensions" in done.stdout and "Load unpacked" in done.stdout and "ws://127.0.0.1:" in done.stdout
