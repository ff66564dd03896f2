"""The pod offers only the agents it can start: one configured whose command is not installed is left out of the
handshake's offer (so the panel's picker never lists it), and `openab run`'s start-up output and its log name it
with what to install. Real pods on loopback, the real `openab run` process, a real PATH with and without the CLI.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
from pathlib import Path

import pytest
from fake_extension import RemoteError
from test_runtime_pod import run_pod
from test_runtime_run_command import OPENAB

from openab_browser.core.agents.recipes import RECIPES

pytestmark = pytest.mark.anyio

AGENTS = "dev.openab/agents"
AGENT = "dev.openab/agent"
CODEX_INSTALL = RECIPES["codex"].install


def bin_dir(tmp_path: Path, *programs: str) -> Path:
    """A folder of executables named ``programs`` (each a real ACP agent: the built-in one), for a PATH."""
    folder = tmp_path / "bin"
    folder.mkdir(exist_ok=True)
    for name in programs:
        program = folder / name
        program.write_text(f"#!/bin/sh\nexec {sys.executable} -m openab_browser.core.agents.builtin\n")
        program.chmod(0o755)
    return folder


async def offered(tmp_path: Path, path: str, caplog: pytest.LogCaptureFixture) -> tuple[list[str], str]:
    """The agent ids a pod configured with builtin and codex offers on this PATH, and what the pod logged."""
    caplog.clear()
    async with run_pod(tmp_path / "state", agent=["builtin", "codex"], base_env={"PATH": path}) as pod, \
            pod.extension() as ext:
        init = await ext.initialize()
        ids = [a["id"] for a in init["_meta"][AGENTS]]
        if "codex" not in ids:
            with pytest.raises(RemoteError, match="'codex' is not an agent this gateway offers"):
                await ext.request("session/new", {"cwd": "/", "mcpServers": [], "_meta": {AGENT: "codex"}})
    return ids, caplog.text


async def test_an_agent_whose_command_is_not_on_path_is_not_offered_and_the_log_says_why(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    empty = bin_dir(tmp_path)
    ids, logged = await offered(tmp_path, f"{empty}:/usr/bin:/bin", caplog)
    assert ids == ["builtin"]
    assert f"agent codex: not installed ({CODEX_INSTALL}), so it is not offered" in logged
    # Installed (on the PATH the agent is started with), it is offered.
    bin_dir(tmp_path, "codex-acp")
    ids, logged = await offered(tmp_path, f"{empty}:/usr/bin:/bin", caplog)
    assert ids == ["builtin", "codex"] and "not installed" not in logged


async def test_with_no_agent_installed_the_configured_ones_stay_offered(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # Nothing could start: a chat's own error then says what to install, rather than a pod with no agent at all.
    async with run_pod(tmp_path / "state", agent=["codex"], base_env={"PATH": str(bin_dir(tmp_path))}) as pod, \
            pod.extension() as ext:
        init = await ext.initialize()
    assert [a["id"] for a in init["_meta"][AGENTS]] == ["codex"]
    assert f"agent codex: not installed ({CODEX_INSTALL})\n" in caplog.text + "\n"


async def test_openab_run_names_a_configured_agent_that_is_not_installed(tmp_path: Path) -> None:
    env = {**os.environ, "PATH": f"{bin_dir(tmp_path)}:/usr/bin:/bin", "OPENAB_ACP_AUTH_KEY": "k" * 32}
    process = await asyncio.create_subprocess_exec(
        *OPENAB, "run", "--port", "0", "--state-dir", str(tmp_path / "state"), "--agent", "builtin",
        "--agent", "codex", env=env, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
        start_new_session=True)
    assert process.stderr is not None
    shown = ""
    try:
        async with asyncio.timeout(60):
            while not re.search(r"running on http://", shown, re.IGNORECASE):
                line = (await process.stderr.readline()).decode()
                assert line, "openab run exited while starting:\n" + shown
                shown += line
    finally:
        process.send_signal(signal.SIGTERM)
        async with asyncio.timeout(30):
            shown += (await process.stderr.read()).decode()
            await process.wait()
    assert f"agent codex: not installed ({CODEX_INSTALL}), so it is not offered" in shown, shown
    assert re.search(r"agents builtin, browser via", shown), shown
