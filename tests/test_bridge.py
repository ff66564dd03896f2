"""Bridge mode end to end: the official `mcp` client spawns `openab browser-bridge` under a session's process
tree, and its tool calls travel the pod's Unix socket, the gateway and the `/acp` WebSocket to a fake extension.
Who may use the socket, what bad input gets, a relay from a written config file, and the relay's start-up; the pod
restarting under a running relay is tests/test_bridge_restarts.py. The arrangement of agents and relays, and why
the test process stands in for every session's agent: tests/bridge_harness.py.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import os
import pwd
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from bridge_harness import (
    OPENAB,
    REAL_PYTHON,
    SOCKET_ENV,
    bridge_pod,
    browser_session,
    mcp_error,
    raw_exchange,
    relay_params,
    stand_in_for_agents,
    text_of,
)
from fake_extension import connect_extension, text_result
from mcp import Client
from mcp.shared.subscriptions import ToolsListChanged

from openab_browser.bridge.ancestry import AncestryError, ProcessIdentity, descends_from, resolve_channel
from openab_browser.bridge.framing import BRIDGE_REFUSED, MAX_FRAME_BYTES, READY_METHOD
from openab_browser.core.agents.config import entry
from openab_browser.core.agents.provision import acp_server_entry
from openab_browser.core.mcp.access import BROWSER_CHANNEL_ENV, StdioCommand
from openab_browser.core.mcp.tools import BROWSER_TOOLS
from openab_browser.core.session_naming import SessionNaming
from openab_browser.core.sessions import new_session_id

pytestmark = pytest.mark.anyio


# -- the happy path ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_agent_lists_and_calls_browser_tools_through_the_relay(mode: str) -> None:
    async with bridge_pod() as pod, browser_session(pod, "alice") as (session_id, _extension):
        endpoint = await pod.bridge.open(pod.gateway.pod.sessions.get(session_id))  # type: ignore[arg-type]
        assert endpoint.mode == "bridge"
        assert endpoint.env[BROWSER_CHANNEL_ENV] == pod.channel(session_id)
        assert acp_server_entry(endpoint.entry) == {
            "name": "openab_browser", "command": OPENAB, "args": ["browser-bridge"], "env": []
        }
        assert isinstance(endpoint.entry, StdioCommand)
        command = [endpoint.entry.command, *endpoint.entry.args]
        params = relay_params(endpoint.env[BROWSER_CHANNEL_ENV], Path(endpoint.env[SOCKET_ENV]), command=command)
        async with Client(params, mode=mode) as client:
            if mode == "auto":
                assert client.protocol_version == "2026-07-28"  # it answered the server/discover probe
            tools = {tool.name for tool in (await client.list_tools()).tools}
            # The browser's own names, with the one clients reject mapped to a valid one.
            assert tools == {"whoami", "browser_navigate"}
            result = await client.call_tool("browser_navigate", {"url": "https://example.org/"})
            assert text_of(result) == "alice navigated to https://example.org/"
            assert not result.is_error


async def test_a_6_mib_screenshot_reaches_the_agent_through_the_relay_intact() -> None:
    # The gateway relays the image as the JSON it came in (a fragment, not parsed); the relay's lines must carry it.
    image = base64.b64encode(os.urandom(6 * 1024 * 1024 // 4 * 3)).decode()

    async def screenshot(_arguments: dict[str, Any]) -> dict[str, Any]:
        return {"content": [{"type": "text", "text": 'The "whole" tab'},
                            {"type": "image", "data": image, "mimeType": "image/png"}]}

    async with bridge_pod() as pod, browser_session(pod, "alice", browser_screenshot=screenshot) as (session_id, _e):
        params = relay_params(pod.channel(session_id), pod.socket)
        async with Client(params, mode="legacy") as client:
            result = await client.call_tool("browser_screenshot", {})
    assert text_of(result) == 'The "whole" tab'
    assert result.content[1].type == "image" and result.content[1].mime_type == "image/png"
    assert result.content[1].data == image


async def test_each_agent_reaches_only_its_own_browser() -> None:
    async with (
        bridge_pod() as pod,
        browser_session(pod, "alice") as (alice, _a),
        browser_session(pod, "bob") as (bob, _b),
    ):
        params_a = relay_params(pod.channel(alice), pod.socket)
        params_b = relay_params(pod.channel(bob), pod.socket)
        async with Client(params_a, mode="legacy") as agent_a, Client(params_b, mode="legacy") as agent_b:
            assert text_of(await agent_a.call_tool("whoami", {})) == "browser of alice"
            assert text_of(await agent_b.call_tool("whoami", {})) == "browser of bob"
            assert text_of(await agent_a.call_tool("whoami", {})) == "browser of alice"
            assert pod.bridge.connections == 2


async def test_tool_list_follows_the_browser_attaching_later() -> None:
    async with bridge_pod() as pod, connect_extension(pod.gateway.ws_url, pod.gateway.token) as extension:

        async def whoami(arguments: dict[str, Any]) -> dict[str, Any]:
            return text_result("late browser")

        extension.add_tool("whoami", whoami)
        await extension.initialize()
        # A session whose browser has not attached its tools yet (the side panel is still opening).
        extension.answer_connect = False
        session_id = await extension.new_session([{"type": "acp", "id": "srv", "name": "browser"}])
        stand_in_for_agents(pod.bridge, pod.session(session_id))
        changed = asyncio.Event()

        async def on_message(message: Any) -> None:
            if getattr(getattr(message, "root", message), "method", "") == "notifications/tools/list_changed":
                changed.set()

        params = relay_params(pod.channel(session_id), pod.socket)
        async with Client(params, mode="legacy", message_handler=on_message) as client:
            before = {tool.name for tool in (await client.list_tools()).tools}
            assert before == {tool["name"] for tool in BROWSER_TOOLS}  # the known set while no browser is there
            result = await client.call_tool("browser_navigate", {"url": "https://example.org/"})
            assert result.is_error and "open the openab side panel" in text_of(result)
            # Now the side panel attaches: the agent hears that the list changed, and sees the browser's tools.
            extension.answer_connect = True
            await extension.request("session/resume", {"sessionId": session_id, "cwd": "/",
                                                       "mcpServers": [{"type": "acp", "id": "srv2",
                                                                       "name": "browser"}]})
            async with asyncio.timeout(10):
                await changed.wait()
            assert {tool.name for tool in (await client.list_tools()).tools} == {"whoami"}
            assert text_of(await client.call_tool("whoami", {})) == "late browser"


async def test_a_2026_client_hears_tool_changes_on_its_listen_stream() -> None:
    async with (
        bridge_pod() as pod,
        browser_session(pod, "alice") as (alice, extension),
        Client(relay_params(pod.channel(alice), pod.socket), mode="auto") as client,
    ):
        assert client.protocol_version == "2026-07-28"
        async with client.listen(tools_list_changed=True) as subscription:
            assert subscription.honored.tools_list_changed
            await extension.tools_changed()
            async with asyncio.timeout(10):
                event = await anext(subscription)
        assert isinstance(event, ToolsListChanged)


# -- who may use the socket ---------------------------------------------------------------------------------


async def test_relay_outside_any_session_fails_closed() -> None:
    async with bridge_pod() as pod, browser_session(pod, "alice"):
        async with mcp_error(BRIDGE_REFUSED) as refused, Client(relay_params(None, pod.socket), mode="auto") as client:
            await client.list_tools()
        assert "no OPENAB_BROWSER_CHANNEL" in refused[0].error.message
        assert pod.bridge.connections == 0


async def test_ancestry_is_read_past_a_process_whose_name_looks_like_stat_fields() -> None:
    # Between the agent and the relay runs a process named "a) S 1 (b": read up to its first ")", its
    # /proc/<pid>/stat would say that its parent is pid 1, and the session would be lost.
    folder = Path(tempfile.mkdtemp(prefix="oab-"))
    shell = folder / "a) S 1 (b"
    shell.symlink_to(REAL_PYTHON)  # run with -I -S: it needs no venv, only subprocess
    passthrough = "import subprocess, sys; sys.exit(subprocess.call(sys.argv[1:]))"
    try:
        async with bridge_pod() as pod, browser_session(pod, "alice") as (alice, _a):
            params = relay_params(
                pod.channel(alice), pod.socket, command=[str(shell), "-I", "-S", "-c", passthrough, OPENAB,
                                                        "browser-bridge"],
            )
            async with Client(params, mode="legacy") as client:
                assert text_of(await client.call_tool("whoami", {})) == "browser of alice"
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def fake_process(proc: Path, pid: int, parent: int, channel: str | None, start_time: int = 1000) -> None:
    """A process in a fake /proc: a whole stat line (parent: field 4, start time: field 22) and an environ."""
    (proc / str(pid)).mkdir()
    fields = ["S", str(parent), *["0"] * 17, str(start_time), *["0"] * 30]
    (proc / str(pid) / "stat").write_bytes(f"{pid} (sh) {' '.join(fields)}\n".encode())
    env = f"{BROWSER_CHANNEL_ENV}={channel}" if channel else "PATH=/bin"
    (proc / str(pid) / "environ").write_bytes(env.encode() + b"\0")


def test_the_ancestry_walk_is_bounded(tmp_path: Path) -> None:
    # A fake /proc: a chain of 40 processes, pid n's parent is n + 1, and only the topmost carries a channel.
    channel = SessionNaming().channel(new_session_id())
    for pid in range(100, 140):
        fake_process(tmp_path, pid, pid + 1, channel if pid == 139 else None)
    assert resolve_channel(110, BROWSER_CHANNEL_ENV, proc=str(tmp_path)).value == channel
    with pytest.raises(AncestryError, match="no OPENAB_BROWSER_CHANNEL"):
        resolve_channel(100, BROWSER_CHANNEL_ENV, proc=str(tmp_path))  # 39 steps up: past the bound of 32


def test_an_agents_recycled_pid_is_not_the_agent(tmp_path: Path) -> None:
    # relay 300 -> its parent 200 (the channel's "agent" pid) -> the pod, 100.
    channel = SessionNaming().channel(new_session_id())
    fake_process(tmp_path, 300, 200, None, start_time=5000)
    fake_process(tmp_path, 200, 100, channel, start_time=4000)
    found = resolve_channel(300, BROWSER_CHANNEL_ENV, stop_at=100, proc=str(tmp_path))
    assert found.value == channel
    assert found.lineage == (ProcessIdentity(300, 5000), ProcessIdentity(200, 4000))
    descends_from(found, ProcessIdentity(200, 4000), connecting=300)  # the agent itself: admitted
    # The agent registered as pid 200 started at tick 3000 and is gone; pid 200 now belongs to a newer process.
    with pytest.raises(AncestryError, match=r"pid 200, .*recycled"):
        descends_from(found, ProcessIdentity(200, 3000), connecting=300)
    with pytest.raises(AncestryError, match="not a descendant of pid 150"):
        descends_from(found, ProcessIdentity(150, 4000), connecting=300)
    with pytest.raises(AncestryError, match="no agent running"):
        descends_from(found, None, connecting=300)


async def test_a_closed_sessions_relay_reaches_no_browser() -> None:
    async with (
        bridge_pod() as pod,
        browser_session(pod, "alice") as (alice, _a),
        Client(relay_params(pod.channel(alice), pod.socket), mode="legacy") as client,
    ):
        assert text_of(await client.call_tool("whoami", {})) == "browser of alice"
        await pod.gateway.pod.evict(alice, "closed by the test")
        result = await client.call_tool("browser_navigate", {"url": "https://example.org/"})
        assert result.is_error and "browser not connected" in text_of(result)


async def test_a_process_naming_another_sessions_channel_is_refused() -> None:
    async with (
        bridge_pod() as pod,
        browser_session(pod, "alice") as (alice, _a),
        browser_session(pod, "bob") as (bob, bob_browser),
    ):
        # A raw client under alice's agent that names bob's channel in a frame: refused, then cut off.
        ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        forged = {**ping, "id": 2, "channel_id": pod.channel(bob)}
        lines = await raw_exchange(pod, pod.channel(alice), [json.dumps(ping), json.dumps(forged), json.dumps(ping)])
        greeting, pong, refusal = (json.loads(line) for line in lines[:3])
        assert greeting["method"] == READY_METHOD and greeting["params"]["channel"] == pod.channel(alice)
        assert pong == {"jsonrpc": "2.0", "id": 1, "result": {}}
        assert refusal["id"] == 2 and refusal["error"]["code"] == BRIDGE_REFUSED
        assert "may not name another channel" in refusal["error"]["message"]
        assert lines[3:] == ["EOF"]  # cut off: nothing more is served

        # A relay started by alice's agent with bob's channel in its own environment: the ancestry disagrees.
        params = relay_params(pod.channel(alice), pod.socket, relay_env=f"{BROWSER_CHANNEL_ENV}={pod.channel(bob)}")
        async with mcp_error(BRIDGE_REFUSED) as refused, Client(params, mode="legacy") as client:
            await client.call_tool("whoami", {})
        assert "may not name another session's channel" in refused[0].error.message
        assert not any(
            m.get("params", {}).get("params", {}).get("name") == "whoami"
            for m in bob_browser.server_requests if m.get("method") == "mcp/message"
        )


@pytest.mark.parametrize("forged_id", [[], {"a": 1}, True, "i" * 1025, 1.5])
async def test_a_claim_refused_under_an_id_mcp_does_not_allow_is_refused_under_null(forged_id: Any) -> None:
    # Found by tests/fuzz: the refusal echoed whatever id the frame had, and `"id": []` is no JSON-RPC answer.
    async with bridge_pod() as pod, browser_session(pod, "alice") as (alice, _a), \
            browser_session(pod, "bob") as (bob, _b):
        forged = {"jsonrpc": "2.0", "id": forged_id, "method": "ping", "channel_id": pod.channel(bob)}
        ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        lines = await raw_exchange(pod, pod.channel(alice), [json.dumps(forged), json.dumps(ping)])
        refusal = json.loads(lines[1])
        assert refusal["id"] is None and refusal["error"]["code"] == BRIDGE_REFUSED, refusal
        assert lines[2:] == ["EOF"]  # and cut off, as for any claim of another channel


@pytest.mark.parametrize("depth", [129, 2000])
async def test_a_line_nested_past_the_bound_is_refused_with_the_bound_named(depth: int) -> None:
    # Found by tests/fuzz: past orjson's 1024 levels the bridge answered orjson's bare "depth limit exceeded".
    async with bridge_pod() as pod, browser_session(pod, "alice") as (alice, _a):
        deep = '{"jsonrpc":"2.0","id":3,"method":"ping","params":{"x":' + "[" * depth + "]" * depth + "}}"
        ping = {"jsonrpc": "2.0", "id": 4, "method": "ping"}
        lines = await raw_exchange(pod, pod.channel(alice), [deep, json.dumps(ping)])
        refusal, pong = json.loads(lines[1]), json.loads(lines[2])
    assert refusal["id"] == (3 if depth <= 1024 else None) and refusal["error"]["code"] == -32600, refusal
    assert "nested more than 128 levels deep" in refusal["error"]["message"]
    assert pong == {"jsonrpc": "2.0", "id": 4, "result": {}}  # and the connection serves on


async def test_a_cancellation_naming_an_object_for_an_id_is_ignored(caplog: pytest.LogCaptureFixture) -> None:
    # Found by tests/fuzz: an unhashable requestId made the lookup raise, logged as a failure of the bridge.
    async with bridge_pod() as pod, browser_session(pod, "alice") as (alice, _a):
        cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": {"a": [1]}}}
        ping = {"jsonrpc": "2.0", "id": 4, "method": "ping"}
        lines = await raw_exchange(pod, pod.channel(alice), [json.dumps(cancel) + "\n" + json.dumps(ping)])
    assert json.loads(lines[1]) == {"jsonrpc": "2.0", "id": 4, "result": {}}
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text


@pytest.fixture
def other_user() -> Iterator[int]:
    if os.geteuid() != 0:
        pytest.skip("needs root to run a client as a second user (useradd / setuid)")
    if not os.access("/usr/bin/python3", os.X_OK):
        pytest.skip("needs /usr/bin/python3, an interpreter a second user can run")
    name = "openab-bridge-test"
    try:
        pwd.getpwnam(name)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name], check=True)
    yield pwd.getpwnam(name).pw_uid


async def test_a_different_uid_is_refused(other_user: int) -> None:
    async with bridge_pod() as pod, browser_session(pod, "alice") as (alice, _a):
        ping = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"})
        os.chmod(pod.socket.parent.parent, 0o711)  # the test's own temporary folder is not the one under test
        # The file modes keep another user out first: the directory is 0700 and the socket 0600.
        assert stat.S_IMODE(os.stat(pod.socket.parent).st_mode) == 0o700
        assert stat.S_IMODE(os.stat(pod.socket).st_mode) == 0o600
        lines = await raw_exchange(pod, pod.channel(alice), [ping], user=other_user)
        assert any("Permission denied" in line for line in lines), lines
        # With the modes opened up (a mistake, a shared volume), the kernel's credentials still refuse it.
        os.chmod(pod.socket.parent, 0o711)
        os.chmod(pod.socket, 0o666)
        lines = await raw_exchange(pod, pod.channel(alice), [ping], user=other_user)
        refusal = json.loads(lines[0])
        assert refusal["id"] is None and refusal["error"]["code"] == BRIDGE_REFUSED
        assert f"uid {other_user}" in refusal["error"]["message"]
        assert lines[1:] == ["EOF"]


# -- bad input ----------------------------------------------------------------------------------------------


async def test_oversize_and_garbage_frames_get_json_rpc_errors() -> None:
    async with bridge_pod() as pod, browser_session(pod, "alice") as (alice, _a):
        ping = json.dumps({"jsonrpc": "2.0", "id": 7, "method": "ping"})
        huge = json.dumps({"jsonrpc": "2.0", "id": 8, "method": "ping", "params": {"x": "y" * MAX_FRAME_BYTES}})
        lines = await raw_exchange(pod, pod.channel(alice), ["{not json", huge, "[1, 2]", ping])
        _greeting, garbage, oversize, batch, pong = (json.loads(line) for line in lines[:5])
        assert garbage["error"]["code"] == -32700 and garbage["id"] is None
        assert oversize["error"]["code"] == -32000 and "Frame too large" in oversize["error"]["message"]
        assert batch["error"]["code"] == -32600
        assert pong == {"jsonrpc": "2.0", "id": 7, "result": {}}  # the connection survived all of it

        # The same through the relay's stdin: errors on stdout, and the relay goes on serving.
        env = {"PATH": os.environ["PATH"], BROWSER_CHANNEL_ENV: pod.channel(alice), SOCKET_ENV: str(pod.socket)}
        relay = await asyncio.create_subprocess_exec(
            OPENAB, "browser-bridge", env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t"}}}
        stdin_lines = ["{not json", huge, json.dumps(init), json.dumps({"jsonrpc": "2.0", "id": 2, "method": "ping"})]
        async with asyncio.timeout(60):
            out, err = await relay.communicate(("\n".join(stdin_lines) + "\n").encode())
        answers = [json.loads(line) for line in out.decode().splitlines()]
        assert [a.get("error", {}).get("code") for a in answers[:2]] == [-32700, -32000], answers
        by_id = {a["id"]: a for a in answers if a["id"] is not None}
        assert by_id[1]["result"]["serverInfo"]["name"] == "openab_browser"
        assert by_id[2]["result"] == {}
        assert b"connected to" in err  # diagnostics on stderr, never on stdout


async def test_relay_reads_and_writes_plain_files_too(tmp_path: Path) -> None:
    # `openab browser-bridge < requests.jsonl > answers.jsonl`, as someone debugging by hand would run it.
    async with bridge_pod() as pod, browser_session(pod, "alice") as (alice, _a):
        requests = [
            {"jsonrpc": "2.0", "id": 1, "method": "initialize",
             "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t"}}},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "whoami", "arguments": {}}},
        ]
        (tmp_path / "in.jsonl").write_text("".join(json.dumps(r) + "\n" for r in requests))
        env = {"PATH": os.environ["PATH"], BROWSER_CHANNEL_ENV: pod.channel(alice), SOCKET_ENV: str(pod.socket)}
        relay = await asyncio.create_subprocess_exec(
            "sh", "-c", f'"{OPENAB}" browser-bridge < in.jsonl > out.jsonl', cwd=tmp_path, env=env,
            stderr=subprocess.DEVNULL,
        )
        async with asyncio.timeout(60):
            assert await relay.wait() == 0
        answers = {a["id"]: a for a in map(json.loads, (tmp_path / "out.jsonl").read_text().splitlines())}
        assert answers[2]["result"]["content"] == [{"type": "text", "text": "browser of alice"}]


# -- static config ------------------------------------------------------------------------------------------


async def test_config_write_bridge_entry_starts_a_working_relay(tmp_path: Path) -> None:
    writer = await asyncio.create_subprocess_exec(
        OPENAB, "config", "write", "--agent", "claude", "--mode", "bridge", "--dir", str(tmp_path),
        stdout=subprocess.PIPE,
    )
    async with asyncio.timeout(60):
        out, _ = await writer.communicate()
    assert writer.returncode == 0 and str(tmp_path / ".mcp.json") in out.decode()
    ours = json.loads((tmp_path / ".mcp.json").read_text())["mcpServers"]["openab_browser"]
    assert ours == entry("claude", StdioCommand())
    async with bridge_pod() as pod, browser_session(pod, "alice") as (alice, _a):
        # The entry names `openab` by PATH, as a hand-written config would.
        params = relay_params(pod.channel(alice), pod.socket, command=[ours["command"], *ours["args"]])
        assert params.env is not None
        params.env["PATH"] = f"{Path(OPENAB).parent}:{os.environ['PATH']}"
        async with Client(params, mode="auto") as client:
            assert text_of(await client.call_tool("whoami", {})) == "browser of alice"


# -- start-up -----------------------------------------------------------------------------------------------


async def test_the_relay_runs_without_asyncio_or_tls(tmp_path: Path) -> None:
    # Every agent session spawns a relay and waits for it: importing asyncio (and OpenSSL, which asyncio loads when
    # it can) was most of the relay's start-up, for a process that only moves lines between pipes and a Unix
    # socket (docs/benchmarks.md). Its modules show in the process's own maps and its own sys.modules.
    relay = await asyncio.create_subprocess_exec(
        OPENAB, "browser-bridge", "--socket", str(tmp_path / "none.sock"), "--wait", "30",
        stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    assert relay.stdin is not None and relay.stderr is not None
    try:
        async with asyncio.timeout(30):
            # Its loop reports the missing socket: everything it runs with is loaded by then.
            assert b"cannot connect" in await relay.stderr.readline()
        mapped = await asyncio.to_thread(Path(f"/proc/{relay.pid}/maps").read_text)
        assert "_asyncio." not in mapped, "the relay loaded asyncio's C module"
        assert "libssl" not in mapped and "_ssl." not in mapped
    finally:
        relay.stdin.close()
        async with asyncio.timeout(30):
            await relay.wait()


async def test_a_pod_that_stops_reading_stops_the_relay_reading_its_agent(tmp_path: Path) -> None:
    # The relay holds at most two frames' worth for a socket that does not take them; past that the agent's writes
    # wait in its pipe, and the relay's memory stays what it was.
    path = tmp_path / "browser.sock"
    stalled = asyncio.Event()

    async def stuck_pod(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(json.dumps({"jsonrpc": "2.0", "method": READY_METHOD, "params": {"channel": "acp_c1"}}).encode()
                     + b"\n")
        await stalled.wait()  # and never reads

    server = await asyncio.start_unix_server(stuck_pod, str(path))
    relay = await asyncio.create_subprocess_exec(
        OPENAB, "browser-bridge", "--socket", str(path), stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    assert relay.stdin is not None
    argument = "x" * (256 << 10)
    written = 0
    try:
        for n in range(384):  # 96 MiB, far past the relay's bound
            relay.stdin.write(json.dumps({"jsonrpc": "2.0", "id": n, "method": "tools/call",
                                          "params": {"name": "browser_type", "arguments": {"text": argument}}})
                              .encode() + b"\n")
            try:
                async with asyncio.timeout(2):
                    await relay.stdin.drain()
            except TimeoutError:
                break
            written += 1
        assert written * len(argument) < 48 << 20, f"the relay took {written} lines from its agent"
        status = await asyncio.to_thread(Path(f"/proc/{relay.pid}/status").read_text)
        rss_kib = int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS:")))
        assert rss_kib < 96 << 10, f"the relay holds {rss_kib} KiB"
    finally:
        stalled.set()
        relay.kill()
        await relay.wait()
        server.close()
        await server.wait_closed()
