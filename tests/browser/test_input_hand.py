"""Input like a person's hand (issue 37, items 1-6): a real click after a hover, double and right clicks, typing a
page reads as key events, a range of text selected, a drop that lands in a sortable list, a scroll whose page
handlers have run, and all of it in an agent tab behind the person's.

Chromium runs as a person has it: a plain subprocess with the real extension and no Playwright attached (Playwright
would turn on focus emulation in every tab, and a tab behind another would no longer be one). The person's tab is
the one Chromium started on, in front; the agent's tabs open behind it. What the page did is read through the
agent's own tools; which tab is in front, through the DevTools port on the person's tab
(tests/browser/person_devtools.py). The speeds of both tab positions are bench/bench_browser_tools.py's figures,
not asserted here.
"""

from __future__ import annotations

import html
import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from mcp import Client
from refs import ref_of

from .conftest import KEY, extension_browser
from .live_pod import LiveGateway, call, without_receipt
from .person_devtools import DevTools, devtools

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def browser(gateway: LiveGateway, site: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """As conftest's, with a DevTools port for the person's side (its profile is beside the staged extension)."""
    with extension_browser(tmp_path_factory.mktemp("hand"), site, {"url": gateway.url, "key": KEY, "autopilot": True},
                           extra=("--remote-debugging-port=0",)) as ext:
        yield ext


@pytest.fixture(scope="module")
async def person(browser: Path) -> AsyncIterator[DevTools]:
    async with devtools(browser.parent / "profile") as tools:
        yield tools


async def ok(client: Client, tool: str, args: dict[str, object] | None = None) -> str:
    text, is_error = await call(client, tool, args)
    assert not is_error, text
    return without_receipt(text)


async def open_page(client: Client, site: str, name: str) -> str:
    await ok(client, "browser_navigate", {"url": f"{site}/{name}.html"})
    return await ok(client, "browser_snapshot")


async def log(client: Client) -> list[str]:
    """What the test page's handlers recorded, read as the agent reads the page."""
    dom = await ok(client, "browser_read_dom", {"selector": "#log"})
    return [html.unescape(li) for li in re.findall(r"<li>([^<]*)</li>", dom)]


async def test_a_click_after_a_hover_chooses_the_item_asked_not_the_one_under_the_mouse(
        client: Client, site: str) -> None:
    snap = await open_page(client, site, "hand_menu")
    await ok(client, "browser_hover", {"ref": ref_of(snap, 'button "File"')})
    snap = await ok(client, "browser_snapshot")
    # The agent points at "Open" (to read it), then clicks "Export": the menu chooses the item the mouse is on.
    await ok(client, "browser_hover", {"ref": ref_of(snap, 'menuitem "Open"')})
    said = await ok(client, "browser_click", {"ref": ref_of(snap, 'menuitem "Export"')})
    assert await log(client) == ["chose Export"], said
    # The mouse stays where the click left it, as a hand does: the item under it is still the active one.
    assert re.search(r'<li role="menuitem" class="active">Export</li>',
                     await ok(client, "browser_read_dom", {"selector": "#file-menu"}))


async def test_double_and_right_clicks_are_the_mouse_s_own(client: Client, site: str) -> None:
    snap = await open_page(client, site, "hand_menu")
    said = await ok(client, "browser_click", {"ref": ref_of(snap, 'option "budget.xlsx"'), "double_click": True})
    assert "double-clicked" in said, said
    said = await ok(client, "browser_click", {"ref": ref_of(snap, 'option "notes.txt"'), "button": "right"})
    assert "right-clicked" in said, said
    assert await log(client) == ["opened budget.xlsx", "menu on notes.txt"]
    # A file field opens the system's chooser, over the person's screen, for a real click: it is clicked by script.
    said = await ok(client, "browser_click", {"selector": "#attachment"})
    assert "(as script events, without moving the mouse" in said and "browser_upload gives a file" in said, said


async def test_a_terminal_that_reads_keys_takes_a_command_in_two_calls(client: Client, site: str) -> None:
    snap = await open_page(client, site, "terminal")
    keys = ref_of(snap, 'textbox "Terminal input"')
    await ok(client, "browser_type", {"ref": keys, "text": "echo hello, world"})
    await ok(client, "browser_press_key", {"ref": keys, "key": "Enter"})
    assert await log(client) == ["ran echo hello, world"]
    screen = await ok(client, "browser_read_dom", {"selector": "#screen"})
    assert "$ echo hello, world\nhello, world\n$ " in html.unescape(screen), screen


async def test_long_text_is_typed_whole_and_the_page_sees_its_keys(client: Client, site: str) -> None:
    snap = await open_page(client, site, "terminal")
    keys = ref_of(snap, 'textbox "Terminal input"')
    line = "echo " + " ".join(f"w{i}" for i in range(200))  # under 1 000 characters: every one a key
    said = await ok(client, "browser_type", {"ref": keys, "text": line})
    assert "insertion" not in said, said
    await ok(client, "browser_press_key", {"ref": keys, "key": "Enter"})
    assert await log(client) == [f"ran {line}"]
    # Past 1 000 characters the middle goes in at once, as a paste; the last ones are keys the page hears.
    snap = await open_page(client, site, "select_text")
    text = "".join(f"line {i} of the notes\n" for i in range(400)) + "the end"
    said = await ok(client, "browser_type", {"ref": ref_of(snap, 'textbox "Paste here"'), "text": text})
    assert f"{len(text) - 17} of its characters went in as one insertion" in said, said
    dom = await ok(client, "browser_read_dom", {"selector": "#paste"})
    assert f'data-typed="{len(text)}: the end"' in dom, dom


async def test_text_is_selected_by_its_words_or_its_element_and_the_page_reads_it(client: Client, site: str) -> None:
    snap = await open_page(client, site, "select_text")
    said = await ok(client, "browser_select_text", {"text": "It also reads tables whole"})
    assert "selected" in said, said
    await ok(client, "browser_click", {"ref": ref_of(snap, 'button "Quote selection"')})
    assert await log(client) == ["quoted It also reads tables whole"]
    # A sentence chosen by its words, copied and pasted by the keyboard.
    await ok(client, "browser_select_text", {"text": "Upgrade with one command; nothing else changes."})
    await ok(client, "browser_press_key", {"key": "Control+C"})
    await ok(client, "browser_press_key", {"ref": ref_of(snap, 'textbox "Paste here"'), "key": "Control+V"})
    assert await field(client, "#paste") == "Upgrade with one command; nothing else changes."
    paste = ref_of(snap, 'textbox "Paste here"')
    await ok(client, "browser_select_text", {"ref": paste, "text": "; nothing else changes."})
    await ok(client, "browser_press_key", {"ref": paste, "key": "Backspace"})
    assert await field(client, "#paste") == "Upgrade with one command"
    # A whole element by its ref.
    said = await ok(client, "browser_select_text", {"ref": ref_of(snap, 'button "Quote selection"')})
    assert "Quote selection" in said, said
    # Inside a field: its words selected, then deleted as a person's Backspace would.
    summary = ref_of(snap, 'textbox "Summary"')
    await ok(client, "browser_select_text", {"ref": summary, "text": ", whole tables"})
    await ok(client, "browser_press_key", {"ref": summary, "key": "Backspace"})
    assert await field(client, "#summary") == "Faster start"
    text, is_error = await call(client, "browser_select_text", {"text": "words the page does not have"})
    assert is_error and "not on the page" in text, text


async def field(client: Client, selector: str) -> str:
    """A field's value as the snapshot shows it."""
    snap = await ok(client, "browser_snapshot")
    label = {"#summary": 'textbox "Summary"', "#paste": 'textbox "Paste here"'}[selector]
    line = next(line for line in snap.splitlines() if label in line)
    return line.split(": ", 1)[1] if ": " in line else ""


async def test_a_scroll_returns_once_the_page_s_scroll_handlers_ran(client: Client, site: str) -> None:
    await open_page(client, site, "scroll_late")
    said = await ok(client, "browser_scroll", {"selector": "#terms", "direction": "bottom"})
    assert "scrolled inside #terms" in said, said
    await ok(client, "browser_click", {"selector": "#agree"})  # enabled by the handler, once the scroll stopped
    await ok(client, "browser_scroll", {"direction": "bottom"})
    await ok(client, "browser_type", {"selector": "#comment", "text": "read it all"})
    assert await log(client) == ["terms read", "comment enabled"]


async def order(client: Client) -> str:
    dom = await ok(client, "browser_read_dom", {"selector": "#order"})
    m = re.search(r"Order: ([^<]*)<", dom)
    assert m, dom
    return m.group(1)


async def test_in_a_tab_behind_the_person_s_a_drop_lands_and_a_hover_opens_and_the_tab_stays_behind(
        client: Client, site: str, person: DevTools) -> None:
    theirs = await person.tab_at(f"{site}/index.html")
    await person.front(theirs)
    snap = await open_page(client, site, "sortable")
    agent_tab = await person.tab_at(f"{site}/sortable.html")
    alpha, delta = ref_of(snap, 'listitem "Alpha"'), ref_of(snap, 'listitem "Delta"')
    await ok(client, "browser_drag", {"ref": alpha, "to_ref": delta})
    assert await order(client) == "Bravo, Charlie, Delta, Alpha, Echo"
    snap = await open_page(client, site, "hand_menu")
    await ok(client, "browser_hover", {"ref": ref_of(snap, 'button "File"')})
    snap = await ok(client, "browser_snapshot")
    # A click's move is handled with its press, not at a frame the hidden page would not draw: the menu chooses the
    # item the mouse moved onto (after pointing at "Open"), as in front.
    await ok(client, "browser_hover", {"ref": ref_of(snap, 'menuitem "Open"')})
    await ok(client, "browser_click", {"ref": ref_of(snap, 'menuitem "Export"')})
    assert await log(client) == ["chose Export"]
    assert await person.evaluate(theirs, "document.visibilityState") == "visible"  # never brought forward
    # The same in front, in the same run (bench/bench_browser_tools.py times both).
    snap = await open_page(client, site, "sortable")
    await person.front(agent_tab)
    echo, alpha = ref_of(snap, 'listitem "Echo"'), ref_of(snap, 'listitem "Alpha"')
    await ok(client, "browser_drag", {"ref": echo, "to_ref": alpha})
    assert await order(client) == "Echo, Alpha, Bravo, Charlie, Delta"
    assert await person.evaluate(theirs, "document.visibilityState") == "hidden"
    await person.front(theirs)
