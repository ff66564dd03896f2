"""The extension's one socket: how it dials, how it stays up, how it comes back.

Chromium runs with nothing attached (no DevTools), so the service worker lives or dies exactly
as it would in a user's browser. The pod is the real gateway; the tap shows what crossed the wire.
"""

from __future__ import annotations

import anyio
import pytest
from scripted_agent import ScriptedAgent
from waits import eventually

from openab_browser.core.tunnel.tunnel import Tunnel

from .harness import extension_id
from .live_pod import KEY, LiveGateway, TappedSocket, call

pytestmark = pytest.mark.anyio


async def tools_work(gateway: LiveGateway, sock: TappedSocket, site: str) -> Tunnel:
    """The agent's MCP client reaches the browser through the tunnel `sock` installed."""
    tunnel = await gateway.attached(sock)
    async with gateway.agent_client(tunnel.session_id) as client:
        text, is_error = await call(client, "browser_navigate", {"url": f"{site}/page2.html"})
        assert not is_error, text
        snap, _ = await call(client, "browser_snapshot", {})
        assert "# Page two" in snap
    return tunnel


async def test_dials_with_the_key_as_a_subprotocol_and_declares_the_browser(
    gateway: LiveGateway, tunnel: Tunnel
) -> None:
    sock = gateway.browser_sockets[0]
    assert sock.subprotocols == [f"openab.bearer.{KEY}", "acp.v1"]
    assert KEY not in sock.url
    assert sock.origin == f"chrome-extension://{extension_id()}"
    decl = sock.declared
    assert decl is not None
    assert decl["type"] == "acp" and decl["name"] == "browser"
    assert decl["serverId"] == decl["id"]
    # It answers the agent's permission questions, and marks a journalled step running when the step's call comes.
    assert sock.opened is not None and sock.opened["params"]["_meta"] == {"dev.openab/permissionRelay": True,
                                                                          "dev.openab/marksRunning": True}
    hello = sock.received[0]
    assert hello["method"] == "initialize" and hello["params"]["protocolVersion"] == 1
    # What the gateway made of it: the declared browser, tunnelled in the connection form, may ask the user.
    assert (tunnel.name, tunnel.server_id, tunnel.form) == ("browser", decl["serverId"], "connection")
    session = gateway.pod.sessions.get(tunnel.session_id)
    assert session is not None and session.permission_relay


async def test_stays_connected_through_silence_past_a_workers_idle_limit(
    gateway: LiveGateway, tunnel: Tunnel, site: str,
) -> None:
    sock = gateway.browser_sockets[-1]
    before = len(gateway.browser_sockets)
    # No work for 45 s, half as long again as the 30 s after which Chrome stops a worker without events, and
    # long enough for two of the extension's pings (every 20 s) whatever their phase. The gateway's own
    # keepalive also counts as traffic, so this cannot tell the two apart: it checks that the extension pings,
    # that "Method not found" satisfies it, and that nothing ever drops.
    await anyio.sleep(45)
    assert not sock.closed.is_set()
    assert len(gateway.browser_sockets) == before
    pings = sock.requests("openab/ping")
    assert len(pings) >= 2
    await eventually(lambda: all(sock.answer(p) is not None for p in pings))
    assert all(sock.answer(p)["error"]["code"] == -32601 for p in pings)  # type: ignore[index]
    await tools_work(gateway, sock, site)


async def test_a_dropped_socket_is_redialled_and_the_session_resumed(
    gateway: LiveGateway, tunnel: Tunnel, site: str
) -> None:
    old = gateway.browser_sockets[-1]
    old_tunnel = await gateway.attached(old)
    index = len(gateway.browser_sockets)
    await old.drop(1011)
    new = await gateway.browser_socket(index)
    tunnel = await tools_work(gateway, new, site)
    assert new.resumed and tunnel.session_id == old_tunnel.session_id
    assert new.declared == old.declared  # the same browser, declared again


async def test_a_busy_session_is_resumed_later_not_replaced(
    gateway: LiveGateway, tunnel: Tunnel, agent: ScriptedAgent, site: str
) -> None:
    old = gateway.browser_sockets[-1]
    session_id = (await gateway.attached(old)).session_id
    index = len(gateway.browser_sockets)

    def refused(sock: TappedSocket) -> bool:
        answers = [sock.answer(r) for r in sock.requests("session/resume")]
        return any(a is not None and a.get("error", {}).get("code") == -32001 for a in answers)

    # The person's turn is running (the panel's prompt, put on the wire here) when the network drops
    # the socket under the extension. The gateway has not noticed: to it the turn is still going.
    await old.inject({"jsonrpc": "2.0", "id": "turn-1", "method": "session/prompt",
                      "params": {"sessionId": session_id, "prompt": [{"type": "text", "text": "wait"}]}})
    await eventually(lambda: any(sid == session_id for sid, _ in agent.prompts))
    await old.go_half_open()
    # The redialled extension finds its session busy: refused twice, and it keeps the conversation.
    await eventually(lambda: sum(map(refused, gateway.browser_sockets[index:])) >= 2, 60)
    # The gateway finds out, cancels the turn of a socket that is gone, and the next try finds it free.
    await old.gateway_notices()
    tunnel = await gateway.attached(await gateway.browser_socket(index + 2))
    assert session_id in agent.cancelled
    tries = gateway.browser_sockets[index:]
    assert len(tries) == 3  # refused twice, then resumed
    assert all(refused(t) for t in tries[:2])
    assert tries[-1].resumed and tunnel.session_id == session_id
    assert not any(s.requests("session/new") for s in tries)
    await tools_work(gateway, tries[-1], site)


async def test_a_restarted_gateway_gets_the_browser_back(gateway: LiveGateway, site: str) -> None:
    old = await gateway.attached(gateway.browser_sockets[-1])
    await gateway.stop()
    # Same address and key, a fresh pod that has never heard of the session: it takes the resume
    # and recreates the session under the same id, as after a rolling restart.
    await gateway.start()
    sock = await gateway.browser_socket(0, timeout=60)
    tunnel = await tools_work(gateway, sock, site)
    assert sock.resumed and tunnel.session_id == old.session_id
