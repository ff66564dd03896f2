"""The "openab" tab group keeps meaning "the agent's tabs" across New chat (issue 36, item 8). Before, a tab the person
had shared by moving it into the group stayed in the group after New chat though no longer shared, and the next
chat's first tab made a second "openab" group beside it; closing that leftover tab made Chrome ask "Close tab and
delete group?". Now New chat takes every tab out of the chat's group (the group goes with them), the next chat's
first tab starts the one group, an "openab" group already in the window is joined rather than doubled (what was in
it taken out: it is not the agent's), and a tab the agent closes leaves the group first.

Real Chromium with the real extension and the real gateway at 360 px; the person's moves in Chrome's tab strip are
made the way Chrome reports them to the extension (chrome.tabs.group from the panel page), as in
test_tab_ownership.py; the agents are the official MCP client on each chat's session.
"""

from __future__ import annotations

from typing import Any

import pytest
from playwright.async_api import BrowserContext, Page, ViewportSize, expect
from waits import eventually

from .conftest import person_browser
from .live_pod import TIMEOUT, LiveGateway, call, without_receipt
from .test_tab_ownership import grouped, rows, tab_id_of

pytestmark = pytest.mark.anyio

context, tunnel = person_browser("new-chat-group")

WIDTH: ViewportSize = {"width": 360, "height": 720}


@pytest.fixture(scope="module")
async def narrow(panel: Page) -> Page:
    await panel.set_viewport_size(WIDTH)
    await expect(panel.locator("#pill-link")).to_have_text("connected", timeout=30_000)
    return panel


async def openab_groups(panel: Page) -> list[dict[str, Any]]:
    return [g for g in await panel.evaluate("chrome.tabGroups.query({})") if g["title"] == "openab"]


async def one_group(panel: Page) -> int:
    async def one() -> bool:
        return len(await openab_groups(panel)) == 1

    await eventually(one, 15, what="one openab group")
    [group] = await openab_groups(panel)
    return int(group["id"])


async def session_now(gateway: LiveGateway, other_than: str = "") -> str:
    sock = gateway.browser_sockets[-1]
    await eventually(lambda: (t := gateway.tunnel_of(sock)) is not None and t.session_id != other_than, TIMEOUT,
                     what="the chat's browser tunnel")
    found = gateway.tunnel_of(sock)
    assert found is not None
    return found.session_id


async def agent_opens(gateway: LiveGateway, session: str, url: str) -> int:
    async with gateway.agent_client(session) as agent:
        text, is_error = await call(agent, "browser_tabs", {"action": "open", "url": url})
    assert not is_error, text
    return int(text.split("tab ", 1)[1].split()[0].rstrip(":,.;"))


async def new_chat_keeping_tabs(panel: Page) -> None:
    await panel.locator("#new-chat").click()
    yes = panel.locator("#new-chat-yes")
    if await yes.is_visible():  # asked only when there is something to clear
        await yes.click()
    await expect(panel.locator("#log > *")).to_have_count(0)


async def test_new_chat_takes_a_shared_tab_out_of_the_group_and_the_next_tab_makes_the_only_one(
        context: BrowserContext, narrow: Page, gateway: LiveGateway, site: str) -> None:
    first = await session_now(gateway)
    agents_tab = await agent_opens(gateway, first, f"{site}/form.html")
    group = await one_group(narrow)
    await grouped(narrow, agents_tab, group)
    mine = await context.new_page()
    await mine.goto(f"{site}/page2.html")
    my_tab = await tab_id_of(narrow, f"{site}/page2.html")
    await narrow.evaluate("([tabId, groupId]) => chrome.tabs.group({tabIds: [tabId], groupId})", [my_tab, group])
    await expect(rows(narrow)).to_have_count(2)  # moved in: shared

    await new_chat_keeping_tabs(narrow)
    await expect(narrow.locator("#notice")).to_have_text(
        "New chat. The tab the agent opened stays open as yours. The tab you shared is no longer shared.")
    await grouped(narrow, my_tab, -1)  # before: still in "openab", though no longer shared
    await grouped(narrow, agents_tab, -1)
    assert await openab_groups(narrow) == [], "the chat's group went with its tabs"

    second = await session_now(gateway, other_than=first)
    next_tab = await agent_opens(gateway, second, f"{site}/index.html")
    group = await one_group(narrow)  # before: a second "openab" beside the leftover one
    await grouped(narrow, next_tab, group)
    tabs = await narrow.evaluate("chrome.tabs.query({})")
    assert [t["id"] for t in tabs if t["groupId"] == group] == [next_tab]
    await expect(rows(narrow)).to_have_count(1)
    await mine.close()


async def test_an_openab_group_already_there_is_joined_not_doubled(
        context: BrowserContext, narrow: Page, gateway: LiveGateway, site: str) -> None:
    before = await session_now(gateway)
    await new_chat_keeping_tabs(narrow)

    async def none() -> bool:
        return await openab_groups(narrow) == []

    await eventually(none, 15, what="the chat's group to go with its tabs")
    # An "openab" group this chat did not make (Chrome restored it with the window), holding a tab of the person's.
    mine = await context.new_page()
    await mine.goto(f"{site}/page2.html")
    my_tab = await tab_id_of(narrow, f"{site}/page2.html")
    await narrow.evaluate("""async (tabId) => {
        const groupId = await chrome.tabs.group({tabIds: [tabId]});
        await chrome.tabGroups.update(groupId, {title: 'openab', color: 'blue'});
    }""", my_tab)
    leftover = await one_group(narrow)

    chat = await session_now(gateway, other_than=before)
    agents_tab = await agent_opens(gateway, chat, f"{site}/form.html")
    await grouped(narrow, agents_tab, leftover)  # before: a second group of the same name
    await grouped(narrow, my_tab, -1)  # not the agent's: out of the group it joined
    assert [g["id"] for g in await openab_groups(narrow)] == [leftover]
    await expect(rows(narrow)).to_have_count(1)
    await mine.close()


async def test_a_tab_the_agent_closes_leaves_the_group_first(narrow: Page, gateway: LiveGateway, site: str) -> None:
    before = await session_now(gateway)
    await new_chat_keeping_tabs(narrow)  # a chat of its own: the tab it opens is its group's only one
    chat = await session_now(gateway, other_than=before)
    last = await agent_opens(gateway, chat, f"{site}/form.html")
    group = await one_group(narrow)
    await grouped(narrow, last, group)
    await narrow.evaluate("""() => {
        window.seen = [];
        chrome.tabGroups.onRemoved.addListener((g) => window.seen.push(`group ${g.id} gone`));
        chrome.tabs.onRemoved.addListener((id) => window.seen.push(`tab ${id} closed`));
    }""")
    async with gateway.agent_client(chat) as agent:
        text, is_error = await call(agent, "browser_tabs", {"action": "close", "tab_id": last})
    assert not is_error and without_receipt(text) == f"closed tab {last}", text

    async def both() -> bool:
        return len(await narrow.evaluate("window.seen")) == 2

    await eventually(both, 15, what="the tab and its group to go")
    # The group emptied before the tab closed: Chrome never had a group's last tab closing to ask about. (This
    # Chromium already empties the group first for chrome.tabs.remove alone; the tab leaves it first all the same.)
    assert await narrow.evaluate("window.seen") == [f"group {group} gone", f"tab {last} closed"]
