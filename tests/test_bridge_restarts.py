"""Bridge mode while the pod's side goes away and comes back: the bridge's socket restarted, the whole pod
restarted with the session resumed, a call cut off by the restart, no pod at all, a stale socket file. The relay is
the real `openab browser-bridge` under the official `mcp` client (tests/bridge_harness.py says how).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import shutil
import signal
import stat
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from bridge_harness import (
    OPENAB,
    bridge_pod,
    browser_session,
    mcp_error,
    relay_params,
    relay_pid,
    session_in,
    stand_in_for_agents,
    text_of,
    unread_stdin,
)
from fake_extension import connect_extension, text_result
from gateway_harness import run_gateway
from mcp import Client
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError
from pydantic import SecretStr
from waits import eventually

from openab_browser.bridge.server import BridgeError, BridgeServer
from openab_browser.core.acp.backend import NoAgentBackend
from openab_browser.core.mcp.tools import BROWSER_TOOLS
from openab_browser.core.session_naming import SessionNaming
from openab_browser.core.sessions import new_session_id
from openab_browser.core.settings import Settings
from openab_browser.core.statedir import naming_secret
from openab_browser.gateway.assemble import assemble

pytestmark = pytest.mark.anyio


# -- the pod's server restarting ---------------------------------------------------------------------------


async def test_relay_survives_the_pod_socket_restarting(tmp_path: Path) -> None:
    tools_changed = asyncio.Event()

    async def on_message(message: Any) -> None:
        if getattr(getattr(message, "root", message), "method", "") == "notifications/tools/list_changed":
            tools_changed.set()

    relay_log = tmp_path / "relay.log"
    with relay_log.open("a") as errlog:
        async with (
            bridge_pod() as pod,
            browser_session(pod, "alice") as (alice, extension),
            Client(
                stdio_client(relay_params(pod.channel(alice), pod.socket), errlog=errlog),
                mode="legacy", message_handler=on_message,
            ) as client,
        ):
            assert text_of(await client.call_tool("whoami", {})) == "browser of alice"
            relay = relay_pid()
            path = pod.socket
            tools_changed.clear()
            await pod.bridge.aclose()
            assert not path.exists()
            # The relay has seen the socket close, so what the agent asks now waits for a pod.
            await eventually(lambda: "the pod closed the socket" in relay_log.read_text(), 10)

            # A call made while the socket is down: the relay is paused until the call is in its stdin pipe,
            # and the server comes back only once the relay has read it.
            os.kill(relay, signal.SIGSTOP)
            try:
                call = asyncio.create_task(client.call_tool("whoami", {}))
                await eventually(lambda: unread_stdin(relay) > 0, 10)
            finally:
                os.kill(relay, signal.SIGCONT)
            await eventually(lambda: unread_stdin(relay) == 0, 10)
            assert not path.exists()
            # It waited for the new server, which the relay re-initializes. The session's agent is registered
            # before the server listens: the waiting relay dials at once.
            bridge = stand_in_for_agents(BridgeServer(pod.gateway.pod.tunnels, path), pod.session(alice))
            pod.bridge = await bridge.__aenter__()
            async with asyncio.timeout(20):
                result = await call
            assert text_of(result) == "browser of alice"
            assert text_of(await client.call_tool("browser_navigate", {"url": "https://a.example/"})) == (
                "alice navigated to https://a.example/"
            )
            assert pod.bridge.connections == 1
            # The relay's own "maybe changed" after reconnecting arrives first ...
            async with asyncio.timeout(10):
                await tools_changed.wait()
            # ... and the new server was initialized as the agent once did it: it tells the agent when the tools
            # change.
            tools_changed.clear()
            await extension.tools_changed()
            async with asyncio.timeout(10):
                await tools_changed.wait()


async def test_relay_survives_a_whole_pod_restart_with_the_session_resumed() -> None:
    root = Path(tempfile.mkdtemp(prefix="oab-"))
    path = root / "browser" / "browser.sock"

    @contextlib.asynccontextmanager
    async def whole_pod(session_id: str | None, who: str) -> AsyncIterator[str]:
        """A fresh gateway and bridge on the same socket path, and a browser that resumes ``session_id``."""
        # The same state dir: the restarted pod names the session's channel with the same kept secret.
        settings = Settings(token=SecretStr(secrets.token_urlsafe(24)), port=0, browser_mode="bridge",
                            browser_socket=path, state_dir=root / "state")
        new_pod = assemble(settings, backend=NoAgentBackend())
        assert isinstance(new_pod.browser, BridgeServer)
        # The agent that lived through the restart is registered before the socket listens: its waiting relay
        # dials the moment it can.
        stand_in_for_agents(new_pod.browser, *([session_in(new_pod, session_id)] if session_id else []))
        async with (
            run_gateway(pod=new_pod) as gateway,
            connect_extension(gateway.ws_url, gateway.token) as extension,
        ):

            async def whoami(arguments: dict[str, Any]) -> dict[str, Any]:
                return text_result(f"browser of {who}")

            extension.add_tool("whoami", whoami)
            await extension.initialize()
            servers = [{"type": "acp", "id": "srv", "name": "browser"}]
            if session_id is None:
                session_id = await extension.new_session(servers)
                stand_in_for_agents(new_pod.browser, session_in(new_pod, session_id))
            else:  # what the side panel does when its gateway comes back
                await extension.request(
                    "session/resume", {"sessionId": session_id, "cwd": "/", "mcpServers": servers}
                )
            await gateway.pod.tunnels.wait_attached(session_id, timeout=10)
            yield session_id

    first: contextlib.AbstractAsyncContextManager[str] | None = whole_pod(None, "alice before")
    try:
        session_id = await first.__aenter__()  # type: ignore[union-attr]
        channel = SessionNaming(naming_secret(root / "state")).channel(session_id)
        async with Client(relay_params(channel, path), mode="legacy") as client:
            assert text_of(await client.call_tool("whoami", {})) == "browser of alice before"
            # Everything but the agent and its relay goes: gateway, socket, the browser's connection.
            await first.__aexit__(None, None, None)  # type: ignore[union-attr]
            first = None
            assert not path.exists()
            async with whole_pod(session_id, "alice after"):
                assert text_of(await client.call_tool("whoami", {})) == "browser of alice after"
    finally:
        if first is not None:
            await first.__aexit__(None, None, None)
        shutil.rmtree(root, ignore_errors=True)


async def test_a_call_cut_off_by_the_pod_restarting_gets_an_error_not_a_hang() -> None:
    started, stopped = asyncio.Event(), asyncio.Event()

    async def slow(arguments: dict[str, Any]) -> dict[str, Any]:
        started.set()
        try:
            await asyncio.Event().wait()  # never finishes by itself: only a cancel ends it
        finally:
            stopped.set()
        return text_result("too late")

    async with (
        bridge_pod() as pod,
        browser_session(pod, "alice", slow=slow) as (alice, extension),
        Client(relay_params(pod.channel(alice), pod.socket), mode="legacy") as client,
    ):
        call = asyncio.create_task(client.call_tool("slow", {}))
        async with asyncio.timeout(10):
            await started.wait()
        await pod.bridge.aclose()
        with pytest.raises(MCPError, match="may or may not have run"):
            async with asyncio.timeout(20):
                await call
        # The browser was told to stop the call, too.
        await eventually(lambda: bool(extension.cancelled), 10)
        async with asyncio.timeout(10):
            await stopped.wait()
        pod.bridge = stand_in_for_agents(BridgeServer(pod.gateway.pod.tunnels, pod.socket), pod.session(alice))
        await pod.bridge.start()
        assert text_of(await client.call_tool("whoami", {})) == "browser of alice"


async def test_no_pod_is_a_clear_error_after_the_wait() -> None:
    missing = Path(tempfile.mkdtemp(prefix="oab-")) / "nothing.sock"
    params = relay_params(SessionNaming().channel(new_session_id()), missing,
                          command=[OPENAB, "browser-bridge", "--wait", "0.5"])
    async with mcp_error() as failed, Client(params, mode="legacy"):
        pass
    assert f"not reachable at {missing}" in failed[0].error.message


async def test_stale_socket_file_is_replaced_and_a_live_one_is_not() -> None:
    async with bridge_pod() as pod:
        path = pod.socket
        # A second server on a live socket would steal it from the first: refused with the path named.
        with pytest.raises(Exception, match="another process is serving"):
            await BridgeServer(pod.gateway.pod.tunnels, path).start()
        await pod.bridge.aclose()
        import socket

        stale = socket.socket(socket.AF_UNIX)
        stale.bind(str(path))  # left behind by a crashed pod: nobody listens
        stale.close()
        # A directory other users can enter is refused, not tightened behind the operator's back (it may be /tmp).
        os.chmod(path.parent, 0o755)
        with pytest.raises(BridgeError, match="chmod 700"):
            await BridgeServer(pod.gateway.pod.tunnels, path).start()
        os.chmod(path.parent, 0o700)
        nobody = pod.session(new_session_id())  # a session the pod does not hold (yet): its tools answer all the same
        pod.bridge = stand_in_for_agents(BridgeServer(pod.gateway.pod.tunnels, path), nobody)
        await pod.bridge.start()
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700
        async with Client(relay_params(nobody.channel, path), mode="legacy") as client:
            assert {tool.name for tool in (await client.list_tools()).tools} == {t["name"] for t in BROWSER_TOOLS}
