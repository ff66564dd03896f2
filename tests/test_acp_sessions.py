"""A session's owner and its end, as the person's panel and a second local client see them: `session/close`,
and a session another socket resumes (the socket that held it is told, and its browser is no longer used)."""

from __future__ import annotations

from typing import Any

import pytest
from fake_extension import RemoteError, connect_extension, text_result
from gateway_harness import eventually, run_gateway
from scripted_agent import ScriptedAgent

pytestmark = pytest.mark.anyio

BROWSER = {"type": "acp", "name": "browser", "serverId": "browser-1"}


async def test_session_close_ends_the_session_its_agent_and_its_tunnels() -> None:
    agent = ScriptedAgent()
    async with run_gateway(backend=agent) as gw, connect_extension(gw.ws_url, gw.token) as ext:
        initialized = await ext.initialize()
        assert "close" in initialized["agentCapabilities"]["sessionCapabilities"]
        session_id = await ext.new_session([BROWSER])
        await gw.pod.tunnels.wait_attached(session_id, timeout=10)

        assert await ext.request("session/close", {"sessionId": session_id}) == {}
        assert gw.pod.sessions.get(session_id) is None
        assert agent.closed == [session_id], "the agent was told before the answer came"
        assert gw.pod.tunnels.tunnels(session_id) == []
        with pytest.raises(RemoteError, match="Unknown session"):
            await ext.request("session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": "hi"}]})
        # Closing again is not an error: the panel may retry after a dropped answer.
        assert await ext.request("session/close", {"sessionId": session_id}) == {}


async def test_a_session_resumed_elsewhere_is_no_longer_served_by_the_browser_that_held_it() -> None:
    async with run_gateway(backend=ScriptedAgent()) as gw, connect_extension(gw.ws_url, gw.token) as victim:

        async def read_page(_arguments: dict[str, Any]) -> dict[str, Any]:
            return text_result("the victim's bank balance")

        victim.add_tool("browser_snapshot", read_page)
        await victim.initialize()
        session_id = await victim.new_session([BROWSER])
        await gw.pod.tunnels.wait_attached(session_id, timeout=10)

        async with connect_extension(gw.ws_url, gw.token) as other:
            await other.initialize()
            # Another client names the id and resumes it, declaring no browser of its own.
            assert await other.request("session/resume", {"sessionId": session_id, "cwd": "/"}) == {}
            moved = await victim.wait_notification("_openab/session/moved", timeout=5)
            assert moved["params"]["sessionId"] == session_id
            await eventually(lambda: gw.pod.tunnels.tunnels(session_id) == [], 5)
            # The agent now finds no browser: the victim's page is not read for whoever resumed the session.
            with pytest.raises(Exception, match="browser not connected"):
                await gw.pod.tunnels.call_tool(session_id, "browser_snapshot", {})
            # The socket that lost the session can no longer prompt in it, until it resumes it back.
            with pytest.raises(RemoteError, match="Unknown session"):
                await victim.request("session/prompt", {"sessionId": session_id,
                                                        "prompt": [{"type": "text", "text": "hi"}]})
