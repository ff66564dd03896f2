"""Whose tab is it: the agent's are the tabs it opened (and popups their pages open) and the tabs the person shared,
by the panel's button or by moving the tab into the openab group; moving one out is taking it back. And the prompt
Chrome shows around the group: "Close tab and delete group?".

Real Chromium with the real extension and the real gateway; Playwright plays the person. What a person does in
Chrome's own UI is done the way Chrome itself reports it to the extension: a new tab as Chrome opens Ctrl+T's (with
the tab they look at as its opener; Chrome's keyboard shortcuts do not reach a headless window), a tab dragged
into or out of the group by the extension's own chrome.tabs.group/ungroup from the panel page, which Chrome
reports with the same tabs.onUpdated groupId change as the person's drag. Autopilot is off.
"""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client
from playwright.async_api import BrowserContext, Locator, Page, expect
from waits import eventually

from .conftest import person_browser
from .harness import page_at, snap
from .live_pod import call, without_receipt
from .test_panel import in_background

pytestmark = pytest.mark.anyio

context, tunnel = person_browser("ownership")


def rows(panel: Page) -> Locator:
    return panel.locator("#agent-tab-list li.agent-tab[data-tab-id]")


def row(panel: Page, tab_id: int) -> Locator:
    return panel.locator(f"#agent-tab-list li[data-tab-id='{tab_id}']")


async def tab_id_of(panel: Page, url: str) -> int:
    """The id of the one tab at ``url``, once Chrome has it there: a popup is listed (and adopted) while its first
    navigation is still pending."""
    found: list[dict[str, Any]] = []

    async def there() -> bool:
        found[:] = [t for t in await panel.evaluate("chrome.tabs.query({})") if url in (t["url"], t.get("pendingUrl"))]
        return len(found) == 1

    await eventually(there, 15, what=f"one tab at {url}")
    return int(found[0]["id"])


async def openab_group(panel: Page) -> int:
    [group] = [g for g in await panel.evaluate("chrome.tabGroups.query({})") if g["title"] == "openab"]
    return int(group["id"])


async def grouped(panel: Page, tab_id: int, group: int) -> None:
    """Returns once the tab is in ``group`` (-1: in none): the extension groups a tab just after it lists it."""

    async def there() -> bool:
        return bool((await panel.evaluate("(id) => chrome.tabs.get(id)", tab_id))["groupId"] == group)

    await eventually(there, 15, what=f"tab {tab_id} to be in group {group}")


async def listing(client: Client) -> str:
    text, is_error = await call(client, "browser_tabs", {"action": "list"})
    assert not is_error, text
    return text


async def test_a_tab_the_person_opens_from_an_agent_tab_is_theirs(context: BrowserContext, panel: Page,
                                                                  client: Client, site: str) -> None:
    text, is_error = await call(client, "browser_navigate", {"url": f"{site}/popup.html"})
    assert not is_error, text
    await expect(rows(panel)).to_have_count(1)
    agent_page = await page_at(context, f"{site}/popup.html")
    agent_tab = await tab_id_of(panel, f"{site}/popup.html")
    await agent_page.bring_to_front()
    # The person's new tab while they look at the agent's: Chrome gives it the tab they looked at as its opener.
    known = {t["id"] for t in await panel.evaluate("chrome.tabs.query({})")}
    mine = await context.new_page()
    fresh: list[dict[str, Any]] = []

    async def opened() -> bool:
        fresh[:] = [t for t in await panel.evaluate("chrome.tabs.query({})") if t["id"] not in known]
        return bool(fresh)

    await eventually(opened, 15, what="Chrome to list the person's new tab")
    assert fresh[0].get("openerTabId") == agent_tab  # what made it look like the agent's popup before
    await mine.goto(f"{site}/table.html")
    # Chrome's new tab page as Ctrl+T opens it, with the agent tab as its opener too.
    ntp = await panel.evaluate("""(opener) => chrome.tabs.create({url: 'chrome://newtab/', openerTabId: opener})
        .then((t) => t.id)""", agent_tab)
    now = await listing(client)
    assert now.count("- tab ") == 1 and "table.html" not in now and f"tab {ntp}" not in now, now
    await expect(rows(panel)).to_have_count(1)
    await panel.evaluate("(id) => chrome.tabs.remove(id)", ntp)

    # A popup the agent's page opens (its target=_blank link, clicked in the page) is the agent's.
    await agent_page.locator("#new-tab").click()
    await expect(rows(panel)).to_have_count(2)
    popup = await tab_id_of(panel, f"{site}/page2.html")
    await expect(row(panel, popup).locator(".tab-by")).to_have_text("opened by the agent")
    assert f"- tab {popup}" in await listing(client)
    await grouped(panel, popup, await openab_group(panel))


async def test_moving_a_tab_into_the_openab_group_shares_it(context: BrowserContext, panel: Page,
                                                           client: Client, site: str) -> None:
    mine = await tab_id_of(panel, f"{site}/table.html")
    group = await openab_group(panel)
    await panel.evaluate("([tabId, groupId]) => chrome.tabs.group({tabIds: [tabId], groupId})", [mine, group])
    await expect(row(panel, mine).locator(".tab-by")).to_have_text("shared by you")
    await expect(row(panel, mine).locator("button.unshare")).to_have_text("Stop sharing")
    now = await listing(client)
    assert f"- tab {mine} (shared by the user):" in now, now
    text, is_error = await call(client, "browser_tabs", {"action": "switch", "tab_id": mine})
    assert not is_error, text
    text, is_error = await call(client, "browser_snapshot", {"interactive_only": True})
    assert not is_error and f"URL: {site}/table.html" in text, text
    await snap(panel, "panel-tabs-moved-in.png")


async def test_moving_a_tab_out_of_the_group_takes_it_back(context: BrowserContext, panel: Page,
                                                           client: Client, site: str) -> None:
    mine = await tab_id_of(panel, f"{site}/table.html")
    await panel.evaluate("(id) => chrome.tabs.ungroup(id)", mine)
    await expect(row(panel, mine)).to_have_count(0)
    assert "table.html" not in await listing(client)
    # It was the agent's current tab: the next step says so instead of landing in another tab.
    text, is_error = await call(client, "browser_snapshot")
    assert is_error and "stopped sharing" in text, text
    text, is_error = await call(client, "browser_tabs", {"action": "switch", "tab_id": mine})
    assert is_error and "not an agent tab" in text, text
    assert await panel.evaluate("(id) => chrome.tabs.get(id).then((t) => t.url)", mine) == f"{site}/table.html"

    # A tab the agent opened, moved out, is the person's now: still open, no longer the agent's.
    popup = await tab_id_of(panel, f"{site}/page2.html")
    await panel.evaluate("(id) => chrome.tabs.ungroup(id)", popup)
    await expect(row(panel, popup)).to_have_count(0)
    now = await listing(client)
    assert f"tab {popup}" not in now and now.count("- tab ") == 1, now
    text, is_error = await call(client, "browser_tabs", {"action": "close", "tab_id": popup})
    assert is_error and "not an agent tab" in text, text
    assert await panel.evaluate("(id) => chrome.tabs.get(id).then((t) => t.url)", popup) == f"{site}/page2.html"


async def test_stop_sharing_a_tab_moved_in_takes_it_out_of_the_group(panel: Page, client: Client, site: str) -> None:
    mine = await tab_id_of(panel, f"{site}/table.html")
    group = await openab_group(panel)
    await panel.evaluate("([tabId, groupId]) => chrome.tabs.group({tabIds: [tabId], groupId})", [mine, group])
    await expect(row(panel, mine).locator("button.unshare")).to_have_count(1)
    await row(panel, mine).locator("button.unshare").click()
    await expect(row(panel, mine)).to_have_count(0)
    # The group shows only what the agent may use.
    await grouped(panel, mine, -1)
    assert "table.html" not in await listing(client)


async def test_a_tab_moved_out_mid_call_is_not_touched_again(context: BrowserContext, panel: Page, client: Client,
                                                             site: str) -> None:
    mine = await tab_id_of(panel, f"{site}/table.html")
    await panel.evaluate("([tabId, groupId]) => chrome.tabs.group({tabIds: [tabId], groupId})",
                         [mine, await openab_group(panel)])
    await expect(row(panel, mine).locator(".tab-by")).to_have_text("shared by you")
    text, is_error = await call(client, "browser_tabs", {"action": "switch", "tab_id": mine})
    assert not is_error, text
    text, is_error = await call(client, "browser_navigate", {"url": f"{site}/form.html"})
    assert not is_error, text
    form = await page_at(context, f"{site}/form.html")
    # A risky click waits on the person's card, and the person, instead of answering, drags the tab out.
    async with in_background(client.call_tool("browser_click", {"selector": "#post"})) as out:
        card = panel.locator(".card")
        await expect(card.locator(".title")).to_have_text('The agent wants to click button "Post a review"')
        await panel.evaluate("(id) => chrome.tabs.ungroup(id)", mine)
        await expect(card).to_have_count(0)
    result = out["result"]
    assert result.is_error and "the user stopped sharing the tab this call was using" in result.content[0].text
    await expect(form.locator("#out")).to_have_text("nothing yet")  # never clicked
    await expect(row(panel, mine)).to_have_count(0)
    await form.close()


async def test_the_agent_closing_its_last_tab_takes_the_group_with_it(panel: Page, client: Client) -> None:
    # Chrome asks "Close tab and delete group?" only from its tab strip (a saved group's last tab closed by its
    # close button or menu); the extension's chrome.tabs.remove never asks. The agent's close of its last tab is
    # that call: the tab and the emptied group go, and nothing reads the tab's leaving the group as the person's.
    [agent_row] = await rows(panel).all()
    last = int(str(await agent_row.get_attribute("data-tab-id")))
    group = await openab_group(panel)
    tabs = await panel.evaluate("chrome.tabs.query({})")
    assert [t["id"] for t in tabs if t["groupId"] == group] == [last]
    await panel.evaluate("""() => {
        window.gone = [];
        chrome.tabGroups.onRemoved.addListener((g) => window.gone.push(`group ${g.id}`));
        chrome.tabs.onRemoved.addListener((id) => window.gone.push(`tab ${id}`));
    }""")
    text, is_error = await call(client, "browser_tabs", {"action": "close", "tab_id": last})
    assert not is_error and without_receipt(text) == f"closed tab {last}", text

    async def both() -> bool:
        return sorted(await panel.evaluate("window.gone")) == sorted([f"group {group}", f"tab {last}"])

    await eventually(both, 15, what="the agent's last tab and its group to go")
    await expect(rows(panel)).to_have_count(0)
    now = await listing(client)
    assert now.startswith("no agent tabs"), now
