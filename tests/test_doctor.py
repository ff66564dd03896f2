"""`openab doctor`, run as a person runs it (a subprocess), against real files, real agent CLIs from
tests/agents/node_modules and a real gateway: what is right says ok, what is wrong says FAIL with a fix, and the
exit code tells a script which."""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import signal
import socket
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from gateway_harness import run_gateway
from test_request_log import openab_run
from waits import eventually

from openab_browser.core.mcp.audit import AuditLog
from openab_browser.core.session_naming import SessionNaming
from openab_browser.core.statedir import naming_secret

pytestmark = pytest.mark.anyio

OPENAB = [sys.executable, "-m", "openab_browser.gateway.cli"]
AGENT_BIN = Path(__file__).resolve().parent / "agents" / "node_modules" / ".bin"


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAB_")}
    env.update(extra)
    return env


async def doctor(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None,
                 offline: bool = False) -> tuple[int, str]:
    """``offline``: in a network namespace of its own (where the machine allows one), for a doctor that runs the
    agent CLIs found on PATH (their `mcp list` may reach for the network) and needs no gateway."""
    from agents.offline import can_unshare

    argv = [*OPENAB, "doctor", *args]
    process = await asyncio.create_subprocess_exec(
        *(["unshare", "-n", *argv] if offline and can_unshare() else argv), stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, env=env or clean_env(), cwd=cwd)
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
        code, output = await doctor("--state-dir", str(state), "--key-file", str(key_file), "--url", gw.ws_url)
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
        code, output = await doctor("--state-dir", str(state), "--key-file", str(key_file), "--url", gw.ws_url)
    assert code == 1
    assert "the handshake was refused with HTTP 401" in output
    assert "fix: the key here is not the pod's" in output
    assert key_file.read_text() not in output


async def test_no_gateway_running_fails_with_how_to_start_it(tmp_path: Path) -> None:
    async with run_gateway() as gw:
        url = gw.ws_url  # a port that was just released: nothing answers there now
    state, key_file = private_state(tmp_path)
    code, output = await doctor("--state-dir", str(state), "--key-file", str(key_file), "--url", url)
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
    # Their `mcp list` runs too: in a folder of the test's own, claude's state in it too, with no network.
    env = clean_env(PATH=f"{AGENT_BIN}{os.pathsep}{os.environ['PATH']}", CLAUDE_CONFIG_DIR=str(tmp_path / "claude"))
    code, output = await doctor("--state-dir", str(state), "--url", "none", "--agent", "claude", "--agent", "codex",
                                "--dir", str(tmp_path), env=env, offline=True)
    assert code == 0, output
    assert f"ok    agent claude: {AGENT_BIN / 'claude-agent-acp'}" in output
    # codex-acp takes no --version (its recipe says so): found is all there is to say, with no warning.
    assert f"ok    agent codex: {AGENT_BIN / 'codex-acp'} (it takes no --version)" in output, output
    assert "warn  agent codex" not in output, output
    assert "failed)" not in output
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


async def test_an_agent_whose_version_fails_is_a_warning_with_the_reason(tmp_path: Path) -> None:
    state, _ = private_state(tmp_path)
    cli = tmp_path / "broken-agent"
    cli.write_text("#!/bin/sh\necho 'error while loading shared libraries: libnode.so' >&2\nexit 127\n")
    cli.chmod(0o755)
    code, output = await doctor("--state-dir", str(state), "--url", "none", "--agent", "claude",
                                env=clean_env(OPENAB_AGENT_CMD=str(cli)))
    assert code == 0, output  # a warning: the CLI is there, and may still speak ACP
    assert (f"warn  agent claude: {cli} is there, but `{cli} --version` exited with status 127: error while "
            "loading shared libraries: libnode.so") in output, output
    assert f"fix: its version is unknown: run `{cli} --version` by hand" in output
    assert "ok    agent claude" not in output and "failed)" not in output


# -- the running pod, found without flags ------------------------------------------------------------------


async def test_doctor_and_audit_find_a_pod_on_port_0_where_openab_run_chose_its_state_dir(tmp_path: Path) -> None:
    key = secrets.token_urlsafe(32)
    xdg = tmp_path / "xdg"
    state = xdg / "openab"  # where `openab run` keeps its state with XDG_STATE_HOME set and no OPENAB_STATE_DIR
    earlier = AuditLog(state, tag=SessionNaming(naming_secret(state)).tag)
    earlier.tool_call("sess_x", {"name": "browser_snapshot"}, {"content": []}, 0.01)  # a call of an earlier run
    env = clean_env(XDG_STATE_HOME=str(xdg), OPENAB_ACP_AUTH_KEY=key)
    with openab_run(None, {"XDG_STATE_HOME": str(xdg), "OPENAB_ACP_AUTH_KEY": key}, "--port", "0") as (_, output):
        await eventually((state / "pod.json").exists, what="`openab run` to write its pod.json")
        assert stat.S_IMODE((state / "pod.json").stat().st_mode) == 0o600
        running = json.loads((state / "pod.json").read_text())
        port = running["port"]
        assert port != 0 and running["scheme"] == "ws"
        code, said = await doctor(env=env)
        listed = await asyncio.to_thread(subprocess.run, [*OPENAB, "audit"], env=env, capture_output=True,
                                         text=True, timeout=60, check=False)
    assert code == 0, said
    assert f"ok    pod: pid {running['pid']} serves ws://127.0.0.1:{port}/acp" in said
    assert f"ok    gateway ws://127.0.0.1:{port}/acp: key accepted, ACP protocol 1" in said
    assert listed.returncode == 0 and len(listed.stdout.splitlines()) == 2, listed.stderr
    assert not (state / "pod.json").exists(), "a clean exit removes it"
    assert key not in said and key not in "\n".join(output.lines)


async def test_a_pod_killed_leaves_a_stale_file_doctor_names(tmp_path: Path) -> None:
    key = secrets.token_urlsafe(32)
    state = tmp_path / "state"
    with openab_run(state, {"OPENAB_ACP_AUTH_KEY": key}, "--port", "0"):
        await eventually((state / "pod.json").exists, what="`openab run` to write its pod.json")
        pid = json.loads((state / "pod.json").read_text())["pid"]
        os.kill(pid, signal.SIGKILL)  # the child this test started, by its id
        await eventually(lambda: _gone(pid), what=f"pid {pid} to stop running")
    code, output = await doctor("--state-dir", str(state), env=clean_env(OPENAB_ACP_AUTH_KEY=key))
    assert f"warn  pod: {state / 'pod.json'} names pid {pid}, which is not running" in output, output
    assert code == 1 and "gateway http://127.0.0.1:8080/healthz" in output  # then the settings' port, as before


def _gone(pid: int) -> bool:
    return not Path(f"/proc/{pid}").exists() or Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"


def _link(path: Path) -> None:
    target = path.parent.parent / "elsewhere.json"
    target.write_text('{"pid": 1, "host": "evil.example", "port": 443, "scheme": "wss", "started": "x"}')
    path.symlink_to(target)


def _foreign(path: Path) -> None:
    path.write_text(f'{{"pid": {os.getpid()}, "host": "127.0.0.1", "port": 9, "scheme": "ws", "started": "x"}}')
    path.chmod(0o600)
    os.chown(path, 65534, 65534)


def _huge(path: Path) -> None:
    path.write_text('{"pid": 1, "host": "' + "a" * 1_000_000 + '", "port": 9, "scheme": "ws", "started": "x"}')
    path.chmod(0o600)


def _not_ours(path: Path) -> None:
    path.write_text('{"pid": "1; rm -rf /", "host": "127.0.0.1", "port": 9, "scheme": "ws", "started": "x"}')
    path.chmod(0o600)


@pytest.mark.parametrize(("plant", "said"), [
    (_link, "is a symbolic link"), (_foreign, "is not a plain file of ours"), (_huge, "larger than 4096 bytes"),
    (_not_ours, "is not what `openab run` writes"),
])
async def test_a_planted_pod_file_is_refused_not_believed(tmp_path: Path, plant: Callable[[Path], None],
                                                          said: str) -> None:
    if plant is _foreign and os.geteuid() != 0:
        pytest.skip("gives the file to another uid")
    state, _ = private_state(tmp_path)
    plant(state / "pod.json")
    code, output = await doctor("--state-dir", str(state), "--url", "none")
    assert code == 1
    (line,) = [line for line in output.splitlines() if line.startswith("FAIL  pod:")]
    assert said in line and len(line) < 400, line
    assert f"fix: remove {state / 'pod.json'}" in output


async def test_openab_run_replaces_a_planted_link_and_never_writes_through_it(tmp_path: Path) -> None:
    state, _ = private_state(tmp_path)
    _link(state / "pod.json")
    before = (tmp_path / "elsewhere.json").read_text()
    with openab_run(state, {"OPENAB_ACP_AUTH_KEY": secrets.token_urlsafe(32)}, "--port", "0"):
        pod_file = state / "pod.json"
        await eventually(lambda: pod_file.exists() and not pod_file.is_symlink(),
                         what=f"{pod_file} to become the pod's own file")
    assert (tmp_path / "elsewhere.json").read_text() == before


async def test_the_metrics_key_is_read_as_the_pod_reads_it_and_never_shown(tmp_path: Path) -> None:
    key = secrets.token_urlsafe(32)
    state, key_file = private_state(tmp_path, key)
    metrics_file = tmp_path / "metrics-key"
    metrics_key = secrets.token_hex(32)
    metrics_file.write_text(metrics_key)
    metrics_file.chmod(0o600)
    code, output = await doctor("--state-dir", str(state), "--url", "none",
                                env=clean_env(OPENAB_METRICS_KEY_FILE=str(metrics_file)))
    assert code == 0, output
    assert f"ok    metrics key: 64 characters, from {metrics_file}; /metrics takes it" in output
    # The /acp key (here the kept one) as the metrics key would open /acp for the scraper.
    code, output = await doctor("--state-dir", str(state), "--url", "none",
                                env=clean_env(OPENAB_METRICS_KEY_FILE=str(key_file)))
    assert code == 1 and "FAIL  metrics key: the metrics key is the /acp key" in output
    metrics_file.chmod(0o644)
    code, output = await doctor("--state-dir", str(state), "--url", "none",
                                env=clean_env(OPENAB_METRICS_KEY_FILE=str(metrics_file)))
    assert code == 1 and "FAIL  metrics key:" in output and "can be read by other users" in output
    assert key not in output and metrics_key not in output


async def test_each_clis_own_mcp_list_says_what_it_makes_of_our_entry_and_the_fix(tmp_path: Path) -> None:
    from agents.harness import agent_env, require
    from agents.mcp_peer import browser_peer
    from agents.offline import HostRelay, can_unshare

    from openab_browser.core.agents.config import HttpEndpoint, trust_folder, write

    require("claude")
    require("gemini")
    state, _ = private_state(tmp_path)
    # One HOME and project folder for both CLIs, each set up to run offline as tests/agents runs them.
    claude = agent_env("claude", "http://127.0.0.1:9", tmp_path / "cli")
    gemini = agent_env("gemini", "http://127.0.0.1:9", tmp_path / "cli")
    settings = json.loads(gemini.files["settings"].read_text())
    del settings["security"]["folderTrust"]  # the harness turns it off; a person's gemini has it on
    gemini.files["settings"].write_text(json.dumps(settings))
    env, project = {**claude.env, **gemini.env}, claude.cwd
    args = ("--state-dir", str(state), "--url", "none", "--agent", "claude", "--agent", "gemini",
            "--dir", str(project))

    with browser_peer(secrets.token_urlsafe(16)) as peer, HostRelay([peer.port]) as relay:
        async def run() -> str:
            argv = [*OPENAB, "doctor", *args]
            process = await asyncio.create_subprocess_exec(
                *(relay.wrap(argv) if can_unshare() else argv), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                env=env)
            async with asyncio.timeout(120):
                output, _ = await process.communicate()
            said = output.decode()
            assert peer.token not in said
            return said

        for cli in ("claude", "gemini"):
            await asyncio.to_thread(write, cli, HttpEndpoint(peer.url, peer.token), dir=project, env=env)
        said = await run()
        where = f"`claude mcp list` in {project}: openab_browser"
        assert f"warn  {where} pending approval, because claude does not trust {project}" in said, said
        assert f"`openab config write --agent claude --dir {project} --trust-folder`" in said
        assert f"warn  `gemini mcp list` in {project}: openab_browser disabled, because gemini does not trust" in said
        assert f"`openab config write --agent gemini --dir {project} --trust-folder`" in said

        for cli in ("claude", "gemini"):
            await asyncio.to_thread(trust_folder, cli, project, env=env)
        said = await run()
        assert f"ok    {where} connected" in said, said
        assert f"ok    `gemini mcp list` in {project}: openab_browser connected" in said

        # Trusted, but the approval of our server alone gone: claude's own words again, another fix.
        (project / ".claude" / "settings.local.json").unlink()
        (project / ".gemini" / "settings.json").unlink()
        said = await run()
        assert f"warn  {where} pending approval: the folder is trusted, but .claude/settings.local.json" in said
        assert f"warn  `gemini mcp list` in {project}: openab_browser is not listed" in said


async def test_the_kept_verifier_is_checked_and_a_given_key_compared_with_it(tmp_path: Path) -> None:
    from openab_browser.gateway.acp_key import settle_kept_key, verifier_path

    state = tmp_path / "state"
    key = settle_kept_key(state, strong=32).key
    assert key is not None
    verifier = verifier_path(state)
    code, output = await doctor("--state-dir", str(state), "--url", "none")
    assert code == 0, output
    assert f"ok    key: kept only as a verifier (PBKDF2-SHA256, 1000 iterations, mode 0600) in {verifier}" in output
    code, output = await doctor("--state-dir", str(state), "--url", "none", env=clean_env(OPENAB_ACP_AUTH_KEY=key))
    assert f"ok    key: OPENAB_ACP_AUTH_KEY is the key whose verifier the pod keeps in {verifier}" in output
    other = secrets.token_urlsafe(32)
    code, output = await doctor("--state-dir", str(state), "--url", "none", env=clean_env(OPENAB_ACP_AUTH_KEY=other))
    assert "warn  key: OPENAB_ACP_AUTH_KEY is not the key whose verifier" in output
    # The pod's own key as the metrics key would open /acp for the scraper: found through the verifier.
    metrics_file = tmp_path / "metrics-key"
    metrics_file.write_text(key)
    metrics_file.chmod(0o600)
    code, output = await doctor("--state-dir", str(state), "--url", "none",
                                env=clean_env(OPENAB_METRICS_KEY_FILE=str(metrics_file)))
    assert code == 1 and "FAIL  metrics key: the metrics key is the /acp key" in output
    assert key not in output and other not in output
    verifier.chmod(0o644)
    code, output = await doctor("--state-dir", str(state), "--url", "none")
    assert code == 1 and f"FAIL  key: {verifier} can be read by other users" in output
    verifier.chmod(0o600)
    verifier.write_text(verifier.read_text()[:20])
    code, output = await doctor("--state-dir", str(state), "--url", "none")
    assert code == 1 and "is not a key verifier openab can use" in output and "openab key rotate" in output
