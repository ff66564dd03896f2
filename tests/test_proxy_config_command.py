"""`openab config write`, run as a user would: the installed command in a subprocess, then the files."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

OPENAB = str(Path(sys.executable).with_name("openab"))
NOBODY = 65534


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([OPENAB, "config", "write", *args], capture_output=True, text=True, timeout=60,
                          env={**os.environ, **(env or {})})


def test_bridge_entry_is_written_and_printed(tmp_path: Path) -> None:
    done = run("--agent", "claude-agent-acp", "--dir", str(tmp_path))
    assert done.returncode == 0, done.stderr
    entry = json.loads((tmp_path / ".mcp.json").read_text())["mcpServers"]["openab_browser"]
    assert entry["command"] == "openab" and entry["args"] == ["browser-bridge"]
    assert '"browser-bridge"' in done.stdout and str(tmp_path / ".mcp.json") in done.stdout


def test_proxy_entry_refers_to_the_token_variable_and_never_prints_the_token(tmp_path: Path) -> None:
    secret = "s3cret-token-value-that-must-not-show"
    url = "http://127.0.0.1:40123/mcp"
    done = run("--agent", "claude", "--dir", str(tmp_path), "--mode", "proxy", "--url", url,
               "--token-env", "OPENAB_TEST_TOKEN", env={"OPENAB_TEST_TOKEN": secret})
    assert done.returncode == 0, done.stderr
    entry = json.loads((tmp_path / ".mcp.json").read_text())["mcpServers"]["openab_browser"]
    assert entry == {"type": "http", "url": url, "headers": {"Authorization": "Bearer ${OPENAB_TEST_TOKEN}"}}
    assert secret not in done.stdout + done.stderr

    # Gemini cannot expand the variable: the token goes into the file, never onto the terminal.
    done = run("--agent", "gemini", "--dir", str(tmp_path), "--mode", "proxy", "--url", url,
               "--token-env", "OPENAB_TEST_TOKEN", env={"OPENAB_TEST_TOKEN": secret})
    assert done.returncode == 0, done.stderr
    gemini = json.loads((tmp_path / ".gemini" / "settings.json").read_text())["mcpServers"]["openab_browser"]
    assert gemini["headers"]["Authorization"] == f"Bearer {secret}"
    assert secret not in done.stdout + done.stderr and "<token>" in done.stdout


def test_mistakes_are_refused_with_what_to_do(tmp_path: Path) -> None:
    unset = run("--agent", "gemini", "--dir", str(tmp_path), "--mode", "proxy", "--url", "http://127.0.0.1:1/mcp",
                "--token-env", "OPENAB_TEST_UNSET_TOKEN", env={"OPENAB_TEST_UNSET_TOKEN": ""})
    assert unset.returncode == 2 and "set OPENAB_TEST_UNSET_TOKEN" in unset.stderr
    no_url = run("--agent", "claude", "--dir", str(tmp_path), "--mode", "proxy")
    assert no_url.returncode == 2 and "--url" in no_url.stderr
    unknown = run("--agent", "notepad", "--dir", str(tmp_path))
    assert unknown.returncode == 2 and "choose one of" in unknown.stderr
    assert not (tmp_path / ".gemini").exists() and not (tmp_path / ".mcp.json").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a link to another uid (lchown)")
def test_a_link_another_user_planted_is_refused_and_its_target_left_alone(tmp_path: Path) -> None:
    victim = tmp_path / "victim.json"
    victim.write_text('{"mcpServers": {}}\n')
    os.chmod(victim, 0o644)
    project = tmp_path / "project"
    project.mkdir()
    link = project / ".mcp.json"
    link.symlink_to(victim)
    os.lchown(link, NOBODY, NOBODY)

    done = run("--agent", "claude", "--dir", str(project))

    assert done.returncode == 2, done.stdout
    assert f"{link} is a symbolic link owned by uid {NOBODY}" in done.stderr, done.stderr
    assert victim.read_text() == '{"mcpServers": {}}\n'
    assert stat.S_IMODE(victim.stat().st_mode) == 0o644
    assert link.is_symlink() and done.stdout == ""


def test_the_users_own_link_is_followed_and_the_real_path_printed(tmp_path: Path) -> None:
    real = tmp_path / "dotfiles" / "claude.json"
    real.parent.mkdir()
    real.write_text('{"mcpServers": {"other": {"command": "x"}}}\n')
    project = tmp_path / "project"
    project.mkdir()
    (project / ".mcp.json").symlink_to(real)

    done = run("--agent", "claude", "--dir", str(project))

    assert done.returncode == 0, done.stderr
    assert f"wrote {real} (through the link {project / '.mcp.json'})" in done.stdout, done.stdout
    assert set(json.loads(real.read_text())["mcpServers"]) == {"other", "openab_browser"}
    assert (project / ".mcp.json").is_symlink()


def test_the_command_module_imports_nothing_heavy() -> None:
    code = ("import sys, openab_browser.gateway.config_command as c; "
            "print(sorted(m for m in sys.modules if m.startswith(('openab_browser.core', 'tomlkit', 'starlette'))))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "[]"
