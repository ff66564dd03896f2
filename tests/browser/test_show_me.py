"""Cards about a page the person cannot see: the agent's tabs open in the background, so a card has "Show me" (the
tab in front, the element outlined in its page), a card whose tab closes goes away and declines, and the panel's
list of the agent's tabs brings one forward on a click.

Chrome's own side panel beside the page (`harness.side_panel`), the real gateway with a scripted agent, and the
agent's calls from the official MCP client at the session's proxy endpoint, as an agent's would come.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from mcp import Client
from playwright.async_api import BrowserContext, Page, expect
from waits import eventually

from .conftest import chrome_side_panel
from .harness import page_at, screenshot_dir
from .live_pod import call
from .test_panel import in_background, result_text

pytestmark = pytest.mark.anyio

# The outline as the page has it: its host outside the body, the box it draws and the element's own.
OUTLINE = """() => {
  const host = document.querySelector('openab-outline');
  const el = document.getElementById('delete');
  if (!host) return null;
  const h = host.getBoundingClientRect();
  const e = el.getBoundingClientRect();
  return {
    inBody: document.body.contains(host), display: getComputedStyle(host).display,
    opacity: getComputedStyle(host).opacity, clicks: getComputedStyle(host).pointerEvents,
    encloses: h.left <= e.left && h.top <= e.top && h.right >= e.right && h.bottom >= e.bottom,
    inView: e.top >= 0 && e.bottom <= innerHeight, visible: document.visibilityState,
  };
}"""


profile, context, panel, tunnel = chrome_side_panel("show-me")


async def active_url(panel: Page) -> str:
    """The address of the tab in front of the side panel's window, as the person sees it."""
    return str(await panel.evaluate("""async () => {
        const w = await chrome.windows.getCurrent();
        const [tab] = await chrome.tabs.query({active: true, windowId: w.id});
        return tab ? tab.url : '';
    }"""))


async def in_front(panel: Page, url: str) -> None:
    async def check() -> bool:
        return await active_url(panel) == url

    await eventually(check, 15, what=f"{url} in front")


async def ref_of(client: Client, name: str) -> str:
    text, is_error = await call(client, "browser_snapshot")
    assert not is_error, text
    found = re.search(rf'button "{name}" \[ref=(e\d+)\]', text)
    assert found, text
    return found.group(1)


async def test_show_me_brings_the_tab_forward_with_the_element_outlined(
        context: BrowserContext, panel: Page, client: Client, site: str) -> None:
    far = f"{site}/far.html"
    text, is_error = await call(client, "browser_navigate", {"url": far})
    assert not is_error, text
    assert await active_url(panel) == f"{site}/index.html"  # the agent's tab opened behind the person's
    ref = await ref_of(client, "Delete account")
    async with in_background(client.call_tool("browser_click", {"ref": ref})) as out:
        card = panel.locator(".card")
        await expect(card.locator(".title")).to_have_text('The agent wants to click button "Delete account"')
        show = card.locator("button.show")
        await expect(show).to_have_text("Show me")
        await expect(show).to_have_attribute("title", 'Show the tab, with button "Delete account" outlined')
        await show.click()
        await in_front(panel, far)
        tab = await page_at(context, far)

        async def outlined() -> bool:
            return await tab.evaluate(OUTLINE) is not None

        await eventually(outlined, 15, what="the outline in the page")
        # Over the element, scrolled into view, in the tab the person now sees; outside the page's body, where no
        # snapshot reads, and neither hidden by the page's own style nor in the way of the person's clicks.
        assert await tab.evaluate(OUTLINE) == {
            "inBody": False, "display": "block", "opacity": "1", "clicks": "none", "encloses": True, "inView": True,
            "visible": "visible",
        }
        await tab.screenshot(path=str(screenshot_dir() / "page-show-me.png"))
        assert "result" not in out
        await card.locator("button[data-decision=deny]").click()
    assert out["result"].is_error and "the user declined" in result_text(out["result"])

    async def gone() -> bool:
        return await tab.evaluate(OUTLINE) is None

    await eventually(gone, 15, what="the outline gone once the card is answered")
    text, _ = await call(client, "browser_snapshot")
    assert "openab" not in text  # the agent never reads our outline as the page's
    await expect(tab.locator("#out")).to_have_text("nothing yet")


async def test_a_click_on_an_agent_tab_in_the_list_brings_it_forward(
        context: BrowserContext, panel: Page, site: str) -> None:
    person = await page_at(context, f"{site}/index.html")
    await person.bring_to_front()
    await in_front(panel, f"{site}/index.html")
    entry = panel.locator("#agent-tab-list .agent-tab .tab-label")
    await expect(entry).to_have_count(1)
    await expect(entry.locator(".tab-title")).to_have_text("Account settings")
    await entry.click()
    await in_front(panel, f"{site}/far.html")


async def test_a_card_whose_tab_closes_goes_away_and_declines(
        context: BrowserContext, panel: Page, client: Client, site: str) -> None:
    ref = await ref_of(client, "Delete account")
    async with in_background(client.call_tool("browser_click", {"ref": ref})) as out:
        card = panel.locator(".card")
        await expect(card).to_have_count(1)
        await (await page_at(context, f"{site}/far.html")).close()
        await expect(card).to_have_count(0)
    res: Any = out["result"]
    text = result_text(res)
    assert res.is_error, text
    assert text.startswith("not allowed by the user (the tab closed before the person answered; the action was not "
                           "taken): click an element whose label says \"delete\""), text


async def test_a_handoff_card_shows_its_tab_and_ends_when_the_tab_closes(
        context: BrowserContext, panel: Page, client: Client, site: str) -> None:
    text, is_error = await call(client, "browser_navigate", {"url": f"{site}/handoff.html"})
    assert not is_error, text
    async with in_background(client.call_tool("browser_handoff", {"reason": "Sign in, please"})) as out:
        card = panel.locator(".card[data-kind=handoff]")
        await expect(card).to_have_count(1)
        tab = await page_at(context, f"{site}/handoff.html")
        await in_front(panel, tab.url)  # a handoff brings its tab forward itself
        # The person looks at their own tab, then comes back to the card.
        await (await page_at(context, f"{site}/index.html")).bring_to_front()
        await in_front(panel, f"{site}/index.html")
        await card.locator("button.show").click()
        await in_front(panel, tab.url)
        await tab.close()
        await expect(card).to_have_count(0)
    res: Any = out["result"]
    text = result_text(res)
    assert res.is_error and text.startswith("the tab closed before the person answered, so the handoff ended"), text
