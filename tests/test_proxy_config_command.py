"""`openab config write`, run as a user would: the installed command in a subprocess, then the files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

OPENAB = str(Path(sys.executable).with_name("openab"))


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


def test_the_command_module_imports_nothing_heavy() -> None:
    code = ("import sys, openab.gateway.config_command as c; "
            "print(sorted(m for m in sys.modules if m.startswith(('openab.core', 'tomlkit', 'starlette'))))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "[]"
