"""`openab demo` as a first run shows it: beside the agent's screenshot, one of the side panel with the conversation
as the person would see it (the real panel page in the demo's headless Chromium, 360 px wide like Chrome's side
panel); and a risky step, which waits on a card nobody can answer in a headless browser, is named while it waits
and said to have gone unanswered when the task's time runs out, the panel's screenshot showing the card."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from browser.harness import screenshot_dir, site_server

from openab.gateway.demo_browser import chromium_path

OPENAB = [sys.executable, "-m", "openab.gateway.cli"]
pytestmark = pytest.mark.skipif(chromium_path() is None, reason="Chromium is not installed (apt-get install chromium)")


def demo(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*OPENAB, "demo", "--screenshot", str(tmp_path / "shot.jpg"), *args], capture_output=True,
                          text=True, timeout=240, cwd=tmp_path, stdin=subprocess.DEVNULL)


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def keep(shot: Path, name: str) -> None:
    if os.environ.get("OPENAB_UPDATE_SCREENSHOTS") == "1":
        shutil.copyfile(shot, screenshot_dir() / name)


def test_the_demo_saves_the_side_panel_beside_the_agents_screenshot(tmp_path: Path) -> None:
    done = demo(tmp_path, "--timeout", "120")
    assert done.returncode == 0, done.stdout + done.stderr
    panel = tmp_path / "shot-panel.png"
    assert f"side panel screenshot saved to {panel}" in done.stdout, done.stdout
    assert png_size(panel) == (360, 720)
    assert (tmp_path / "shot.jpg").read_bytes()[:3] == b"\xff\xd8\xff"
    keep(panel, "demo-panel.png")


def test_a_risky_step_says_its_card_waits_and_that_it_went_unanswered(tmp_path: Path) -> None:
    with site_server() as site:
        done = demo(tmp_path, "--timeout", "25", "--task", f"open {site}/form.html\nclick Buy now")
    said = done.stdout
    assert done.returncode == 1, said + done.stderr
    waiting = said.index("Waiting for your answer in the side panel: Click Buy now")
    assert said.index("-> Click Buy now") < waiting
    assert "the task did not finish within 25 s: the card about “Click Buy now” timed out unanswered" in said, said
    panel = tmp_path / "shot-panel.png"
    assert f"side panel screenshot saved to {panel}" in said and png_size(panel) == (360, 720)
    keep(panel, "demo-card-waiting.png")
