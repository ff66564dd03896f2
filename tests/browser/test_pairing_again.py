"""A pairing link for the gateway already in use (issue 36, item 7), as a person meets it at 360 px: the pod started
again and printed a new link, and they open it. Before, the extension added a second entry of the same name and
switched to an empty session; the chat they had was hidden under "Use" on the first entry, and the URLs were cut.
Now the same address is the same entry: the same key changes nothing (the chat stays on screen, the socket stays
up), a new key replaces that entry's and the same session is resumed with it; the list shows each URL whole.

Real Chromium with the real extension against the real gateway; the link's code is one the pod itself issued, and
the person claims it on the extension's own confirmation page.
"""

from __future__ import annotations

from typing import Any

import pytest
from playwright.async_api import BrowserContext, Page, ViewportSize, expect
from scripted_agent import ScriptedAgent, chunk

from openab_browser.core.acp.backend import PromptTurn

from .conftest import person_browser
from .harness import extension_id, snap
from .live_pod import KEY, LiveGateway, TappedSocket

pytestmark = pytest.mark.anyio

context, tunnel = person_browser("pair-again")

WIDTH: ViewportSize = {"width": 360, "height": 720}
PAIR_PAGE = f"chrome-extension://{extension_id()}/pair/pair.html"


@pytest.fixture(scope="module")
async def narrow(panel: Page) -> Page:
    await panel.set_viewport_size(WIDTH)
    await expect(panel.locator("#pill-link")).to_have_text("connected", timeout=30_000)
    return panel


async def saved(panel: Page) -> list[dict[str, Any]]:
    stored = await panel.evaluate("async () => (await chrome.storage.local.get('openab.settings'))['openab.settings']")
    return list(stored["gateways"])


def session_of(sock: TappedSocket) -> str:
    opened = sock.opened
    assert opened is not None
    if opened["method"] == "session/resume":
        return str(opened["params"]["sessionId"])
    answer = sock.answer(opened)
    assert answer is not None
    return str(answer["result"]["sessionId"])


async def pair(context: BrowserContext, gateway: LiveGateway) -> None:
    """A new link from the pod, opened in a tab of the person's and answered with Connect."""
    code = gateway.tap.app.state.pair_codes.issue(gateway.url)  # type: ignore[attr-defined]
    tab = await context.new_page()
    await tab.goto(f"http://127.0.0.1:{gateway.port}/pair#code={code}")
    await tab.wait_for_url(f"{PAIR_PAGE}#*")
    await tab.locator("#connect").click()
    await expect(tab.locator("#status")).to_contain_text("Connected: the openab side panel now uses the gateway at")
    await tab.close()


async def chat(agent: ScriptedAgent, panel: Page) -> None:
    async def hello(turn: PromptTurn, text: str) -> str:
        turn.send_update(chunk("Hello, the same chat."))
        return "end_turn"

    agent.scripts["hello"] = hello
    await panel.locator("#prompt").fill("hello")
    await panel.locator("#send").click()
    await expect(panel.locator(".msg.agent").last).to_have_text("Hello, the same chat.", timeout=30_000)


async def test_the_same_gateway_and_key_is_the_same_entry_and_the_chat_stays(
        agent: ScriptedAgent, context: BrowserContext, narrow: Page, gateway: LiveGateway) -> None:
    await chat(agent, narrow)
    [before] = await saved(narrow)
    sockets = len(gateway.browser_sockets)
    await pair(context, gateway)
    # The link's answer is saved before Connect's reply: nothing more is coming.
    assert [(g["id"], g["url"], g["key"]) for g in await saved(narrow)] == [(before["id"], gateway.url, KEY)]
    await expect(narrow.locator("#pill-link")).to_have_text("connected")
    await expect(narrow.locator(".msg.agent").last).to_have_text("Hello, the same chat.")
    assert len(gateway.browser_sockets) == sockets, "the live connection to the same gateway was left as it was"
    await narrow.locator("#toggle-settings").click()
    await expect(narrow.locator("#gateways li")).to_have_count(1)
    await narrow.locator("#toggle-settings").click()


async def test_a_new_key_for_the_same_gateway_updates_that_entry_and_resumes_its_chat(
        context: BrowserContext, narrow: Page, gateway: LiveGateway) -> None:
    # The key this browser keeps is no longer the pod's (the pod made another): the gateway refuses it.
    await narrow.locator("#toggle-settings").click()
    await narrow.locator("#set-key").fill("an-old-key_0123456789")
    await narrow.locator("#save-settings").click()
    await expect(narrow.locator("#pill-link")).not_to_have_text("connected", timeout=30_000)
    [before] = await saved(narrow)
    session = session_of([s for s in gateway.browser_sockets if s.opened][-1])
    sockets = len(gateway.browser_sockets)

    await pair(context, gateway)
    assert [(g["id"], g["name"], g["key"]) for g in await saved(narrow)] == [(before["id"], before["name"], KEY)]
    await expect(narrow.locator("#pill-link")).to_have_text("connected", timeout=30_000)
    again = [s for s in gateway.browser_sockets if s.opened][-1]
    assert gateway.browser_sockets.index(again) >= sockets and again.resumed
    assert session_of(again) == session, "the same session, resumed"
    await expect(narrow.locator(".msg.agent").last).to_have_text("Hello, the same chat.")

    # One entry, its URL whole at 360 px (before, "127.0.0.1:NNNNN ws://127.0.0.1:NN..." was cut).
    rows = narrow.locator("#gateways li")
    await expect(rows).to_have_count(1)
    await expect(rows.locator(".where")).to_have_text(gateway.url)
    cut = await rows.locator(".gateway-label").evaluate(
        "(e) => [e, ...e.children].some((c) => c.scrollWidth > c.clientWidth + 1)")
    assert not cut, "the gateway's name or URL is cut"
    await snap(narrow, "panel-paired-again.png")
    await narrow.locator("#toggle-settings").click()


async def test_a_link_for_a_saved_gateway_not_in_use_puts_it_in_use_with_its_chat(
        context: BrowserContext, narrow: Page, gateway: LiveGateway) -> None:
    [ours] = await saved(narrow)
    # Another gateway in use (one that does not answer): the panel shows its (empty) conversation.
    await narrow.locator("#toggle-settings").click()
    await narrow.locator("#add-gateway").click()
    await narrow.locator("#set-name").fill("Elsewhere")
    await narrow.locator("#set-url").fill("ws://127.0.0.1:9/acp")
    await narrow.locator("#save-settings").click()
    await expect(narrow.locator("#gateways li.active strong")).to_have_text("Elsewhere")
    await expect(narrow.locator(".msg.agent")).to_have_count(0)

    await pair(context, gateway)
    gateways = await saved(narrow)
    assert [g["name"] for g in gateways] == [ours["name"], "Elsewhere"], "no third entry"
    active = await narrow.evaluate(
        "async () => (await chrome.storage.local.get('openab.settings'))['openab.settings'].active")
    assert active == ours["id"]
    await expect(narrow.locator("#pill-link")).to_have_text("connected", timeout=30_000)
    await expect(narrow.locator(".msg.agent").last).to_have_text("Hello, the same chat.")
    await expect(narrow.locator("#gateways li.active strong")).to_have_text(ours["name"])
    await narrow.locator("#toggle-settings").click()
