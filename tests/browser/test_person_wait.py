"""A guard card the person takes their time over: the panel tells the gateway it is asking (`_openab/person`), and
the tool call waits for the answer past the pod's tool-call timeout instead of ending "outcome unknown".

Real Chromium with the real extension and the real gateway, whose tool-call timeout is set short here: the card
stays open longer than it, as a person reading it would, then the person answers.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from mcp import Client
from playwright.async_api import Page, expect
from scripted_agent import ScriptedAgent
from waits import eventually

from .conftest import person_browser
from .live_pod import LiveGateway, TappedSocket, call
from .test_panel import in_background, result_text

pytestmark = pytest.mark.anyio

CALL_TIMEOUT = 1.5  # the pod's tool-call timeout here (170 s by default)
PERSON_TAKES = 2 * CALL_TIMEOUT


@pytest.fixture(scope="module")
async def gateway(agent: ScriptedAgent, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[LiveGateway]:
    async with LiveGateway(tmp_path_factory.mktemp("state"), agent, tunnel_timeout=CALL_TIMEOUT) as gw:
        yield gw


context, tunnel = person_browser("person")


def said_asking(sock: TappedSocket) -> list[bool]:
    return [m["params"]["asking"] for m in sock.received if m.get("method") == "_openab/person"]


async def test_a_card_open_past_the_tool_call_timeout_waits_for_the_persons_answer(
        gateway: LiveGateway, panel: Page, client: Client, site: str) -> None:
    sock = await gateway.browser_socket(0)
    text, is_error = await call(client, "browser_navigate", {"url": f"{site}/form.html"})
    assert not is_error, text
    async with in_background(client.call_tool("browser_click", {"selector": "#post"})) as out:
        card = panel.locator(".card[data-kind=action]")
        await expect(card).to_be_visible()
        await eventually(lambda: said_asking(sock) == [True], timeout=10)
        await asyncio.sleep(PERSON_TAKES)  # the person reads the card: longer than the pod's tool-call timeout
        await card.locator("button[data-decision=allow]").click()
    # The person's answer, not "timed out ... outcome unknown": the call waited for them.
    assert not out["result"].is_error, result_text(out["result"])
    await eventually(lambda: said_asking(sock) == [True, False], timeout=10)
    text, _ = await call(client, "browser_read_dom", {"selector": "#out"})
    assert "posted" in text
