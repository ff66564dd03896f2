"""The panel as Chrome's own side panel, not a tab: connect, prompt, a card, and closing and reopening it.

Chrome opens the side panel only on a user gesture (`chrome.sidePanel.open` from a Playwright
evaluate in an extension page); the panel is then found over the DevTools port and driven as a page
(`harness.side_panel`). The pod is the real gateway with a scripted agent; the risky call comes
from the official MCP client at the session's proxy endpoint, as an agent's would.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client
from playwright.async_api import BrowserContext, Page, expect
from scripted_agent import ScriptedAgent, chunk

from openab_browser.core.acp.backend import PromptTurn
from openab_browser.core.tunnel.tunnel import Tunnel

from .conftest import chrome_side_panel
from .harness import (
    extension_id,
    page_at,
    screenshot_dir,
    side_panel,
)
from .live_pod import LiveGateway
from .test_panel import in_background
from .test_panel_header import MISFITS
from .test_show_me import active_url, in_front

pytestmark = pytest.mark.anyio


profile, context, panel, tunnel = chrome_side_panel("side-panel")


async def contexts(page: Page) -> list[str]:
    """The extension's documents as Chrome counts them: the worker, tabs, side panels."""
    return list(await page.evaluate("chrome.runtime.getContexts({}).then((cs) => cs.map((c) => c.contextType))"))


async def test_it_is_the_real_side_panel_and_it_connects(context: BrowserContext, panel: Page,
                                                         tunnel: Tunnel) -> None:
    assert panel.url == f"chrome-extension://{extension_id()}/panel/sidepanel.html"
    # Chrome's side panel, beside the page: no tab of the extension's is open.
    assert sorted(await contexts(panel)) == ["BACKGROUND", "SIDE_PANEL"]
    assert not [p for p in context.pages if p.url.startswith("chrome-extension://")]
    width = await panel.evaluate("innerWidth")
    assert 300 <= width <= 500, width
    await expect(panel.locator("#pill-link")).to_have_text("connected")
    await expect(panel.locator("#pill-tunnel")).to_have_text("tools attached")
    await expect(panel.locator("#pill-tools")).to_have_text("idle")
    assert await panel.evaluate(MISFITS) == []  # the header whole at the side panel's own width
    await panel.screenshot(path=str(screenshot_dir() / "side-panel-connected.png"))


async def test_a_prompt_typed_in_the_side_panel_gets_its_answer_there(agent: ScriptedAgent, panel: Page,
                                                                        tunnel: Tunnel) -> None:
    async def hello(turn: PromptTurn, text: str) -> str:
        turn.send_update(chunk("Hello from the agent. Here is a **list**:\n\n- one\n- two\n"))
        return "end_turn"

    agent.scripts["hello"] = hello
    await panel.locator("#prompt").fill("hello side panel")
    await panel.locator("#prompt").press("Enter")
    await expect(panel.locator(".msg.user")).to_have_text("hello side panel")
    await expect(panel.locator(".msg.agent li")).to_have_text(["one", "two"])
    await expect(panel.locator(".msg.agent strong")).to_have_text("list")
    assert agent.prompts[-1] == (tunnel.session_id, [{"type": "text", "text": "hello side panel"}])
    await expect(panel.locator("#send")).to_be_enabled()
    await panel.screenshot(path=str(screenshot_dir() / "side-panel-chat.png"))


async def test_a_risky_step_is_a_card_in_the_side_panel(context: BrowserContext, panel: Page, client: Client,
                                                        site: str) -> None:
    assert not (await client.call_tool("browser_navigate", {"url": f"{site}/form.html"})).is_error
    async with in_background(client.call_tool("browser_click", {"selector": "#post"})) as out:
        card = panel.locator(".card")
        await expect(card.locator(".title")).to_have_text('The agent wants to click button "Post a review"')
        assert "result" not in out
        # At Chrome's own panel width the header says the call runs, and nothing in it is cut.
        await expect(panel.locator("#pill-tools")).to_have_text("browser in use")
        assert await panel.evaluate(MISFITS) == []
        await panel.screenshot(path=str(screenshot_dir() / "side-panel-confirm.png"))
        # The agent's tab opened behind the person's: Show me brings it beside the panel.
        assert await active_url(panel) == f"{site}/index.html"
        await card.locator("button.show").click()
        await in_front(panel, f"{site}/form.html")
        await card.locator("button[data-decision=allow]").click()
    assert not out["result"].is_error
    await expect(panel.locator(".card")).to_have_count(0)
    page = await page_at(context, f"{site}/form.html")
    await expect(page.locator("#out")).to_have_text("posted")


async def test_the_latest_exchange_stays_in_view_when_the_tab_list_grows_under_it(
        agent: ScriptedAgent, panel: Page, client: Client, site: str) -> None:
    async def long(turn: PromptTurn, text: str) -> str:
        turn.send_update(chunk("\n\n".join(f"Line {n} of a long answer." for n in range(40))))
        return "end_turn"

    async def short(turn: PromptTurn, text: str) -> str:
        turn.send_update(chunk("The short answer."))
        return "end_turn"

    agent.scripts["long"] = long
    agent.scripts["short"] = short
    log = panel.locator("#log")
    at_end = "(log) => log.scrollTop + log.clientHeight >= log.scrollHeight - 2"
    await panel.locator("#prompt").fill("long")
    await panel.locator("#prompt").press("Enter")
    await expect(panel.locator(".msg.agent").last).to_contain_text("Line 39 of a long answer.")
    await expect(panel.locator("#send")).to_be_enabled()
    assert await log.evaluate(at_end)
    # The agent opens another tab: the list under the conversation grows, and the log's box shrinks under its end.
    rows = await panel.locator("#agent-tab-list li").count()
    assert not (await client.call_tool("browser_tabs", {"action": "open", "url": f"{site}/keys.html"})).is_error
    await expect(panel.locator("#agent-tab-list li")).to_have_count(rows + 1)
    end = await log.evaluate("(log) => log.scrollHeight - log.clientHeight")
    await expect(log).to_have_js_property("scrollTop", end)
    # The person's next message and its answer come into view, as the person reads on.
    await panel.locator("#prompt").fill("short")
    await panel.locator("#prompt").press("Enter")
    await expect(panel.locator(".msg.agent").last).to_have_text("The short answer.")
    await expect(panel.locator("#send")).to_be_enabled()
    assert await log.evaluate(at_end)
    await expect(panel.locator(".msg.user").last).to_be_in_viewport()
    await expect(panel.locator(".msg.agent").last).to_be_in_viewport()


async def test_closing_and_reopening_the_side_panel_shows_the_same_conversation(
    context: BrowserContext, panel: Page, profile: Path, gateway: LiveGateway
) -> None:
    sockets = len(gateway.browser_sockets)
    async with panel.expect_event("close"):
        await panel.evaluate("setTimeout(() => window.close(), 0)")
    assert await _side_panels(context) == 0
    async with side_panel(context, profile / "chrome") as again:
        await expect(again.locator(".msg.user").first).to_have_text("hello side panel")
        await expect(again.locator(".msg.agent li")).to_have_text(["one", "two"])
        await expect(again.locator("#pill-link")).to_have_text("connected")
    # The socket lives in the service worker: the panel closing did not drop it.
    assert len(gateway.browser_sockets) == sockets and not gateway.browser_sockets[-1].closed.is_set()


async def _side_panels(context: BrowserContext) -> int:
    """How many side panels Chrome has open, as the extension's service worker sees them."""
    [worker] = [w for w in context.service_workers if extension_id() in w.url]
    return int(await worker.evaluate(
        "chrome.runtime.getContexts({contextTypes: ['SIDE_PANEL']}).then((cs) => cs.length)"))


def test_screenshots_were_written() -> None:
    for name in ("side-panel-connected.png", "side-panel-chat.png", "side-panel-confirm.png"):
        data = (screenshot_dir() / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000
