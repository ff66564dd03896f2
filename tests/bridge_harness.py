"""The bridge's test pod and its processes, for tests/test_bridge.py and tests/test_bridge_restarts.py: a gateway
in bridge mode, fake extensions with their own sessions, and relays spawned as an agent CLI spawns its MCP server.

The "agent" here is a small intermediate process that carries ``OPENAB_BROWSER_CHANNEL`` in its environment and
starts the relay with a scrubbed one, as agent CLIs do with their MCP servers.

The bridge admits a relay only below the agent the pod registered for its session (``agent_started``). The
official MCP client spawns the "agent" itself and its relay dials at once, before a test could register that
process, so here the test process stands in for every session's agent: it is registered, and the ancestry
walk goes up to the test's parent instead of stopping at the test process (:func:`stand_in_for_agents`).
``tests/test_bridge_attacks.py`` runs the production arrangement, with real agent processes.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import termios
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fake_extension import FakeExtension, ToolFunction, connect_extension, text_result
from gateway_harness import RunningGateway, run_gateway
from mcp import StdioServerParameters
from mcp.shared.exceptions import MCPError

from openab_browser.bridge.server import BridgeServer
from openab_browser.core.mcp.access import BROWSER_CHANNEL_ENV
from openab_browser.core.pod import Pod
from openab_browser.core.sessions import Session

OPENAB = str(Path(sys.executable).parent / "openab")
SOCKET_ENV = "OPENAB_BROWSER_SOCKET"
REAL_PYTHON = os.path.realpath(sys.executable)

# The "agent": it holds the session's variables and starts its MCP server with only PATH and HOME, as
# Cursor does. It forwards stdio untouched (the relay inherits the pipes) and exits with the relay.
AGENT = """
import os, subprocess, sys
relay_env = {k: os.environ[k] for k in ("PATH", "HOME") if k in os.environ}
relay_env.update(dict(item.split("=", 1) for item in os.environ.get("RELAY_EXTRA_ENV", "").split() if item))
sys.exit(subprocess.call(sys.argv[1:], env=relay_env))
"""

# A raw client of the pod's socket: sends each argument line, prints every line it gets back as JSON, one
# per line, reading one answer per sent line (after the greeting) until the socket closes.
RAW_CLIENT = """
import json, socket, sys
path, lines = sys.argv[1], json.loads(sys.stdin.read())
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(20)
s.connect(path)
f = s.makefile("rb")
def line():
    try:
        got = f.readline()
    except OSError:
        got = b""
    print(got.decode().rstrip("\\n") if got else "EOF", flush=True)
    return got
if line():
    for text in lines:
        try:
            s.sendall(text.encode() + b"\\n")
        except OSError as exc:
            print("EOF", flush=True)
            break
        if not line():
            break
"""


@dataclass
class BridgePod:
    gateway: RunningGateway
    bridge: BridgeServer

    @property
    def socket(self) -> Path:
        return self.bridge.path

    def session(self, session_id: str) -> Session:
        return session_in(self.gateway.pod, session_id)

    def channel(self, session_id: str) -> str:
        """The session's channel: named by the pod's secret, not derived from the id alone."""
        return self.session(session_id).channel


def stand_in_for_agents(bridge: BridgeServer, *sessions: Session) -> BridgeServer:
    """Make the test process the agent of ``sessions`` (see the module's docstring): the walk goes on past it
    to its parent, and it is registered, by pid and start time, as each session's agent."""
    bridge.trusted_parent = os.getppid()
    for session in sessions:
        bridge.agent_started(session, os.getpid())
    return bridge


def session_in(pod: Pod, session_id: str) -> Session:
    """The pod's session ``session_id``, or the one it would name so (a session it does not hold yet)."""
    return pod.sessions.get(session_id) or Session(session_id, pod.sessions.naming.channel(session_id), 0.0, 0.0)


@contextlib.asynccontextmanager
async def bridge_pod() -> AsyncIterator[BridgePod]:
    # Short: a Unix socket address holds at most 107 bytes, and pytest's tmp_path can be longer.
    root = Path(tempfile.mkdtemp(prefix="oab-"))
    try:
        async with run_gateway(browser_mode="bridge", browser_socket=root / "browser" / "browser.sock") as gateway:
            assert isinstance(gateway.pod.browser, BridgeServer)  # the pod started it before serving
            pod = BridgePod(gateway, stand_in_for_agents(gateway.pod.browser))
            try:
                yield pod
            finally:
                await pod.bridge.aclose()  # the one running now: a test may have restarted it
    finally:
        shutil.rmtree(root, ignore_errors=True)


@contextlib.asynccontextmanager
async def browser_session(
    pod: BridgePod, who: str, **tools: ToolFunction
) -> AsyncIterator[tuple[str, FakeExtension]]:
    """A fake extension with its own session and browser tools that say whose browser they are."""
    async with connect_extension(pod.gateway.ws_url, pod.gateway.token) as extension:
        for name, function in tools.items():
            extension.add_tool(name, function)

        async def whoami(arguments: dict[str, Any]) -> dict[str, Any]:
            return text_result(f"browser of {who}")

        async def navigate(arguments: dict[str, Any]) -> dict[str, Any]:
            return text_result(f"{who} navigated to {arguments.get('url')}")

        extension.add_tool("whoami", whoami)
        extension.add_tool("browser.navigate", navigate, {"type": "object", "properties": {"url": {"type": "string"}}})
        await extension.initialize()
        session_id = await extension.new_session([{"type": "acp", "id": f"srv-{who}", "name": "browser"}])
        await pod.gateway.pod.tunnels.wait_attached(session_id, timeout=10)
        stand_in_for_agents(pod.bridge, pod.session(session_id))
        yield session_id, extension


def relay_params(
    channel: str | None, socket: Path | None, *, command: list[str] | None = None, relay_env: str = ""
) -> StdioServerParameters:
    """Spawn the relay as the grandchild of the MCP client, under an "agent" that carries ``channel``."""
    env = {"RELAY_EXTRA_ENV": relay_env}
    if channel is not None:
        env[BROWSER_CHANNEL_ENV] = channel
    if socket is not None:
        env[SOCKET_ENV] = str(socket)
    return StdioServerParameters(
        command=sys.executable, args=["-c", AGENT, *(command or [OPENAB, "browser-bridge"])], env=env
    )


async def raw_exchange(pod: BridgePod, channel: str | None, lines: list[str], *, user: int | None = None) -> list[str]:
    """What a raw socket client (in its own process, under ``channel``) gets back for ``lines``."""
    env = {"PATH": os.environ["PATH"]}
    if channel is not None:
        env[BROWSER_CHANNEL_ENV] = channel
    # The system interpreter: the venv's lives under /root, which another user cannot enter.
    python = "/usr/bin/python3" if user is not None else sys.executable
    process = await asyncio.create_subprocess_exec(
        python, "-I", "-S", "-c", RAW_CLIENT, str(pod.socket), env=env, user=user,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    async with asyncio.timeout(60):
        out, err = await process.communicate(json.dumps(lines).encode())
    return out.decode().splitlines() + [f"STDERR {line}" for line in err.decode().splitlines()]


@contextlib.asynccontextmanager
async def mcp_error(code: int | None = None) -> AsyncIterator[list[MCPError]]:
    """Expect an MCPError (the client may wrap it in exception groups); the list holds it afterwards."""
    caught: list[MCPError] = []
    try:
        yield caught
    except BaseException as exc:  # unwrapped, and re-raised when it is not ours
        errors = [exc]
        while errors and not isinstance(errors[0], MCPError):
            first = errors.pop(0)
            errors += list(getattr(first, "exceptions", []))
        if not errors:
            raise
        caught.append(errors[0])  # type: ignore[arg-type]
    assert caught, "no MCP error"
    assert code is None or caught[0].error.code == code, caught[0].error


def text_of(result: Any) -> str:
    return "\n".join(block.text for block in result.content if getattr(block, "type", "") == "text")


def relay_pid() -> int:
    """The pid of the one relay this test runs: an ``openab browser-bridge`` whose parent, the "agent", is ours."""

    def parent(pid: int) -> int:
        return int(Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[1])

    found = []
    for process in Path("/proc").iterdir():
        if not process.name.isdigit():
            continue
        try:
            if b"browser-bridge" in (process / "cmdline").read_bytes().split(b"\0") and (
                parent(parent(int(process.name))) == os.getpid()
            ):
                found.append(int(process.name))
        except (OSError, ValueError, IndexError):  # gone meanwhile, or a kernel thread
            continue
    assert len(found) == 1, found
    return found[0]


def unread_stdin(pid: int) -> int:
    """How many bytes wait in process ``pid``'s stdin pipe, written but not yet read by it."""
    fd = os.open(f"/proc/{pid}/fd/0", os.O_RDONLY | os.O_NONBLOCK)
    try:
        return int(struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0" * 4))[0])
    finally:
        os.close(fd)
