"""`openab run` as the pod's real main process: flags and env, a session served end to end by the built-in
agent through the proxy (and through the bridge), one log line per session event, a clean stop."""

from __future__ import annotations

import asyncio
import os
import re
import secrets
import shutil
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from fake_extension import connect_extension
from test_runtime_limits import cgroup_modes, escapee_pids, escaping_agent
from test_runtime_pod import BROWSER_SERVER, FakeBrowser, live_group, prompt
from waits import eventually

from openab_browser.core.procfs import read_stat
from openab_browser.core.session_naming import SessionNaming
from openab_browser.core.statedir import naming_secret

pytestmark = pytest.mark.anyio

OPENAB = [sys.executable, "-m", "openab_browser.gateway.cli"]


class Pod:
    def __init__(self, process: asyncio.subprocess.Process, url: str, token: str) -> None:
        self.process, self.url, self.token = process, url, token
        self.log: list[str] = []

    @property
    def ws_url(self) -> str:
        return "ws" + self.url.removeprefix("http") + "/acp"


async def start_pod(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> Pod:
    token = secrets.token_urlsafe(24)
    process = await asyncio.create_subprocess_exec(
        *OPENAB, "run", "--port", "0", "--state-dir", str(tmp_path / "state"), *args,
        env={**os.environ, "OPENAB_ACP_AUTH_KEY": token, **(env or {})},
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE, start_new_session=True,
    )
    assert process.stderr is not None
    lines: list[str] = []
    async with asyncio.timeout(30):
        while True:
            line = (await process.stderr.readline()).decode()
            if not line:
                raise AssertionError("openab run exited while starting:\n" + "".join(lines))
            lines.append(line)
            if match := re.search(r"running on (http://\S+)", line, re.IGNORECASE):
                pod = Pod(process, match.group(1), token)
                pod.log = lines
                return pod


async def read_log(pod: Pod) -> AsyncIterator[str]:
    assert pod.process.stderr is not None
    while line := await pod.process.stderr.readline():
        pod.log.append(line.decode())
        yield line.decode()


async def stop(pod: Pod) -> int:
    pod.process.send_signal(signal.SIGTERM)
    async with asyncio.timeout(30):
        async for _ in read_log(pod):
            pass
        return await pod.process.wait()


@pytest.mark.parametrize(("mode", "loop"), [("proxy", None), ("bridge", None), ("proxy", "asyncio")])
async def test_openab_run_serves_a_session_with_the_builtin_agent(tmp_path: Path, mode: str, loop: str | None) -> None:
    # A short socket path: pytest's tmp_path may be too long for a Unix socket address.
    socket_dir = Path(f"/tmp/openab-{secrets.token_hex(4)}")
    pod = await start_pod(tmp_path, "--browser-mode", mode, *(["--event-loop", loop] if loop else []),
                          env={"OPENAB_AGENT": "builtin", "OPENAB_BROWSER_SOCKET": str(socket_dir / "s")})
    try:
        async with connect_extension(pod.ws_url, pod.token) as ext:
            await ext.initialize()
            browser = FakeBrowser(ext)
            session_id = await ext.new_session([BROWSER_SERVER])
            # The tunnel is up once the pod has listed the browser's tools.
            await eventually(lambda: any((m.get("params") or {}).get("method") == "tools/list"
                                         for m in ext.server_requests))
            turn = await prompt(ext, session_id, "open https://example.org/run; read", timeout=60)
    finally:
        code = await stop(pod)
        shutil.rmtree(socket_dir, ignore_errors=True)

    assert turn.result == {"stopReason": "end_turn"}, turn.error
    assert browser.url == "https://example.org/run"
    assert "Example Domain" in turn.text
    log = "".join(pod.log)
    # uvloop is a dependency: the pod runs on it unless told otherwise, and says so.
    assert f"event loop: {loop or 'uvloop'}; HTTP parser: httptools" in log
    # Its heap as built is set aside from the collector, whose young passes come less often (core/heap.py).
    assert re.search(r"heap: [1-9]\d{4,} objects of the built pod frozen, young generation 10000", log), log
    # The log names the session by its tag: its id would let a reader of the log resume it.
    assert "sess_" not in log
    tag = SessionNaming(naming_secret(tmp_path / "state")).tag(session_id)
    assert f"session {tag} created" in log
    assert f"session {tag}: prompt to openab built-in agent" in log
    assert f"session {tag}: turn ended (end_turn)" in log
    # A graceful stop (uvicorn then re-raises SIGTERM, so the exit status says how it was asked to stop).
    assert code in (0, -signal.SIGTERM) and f"session {tag} evicted: pod shutting down" in log
    pids = [int(p) for p in re.findall(r"\(pid (\d+)", log)]
    assert pids and all(not live_group(pid) for pid in pids), "no agent outlives the pod"


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
async def test_a_stop_by_signal_ends_with_status_0_and_no_traceback(tmp_path: Path, sig: signal.Signals) -> None:
    # JupyterHub's local spawner stops a server with SIGINT first, a person with Ctrl+C, Kubernetes with SIGTERM:
    # each is a drained stop, which ends with 0 and a log without a KeyboardInterrupt traceback.
    pod = await start_pod(tmp_path, env={"OPENAB_AGENT": "builtin"})
    async with connect_extension(pod.ws_url, pod.token) as ext:
        await ext.initialize()
        await ext.new_session([])
        pod.process.send_signal(sig)
        async with asyncio.timeout(30):
            async for _ in read_log(pod):
                pass
            code = await pod.process.wait()
    log = "".join(pod.log)
    assert code == 0, log[-3000:]
    assert "Traceback" not in log and "KeyboardInterrupt" not in log, log[-3000:]
    assert "evicted: pod shutting down" in log


async def test_openab_run_refuses_an_unknown_agent_and_an_unsafe_bind(tmp_path: Path) -> None:
    unknown = await asyncio.create_subprocess_exec(
        *OPENAB, "run", "--agent", "custom", "--state-dir", str(tmp_path), stderr=asyncio.subprocess.PIPE,
    )
    _, err = await unknown.communicate()
    assert unknown.returncode == 2 and b"--agent custom needs --agent-cmd" in err

    exposed = await asyncio.create_subprocess_exec(
        *OPENAB, "run", "--host", "0.0.0.0", "--insecure-no-key", "--state-dir", str(tmp_path / "exposed"),
        stderr=asyncio.subprocess.PIPE, env={k: v for k, v in os.environ.items() if k != "OPENAB_ACP_AUTH_KEY"},
    )
    _, err = await exposed.communicate()
    assert exposed.returncode == 2 and b"without a key" in err

    no_such_loop = await asyncio.create_subprocess_exec(
        *OPENAB, "run", "--state-dir", str(tmp_path / "loop"), stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "OPENAB_EVENT_LOOP": "trio"},
    )
    _, err = await no_such_loop.communicate()
    assert no_such_loop.returncode == 2 and b"event_loop" in err and b"'uvloop'" in err, err


# -- signals: SIGHUP, and what a SIGKILL leaves ---------------------------------------------------------------

async def test_sighup_without_tls_is_a_logged_no_op_and_the_pod_serves_on(tmp_path: Path) -> None:
    pod = await start_pod(tmp_path)
    try:
        async with connect_extension(pod.ws_url, pod.token) as ext:
            await ext.initialize()
            session_id = await ext.new_session()
            for _ in range(2):  # a terminal's hangup, an operator's `kill -HUP` out of habit
                pod.process.send_signal(signal.SIGHUP)
                async with asyncio.timeout(15):
                    async for line in read_log(pod):
                        if "SIGHUP: nothing to reload without TLS" in line:
                            break
            # The same socket and its session carry on; so does a new socket.
            assert (await ext.initialize())["protocolVersion"] == 1
            assert await ext.request("session/close", {"sessionId": session_id}) == {}
        async with connect_extension(pod.ws_url, pod.token) as ext:
            assert (await ext.initialize())["protocolVersion"] == 1
        assert pod.process.returncode is None
    finally:
        code = await stop(pod)
    assert code in (0, -signal.SIGTERM), "only SIGTERM stops it, drained"


def alive(pid: int) -> bool:
    """Running: not gone, not a zombie (the sandbox's PID 1 may not reap what it adopts)."""
    st = read_stat(pid)
    return st is not None and st.state != "Z"


def own_pid_namespace(pid: int) -> bool:
    """Whether ``pid`` lives in a PID namespace below the pod's (a confined agent's, docs/security.md)."""
    status = Path(f"/proc/{pid}/status").read_text()
    return len(next(line for line in status.splitlines() if line.startswith("NSpid:")).split()) > 2


@cgroup_modes
async def test_the_next_start_sweeps_what_a_pod_killed_by_sigkill_left(tmp_path: Path, cgroups: bool) -> None:
    command = " ".join(escaping_agent(tmp_path))
    env = {"OPENAB_AGENT_CGROUPS": "true" if cgroups else "false"}
    args = ("--agent", "custom", "--agent-cmd", command)
    pod = await start_pod(tmp_path, *args, env=env)
    pids: dict[str, int] = {}
    try:
        async with connect_extension(pod.ws_url, pod.token) as ext:
            await ext.initialize()
            session_id = await ext.new_session()
            turn = await prompt(ext, session_id, "hello")
            assert turn.result == {"stopReason": "end_turn"}, turn.error
            pids = await escapee_pids(tmp_path)
            own_pids = own_pid_namespace(pids["child"])
            sessions = tmp_path / "state" / "sessions"
            assert [p.name for p in sessions.iterdir()], "the session has its folder"
            # An OOM kill, `kill -9`, a node's crash: no drain, no eviction.
            pod.process.kill()
            assert await pod.process.wait() == -signal.SIGKILL
        if own_pids:
            # A confined agent in a PID namespace of its own (its launcher made one): the agent ends at its stdin's
            # end, and the kernel ends everything it set loose with it, before any sweep.
            await eventually(lambda: not any(alive(pid) for pid in pids.values()), timeout=10)
        else:
            # What its agent set loose outlives it: a setsid child (its environment shed) and a daemon.
            assert alive(pids["child"]) and alive(pids["daemon"])
        assert [p.name for p in sessions.iterdir()], "the session folder stays"

        pod = await start_pod(tmp_path, *args, env=env)
        swept = "".join(pod.log)
        killed = r"\d+" if own_pids else r"[1-9]\d*"
        assert re.search(rf"earlier run \(pid \d+\) did not stop cleanly: {killed} process\(es\) its agents left "
                         r"were killed and 1 session folder\(s\) removed", swept), swept
        assert list(sessions.iterdir()) == []
        await eventually(lambda: not alive(pids["daemon"]), timeout=10)
        if cgroups or own_pids:
            # Its cgroup held everything it started, whatever it did with its environment.
            await eventually(lambda: not alive(pids["child"]), timeout=10)
        else:
            # Without a cgroup only the run's mark finds a process whose parent is gone: one that shed its
            # environment as well is out of reach, and is left rather than guessed at.
            assert alive(pids["child"])
        async with connect_extension(pod.ws_url, pod.token) as ext:
            await ext.initialize()
            await ext.new_session()
        assert await stop(pod) in (0, -signal.SIGTERM)
        # A clean stop leaves nothing to sweep: the next start says nothing of an earlier run.
        pod = await start_pod(tmp_path, *args, env=env)
        assert "did not stop cleanly" not in "".join(pod.log)
    finally:
        if pod.process.returncode is None:
            await stop(pod)
        for pid in pids.values():
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
