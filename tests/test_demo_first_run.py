"""`openab demo` as a first run shows it: beside the agent's screenshot, one of the side panel with the conversation
as the person would see it (the real panel page in the demo's headless Chromium, 360 px wide like Chrome's side
panel); and a risky step, which waits on a card nobody can answer in a headless browser, is named while it waits
and said to have gone unanswered when the task's time runs out, the panel's screenshot showing the card."""

from __future__ import annotations

import contextlib
import os
import shutil
import struct
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from browser.harness import screenshot_dir, site_server

from openab_browser.gateway.demo_browser import chromium_path

OPENAB = [sys.executable, "-m", "openab_browser.gateway.cli"]
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


def _listening_inodes() -> set[str]:
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError), open(table) as f:
            for line in f.readlines()[1:]:
                fields = line.split()
                if fields[3] == "0A":  # LISTEN
                    inodes.add(fields[9])
    return inodes


def _demo_browsers() -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            if any(a.startswith(b"--user-data-dir=") and b"openab-demo-" in a for a in argv):
                pids.append(int(entry.name))
    return pids


def _sockets(pid: int) -> set[str]:
    found = set()
    with contextlib.suppress(OSError):
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            with contextlib.suppress(OSError):
                target = os.readlink(fd)
                if target.startswith("socket:["):
                    found.add(target[len("socket:["):-1])
    return found


@dataclass
class BrowserSeen:
    """What an attacker on the same host finds of one of the demo's Chromium processes while it runs."""

    pid: int
    argv: list[bytes]
    tcp_listening: bool
    devtools_file: bool


@dataclass
class RiskyRun:
    """One demo run whose risky step waits on a card nobody answers: its output and exit code, its panel's
    screenshot, and its browsers as seen from outside while the card waited."""

    said: str
    returncode: int
    panel: Path
    browsers: list[BrowserSeen]


@pytest.fixture(scope="module")
def risky_run(tmp_path_factory: pytest.TempPathFactory) -> RiskyRun:
    """A module's one run: the card waits for the task's whole time by design, so each test of it would cost
    that time again."""
    folder = tmp_path_factory.mktemp("risky")
    seen: list[BrowserSeen] = []
    with site_server() as site:
        demo_run = subprocess.Popen(
            [*OPENAB, "demo", "--screenshot", str(folder / "shot.jpg"), "--timeout", "25", "--task",
             f"open {site}/form.html\nclick Buy now"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=folder, stdin=subprocess.DEVNULL)
        lines: list[str] = []
        try:
            assert demo_run.stdout is not None
            for line in demo_run.stdout:  # the card waits: the browser is up and the panel is being driven
                lines.append(line)
                if "Waiting for your answer in the side panel" in line:
                    break
            listening = _listening_inodes()
            for pid in _demo_browsers():
                argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
                profile = next(a for a in argv if a.startswith(b"--user-data-dir="))[len(b"--user-data-dir="):]
                seen.append(BrowserSeen(pid, argv, bool(_sockets(pid) & listening),
                                        (Path(profile.decode()) / "DevToolsActivePort").exists()))
        finally:
            rest, _ = demo_run.communicate(timeout=120)
    return RiskyRun("".join(lines) + rest, demo_run.returncode, folder / "shot-panel.png", seen)


def test_a_risky_step_says_its_card_waits_and_that_it_went_unanswered(risky_run: RiskyRun) -> None:
    said = risky_run.said
    assert risky_run.returncode == 1, said
    waiting = said.index("Waiting for your answer in the side panel: Click Buy now")
    assert said.index("-> Click Buy now") < waiting
    assert "the task did not finish within 25 s: the card about “Click Buy now” timed out unanswered" in said, said
    assert f"side panel screenshot saved to {risky_run.panel}" in said and png_size(risky_run.panel) == (360, 720)
    keep(risky_run.panel, "demo-card-waiting.png")


def test_the_demo_browser_listens_on_no_port_a_local_user_could_drive_it_through(risky_run: RiskyRun) -> None:
    # An attacker on the same host looks for the demo browser's DevTools: a TCP port (or the DevToolsActivePort
    # file naming one) would let them drive it and read the gateway key its extension stores.
    assert risky_run.browsers, "the demo's Chromium is running while its card waits"
    for browser in risky_run.browsers:
        assert not any(a.startswith(b"--remote-debugging-port") for a in browser.argv)
        assert not browser.tcp_listening, f"Chromium {browser.pid} listens on a TCP port"
        assert not browser.devtools_file
