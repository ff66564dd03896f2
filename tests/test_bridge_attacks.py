"""Attacks on the pod's browser socket from processes of the pod's own uid, set up as the runtime sets them up.

Here the test process is the pod: each session's agent is its own child, started with the session's
``OPENAB_BROWSER_CHANNEL`` and registered with ``BridgeServer.agent_started`` right after it is spawned, as
``core/agents/session_agent.py`` does, and the ancestry walk stops at the test process (the bridge's default
``trusted_parent``). Each "agent" waits for a go on its stdin, so it is registered before it, or anything under
it, dials the socket.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from fake_extension import FakeExtension, connect_extension, text_result
from gateway_harness import RunningGateway, run_gateway
from waits import eventually

from openab_browser.bridge.ancestry import process_identity
from openab_browser.bridge.framing import BRIDGE_REFUSED, READY_METHOD
from openab_browser.bridge.server import BridgeServer
from openab_browser.core.mcp.access import BROWSER_CHANNEL_ENV

pytestmark = pytest.mark.anyio

OPENAB = str(Path(sys.executable).parent / "openab")
SOCKET_ENV = "OPENAB_BROWSER_SOCKET"

# An "agent" of the pod. It reads "go" unbuffered (three bytes: what follows on its stdin is for whatever it
# starts), then:
#   hold N          dials the socket N times, then once more for each line it reads, prints each greeting line,
#                   and holds the connections until EOF;
#   relay OPENAB    runs `openab browser-bridge` as its child, with only PATH in its environment, on its stdio;
#   double-fork CHANNEL OPENAB
#                   forks; the child calls setsid(), forks again, prints the grandchild's pid and exits, so the
#                   grandchild is reparented out of the agent's tree; the grandchild then execs the relay with
#                   CHANNEL, another session's, in its environment, on the agent's stdio.
AGENT = r"""
import os, socket, subprocess, sys, time
sock_path = os.environ["OPENAB_BROWSER_SOCKET"]
assert os.read(0, 3) == b"go\n"
action = sys.argv[1]
if action == "hold":
    held = []
    def dial():
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(20)
        s.connect(sock_path)
        held.append(s)
        line = s.makefile("rb").readline()
        print(line.decode().rstrip("\n") or "EOF", flush=True)
    for _ in range(int(sys.argv[2])):
        dial()
    while sys.stdin.buffer.readline():
        dial()
elif action == "relay":
    sys.exit(subprocess.call([sys.argv[2], "browser-bridge"], env={"PATH": os.environ["PATH"]}))
elif action == "double-fork":
    middle = os.fork()
    if middle == 0:
        os.setsid()
        middle_pid = os.getpid()
        if os.fork():
            os._exit(0)
        print(f"pid {os.getpid()}", flush=True)
        deadline = time.monotonic() + 10
        while os.getppid() == middle_pid and time.monotonic() < deadline:  # until the middle one is gone
            time.sleep(0.01)
        env = {"PATH": os.environ["PATH"], "OPENAB_BROWSER_CHANNEL": sys.argv[2], "OPENAB_BROWSER_SOCKET": sock_path}
        os.execve(sys.argv[3], [sys.argv[3], "browser-bridge"], env)
    os.waitpid(middle, 0)
    while True:
        time.sleep(60)
"""

INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "attack"}}}


def parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[1])


@dataclass
class Agent:
    process: asyncio.subprocess.Process

    @property
    def pid(self) -> int:
        return self.process.pid

    async def go(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(b"go\n")
        await self.process.stdin.drain()

    async def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        await self.process.stdin.drain()

    async def dial(self) -> None:
        """Have a ``hold`` agent dial once more."""
        assert self.process.stdin is not None
        self.process.stdin.write(b"dial\n")
        await self.process.stdin.drain()

    async def line(self) -> str:
        assert self.process.stdout is not None
        async with asyncio.timeout(30):
            line = await self.process.stdout.readline()
        assert line, "the agent's stdout closed"
        return line.decode().rstrip("\n")

    async def greetings(self, count: int) -> list[dict[str, Any]]:
        return [json.loads(await self.line()) for _ in range(count)]


@dataclass
class Pod:
    gateway: RunningGateway
    bridge: BridgeServer
    sessions: dict[str, str]  # who -> session id
    log: Path
    agents: list[Agent] = field(default_factory=list)
    strays: list[int] = field(default_factory=list)  # processes that left an agent's tree, to end by pid

    def channel(self, who: str) -> str:
        session = self.gateway.pod.sessions.get(self.sessions[who])
        assert session is not None
        return session.channel

    def env(self, channel: str) -> dict[str, str]:
        return {"PATH": os.environ["PATH"], BROWSER_CHANNEL_ENV: channel, SOCKET_ENV: str(self.bridge.path)}

    async def agent(self, who: str, *args: str, register: bool = True, channel: str | None = None) -> Agent:
        """Start an agent for ``who``'s session (or with ``channel`` in its environment instead) and, as the
        runtime does, register it for that session before it may dial; then tell it to go."""
        env = self.env(channel or self.channel(who))
        with self.log.open("ab") as errors:
            process = await asyncio.create_subprocess_exec(
                sys.executable, "-I", "-c", AGENT, *args, env=env,
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errors,
            )
        agent = Agent(process)
        self.agents.append(agent)
        if register:
            session = self.gateway.pod.sessions.get(self.sessions[who])
            assert session is not None
            self.bridge.agent_started(session, process.pid)
        await agent.go()
        return agent


@contextlib.asynccontextmanager
async def attack_pod(*names: str) -> AsyncIterator[Pod]:
    """A bridge-mode pod with one browser session per name; each browser's ``whoami`` says whose it is."""
    root = Path(tempfile.mkdtemp(prefix="oab-"))
    try:
        async with (
            run_gateway(browser_mode="bridge", browser_socket=root / "browser" / "browser.sock") as gateway,
            contextlib.AsyncExitStack() as stack,
        ):
            assert isinstance(gateway.pod.browser, BridgeServer)
            assert gateway.pod.browser.trusted_parent == os.getpid()  # the production arrangement
            sessions = {}
            for who in names:
                extension: FakeExtension = await stack.enter_async_context(
                    connect_extension(gateway.ws_url, gateway.token)
                )

                async def whoami(arguments: dict[str, Any], who: str = who) -> dict[str, Any]:
                    return text_result(f"browser of {who}")

                extension.add_tool("whoami", whoami)
                await extension.initialize()
                sessions[who] = await extension.new_session([{"type": "acp", "id": f"srv-{who}", "name": "browser"}])
                await gateway.pod.tunnels.wait_attached(sessions[who], timeout=10)
            pod = Pod(gateway, gateway.pod.browser, sessions, root / "agents.log")
            try:
                yield pod
            finally:
                for agent in pod.agents:
                    if agent.process.stdin is not None:
                        agent.process.stdin.close()
                    with contextlib.suppress(ProcessLookupError):
                        agent.process.kill()
                    async with asyncio.timeout(10):
                        await agent.process.wait()
                for pid in pod.strays:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
    finally:
        shutil.rmtree(root, ignore_errors=True)


# -- the registered agent and its descendants are admitted ---------------------------------------------------


async def test_the_registered_agent_and_the_relay_it_spawns_reach_their_own_browser() -> None:
    async with attack_pod("alice") as pod:
        agent = await pod.agent("alice", "relay", OPENAB)
        await agent.send(INITIALIZE)
        assert json.loads(await agent.line())["result"]["serverInfo"]["name"] == "openab_browser"
        await agent.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                          "params": {"name": "whoami", "arguments": {}}})
        answer = json.loads(await agent.line())
        assert answer["result"]["content"] == [{"type": "text", "text": "browser of alice"}]

        holder = await pod.agent("alice", "hold", "1")  # the agent dialling the socket itself
        [greeting] = await holder.greetings(1)
        assert greeting["method"] == READY_METHOD and greeting["params"]["channel"] == pod.channel("alice")


# -- escaping the agent's tree ------------------------------------------------------------------------------


async def test_a_double_forked_process_cannot_take_another_sessions_channel() -> None:
    async with attack_pod("alice", "bob") as pod:
        bob = await pod.agent("bob", "hold", "1")
        [greeting] = await bob.greetings(1)
        assert greeting["params"]["channel"] == pod.channel("bob")  # bob's own agent is welcome

        # A process under alice's agent escapes its tree and runs a relay with bob's channel.
        alice = await pod.agent("alice", "double-fork", pod.channel("bob"), OPENAB)
        escaped = int((await alice.line()).removeprefix("pid "))
        pod.strays.append(escaped)
        await alice.send(INITIALIZE)
        answer = json.loads(await alice.line())
        # It really left alice's agent's tree (for init, or for the pod when the pod is a child subreaper).
        assert parent_of(escaped) != alice.pid
        assert answer.get("error", {}).get("code") == BRIDGE_REFUSED, answer
        message = answer["error"]["message"]
        assert f"pid {bob.pid}" in message and "not a descendant" in message, message
        assert pod.bridge.connections == 1  # bob's agent's, and no other


async def test_the_right_channel_without_its_agent_above_is_refused() -> None:
    async with attack_pod("alice") as pod:
        agent = await pod.agent("alice", "hold", "1")
        [greeting] = await agent.greetings(1)
        assert greeting["params"]["channel"] == pod.channel("alice")
        # A process of the pod's uid that carries alice's channel, but was not started under alice's agent.
        stranger = await pod.agent("alice", "hold", "1", register=False)
        [refusal] = await stranger.greetings(1)
        assert refusal["id"] is None and refusal["error"]["code"] == BRIDGE_REFUSED
        assert "not a descendant" in refusal["error"]["message"]
        assert f"pid {agent.pid}" in refusal["error"]["message"]


async def test_a_channel_whose_session_has_no_agent_is_refused() -> None:
    async with attack_pod("alice") as pod:
        stranger = await pod.agent("alice", "hold", "1", register=False)
        [refusal] = await stranger.greetings(1)
        assert refusal["error"]["code"] == BRIDGE_REFUSED
        assert "no agent" in refusal["error"]["message"], refusal


async def test_a_closed_sessions_agent_is_forgotten() -> None:
    async with attack_pod("alice") as pod:
        agent = await pod.agent("alice", "hold", "1")
        [first] = await agent.greetings(1)
        assert first["method"] == READY_METHOD
        session = pod.gateway.pod.sessions.get(pod.sessions["alice"])
        assert session is not None
        await pod.bridge.close(session)  # what the pod does when it evicts the session
        await agent.dial()  # the same process again: its session no longer has an agent
        [second] = await agent.greetings(1)
        assert second["error"]["code"] == BRIDGE_REFUSED and "no agent" in second["error"]["message"]


def uptime_ticks() -> float:
    """Now, in the clock ticks after boot that /proc/<pid>/stat counts start times in."""
    return float(Path("/proc/uptime").read_text().split()[0]) * os.sysconf("SC_CLK_TCK")


def _set_next_pid(pid: int) -> bool:
    """Make ``pid`` the next pid the kernel hands out (root, in our own pid namespace), if allowed."""
    try:
        with open("/proc/sys/kernel/ns_last_pid", "w") as f:
            f.write(str(pid - 1))
    except OSError:
        return False
    return True


async def test_a_recycled_agent_pid_does_not_count() -> None:
    if os.geteuid() != 0 or not os.access("/proc/sys/kernel/ns_last_pid", os.W_OK):
        pytest.skip("needs root to choose the next pid (/proc/sys/kernel/ns_last_pid)")
    async with attack_pod("alice") as pod:
        # The agent that dies. Not an asyncio child: asyncio's child watcher keys its threads by pid, and two of
        # its children under one pid in quick succession confuse it.
        env = pod.env(pod.channel("alice"))
        agent = subprocess.Popen(  # noqa: ASYNC220 - returns once exec'd; kept out of asyncio's watcher (above)
            [sys.executable, "-I", "-c", "import sys; sys.stdin.read()"], env=env, stdin=subprocess.PIPE
        )
        recycled = agent.pid
        session = pod.gateway.pod.sessions.get(pod.sessions["alice"])
        assert session is not None
        pod.bridge.agent_started(session, recycled)
        started = process_identity(recycled)
        assert started is not None
        # Start times count clock ticks: the impostor must start at a later one for the pid to be told apart.
        await eventually(lambda: uptime_ticks() > started.start_time + 1, 5)
        agent.kill()
        agent.wait(timeout=10)
        # A new process of the pod's uid, with alice's channel, gets the dead agent's pid (other processes on
        # the machine may take it first: try a few times).
        for _ in range(20):
            if not _set_next_pid(recycled):
                pytest.skip("the kernel refused to set the next pid")
            impostor = await pod.agent("alice", "hold", "1", register=False)
            if impostor.pid == recycled:
                break
            await impostor.greetings(1)
        else:
            pytest.skip(f"pid {recycled} was taken by another process every time")
        assert process_identity(recycled) != started  # the same pid, another process
        [refusal] = await impostor.greetings(1)
        assert refusal.get("error", {}).get("code") == BRIDGE_REFUSED, refusal
        assert f"pid {recycled}" in refusal["error"]["message"] and "started" in refusal["error"]["message"]


# -- one session cannot use up the socket ----------------------------------------------------------------------


async def test_a_session_at_its_quota_does_not_lock_out_another() -> None:
    async with attack_pod("alice", "bob") as pod:
        pod.bridge.max_connections = 20
        alice = await pod.agent("alice", "hold", "20")
        greetings = await alice.greetings(20)
        admitted = [g for g in greetings if g.get("method") == READY_METHOD]
        refused = [g for g in greetings if "error" in g]
        assert len(admitted) == 16 and len(refused) == 4
        assert all(g["error"]["code"] == BRIDGE_REFUSED for g in refused)
        assert "16 connections" in refused[0]["error"]["message"], refused[0]
        bob = await pod.agent("bob", "hold", "1")
        [greeting] = await bob.greetings(1)
        assert greeting["method"] == READY_METHOD and greeting["params"]["channel"] == pod.channel("bob")
        assert pod.bridge.connections == 17
