"""A key press gets the guard's decision a click on the same element gets, and goes only where it was decided.

Real Chromium with the real extension and the real gateway; the agent's calls come through the official MCP client,
and Playwright plays the person on the panel's cards. The pages (tests/site/keys.html, focus_steal.html) record
every effect of their key and click handlers in `window.events`, read after the tool's answer, which comes after
any effect. Autopilot is off, as a cautious person has it; the site rule the last test makes is removed again.
"""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client
from playwright.async_api import BrowserContext, Page, expect
from refs import ref_of

from .conftest import person_browser
from .live_pod import call, opened
from .test_panel import guard_said, in_background, result_text

pytestmark = pytest.mark.anyio

ASKS = "The agent wants to "


context, tunnel = person_browser("keys")


async def open_page(client: Client, context: BrowserContext, url: str) -> tuple[str, Page]:
    """The agent's tab at `url` (freshly loaded, so its record is empty), its snapshot, and the page as Playwright
    has it."""
    snap, tab = await opened(client, context, url)
    assert await events(tab) == []
    return snap, tab


async def events(tab: Page) -> list[str]:
    return list(await tab.evaluate("window.events.slice()"))


async def answer(panel: Page, client: Client, tool: str, args: dict[str, Any], decision: str) -> tuple[str, Any]:
    """Calls `tool`, waits for its card and answers it; the card's title and the call's result (the call has
    answered when this returns)."""
    async with in_background(client.call_tool(tool, args)) as out:
        card = panel.locator(".card")
        await expect(card).to_have_count(1)
        title = await card.locator(".title").text_content() or ""
        await card.locator(f"button[data-decision={decision}]").click()
    await expect(panel.locator(".card")).to_have_count(0)
    return title, out["result"]


def declined(result: Any) -> bool:
    return bool(result.is_error) and "not allowed by the user" in result_text(result) and guard_said(result) == "denied"


@pytest.mark.parametrize(("element", "key", "label", "effect"), [
    ('button "Delete account"', "Enter", "Enter", "delete"),
    ('button "Delete account"', " ", "Space", "delete"),
    ('button "Delete account"', "NumpadEnter", "Enter", "delete"),
    ('button "Delete account"', "Shift+Space", "Shift+Space", "delete"),
    ('generic "Send"', "Enter", "Enter", "send"),
])
async def test_a_key_that_activates_a_control_asks_where_a_click_on_it_asks(
        panel: Page, client: Client, context: BrowserContext, site: str, element: str, key: str, label: str,
        effect: str) -> None:
    snap, tab = await open_page(client, context, f"{site}/keys.html")
    ref = ref_of(snap, element)
    click_title, result = await answer(panel, client, "browser_click", {"ref": ref}, "deny")
    assert declined(result)
    assert click_title.startswith(ASKS)
    # The press's card: the same element, in the same words as the click's, and what the key can do.
    title, result = await answer(panel, client, "browser_press_key", {"ref": ref, "key": key}, "deny")
    assert title == f"{ASKS}press {label} on {element}, which can {click_title.removeprefix(ASKS)}"
    assert declined(result)
    assert await events(tab) == []  # the page's handler never ran
    _, result = await answer(panel, client, "browser_press_key", {"ref": ref, "key": key}, "allow")
    assert not result.is_error, result_text(result)
    assert guard_said(result) == "asked-allowed"
    assert await events(tab) == [effect]
    # It has the focus now: a key with no element named goes to it, and is decided on as a press on it.
    title, result = await answer(panel, client, "browser_press_key", {"key": key}, "deny")
    assert title == f"{ASKS}press {label} on {element}, which can {click_title.removeprefix(ASKS)}"
    assert declined(result)
    assert await events(tab) == [effect]


async def test_enter_in_a_chat_composer_asks_as_a_send(panel: Page, client: Client, context: BrowserContext,
                                                      site: str) -> None:
    snap, tab = await open_page(client, context, f"{site}/keys.html")
    composer = ref_of(snap, 'combobox "Message"')
    text, is_error = await call(client, "browser_type", {"ref": composer, "text": "see you at noon"})
    assert not is_error, text
    # Space in it is typing: routine.
    text, is_error = await call(client, "browser_press_key", {"ref": composer, "key": " "})
    assert not is_error, text
    title, result = await answer(panel, client, "browser_press_key", {"ref": composer, "key": "Enter"}, "deny")
    assert title == f'{ASKS}press Enter in combobox "Message", which can send what it holds'
    assert declined(result)
    assert await events(tab) == []
    assert (await tab.locator("#composer").inner_text()).strip() == "see you at noon"  # still unsent
    _, result = await answer(panel, client, "browser_press_key", {"key": "Enter"}, "allow")
    assert not result.is_error, result_text(result)
    assert await events(tab) == ["message: see you at noon"]

    # A composer that sends on Control+Enter: the modifier is pressed with the key, and asked about the same way.
    reply = ref_of(snap, 'textbox "Reply"')
    text, is_error = await call(client, "browser_type", {"ref": reply, "text": "on my way"})
    assert not is_error, text
    title, result = await answer(panel, client, "browser_press_key", {"ref": reply, "key": "Control+Enter"}, "allow")
    assert title == f'{ASKS}press Control+Enter in textbox "Reply", which can send what it holds'
    assert not result.is_error, result_text(result)
    assert await events(tab) == ["message: see you at noon", "reply: on my way"]


async def test_keys_that_activate_nothing_risky_are_not_asked(panel: Page, client: Client, context: BrowserContext,
                                                             site: str) -> None:
    snap, tab = await open_page(client, context, f"{site}/keys.html")
    for args in ({"ref": ref_of(snap, 'searchbox "Search"'), "key": "a"},
                 {"ref": ref_of(snap, 'option "Inbox"'), "key": "ArrowDown"},
                 {"ref": ref_of(snap, 'button "Preview"'), "key": "Enter"}):
        # Answered with no one at the panel: no card was shown.
        res = await client.call_tool("browser_press_key", args)
        assert not res.is_error, result_text(res)
        assert guard_said(res) == "allowed"
    await expect(panel.locator(".card")).to_have_count(0)
    assert await events(tab) == ["key a", "down", "preview"]
    # A click on the same control is not asked either.
    res = await client.call_tool("browser_click", {"ref": ref_of(snap, 'button "Preview"')})
    assert not res.is_error and guard_said(res) == "allowed"


async def test_a_press_goes_only_to_the_element_it_was_decided_for(
        panel: Page, client: Client, context: BrowserContext, site: str) -> None:
    # The page hands the focus on to "Delete account" the moment "Help" gets it: nothing is pressed.
    snap, tab = await open_page(client, context, f"{site}/focus_steal.html")
    res = await client.call_tool("browser_press_key", {"ref": ref_of(snap, 'button "Help"'), "key": "Enter"})
    assert res.is_error and "the page moved the keyboard focus to another element" in result_text(res)
    assert await events(tab) == []

    # Asked about Enter in the search field, the page moves the focus to "Delete account" while the card waits:
    # the person's yes is for the field, so nothing is pressed anywhere.
    snap, tab = await open_page(client, context, f"{site}/keys.html")
    text, is_error = await call(client, "browser_press_key", {"ref": ref_of(snap, 'searchbox "Search"'), "key": "b"})
    assert not is_error, text
    async with in_background(client.call_tool("browser_press_key", {"key": "Enter"})) as out:
        card = panel.locator(".card")
        await expect(card.locator(".title")).to_have_text(
            f'{ASKS}press Enter in searchbox "Search", which can submit a form')
        await tab.evaluate("document.getElementById('delete').focus()")
        await card.locator("button[data-decision=allow]").click()
    assert out["result"].is_error
    assert "the keyboard focus moved to another element after the key was checked" in result_text(out["result"])
    assert await events(tab) == ["key b"]

    # The page relabels the field, or swaps in a look-alike with the focus, while the card waits: the yes was for
    # the element as it was described, so nothing is pressed.
    for change in ("(() => { const q = document.getElementById('q'); const twin = q.cloneNode(true);"
                   " q.replaceWith(twin); twin.focus(); })()",
                   "document.getElementById('q').setAttribute('aria-label', 'Search, then delete account')"):
        await tab.evaluate("document.getElementById('q').focus()")
        async with in_background(client.call_tool("browser_press_key", {"key": "Enter"})) as out:
            card = panel.locator(".card")
            await expect(card.locator(".title")).to_have_text(
                f'{ASKS}press Enter in searchbox "Search", which can submit a form')
            await tab.evaluate(change)
            await card.locator("button[data-decision=allow]").click()
        assert out["result"].is_error and "stale_ref" in result_text(out["result"]), result_text(out["result"])
    assert await events(tab) == ["key b"]

    # An element that cannot take the focus never gets the key: a keyboard could not send it there. (A letter there
    # would first ask, as a shortcut outside a text field: test_guard_inputs.py.)
    res = await client.call_tool("browser_press_key", {"selector": "#remove", "key": "Tab"})
    assert res.is_error and "cannot take the keyboard focus" in result_text(res)
    # With no element focused, Enter would reach the page itself: refused; Escape goes there.
    await tab.evaluate("document.activeElement.blur()")
    res = await client.call_tool("browser_press_key", {"key": "Enter"})
    assert res.is_error and "no element has the keyboard focus" in result_text(res)
    res = await client.call_tool("browser_press_key", {"key": "Escape"})
    assert not res.is_error, result_text(res)
    assert await events(tab) == ["key b", "page Escape"]
    await expect(panel.locator(".card")).to_have_count(0)


async def test_a_site_rule_lets_enter_in_a_search_field_through_as_it_does_a_click(
        panel: Page, client: Client, context: BrowserContext, site: str) -> None:
    snap, tab = await open_page(client, context, f"{site}/keys.html")
    search = ref_of(snap, 'searchbox "Search"')
    text, is_error = await call(client, "browser_type", {"ref": search, "text": "maps"})
    assert not is_error, text
    # Benign, but still a submit: asked once, and "Always allow" covers the site from then on.
    title, result = await answer(panel, client, "browser_press_key", {"ref": search, "key": "Enter"}, "always")
    assert title == f'{ASKS}press Enter in searchbox "Search", which can submit a form'
    assert not result.is_error and guard_said(result) == "asked-allowed"
    try:
        # The same press straight after the first: a second one on purpose says so (docs/journal.md).
        res = await client.call_tool("browser_press_key", {"ref": search, "key": "Enter", "repeat": True})
        assert not res.is_error and guard_said(res) == "allowed"
        delete = ref_of(snap, 'button "Delete account"')
        res = await client.call_tool("browser_press_key", {"ref": delete, "key": "Enter"})
        assert not res.is_error and guard_said(res) == "allowed"  # as a click on it now would be
        # Typing is real keys too (issue 37): the field heard each of them before the Enters.
        assert await events(tab) == ["key m", "key a", "key p", "key s", "key Enter", "search: maps", "key Enter",
                                     "search: maps", "delete"]
    finally:
        await panel.locator("#toggle-settings").click()
        await expect(panel.locator("#rules")).to_contain_text(f"Always: {site}")
        await panel.locator("#rules button").click()
        await expect(panel.locator("#rules li")).to_have_count(0)
        await panel.locator("#toggle-settings").click()


async def test_a_real_key_is_kept_from_the_page_when_the_focus_moves_before_it_arrives(
        panel: Page, client: Client, context: BrowserContext, site: str) -> None:
    # The focus moves on to "Delete account" once the extension's check has found it on "Help", before the real key
    # comes: the key reaches no handler of the page.
    snap, tab = await open_page(client, context, f"{site}/focus_later.html")
    res = await client.call_tool("browser_press_key", {"ref": ref_of(snap, 'button "Help"'), "key": "Enter"})
    assert res.is_error and "the keyboard focus moved to another element after the key was checked" in result_text(res)
    assert await events(tab) == []
    assert await tab.evaluate("document.activeElement.id") == "wipe"
    await expect(panel.locator(".card")).to_have_count(0)
