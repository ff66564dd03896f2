"""`openab demo` as a person runs it: a real headless Chromium with the real extension, the built-in agent,
one task on the local demo page, the transcript on stdout and the screenshot on disk."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from openab_browser.gateway.demo_browser import chromium_path

OPENAB = [sys.executable, "-m", "openab_browser.gateway.cli"]


@pytest.mark.skipif(chromium_path() is None, reason="Chromium is not installed (apt-get install chromium)")
def test_demo_runs_a_task_through_the_real_browser_and_saves_the_screenshot(tmp_path: Path) -> None:
    shot = tmp_path / "shot.jpg"
    done = subprocess.run(
        [*OPENAB, "demo", "--screenshot", str(shot), "--timeout", "120"],
        capture_output=True, text=True, timeout=240, cwd=tmp_path, stdin=subprocess.DEVNULL,
    )

    assert done.returncode == 0, done.stdout + done.stderr
    transcript = done.stdout
    # The page changed because the agent typed and clicked in Chromium; the agent read that back, in the person's words.
    assert "Your name (textbox): Ada" in transcript and "Hello, Ada! The agent clicked the button." in transcript
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


@pytest.mark.agents
@pytest.mark.skipif(chromium_path() is None, reason="Chromium is not installed (apt-get install chromium)")
@pytest.mark.parametrize("cli", ["claude", "codex"])
def test_demo_with_a_real_agent_cli_drives_the_real_browser(tmp_path: Path, cli: str) -> None:
    from agents.fake_model import Call, FakeModel, Script, serving
    from agents.harness import ACP_COMMANDS, agent_env, require
    from browser.harness import site_server

    require(ACP_COMMANDS[cli][0])
    with serving(FakeModel()) as model, site_server() as site:
        model.set_script(Script(calls=[Call("browser_navigate", {"url": f"{site}/form.html"}),
                                       Call("browser_snapshot", {})]))
        agent = agent_env(cli, model.url, tmp_path / cli)
        passed = [f"--agent-env={name}={value}" for name, value in agent.env.items()]
        done = subprocess.run(
            [*OPENAB, "demo", "--agent", cli, *passed, "--task", "Read the shop's sign-in page.",
             "--screenshot", str(tmp_path / "shot.jpg"), "--timeout", "150"],
            capture_output=True, text=True, timeout=300, cwd=tmp_path, stdin=subprocess.DEVNULL,
        )

    assert done.returncode == 0, done.stdout + done.stderr
    # The CLI's calls went through the proxy, the tunnel and the extension into Chromium, and back:
    assert "Sign in to Example Shop" in done.stdout, done.stdout
    called = [str(c.tool).split(".")[-1].split("__")[-1] for c in model.calls()]
    assert called == ["browser_navigate", "browser_snapshot"]
