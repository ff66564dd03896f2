"""The small texts that name agents (issue 36, item 5): `openab config write --help` lists every CLI it writes for,
taken from the one list that knows them; refusing to trust the home folder names the agent asked; `openab doctor`
reports a CLI whose command takes no --version as found, with no warning."""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path

import pytest
from test_doctor import OPENAB, clean_env, doctor, private_state

from openab_browser.core.agent_names import CONFIG_NAMES
from openab_browser.core.agents.config import AGENTS, ConfigError
from openab_browser.core.agents.config.trust import check_trustable


def test_config_write_help_lists_every_cli_it_writes_for() -> None:
    done = subprocess.run([*OPENAB, "config", "write", "--help"], capture_output=True, text=True, timeout=60,
                          check=True)
    words = done.stdout.replace(",", " ").split()
    assert set(AGENTS) == set(CONFIG_NAMES)  # the writers are the names, no more and no fewer
    missing = [name for name in AGENTS if name not in words]
    assert not missing, f"--help leaves out {missing}:\n{done.stdout}"


@pytest.mark.parametrize("agent", ["gemini", "claude"])
def test_refusing_to_trust_the_home_folder_names_the_agent_asked(agent: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as refused:
        check_trustable(agent, tmp_path, home=tmp_path, env={})
    said = str(refused.value)
    assert f"openab does not record {agent}'s trust for {tmp_path}" in said, said
    # Only claude never keeps the home folder's trust: gemini's refusal says nothing of claude.
    assert ("claude" in said) == (agent == "claude"), said


@pytest.mark.anyio
async def test_doctor_reports_codex_acp_found_with_no_warning(tmp_path: Path) -> None:
    state, _ = private_state(tmp_path)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "codex-acp"  # as the real one answers --version: an unexpected argument, status 2
    fake.write_text("#!/bin/sh\necho \"error: unexpected argument '$1' found\" >&2\nexit 2\n")
    fake.chmod(0o755)
    env = clean_env(PATH=f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin", HOME=str(tmp_path))
    code, output = await asyncio.wait_for(
        doctor("--state-dir", str(state), "--url", "none", "--agent", "codex", "--dir", str(tmp_path), env=env), 120)
    assert f"ok    agent codex: {fake} (it takes no --version)" in output, output
    assert "warn  agent codex" not in output and "--version` exited" not in output, output
    assert code == 0, output
