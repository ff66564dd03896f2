"""The extension's one socket: how it dials, how it stays up, how it comes back.

Chromium runs with nothing attached (no DevTools), so the service worker lives or dies exactly
as it would in a user's browser.
"""

from __future__ import annotations

import anyio
import pytest

from .conftest import KEY
from .pod import Pod, PodSocket

pytestmark = pytest.mark.anyio


async def tools_work(pod: Pod, index: int, site: str) -> None:
    sock = await pod.next_socket(after=index)
    async with sock.mcp_client() as client:
        res = await client.call_tool("browser_navigate", {"url": f"{site}/page2.html"})
        assert not res.is_error, res.content
        snap = await client.call_tool("browser_snapshot", {})
        assert 'heading "Page two"' in getattr(snap.content[0], "text", "")


async def test_dials_with_the_key_as_a_subprotocol_and_declares_the_browser(pod: Pod, browser: object) -> None:
    sock = await pod.next_socket(after=0)
    assert sock.subprotocols == [f"openab.bearer.{KEY}", "acp.v1"]
    assert KEY not in str(sock.ws.url)
    assert sock.server_decl is not None
    assert sock.server_decl["type"] == "acp" and sock.server_decl["name"] == "browser"
    assert sock.server_decl["serverId"] == sock.server_decl["id"]
    assert sock.session_meta == {"openab/permissionRelay": True}
    hello = sock.received[0]
    assert hello["method"] == "initialize" and hello["params"]["protocolVersion"] == 1


async def test_stays_connected_through_a_minute_of_silence(pod: Pod, browser: object, site: str) -> None:
    sock = await pod.next_socket(after=0)
    before = len(pod.sockets)
    # The pod double sends nothing on its own: only the extension's keepalive can keep the
    # service worker (which Chrome stops after 30 s idle) and its socket alive.
    await anyio.sleep(62)
    assert not sock.closed.is_set()
    assert len(pod.sockets) == before
    pings = [m for m in sock.received if m.get("method") == "openab/ping"]
    assert len(pings) >= 2
    await tools_work(pod, before - 1, site)


async def test_a_dropped_socket_is_redialled_and_the_session_resumed(pod: Pod, browser: object, site: str) -> None:
    old = pod.sockets[-1]
    index = len(pod.sockets)
    await old.ws.close(code=1011)
    new = await pod.next_socket(after=index)
    assert new.resumed and new.session_id == old.session_id
    assert new.server_decl == old.server_decl  # the same browser, declared again
    await tools_work(pod, index, site)


async def test_a_busy_session_is_resumed_later_not_replaced(pod: Pod, browser: object, site: str) -> None:
    old = pod.sockets[-1]
    index = len(pod.sockets)
    pod.busy_resumes = 2  # a prompt from the dropped socket is still finishing
    await old.ws.close(code=1011)
    tries: list[PodSocket] = []
    while not tries or not await pod.tunnel_or_close(tries[-1]):
        tries.append(await pod.next_socket(after=index + len(tries), tunnel=False))
    assert len(tries) == 3  # refused twice, then resumed
    assert tries[-1].resumed and tries[-1].session_id == old.session_id
    assert not any(m.get("method") == "session/new" for s in tries for m in s.received)
    await tools_work(pod, index + 2, site)


async def test_a_restarted_gateway_gets_the_browser_back(pod: Pod, browser: object, site: str) -> None:
    old = pod.sockets[-1]
    await pod.stop()
    async with anyio.create_task_group() as tg:
        # Same address, and the gateway still knows the session, as after a rolling restart.
        again = Pod(key=KEY, port=pod.port)
        again.sessions = pod.sessions
        await again.start(tg)
        try:
            sock = await again.next_socket(after=0, timeout=60)
            assert sock.resumed and sock.session_id == old.session_id
            await tools_work(again, 0, site)
        finally:
            await again.stop()
            tg.cancel_scope.cancel()
