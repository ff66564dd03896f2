"""The page's gate holds text that goes in without keys as it holds keys (issue 39): where no script of the page
listens for typing, lib/input.js types a field's first character as a key and the rest as one insertion
(Input.insertText), which has no key event of its own. The gate (page/agent.js) checks the focus on the first
keydown or beforeinput, and once it has refused (the focus left the element the guard decided on), it cancels every
key and every insertion until it is read. A click's gate holds no key: a plain click is aimed (and its gate armed) as
its element is described, before the guard decides, and the person may type in the page meanwhile; and that aim
moves nothing on the page.

The shipped page scripts run in a page of real Chromium, and Chrome's own trusted events come from the DevTools
protocol as the extension's debugger sends them. The page scripts are loaded into the page's main world here (the
extension injects them into its isolated world, which Playwright does not reach): the gate's code and Chrome's events
are the same.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from playwright.async_api import CDPSession, Page, async_playwright

from .harness import CHROMIUM, EXTENSION_SRC

pytestmark = pytest.mark.anyio

# In the order lib/page-script.js injects them; page/files.js, the last, talks to the extension and is not needed.
PAGE_SCRIPTS = ("elements.js", "pointers.js", "read.js", "input.js", "agent.js")
PAGE = ('<!doctype html><html lang="en"><body><label>Name <input id="name"></label>'
        '<label>Note <input id="note"></label> <button id="go">Go</button> <button id="off" disabled>Off</button>'
        '<p style="margin-top: 3000px"><button id="far">Far</button></p></body></html>')
# What lib/tools-act.js asks of a plain real click's description: its aim too, but not for these fields.
CLICK_WANT = {"aim": {"skip": "^(select|input:(file|date|datetime-local|month|week|time|color))$"}}


@pytest.fixture
async def page() -> AsyncIterator[Page]:
    if not CHROMIUM:
        pytest.skip("Debian chromium is not installed")
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=CHROMIUM, headless=True)
        try:
            page = await browser.new_page()
            await page.set_content(PAGE)
            for name in PAGE_SCRIPTS:
                await page.add_script_tag(path=str(EXTENSION_SRC / "page" / name))
            yield page
        finally:
            await browser.close()


async def ready(page: Page, selector: str) -> str:
    """What lib/tools-act.js asks of the page before real keys: the field described, then readied (the gate armed)."""
    verb: str = await page.evaluate("""(selector) => {
        const target = { selector };
        const described = globalThis.__openab.describeTarget(target);
        const done = globalThis.__openab.act('type', target, { text: '', clear: true, real: true },
                                             described.desc.fingerprint);
        return done.verb || done.message;
    }""", selector)
    return verb


async def pressed(page: Page) -> dict[str, object]:
    said: dict[str, object] = await page.evaluate("globalThis.__openab.pressed()")
    return said


async def first_key(cdp: CDPSession, ch: str) -> None:
    for kind in ("keyDown", "keyUp"):
        await cdp.send("Input.dispatchKeyEvent", {"type": kind, "key": ch, "text": ch if kind == "keyDown" else ""})


async def test_an_insertion_after_the_first_key_goes_where_the_gate_let_it(page: Page) -> None:
    cdp = await page.context.new_cdp_session(page)
    assert await ready(page, "#name") == "ready"
    await first_key(cdp, "A")
    await cdp.send("Input.insertText", {"text": "da Lovelace"})
    assert await page.input_value("#name") == "Ada Lovelace"
    said = await pressed(page)
    assert said["passed"] is True and said["refused"] is False, said


async def test_once_the_focus_has_left_no_insertion_reaches_the_page(page: Page) -> None:
    cdp = await page.context.new_cdp_session(page)
    assert await ready(page, "#name") == "ready"
    # A script of the page moves the focus after the guard decided on #name and before the text comes.
    await page.evaluate("document.getElementById('note').focus()")
    await first_key(cdp, "s")
    await cdp.send("Input.insertText", {"text": "ecret"})
    assert (await page.input_value("#name"), await page.input_value("#note")) == ("", "")
    said = await pressed(page)
    assert said["refused"] is True and said["passed"] is False, said


async def test_an_insertion_that_comes_first_is_checked_as_a_first_key_is(page: Page) -> None:
    cdp = await page.context.new_cdp_session(page)
    assert await ready(page, "#name") == "ready"
    await page.evaluate("document.getElementById('note').focus()")
    await cdp.send("Input.insertText", {"text": "\nsecret"})
    assert (await page.input_value("#name"), await page.input_value("#note")) == ("", "")
    assert (await pressed(page))["refused"] is True
    # Readied again with the focus left where the guard decided, the same insertion goes in.
    assert await ready(page, "#name") == "ready"
    await cdp.send("Input.insertText", {"text": "Ada"})
    assert await page.input_value("#name") == "Ada"
    assert (await pressed(page))["passed"] is True


async def described_for_click(page: Page, selector: str) -> dict[str, Any]:
    """The description lib/tools-act.js asks for before a plain real click: the element's, with its aim."""
    said: dict[str, Any] = await page.evaluate(
        "([selector, want]) => globalThis.__openab.describeTarget({ selector }, want)", [selector, CLICK_WANT])
    return said


async def test_a_click_is_aimed_as_it_is_described_only_where_nothing_has_to_move(page: Page) -> None:
    near = await described_for_click(page, "#go")
    assert near["ok"] is True and near["aimed"]["ok"] is True, near
    box = await page.locator("#go").bounding_box()
    middle = box and (box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    at = near["aimed"]["from"]
    assert middle and abs(at["x"] - middle[0]) <= 0.5 and abs(at["y"] - middle[1]) <= 0.5, (at, box)
    # Off screen it would have to scroll the page before the guard decided: it is aimed after the decision instead.
    far = await described_for_click(page, "#far")
    assert far["ok"] is True and "aimed" not in far, far
    assert await page.evaluate("scrollY") == 0
    assert "aimed" not in await described_for_click(page, "#off")


async def test_a_clicks_gate_keeps_no_key_from_the_person(page: Page) -> None:
    cdp = await page.context.new_cdp_session(page)
    described = await described_for_click(page, "#go")
    await page.focus("#note")
    for ch in "hi":
        await first_key(cdp, ch)
    assert await page.input_value("#note") == "hi"
    # Aimed again after a person's answer, as realClick does: that gate holds no key either.
    aimed = await page.evaluate(
        "(fp) => globalThis.__openab.aim({ target: { selector: '#go' }, click: true }, { from: fp, to: '' })",
        described["desc"]["fingerprint"])
    assert aimed["ok"] is True, aimed
    await first_key(cdp, "!")
    assert await page.input_value("#note") == "hi!"
    said = await pressed(page)
    assert said["ok"] is True and said["refused"] is False and said["left"] is False, said
