"""`openab doctor`, run as a person runs it (a subprocess), against real files, real agent CLIs from
tests/agents/node_modules and a real gateway: what is right says ok, what is wrong says FAIL with a fix, and the
exit code tells a script which."""

from __future__ import annotations

import asyncio
import os
import secrets
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from gateway_harness import run_gateway

pytestmark = pytest.mark.anyio

OPENAB = [sys.executable, "-m", "openab.gateway.cli"]
AGENT_BIN = Path(__file__).resolve().parent / "agents" / "node_modules" / ".bin"


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAB_")}
    env.update(extra)
    return env


async def doctor(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        *OPENAB, "doctor", *args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env or clean_env(), cwd=cwd)
    async with asyncio.timeout(90):
        output, _ = await process.communicate()
    assert process.returncode is not None
    return process.returncode, output.decode()


def private_state(tmp_path: Path, key: str | None = None) -> tuple[Path, Path]:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    key_file = state / "acp.key"
    key_file.write_text(key or secrets.token_urlsafe(32))
    key_file.chmod(0o600)
    return state, key_file


async def test_a_sound_installation_with_its_gateway_running_is_all_ok(tmp_path: Path) -> None:
    key = secrets.token_urlsafe(32)
    state, key_file = private_state(tmp_path, key)
    async with run_gateway(token=key) as gw:
        code, output = await doctor("--state-dir", str(state), "--token-file", str(key_file), "--url", gw.ws_url)
    assert code == 0, output
    assert "FAIL" not in output
    assert f"ok    key: 43 characters, from {key_file}" in output
    assert f"ok    gateway {gw.base_url}/healthz: alive" in output
    assert f"ok    gateway {gw.ws_url}: key accepted, ACP protocol 1" in output
    assert "state dir" in output and "mode 0700" in output
    assert key not in output


async def test_a_key_the_gateway_does_not_know_is_named_with_its_fix(tmp_path: Path) -> None:
    state, key_file = private_state(tmp_path)
    async with run_gateway() as gw:
        code, output = await doctor("--state-dir", str(state), "--token-file", str(key_file), "--url", gw.ws_url)
    assert code == 1
    assert "the handshake was refused with HTTP 401" in output
    assert "fix: the key here is not the pod's" in output
    assert key_file.read_text() not in output


async def test_no_gateway_running_fails_with_how_to_start_it(tmp_path: Path) -> None:
    async with run_gateway() as gw:
        url = gw.ws_url  # a port that was just released: nothing answers there now
    state, key_file = private_state(tmp_path)
    code, output = await doctor("--state-dir", str(state), "--token-file", str(key_file), "--url", url)
    assert code == 1
    assert "ConnectError" in output and "fix: start it (`openab run`)" in output


async def test_weak_or_readable_keys_fail(tmp_path: Path) -> None:
    state, key_file = private_state(tmp_path, "a" * 40)
    code, output = await doctor("--state-dir", str(state), "--url", "none")
    assert code == 1
    assert "key: the key from" in output and "is weak (40 characters, 1 distinct)" in output
    assert "openssl rand -hex 32" in output
    key_file.write_text(secrets.token_urlsafe(32))
    key_file.chmod(0o644)
    code, output = await doctor("--state-dir", str(state), "--url", "none")
    assert code == 1
    assert f"chmod 600 {key_file}" in output
    # The key in the environment counts too, and is never echoed.
    short = "short-key-" + secrets.token_hex(4)
    code, output = await doctor("--state-dir", str(state), "--url", "none",
                                env=clean_env(OPENAB_ACP_AUTH_KEY=short))
    assert code == 1 and "from OPENAB_ACP_AUTH_KEY is weak" in output
    assert short not in output


async def test_a_state_dir_others_can_read_fails(tmp_path: Path) -> None:
    state, _ = private_state(tmp_path)
    state.chmod(0o755)
    code, output = await doctor("--state-dir", str(state), "--url", "none")
    assert code == 1
    assert "mode 0755, other users can reach the sessions' files" in output
    assert f"fix: `chmod 700 {state}`" in output


async def test_real_agent_clis_are_found_with_their_versions_and_missing_ones_named(tmp_path: Path) -> None:
    state, _ = private_state(tmp_path)
    env = clean_env(PATH=f"{AGENT_BIN}{os.pathsep}{os.environ['PATH']}")
    code, output = await doctor("--state-dir", str(state), "--url", "none", "--agent", "claude", "--agent", "codex",
                                env=env)
    assert code == 0, output
    assert f"ok    agent claude: {AGENT_BIN / 'claude-agent-acp'}" in output
    assert f"ok    agent codex: {AGENT_BIN / 'codex-acp'}" in output
    bare = clean_env(PATH="/usr/bin:/bin")
    code, output = await doctor("--state-dir", str(state), "--url", "none", "--agent", "codex", env=bare)
    assert code == 1
    assert "FAIL  agent codex: `codex-acp` is not on PATH" in output
    assert "fix: npm install -g" in output


async def test_written_configs_are_checked_and_a_broken_one_fails(tmp_path: Path) -> None:
    state, _ = private_state(tmp_path)
    project = tmp_path / "project"
    project.mkdir()
    written = await asyncio.to_thread(
        subprocess.run, [*OPENAB, "config", "write", "--agent", "claude", "--dir", str(project)],
        capture_output=True, text=True, timeout=60, env=clean_env(HOME=str(tmp_path)))
    assert written.returncode == 0, written.stderr
    env = clean_env(HOME=str(tmp_path))
    code, output = await doctor("--state-dir", str(state), "--url", "none", "--agent", "claude", "--dir",
                                str(project), env=env)
    assert f"ok    config {project / '.mcp.json'}: holds openab_browser (check: `claude mcp list`)" in output, output
    (project / ".mcp.json").write_text('{"mcpServers": {"openab_browser": ')
    code, output = await doctor("--state-dir", str(state), "--url", "none", "--agent", "claude", "--dir",
                                str(project), env=env)
    assert code == 1
    assert f"FAIL  config {project / '.mcp.json'}: not valid json" in output
    assert "openab config write --agent claude" in output


async def test_a_bridge_socket_others_can_reach_fails(tmp_path: Path) -> None:
    state, _ = private_state(tmp_path)
    folder = state / "browser"
    folder.mkdir(mode=0o700)
    path = folder / "browser.sock"
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(str(path))
        path.chmod(0o600)
        code, output = await doctor("--state-dir", str(state), "--url", "none", "--browser-mode", "bridge")
        assert code == 0, output
        assert f"ok    bridge socket {path}: mode 0600, folder 0700" in output
        path.chmod(0o666)
        code, output = await doctor("--state-dir", str(state), "--url", "none", "--browser-mode", "bridge")
    assert code == 1
    assert "other users could reach the browser" in output


async def test_an_open_bind_without_tls_fails(tmp_path: Path) -> None:
    state, _ = private_state(tmp_path)
    code, output = await doctor("--state-dir", str(state), "--url", "none", env=clean_env(OPENAB_HOST="0.0.0.0"))
    assert code == 1
    assert "TLS: none, and bound to 0.0.0.0: the key would cross the network in clear" in output
    assert "--tls-cert/--tls-key, or --behind-proxy" in output
    (tmp_path / "cert.pem").write_text("not a certificate")
    (tmp_path / "key.pem").write_text("not a key")
    code, output = await doctor("--state-dir", str(state), "--url", "none", "--tls-cert", str(tmp_path / "cert.pem"),
                                "--tls-key", str(tmp_path / "key.pem"))
    assert code == 1
    assert "FAIL  TLS: cannot load the TLS certificate" in output
