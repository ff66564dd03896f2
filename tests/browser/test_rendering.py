"""What the panel shows of a conversation: the agent's markdown, tool rows, screenshots, the history.

The real extension in Debian Chromium with its panel page driven by Playwright; the pod is the real
gateway, with a scripted agent sending the session/update notifications a CLI sends (tool results in
the shape claude-agent-acp gives them: `content` blocks, an image as `{type: image, data, mimeType}`).
The screenshot in a tool row is a real one, taken through the extension by the agent's MCP client.
"""

from __future__ import annotations

import pytest
from mcp import Client
from playwright.async_api import BrowserContext, Page, expect
from scripted_agent import ScriptedAgent, chunk
from waits import eventually

from openab.core.acp.backend import PromptTurn
from openab.core.tunnel.tunnel import Tunnel

from .conftest import person_browser
from .harness import open_panel, screenshot_dir, snap
from .live_pod import LiveGateway

pytestmark = pytest.mark.anyio

HOSTILE = '<img src=x onerror="window.pwned = 1"> <script>window.pwned = 2</script>'


context, tunnel = person_browser("rendering", autopilot=True)


async def say(panel: Page, text: str) -> None:
    await panel.locator("#prompt").fill(text)
    await panel.locator("#send").click()
    await expect(panel.locator("#send")).to_be_enabled()  # the turn is over


def reply(site: str) -> str:
    return (f"### What I found\n\nThe form at [the sign-in page]({site}/form.html) has **two** fields:\n\n"
            "1. `Username`, a text field\n2. `Password`, *prefilled*\n   - it should not be\n\n"
            "| Field | Kind |\n| --- | --- |\n| user | text |\n| pw | password |\n\n"
            "```html\n<input id=\"pw\" type=\"password\">\n```\n\n"
            f"Not links: [run this](javascript:window.pwned=3) and {HOSTILE}")


async def test_the_agents_markdown_is_rendered_and_its_markup_is_not(agent: ScriptedAgent, panel: Page,
                                                                     tunnel: Tunnel, site: str) -> None:
    async def markdown(turn: PromptTurn, text: str) -> str:
        for piece in (reply(site)[i:i + 40] for i in range(0, len(reply(site)), 40)):
            turn.send_update(chunk(piece))  # streamed in small pieces, as a model does
        return "end_turn"

    agent.scripts["markdown"] = markdown
    await say(panel, "markdown please")
    msg = panel.locator(".msg.agent").last
    await expect(msg.locator("h3")).to_have_text("What I found")
    await expect(msg.locator("ol > li")).to_have_count(2)
    await expect(msg.locator("ol > li").nth(1).locator("ul > li")).to_have_text("it should not be")
    await expect(msg.locator("table tr")).to_have_count(3)
    await expect(msg.locator("pre code")).to_have_text('<input id="pw" type="password">')
    await expect(msg.locator("strong")).to_have_text("two")
    # One link, to the http page; the javascript: one and the markup are text.
    links = msg.locator("a")
    await expect(links).to_have_count(1)
    assert await links.get_attribute("href") == f"{site}/form.html"
    assert await links.get_attribute("target") == "_blank"
    assert await links.get_attribute("rel") == "noopener noreferrer"
    await expect(msg).to_contain_text("[run this](javascript:window.pwned=3)")
    await expect(msg).to_contain_text(HOSTILE)
    assert await panel.locator("#log img, #log script").count() == 0
    assert await panel.evaluate("window.pwned") is None
    await snap(panel, "panel-markdown.png")


async def test_a_link_opens_in_a_new_tab_only_when_clicked(context: BrowserContext, panel: Page, site: str) -> None:
    target = f"{site}/form.html"
    assert not [p for p in context.pages if p.url == target]  # rendering it opened nothing
    async with context.expect_page() as opened:
        await panel.locator(".msg.agent a").last.click()
    page = await opened.value
    await page.wait_for_load_state()
    assert page.url == target
    assert panel.url.startswith("chrome-extension://")  # the panel stays where it was
    await page.close()


async def test_a_tool_row_expands_and_shows_the_screenshot_the_agent_took(
    agent: ScriptedAgent, panel: Page, client: Client, site: str
) -> None:
    await client.call_tool("browser_navigate", {"url": f"{site}/form.html"})
    shot = await client.call_tool("browser_screenshot", {})
    [image] = shot.content
    assert image.type == "image"

    async def screenshot(turn: PromptTurn, text: str) -> str:
        turn.send_update({"sessionUpdate": "tool_call", "toolCallId": "shot-1", "kind": "other",
                          "title": "mcp__openab_browser__browser_screenshot", "status": "in_progress",
                          "rawInput": {"fullPage": False, "note": HOSTILE}})
        said = {"type": "text", "text": f"Screenshot. {HOSTILE}"}
        picture = {"type": "image", "data": image.data, "mimeType": image.mime_type}
        turn.send_update({"sessionUpdate": "tool_call_update", "toolCallId": "shot-1", "status": "completed",
                          "content": [{"type": "content", "content": said}, {"type": "content", "content": picture}]})
        turn.send_update(chunk("Here is the page."))
        return "end_turn"

    agent.scripts["screenshot"] = screenshot
    await say(panel, "screenshot it")
    row = panel.locator(".step", has_text="browser_screenshot")
    await expect(row.locator(".status")).to_have_text("completed")
    # The thumbnail is the real picture, decoded, without opening the row.
    thumb = row.locator(".shots img")
    await expect(thumb).to_be_visible()
    width = await thumb.evaluate("(img) => img.decode().then(() => img.naturalWidth)")
    assert width >= 800
    # Arguments and result wait behind a click, as text.
    await expect(row.locator(".step-body")).to_be_hidden()
    await row.locator("summary").click()
    await expect(row.locator(".step-input")).to_contain_text('"fullPage": false')
    await expect(row.locator(".step-input")).to_contain_text(HOSTILE.replace('"', '\\"'))
    await expect(row.locator(".step-result")).to_contain_text(f"Screenshot. {HOSTILE}")
    assert await panel.evaluate("window.pwned") is None
    await row.locator(".shots").scroll_into_view_if_needed()
    await snap(panel, "panel-tool-row.png")
    # Click to enlarge; Escape closes it and does not stop anything.
    await thumb.click()
    big = panel.locator(".lightbox img")
    await expect(big).to_be_visible()
    assert await big.evaluate("(img) => img.decode().then(() => img.naturalWidth)") == width
    await snap(panel, "panel-screenshot-enlarged.png")
    cancelled = list(agent.cancelled)
    await panel.keyboard.press("Escape")
    await expect(panel.locator(".lightbox")).to_have_count(0)
    assert agent.cancelled == cancelled


def held_session(gateway: LiveGateway) -> str:
    [session_id] = [s.id for s in gateway.pod.sessions.all() if s.owner is not None]
    return session_id


# True once session storage holds exactly one conversation, ending in arg[0], of at least arg[1] items.
SAVED = """([suffix, least]) => chrome.storage.session.get(null).then((all) => {
    const saved = Object.entries(all).filter(([k]) => k.startsWith('openab.transcript:'));
    return saved.length === 1 && saved[0][0].endsWith(suffix) && saved[0][1].items.length >= least; })"""


async def test_the_history_is_there_after_reopening_and_new_chat_clears_it(
    context: BrowserContext, panel: Page, gateway: LiveGateway
) -> None:
    old = held_session(gateway)
    await panel.close()
    again = await open_panel(context)
    # The same conversation, rendered the same way: markdown, the tool row with its picture.
    await expect(again.locator(".msg.user")).to_have_text(["markdown please", "screenshot it"])
    await expect(again.locator(".msg.agent h3")).to_have_text("What I found")
    await expect(again.locator(".step", has_text="browser_screenshot").locator(".shots img")).to_be_visible()
    # It is saved (for a restarted service worker) for this gateway's session, and for it only.
    await again.wait_for_function(SAVED, arg=[f"#{old}", 5], polling=100)

    await again.locator("#new-chat").click()
    await expect(again.locator("#log > *")).to_have_count(0)
    await eventually(lambda: any(s.owner is not None for s in gateway.pod.sessions.all() if s.id != old), 30)
    # The replaced conversation is gone from storage too; the new one is saved under its own session.
    await again.wait_for_function(SAVED, arg=[f"#{held_session(gateway)}", 0], polling=100)
    await again.close()
    fresh = await open_panel(context)
    await expect(fresh.locator("#pill-link")).to_have_text("connected")
    await expect(fresh.locator("#log > *")).to_have_count(0)



def test_screenshots_were_written() -> None:
    for name in ("panel-markdown.png", "panel-tool-row.png", "panel-screenshot-enlarged.png"):
        data = (screenshot_dir() / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000
