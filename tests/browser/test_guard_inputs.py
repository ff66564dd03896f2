"""The guard judges what an input can do where it lands: a page's own keyboard shortcut, a choice that acts, a drop
onto a trash, and an approved plan that never waves through what its card says still asks.

Real Chromium with the real extension and the real gateway; the agent's calls come through the official MCP client,
and Playwright plays the person on the panel's cards. The pages are built the way web apps are
(tests/site/mail.html: a mail list whose document-wide shortcuts delete or archive the selected conversation;
bulk.html: lists whose change acts) and record each effect in `window.events`, read after the tool's answer, which
comes after any effect. Autopilot is off, as a cautious person has it. The plan's test is last: its approval stays.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from mcp import Client
from playwright.async_api import BrowserContext, Page, expect
from refs import ref_of

from openab_browser.core.catalogue import CATALOGUE_PATH

from .conftest import person_browser
from .live_pod import call
from .test_guard_keys import ASKS, answer, declined, events, open_page
from .test_panel import guard_said, in_background, result_text

pytestmark = pytest.mark.anyio

SHORTCUT = "which the page may take as one of its own keyboard shortcuts"
RULE = "dev.openab/guard_rule"


context, tunnel = person_browser("inputs")


async def runs_unasked(panel: Page, client: Client, tool: str, args: dict[str, Any]) -> Any:
    """Calls `tool`, which must run with no card; its result."""
    res = await client.call_tool(tool, args)
    assert not res.is_error, result_text(res)
    await expect(panel.locator(".card")).to_have_count(0)
    return res


def rule_of(result: Any) -> Any:
    """The rule the guard's decision came from, as the result carries it for the pod's audit log."""
    return (result.meta or {}).get(RULE)


def host(site: str) -> str:
    return site.removeprefix("http://")


async def test_a_key_outside_a_text_field_asks_naming_the_key_and_what_it_lands_on(
        panel: Page, client: Client, context: BrowserContext, site: str) -> None:
    snap, tab = await open_page(client, context, f"{site}/mail.html")
    row = ref_of(snap, 'option "Invoice from ACME"')
    # Delete on the selected conversation: the page's own shortcut deletes it, and no word on the page says so.
    title, result = await answer(panel, client, "browser_press_key", {"ref": row, "key": "Delete"}, "deny")
    assert title == f'{ASKS}press Delete on option "Invoice from ACME", {SHORTCUT}'
    assert declined(result) and rule_of(result) == "person:key-shortcut"
    assert await events(tab) == []

    # "#" with no element focused lands on the page itself: judged there, naming the page and what is selected.
    await tab.evaluate("document.activeElement && document.activeElement.blur()")
    title, result = await answer(panel, client, "browser_press_key", {"key": "#"}, "deny")
    assert title == (f'{ASKS}press # on the page at {host(site)} (selected there: option "Invoice from ACME"), '
                     f"{SHORTCUT}")
    assert declined(result)
    assert await events(tab) == []
    _, result = await answer(panel, client, "browser_press_key", {"key": "#"}, "allow")
    assert not result.is_error, result_text(result)
    assert guard_said(result) == "asked-allowed" and rule_of(result) == "person:key-shortcut"
    assert await events(tab) == ["deleted Invoice from ACME"]


async def test_typing_moving_and_scrolling_keys_stay_routine(
        panel: Page, client: Client, context: BrowserContext, site: str) -> None:
    snap, tab = await open_page(client, context, f"{site}/mail.html")
    find = ref_of(snap, 'searchbox "Search mail"')
    # Printable text and the editing chords in a text field are typing, whatever the key.
    for key in ("#", "e", "Delete", "Control+a", "Backspace"):
        await runs_unasked(panel, client, "browser_press_key", {"ref": find, "key": key, "repeat": True})
    # Moving the focus or the selection is the browser's, on the page or on a row.
    await tab.evaluate("document.activeElement.blur()")
    res = await runs_unasked(panel, client, "browser_press_key", {"key": "ArrowDown"})
    assert rule_of(res) == "routine"
    await runs_unasked(panel, client, "browser_press_key", {"key": "Tab"})
    got = await events(tab)
    assert got[-2:] == ["down", "tab"] and "find #" in got, got
    assert not any(e.startswith(("deleted", "archived")) for e in got), got


async def test_a_choice_that_acts_asks_and_a_plain_choice_does_not(
        panel: Page, client: Client, context: BrowserContext, site: str) -> None:
    snap, tab = await open_page(client, context, f"{site}/bulk.html")
    asked = [
        ('combobox "Bulk actions"', "delete", 'choose "Delete selected accounts" in combobox "Bulk actions"'),
        ('combobox "Pay now"', "5000", 'choose "$5,000" in combobox "Pay now"'),
        ('combobox "Account"', "Delete my account", 'choose "Delete my account" in combobox "Account"'),
        ('combobox "Sort by"', "old", 'choose "Oldest" in combobox "Sort by", which submits its form to '),
        ('combobox "Go to"', "/keys.html", 'choose "Keys" in combobox "Go to", which opens another page'),
    ]
    for element, value, words in asked:
        title, result = await answer(panel, client, "browser_select_option",
                                     {"ref": ref_of(snap, element), "value": value}, "deny")
        assert title.startswith(f"{ASKS}{words}"), title
        assert declined(result)
    assert await events(tab) == []
    # Choosing a colour, or marking as read, acts on nothing: no card.
    await runs_unasked(panel, client, "browser_select_option",
                       {"ref": ref_of(snap, 'combobox "Colour"'), "value": "blue"})
    await runs_unasked(panel, client, "browser_select_option",
                       {"ref": ref_of(snap, 'combobox "Bulk actions"'), "value": "Mark as read"})
    assert await events(tab) == ["colour blue", "bulk read"]


async def test_a_drop_onto_a_trash_asks_as_a_click_on_it_does(
        panel: Page, client: Client, context: BrowserContext, site: str) -> None:
    snap, tab = await open_page(client, context, f"{site}/mail.html")
    row = ref_of(snap, 'option "Lunch on Friday?"')
    title, result = await answer(panel, client, "browser_drag", {"ref": row, "to_selector": "#trash"}, "deny")
    assert title == f'{ASKS}drag option "Lunch on Friday?" onto button "Move to trash"'
    assert declined(result) and rule_of(result) == "person:drop-target:risky-word:trash"
    assert await events(tab) == []
    await runs_unasked(panel, client, "browser_drag", {"ref": row, "to_selector": "#later"})
    assert await events(tab) == ["snoozed Lunch on Friday?"]


async def test_an_approved_plan_never_waves_through_what_its_card_says_still_asks(
        panel: Page, client: Client, context: BrowserContext, site: str) -> None:
    # One list says what still asks: the card's sentence, the agent's answer and the catalogue's description are
    # made from it, and so is the guard's behaviour below.
    sentence = await panel.evaluate("import('/lib/still-asks.js').then((m) => m.stillAsksSentence())")
    lower = await panel.evaluate("import('/lib/still-asks.js').then((m) => m.stillAsksSentence(true))")
    assert "payments" in sentence and "keyboard shortcuts" in sentence
    plan = {"summary": "Tidy the shop order", "steps": ["Post a review", "Buy the mug"], "sites": [host(site)]}
    async with in_background(client.call_tool("browser_plan", plan)) as out:
        card = panel.locator(".card[data-kind=plan]")
        await expect(card).to_have_count(1)
        await expect(card.locator(".note").last).to_contain_text(sentence)
        await card.locator("button[data-decision=approve]").click()
    assert not out["result"].is_error and lower in result_text(out["result"])
    described = next(t["description"] for t in json.loads(CATALOGUE_PATH.read_text())["tools"]
                     if t["name"] == "browser_plan")
    assert lower in described

    text, is_error = await call(client, "browser_navigate", {"url": f"{site}/form.html"})
    assert not is_error, text
    # A routine risky step on the plan's site runs unasked ...
    res = await runs_unasked(panel, client, "browser_click", {"selector": "#post"})
    assert rule_of(res) == "plan-approved:risky-word:post"
    # ... a purchase still asks, as the card said.
    title, result = await answer(panel, client, "browser_click", {"selector": "#buy"}, "deny")
    assert title == f'{ASKS}click button "Buy now"'
    assert declined(result)
    out_text, _ = await call(client, "browser_read_dom", {"selector": "#out"})
    assert "bought" not in out_text
    # And so does a page's own shortcut.
    snap, tab = await open_page(client, context, f"{site}/mail.html")
    row = ref_of(snap, 'option "Invoice')
    title, result = await answer(panel, client, "browser_press_key", {"ref": row, "key": "e"}, "deny")
    assert title.startswith(f"{ASKS}press e on option") and declined(result)
    assert await events(tab) == []
