"""Real input, as a person's keyboard and mouse give it (issue 23): keys with their default actions and chords,
hover, drag and drop, scrolling inside an element, several choices and modified clicks.

Real Chromium with the real extension and gateway; the agent's calls come through the official MCP client, and
Playwright plays the person on the panel's cards. tests/site/input.html is made of controls that answer only to real
input (a native slider, a menu only CSS opens, an HTML drag and drop); each test asserts what the person would
see on the page afterwards. Autopilot is off, so a risky drop comes to the panel as a card.
"""

from __future__ import annotations

import pytest
from mcp import Client
from playwright.async_api import BrowserContext, Page
from refs import ref_of

from .conftest import person_browser
from .live_pod import call, opened
from .test_guard_keys import answer, declined, events
from .test_panel import guard_said, result_text

pytestmark = pytest.mark.anyio

context, tunnel = person_browser("input")


async def open_input(client: Client, context: BrowserContext, site: str) -> tuple[str, Page]:
    return await opened(client, context, f"{site}/input.html")


async def press(client: Client, args: dict[str, object]) -> str:
    text, is_error = await call(client, "browser_press_key", args)
    assert not is_error, text
    return text


async def test_keys_move_a_slider_and_chords_select_copy_and_paste(
        panel: Page, client: Client, context: BrowserContext, site: str) -> None:
    snap, tab = await open_input(client, context, site)
    volume = ref_of(snap, 'slider "Volume"')
    await press(client, {"ref": volume, "key": "ArrowRight"})
    assert await tab.eval_on_selector("#volume", "e => e.value") == "51"
    await press(client, {"key": "End"})
    assert await tab.eval_on_selector("#volume", "e => e.value") == "100"
    await press(client, {"key": "Home"})
    assert await tab.eval_on_selector("#volume", "e => e.value") == "0"
    # A chord: the whole title selected and copied, then pasted into another field, through the clipboard.
    title = ref_of(snap, 'textbox "Title"')
    await press(client, {"ref": title, "key": "Control+A"})
    assert await tab.evaluate("(() => { const t = document.getElementById('title');"
                              " return [t.selectionStart, t.selectionEnd]; })()") == [0, len("Quarterly report")]
    await press(client, {"key": "c", "modifiers": ["Control"]})
    await press(client, {"ref": ref_of(snap, 'textbox "Paste here"'), "key": "Control+V"})
    assert await tab.input_value("#paste") == "Quarterly report"
    # Page Down in the textarea scrolls its own text, as a person's key does.
    notes = ref_of(snap, 'textbox "Notes"')
    assert await tab.eval_on_selector("#notes", "e => e.scrollTop") == 0
    await press(client, {"ref": notes, "key": "PageDown"})
    assert await tab.eval_on_selector("#notes", "e => e.scrollTop") > 0


async def test_a_menu_that_opens_on_hover_opens_and_its_item_is_clicked(
        panel: Page, client: Client, context: BrowserContext, site: str) -> None:
    snap, tab = await open_input(client, context, site)
    assert 'menuitem "Settings"' not in snap  # closed: only a pointer over "Account" opens it
    text, is_error = await call(client, "browser_hover", {"ref": ref_of(snap, 'button "Account"')})
    assert not is_error, text
    snap, is_error = await call(client, "browser_snapshot")
    assert not is_error, snap
    text, is_error = await call(client, "browser_click", {"ref": ref_of(snap, 'menuitem "Settings"')})
    assert not is_error, text
    assert await events(tab) == ["settings opened"]


async def test_a_slider_is_dragged_and_a_card_is_dropped_where_the_person_agrees(
        panel: Page, client: Client, context: BrowserContext, site: str) -> None:
    snap, tab = await open_input(client, context, site)
    # The thumb of a native slider follows the real mouse: from the middle, 60 px to the right.
    text, is_error = await call(client, "browser_drag", {"ref": ref_of(snap, 'slider "Volume"'), "dx": 60})
    assert not is_error, text
    assert int(await tab.eval_on_selector("#volume", "e => e.value")) > 50
    card = ref_of(snap, 'button "Card Groceries"')
    text, is_error = await call(client, "browser_drag", {"ref": card, "to_selector": "#done"})
    assert not is_error, text
    assert await events(tab) == ["dropped Groceries on Done"]
    # A drop onto "Delete" is asked about as its effect, and nothing is dropped when the person says no.
    title, result = await answer(panel, client, "browser_drag", {"ref": card, "to_selector": "#trash"},
                                 "deny")
    assert title == 'The agent wants to drag button "Card Groceries" onto region "Delete"'
    assert declined(result)
    assert await events(tab) == ["dropped Groceries on Done"]
    _, result = await answer(panel, client, "browser_drag", {"ref": card, "to_selector": "#trash"},
                             "allow")
    assert not result.is_error and guard_said(result) == "asked-allowed", result_text(result)
    assert await events(tab) == ["dropped Groceries on Done", "dropped Groceries on Delete"]


async def test_scrolling_inside_an_element_several_choices_and_modified_clicks(
        panel: Page, client: Client, context: BrowserContext, site: str) -> None:
    snap, tab = await open_input(client, context, site)
    text, is_error = await call(client, "browser_scroll", {"ref": ref_of(snap, 'region "Feed"'), "direction": "down",
                                                           "pixels": 300})
    assert not is_error, text
    assert await tab.eval_on_selector("#feed", "e => e.scrollTop") == 300
    assert "scrolled inside [ref=" in text, text
    text, is_error = await call(client, "browser_select_option", {"ref": ref_of(snap, 'listbox "Toppings"'),
                                                                  "values": ["cheese", "Basil"]})
    assert not is_error, text
    assert await tab.eval_on_selector("#toppings", "e => [...e.selectedOptions].map((o) => o.value)") == [
        "cheese", "basil"]
    for ref, mods in ((ref_of(snap, 'option "Report.pdf"'), None), (ref_of(snap, 'option "Photo.jpg"'), ["Shift"]),
                      (ref_of(snap, 'option "Report.pdf"'), ["Control"])):
        text, is_error = await call(client, "browser_click", {"ref": ref, **({"modifiers": mods} if mods else {})})
        assert not is_error, text
    assert await events(tab) == ["click Report.pdf", "click Photo.jpg with shift", "click Report.pdf with ctrl"]
