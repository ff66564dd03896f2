"""Real input's pure parts (issue 23), run as the shipped modules inside the extension's own page: the key events a
press becomes, the spellings and modifiers a press takes, the guard on a drop, and what the agent is told when no
real input can be sent (the person cancelled Chrome's debugging bar, which a test cannot press).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from playwright.async_api import Page

from .harness import unpaired_panel
from .test_units import element, run

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
async def page(site: str, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Page]:
    async with unpaired_panel(site, tmp_path_factory.mktemp("input-units")) as page:
        yield page


async def events(page: Page, key: str, modifiers: list[str] | None = None) -> list[dict[str, Any]]:
    return list(await page.evaluate("""async ([key, modifiers]) => {
        const guard = await import('/lib/guard.js');
        const input = await import('/lib/input.js');
        return input.keyEvents(guard.keyPress(key, modifiers));
    }""", [key, modifiers]))


async def test_a_chord_holds_its_modifier_and_names_the_editing_command(page: Page) -> None:
    down, key, up, release = await events(page, "Control+A")
    assert (down["type"], down["key"], up["type"], release["type"], release["key"]) == (
        "rawKeyDown", "Control", "keyUp", "keyUp", "Control")
    # The A key with Control is "a", as a keyboard gives it, and types nothing; Chrome runs its command.
    assert (key["type"], key["key"], key["code"], key["modifiers"], key["commands"]) == (
        "rawKeyDown", "a", "KeyA", 2, ["selectAll"])
    assert "text" not in key
    assert [e["key"] for e in await events(page, "v", ["Meta"])] == ["Meta", "v", "v", "Meta"]
    # A plain key types its text; Enter types a return; a named key types nothing.
    assert [(e["type"], e.get("text")) for e in await events(page, "x")] == [("keyDown", "x"), ("keyUp", None)]
    assert (await events(page, "Enter"))[0]["text"] == "\r"
    home = (await events(page, "home"))[0]
    assert (home["type"], home["key"], home["windowsVirtualKeyCode"]) == ("rawKeyDown", "Home", 36)


async def test_key_spellings_and_modifiers(page: Page) -> None:
    got = await run(page, "guard.js", "arg.map((k) => { const p = m.keyPress(k); return [p.key, p.code]; })",
                    ["esc", "PageDown", "Down", ";"])
    assert got == [["Escape", "Escape"], ["PageDown", "PageDown"], ["ArrowDown", "ArrowDown"], [";", "Semicolon"]]
    shifted = await run(page, "guard.js", "m.keyPress('Tab', ['Shift'])")
    assert shifted["shiftKey"] and shifted["key"] == "Tab"
    refused = await run(page, "guard.js", "(() => { try { m.keyPress('a', ['Hyper']); } "
                        "catch (e) { return e.code + ': ' + e.message; } })()")
    assert refused == 'bad_args: "modifiers" must be a list of "Control", "Shift", "Alt" or "Meta"'


async def test_a_drop_is_asked_about_by_what_it_drops_onto(page: Page) -> None:
    card = element("button", "Card Groceries")
    drag = "m.classify('browser_drag', arg)"
    onto = await run(page, "guard.js", drag, card | {"drop": element("region", "Delete")})
    assert onto["risk"] == "delete" and onto["action"] == 'drag button "Card Groceries" onto region "Delete"'
    assert await run(page, "guard.js", drag, card | {"drop": element("region", "Done")}) is None
    hover = "m.classify('browser_hover', arg)"
    assert await run(page, "guard.js", hover, element("button", "Delete account")) is None


async def test_with_the_debugging_bar_cancelled_the_agent_hears_what_still_works(page: Page) -> None:
    said = await page.evaluate("""async () => {
        const { Dialogs } = await import('/lib/dialogs.js');
        const { RealInput } = await import('/lib/input.js');
        const dialogs = new Dialogs();
        dialogs.declined = true;
        return new RealInput(dialogs).require(1, 'browser_hover').catch((e) => `${e.code}: ${e.message}`);
    }""")
    assert said == ("no_real_input: browser_hover was not done: real mouse and key events cannot be sent now: the "
                    "user cancelled Chrome's debugging bar, and real mouse and key events go through the debugger; a "
                    "new chat asks again. browser_click and browser_type still work as script events (a click moves "
                    "no mouse, typing sends no keys), and browser_select_option, browser_select_text and "
                    "browser_scroll work as before.")


async def test_a_typed_character_is_its_key_down_with_its_text_and_up(page: Page) -> None:
    typed = await page.evaluate("""async () => {
        const input = await import('/lib/input.js');
        return ['a', 'Q', '7', ' ', '\u00e9'].map((ch) => input.charEvents(ch));
    }""")
    assert [[e["type"] for e in events] for events in typed] == [["keyDown", "keyUp"]] * 5
    assert [(events[0]["key"], events[0]["code"], events[0]["text"], events[0]["windowsVirtualKeyCode"])
            for events in typed] == [("a", "KeyA", "a", 65), ("Q", "KeyQ", "Q", 81), ("7", "Digit7", "7", 55),
                                     (" ", "Space", " ", 32), ("\u00e9", "", "\u00e9", 0)]

