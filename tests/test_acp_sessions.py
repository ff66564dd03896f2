"""A session's owner and its end, as the person's panel and a second local client see them: `session/close`,
and a session another socket resumes (the socket that held it is told, and its browser is no longer used)."""

from __future__ import annotations

from typing import Any

import pytest
from fake_extension import RemoteError, connect_extension, text_result
from gateway_harness import run_gateway
from scripted_agent import ScriptedAgent
from waits import eventually

from openab_browser.core.sessions import SessionStore

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


# -- a full pod: who makes room -----------------------------------------------------------------------------------

def nobody_holds(store: SessionStore, session_ids: list[str]) -> bool:
    return all((session := store.get(sid)) is not None and session.owner is None for sid in session_ids)


async def test_a_flood_of_sessions_leaves_room_for_a_live_socket_and_never_costs_a_conversation() -> None:
    agent = ScriptedAgent()
    # Small numbers, the same rules as the defaults (4096 in the pod, 128 per socket).
    async with (run_gateway(backend=agent, max_sessions=6, max_sessions_per_connection=4) as gw,
                connect_extension(gw.ws_url, gw.token) as person):
        await person.initialize()
        # The person's earlier chat: it ran a prompt, and its socket then went (it stays resumable).
        async with connect_extension(gw.ws_url, gw.token) as earlier:
            await earlier.initialize()
            talked = await earlier.new_session()
            turn = await earlier.request("session/prompt", {"sessionId": talked,
                                                            "prompt": [{"type": "text", "text": "echo hi"}]})
            assert turn == {"stopReason": "end_turn"}
        # A session a live socket holds, never prompted.
        held = await person.new_session()

        # One key holder opens sessions and drops its socket, again and again.
        flooded: list[str] = []
        async with connect_extension(gw.ws_url, gw.token) as flood:
            await flood.initialize()
            flooded += [await flood.new_session() for _ in range(4)]
            # Its per-socket bound: a clear error, and the socket stays (the next request is answered).
            with pytest.raises(RemoteError, match=r"Too many sessions on this connection \(max 4\)") as refused:
                await flood.new_session()
            assert refused.value.code == -32000
            assert (await flood.initialize())["protocolVersion"] == 1
        await eventually(lambda: nobody_holds(gw.pod.sessions, flooded), 5)
        assert len(gw.pod.sessions) == 6, "the pod is full"

        async with connect_extension(gw.ws_url, gw.token) as flood:
            await flood.initialize()
            # Full, yet each new session gets in: the oldest dropped one that never ran a prompt makes room.
            again = [await flood.new_session() for _ in range(4)]
            assert len(gw.pod.sessions) == 6
            assert [gw.pod.sessions.get(s) is None for s in flooded] == [True, True, True, True]
            await eventually(lambda: set(flooded) <= set(agent.closed), 5)

            # The person's session/new: every session now is held by a live socket or has a conversation.
            with pytest.raises(RemoteError, match=r"Too many sessions in this pod \(max 6\)"):
                await person.new_session()
        # The flood's socket closed: its sessions are spare, and the person's next session/new succeeds.
        await eventually(lambda: nobody_holds(gw.pod.sessions, again), 5)
        mine = await person.new_session()
        assert gw.pod.sessions.get(mine) is not None
        # Never evicted to make room: a session that ran a prompt, and one a live socket holds.
        assert gw.pod.sessions.get(talked) is not None and gw.pod.sessions.get(held) is not None
        assert talked not in agent.closed and held not in agent.closed
        assert await person.request("session/resume", {"sessionId": talked, "cwd": "/"}) == {}
