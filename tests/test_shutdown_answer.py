"""A turn cancelled by the gateway's stop answers so; one the client cancelled stays the client's cancel.

The real gateway on loopback, a scripted agent, and the fake extension as the ACP client over a real WebSocket.
The side panel reads the answer's ``_meta`` to tell "the gateway shut down during this turn" from the person's Stop
(tests/browser/test_shutdown.py shows it there).
"""

from __future__ import annotations

import asyncio

import pytest
from fake_extension import connect_extension
from gateway_harness import run_gateway
from scripted_agent import ScriptedAgent
from waits import eventually

from openab_browser.core.acp.backend import PromptTurn
from openab_browser.core.acp.schema import STOPPED_META, STOPPED_SHUTDOWN

pytestmark = pytest.mark.anyio


async def test_a_turn_the_client_cancelled_is_not_called_a_shutdown_even_if_a_stop_follows() -> None:
    agent = ScriptedAgent()
    release = asyncio.Event()

    async def stubborn(turn: PromptTurn, text: str) -> str:
        await release.wait()  # deaf to the cancel: the gateway answers for it once the cancel grace is over
        return "end_turn"

    agent.scripts["stubborn"] = stubborn
    async with (
        run_gateway(backend=agent, drain_timeout=0, cancel_grace=1) as gateway,
        connect_extension(gateway.ws_url, gateway.token) as ext,
    ):
        await ext.initialize()
        mine, other = await ext.new_session(), await ext.new_session()
        turns = [asyncio.ensure_future(ext.request("session/prompt", {
            "sessionId": sid, "prompt": [{"type": "text", "text": text}]}, timeout=30))
            for sid, text in ((mine, "stubborn"), (other, "wait"))]
        await eventually(lambda: len(agent.prompts) == 2, timeout=10)
        await ext.notify("session/cancel", {"sessionId": mine})  # the person's Stop
        await eventually(lambda: mine in agent.cancelled, timeout=10)
        # The gateway stops before the cancelled turn has answered: it cancels both, that one again.
        async with asyncio.timeout(10):
            await gateway.pod.drain()
            stopped, shut = await asyncio.gather(*turns)
        release.set()
    assert stopped == {"stopReason": "cancelled"}
    assert shut == {"stopReason": "cancelled", "_meta": {STOPPED_META: STOPPED_SHUTDOWN}}
