"""The panel's last frictions (issue 36, item 9), each as a person meets it at 360 px, Chrome's default side panel
width: the link line after a valid Save, a card whose tab was closed, a failure written for the model, a step the
agent aimed by a selector, the connection's greeting once the chat goes on, a resumed session as an event in the
chat's time, and an enlarged screenshot that uses the panel and offers its full size.

Real Chromium with the real extension against the real gateway; the scripted agent makes its browser calls through
the official MCP client and relays each call and its real result to the panel, as a CLI does.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from mcp import Client
from playwright.async_api import BrowserContext, Page, ViewportSize, expect
from scripted_agent import ScriptedAgent, chunk

from openab_browser.core.acp.backend import PromptTurn

from .conftest import person_browser
from .harness import open_panel, snap
from .live_pod import KEY, LiveGateway

pytestmark = pytest.mark.anyio

context, tunnel = person_browser("panel-frictions")

WIDTH: ViewportSize = {"width": 360, "height": 720}


@pytest.fixture(scope="module")
async def narrow(panel: Page) -> Page:
    """The module's panel at Chrome's default side panel width, connected."""
    await panel.set_viewport_size(WIDTH)
    await expect(panel.locator("#pill-link")).to_have_text("connected", timeout=30_000)
    return panel


def call(call_id: str, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"sessionUpdate": "tool_call", "toolCallId": call_id, "title": f"mcp__openab_browser__{tool}",
            "kind": "other", "status": "in_progress", "rawInput": args}


async def relay(turn: PromptTurn, client: Client, call_id: str, tool: str, args: dict[str, Any]) -> str:
    """One real browser call, shown to the panel as a CLI shows it: the call, then its result."""
    turn.send_update(call(call_id, tool, args))
    res = await client.call_tool(tool, args)
    said = "\n".join(getattr(c, "text", "") for c in res.content)
    turn.send_update({"sessionUpdate": "tool_call_update", "toolCallId": call_id,
                      "status": "failed" if res.is_error else "completed",
                      "content": [{"type": "content", "content": {"type": "text", "text": said}}]})
    return said


async def say(panel: Page, text: str) -> None:
    await panel.locator("#prompt").fill(text)
    await panel.locator("#send").click()


async def new_chat(panel: Page) -> None:
    await panel.locator("#new-chat").click()
    yes = panel.locator("#new-chat-yes")
    if await yes.is_visible():
        await yes.click()
    await expect(panel.locator("#log > *")).to_have_count(0)


async def test_a_failure_written_for_the_model_is_said_short(
        agent: ScriptedAgent, narrow: Page, client: Client) -> None:
    """Before: the row said only "Could not click an element", and the reason read was the model's text
    ("no agent tab yet: open one with browser_navigate {..."). Now a line of ours says why; the whole text is
    the step's Result."""
    async def early(turn: PromptTurn, text: str) -> str:
        said = await relay(turn, client, "c1", "browser_click", {"selector": "#preview"})
        assert said.startswith("no agent tab yet: open one with browser_navigate {")
        return "end_turn"

    agent.scripts["early"] = early
    await say(narrow, "early")
    row = narrow.locator(".step").last
    await expect(row).to_have_class(re.compile(r"\bfailed\b"), timeout=30_000)
    await expect(row.locator(".why")).to_have_text("No tab open for the agent yet")
    assert "browser_" not in await row.locator(".why").inner_text()
    await expect(row.locator(".step-body")).to_be_hidden()
    await row.locator("summary").click()
    await expect(row.locator(".step-result")).to_contain_text('no agent tab yet: open one with browser_navigate {"url"')
    await snap(narrow, "panel-failure-short.png")
    await row.locator("summary").click()


async def test_a_step_aimed_by_a_selector_is_named_by_its_element(
        agent: ScriptedAgent, narrow: Page, client: Client, site: str) -> None:
    """Before: "Clicked #preview". The result's block names the element: the row says its name."""
    async def aimed(turn: PromptTurn, text: str) -> str:
        await relay(turn, client, "n1", "browser_navigate", {"url": f"{site}/form.html"})
        await relay(turn, client, "c2", "browser_click", {"selector": "#preview"})
        return "end_turn"

    agent.scripts["aimed"] = aimed
    await say(narrow, "aimed")
    row = narrow.locator(".step").last
    await expect(row).to_have_class(re.compile(r"\bcompleted\b"), timeout=30_000)
    await expect(row.locator(".title")).to_have_text('Clicked "Preview"')
    await expect(row.locator(".title q.quoted")).to_have_text("Preview")
    await snap(narrow, "panel-step-named.png")


async def test_a_card_whose_tab_closed_is_not_said_as_declined(
        agent: ScriptedAgent, context: BrowserContext, narrow: Page, client: Client, site: str) -> None:
    """Before: "You declined: Click "Buy now"", though the person never answered: they closed the tab."""
    async def buy(turn: PromptTurn, text: str) -> str:
        await relay(turn, client, "c3", "browser_click", {"selector": "#buy"})
        turn.send_update(chunk("The tab closed."))
        return "end_turn"

    agent.scripts["buy"] = buy
    await say(narrow, "buy")
    card = narrow.locator(".card")
    await expect(card).to_have_count(1, timeout=30_000)
    [tab] = [p for p in context.pages if p.url.startswith(f"{site}/form.html")]
    await tab.close()
    await expect(card).to_have_count(0)
    row = narrow.locator(".step").last
    await expect(row.locator(".title")).to_have_text(
        re.compile(r'^The tab closed before you answered: Click "Buy now"$'), timeout=30_000)
    await expect(row.locator(".title")).not_to_contain_text("declined")
    await expect(row.locator(".status")).to_have_text("not answered")
    await expect(narrow.locator("#send")).to_be_enabled(timeout=30_000)
    await snap(narrow, "panel-card-tab-closed.png")


async def test_the_greeting_goes_once_the_chat_goes_on(agent: ScriptedAgent, narrow: Page) -> None:
    """Before: "New session" (or "Session resumed") stayed under the pill for the whole chat."""
    await new_chat(narrow)
    line = narrow.locator("#link-detail")
    await expect(line).to_have_text(re.compile(r"^(New session|Session resumed at .+)$"))

    async def hello(turn: PromptTurn, text: str) -> str:
        turn.send_update(chunk("Hello."))
        return "end_turn"

    agent.scripts["hello"] = hello
    await say(narrow, "hello")
    await expect(narrow.locator(".msg.agent").last).to_have_text("Hello.", timeout=30_000)
    await expect(line).to_have_text("")
    # A panel opened now says it no more.
    again = await open_panel(narrow.context)
    await again.set_viewport_size(WIDTH)
    await expect(again.locator(".msg.agent").last).to_have_text("Hello.")
    await expect(again.locator("#link-detail")).to_have_text("")
    await again.close()
    await snap(narrow, "panel-greeting-gone.png")


async def test_a_valid_save_takes_the_refused_edits_line_away(narrow: Page, gateway: LiveGateway) -> None:
    """Before: after a refused key and then a valid Save, the line still said "The new key was not saved"."""
    await narrow.locator("#toggle-settings").click()
    await narrow.locator("#set-key").fill("a b")
    await narrow.locator("#save-settings").click()
    line = narrow.locator("#link-detail")
    await expect(line).to_contain_text("The new key was not saved")
    await narrow.locator("#set-key").fill(KEY)
    await narrow.locator("#save-settings").click()
    await expect(narrow.locator("#notice")).to_have_text("Settings saved.")
    await expect(narrow.locator("#set-key-error")).to_be_hidden()
    await expect(line).not_to_contain_text("not saved")
    await expect(narrow.locator("#pill-link")).to_have_text("connected")
    await snap(narrow, "panel-saved-after-error.png")
    await narrow.locator("#toggle-settings").click()


async def test_an_enlarged_screenshot_uses_the_panel_and_offers_its_full_size(
        agent: ScriptedAgent, narrow: Page, gateway: LiveGateway, site: str) -> None:
    """Before: the picture was capped at the panel's width less its margins (340 px of a 1280 px page at 360 px),
    with no way to see it larger. Now it fills the panel's width, and Full size shows it pixel for pixel."""
    tunnel = gateway.tunnel_of(gateway.browser_sockets[-1])  # this chat's (New chat above started another)
    assert tunnel is not None
    async with gateway.agent_client(tunnel.session_id) as client:
        await show_a_screenshot(agent, narrow, client, site)


async def show_a_screenshot(agent: ScriptedAgent, narrow: Page, client: Client, site: str) -> None:
    async def shot(turn: PromptTurn, text: str) -> str:
        await relay(turn, client, "n9", "browser_navigate", {"url": f"{site}/form.html"})
        taken = await client.call_tool("browser_screenshot", {})
        [picture] = [c for c in taken.content if c.type == "image"]
        turn.send_update(call("s9", "browser_screenshot", {}))
        turn.send_update({"sessionUpdate": "tool_call_update", "toolCallId": "s9", "status": "completed",
                          "content": [{"type": "content", "content": {"type": "image", "data": picture.data,
                                                                      "mimeType": picture.mime_type}}]})
        return "end_turn"

    agent.scripts["shot"] = shot
    await say(narrow, "shot")
    thumb = narrow.locator(".step .shots img").last
    await expect(thumb).to_be_visible(timeout=30_000)
    natural = int(await thumb.evaluate("(img) => img.decode().then(() => img.naturalWidth)"))
    assert natural > 700
    await thumb.click()
    box = narrow.locator(".lightbox")
    big = box.locator("img")
    await expect(big).to_be_visible()
    width = await big.evaluate("(img) => img.getBoundingClientRect().width")
    view = await box.locator(".lightbox-view").evaluate("(v) => v.clientWidth")
    assert width == view >= WIDTH["width"] - 2, (width, view)  # the panel's whole width, not 340 px of it
    await snap(narrow, "panel-screenshot-enlarged-360.png")

    await box.get_by_role("button", name="Full size").click()
    await expect(box).to_have_class(re.compile(r"\bfull\b"))
    ratio = await narrow.evaluate("window.devicePixelRatio")
    width = await big.evaluate("(img) => img.getBoundingClientRect().width")
    assert abs(width - natural / ratio) < 1, (width, natural, ratio)
    scrolls = await box.locator(".lightbox-view").evaluate("(v) => v.scrollWidth > v.clientWidth")
    assert scrolls, "a picture larger than the panel scrolls"
    await snap(narrow, "panel-screenshot-full-size.png")
    await box.get_by_role("button", name="Fit to panel").click()
    await expect(box).to_have_class(re.compile(r"\bfit\b"))
    await narrow.keyboard.press("Escape")
    await expect(box).to_have_count(0)


async def test_a_resumed_session_is_an_event_in_the_chat_not_a_line_on_top(
        agent: ScriptedAgent, narrow: Page, gateway: LiveGateway) -> None:
    """Last in the module: the dropped socket ends the module's MCP client's connection.

    Before: "Session resumed" sat under the pill, with no time, as if it were the connection's state, and stayed
    there until the person wrote. Now it is a line in the conversation, at its place in time, with its time; the
    line on top says it with its time only until the chat goes on."""
    async def hello(turn: PromptTurn, text: str) -> str:
        turn.send_update(chunk("Hello again."))
        return "end_turn"

    agent.scripts["hello"] = hello
    await say(narrow, "hello")
    await expect(narrow.locator(".msg.agent").last).to_have_text("Hello again.", timeout=30_000)
    sockets = len(gateway.browser_sockets)
    await gateway.browser_sockets[-1].drop()
    again = await gateway.browser_socket(sockets)
    await expect(narrow.locator("#pill-link")).to_have_text("connected", timeout=30_000)
    assert again.resumed
    last = narrow.locator("#log > *").last
    await expect(last).to_have_class("event")
    await expect(last).to_contain_text("Session resumed")
    await expect(last.locator("time")).to_have_text(re.compile(r"\d"))
    line = narrow.locator("#link-detail")
    await expect(line).to_have_text(re.compile(r"^Session resumed at \d"))
    await snap(narrow, "panel-session-resumed.png")

    # The reply is the same text as the first: wait for one more reply, not for the last to read it.
    replies = await narrow.locator(".msg.agent").count()
    await say(narrow, "hello")
    await expect(narrow.locator(".msg.agent")).to_have_count(replies + 1, timeout=30_000)
    await expect(narrow.locator(".msg.agent").last).to_have_text("Hello again.", timeout=30_000)
    await expect(line).to_have_text("")
    # The event stays where it happened: after the first reply, before the message written since.
    kinds = await narrow.locator("#log > *").evaluate_all("(rows) => rows.map((r) => r.dataset.kind)")
    assert kinds[-4:] == ["agent", "event", "user", "agent"], kinds
