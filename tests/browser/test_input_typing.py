"""Typing where the page listens for it and where it does not (issue 39): where no script of the page listens for
typing on the way to the field, its text after the first key goes in as one insertion, and the field holds the same
text as key by key; where one does (an input listener around the field), each character is its own key, as before.

Real Chromium with the real extension and gateway; the agent's calls come through the official MCP client.
tests/site/typing.html has two plain fields, one inside a box that records each input event, one in a shadow root
whose host records keys, one given a key listener as it takes the focus and one with an input handler as an
attribute (with ``?listen`` its document listens for keys too). What reaches a field is read from a world of the
test's own beside the page's (as the extension's page script is), whose listener on the document the page's script
cannot see and the extension does not count as the page's.
"""

from __future__ import annotations

import json

import pytest
from mcp import Client
from playwright.async_api import BrowserContext, CDPSession, Page
from refs import ref_of

from .conftest import person_browser
from .harness import page_at
from .live_pod import call, opened

pytestmark = pytest.mark.anyio

context, tunnel = person_browser("typing")


async def open_typing(client: Client, context: BrowserContext, site: str) -> tuple[str, Page]:
    return await opened(client, context, f"{site}/typing.html")


async def type_into(client: Client, ref: str, text: str) -> str:
    said, is_error = await call(client, "browser_type", {"ref": ref, "text": text})
    assert not is_error, said
    return said


async def test_a_field_no_script_hears_holds_the_text_as_typed(
        panel: Page, client: Client, context: BrowserContext, site: str) -> None:
    snap, tab = await open_typing(client, context, site)
    words = "Grüße, Ada \U0001f642 at 9:30"
    said = await type_into(client, ref_of(snap, 'textbox "Plain"'), words)
    assert await tab.input_value("#plain") == words
    assert said.startswith("typed into [ref="), said
    assert "one insertion" not in said  # the long text's words are for text past LONG_TEXT only
    # A line break in a textarea is text, never Enter; typing again replaces the value.
    await type_into(client, ref_of(snap, 'textbox "Notes"'), "first line\nsecond line")
    await type_into(client, ref_of(snap, 'textbox "Notes"'), "line one\nline two")
    assert await tab.input_value("#notes") == "line one\nline two"
    assert await tab.evaluate("window.heard") == []


async def test_a_field_the_page_listens_around_gets_a_key_a_character(
        panel: Page, client: Client, context: BrowserContext, site: str) -> None:
    snap, tab = await open_typing(client, context, site)
    words = "hello, world"
    await type_into(client, ref_of(snap, 'textbox "Counted"'), words)
    assert await tab.input_value("#counted") == words
    assert await tab.evaluate("window.heard") == list(words)


class InputSeen:
    """The input events that reach the page's document, recorded in an isolated world of the test's own."""

    def __init__(self, cdp: CDPSession, context_id: int) -> None:
        self.cdp = cdp
        self.context_id = context_id

    @classmethod
    async def watching(cls, tab: Page) -> InputSeen:
        cdp = await tab.context.new_cdp_session(tab)
        tree = await cdp.send("Page.getFrameTree")
        world = await cdp.send("Page.createIsolatedWorld", {"frameId": tree["frameTree"]["frame"]["id"],
                                                            "worldName": "openab-test-observer"})
        seen = cls(cdp, world["executionContextId"])
        await seen._run("globalThis.seen = []; "
                        "document.addEventListener('input', (e) => seen.push([e.inputType, e.data]), true)")
        return seen

    async def _run(self, expression: str) -> object:
        said = await self.cdp.send("Runtime.evaluate", {"expression": expression, "contextId": self.context_id,
                                                        "returnByValue": True})
        return said["result"].get("value")

    async def taken(self) -> list[list[str]]:
        """The events seen since the last call, as [inputType, data]."""
        events = json.loads(str(await self._run("JSON.stringify(seen.splice(0))")))
        assert isinstance(events, list)
        return events


async def test_where_no_script_hears_typing_the_text_after_its_first_key_goes_in_as_one_insertion(
        panel: Page, client: Client, context: BrowserContext, site: str) -> None:
    snap, tab = await open_typing(client, context, site)
    seen = await InputSeen.watching(tab)
    plain = ref_of(snap, 'textbox "Plain"')
    # The box around the other field listens: this field's way is walked, and no listener is on it.
    await type_into(client, plain, "Grace Hopper, 1906")
    assert await seen.taken() == [["insertText", "G"], ["insertText", "race Hopper, 1906"]]
    # No element of the page listens at all (the box replaced by a copy, which has no listeners): the same.
    await tab.evaluate("(box => box.replaceWith(box.cloneNode(true)))(document.getElementById('box'))")
    await type_into(client, plain, "Ada Lovelace, 1815")
    assert await seen.taken() == [["insertText", "A"], ["insertText", "da Lovelace, 1815"]]
    assert await tab.input_value("#plain") == "Ada Lovelace, 1815"
    # The page's own script listens on the document, which is on the way to every field: a key a character.
    await tab.evaluate("document.addEventListener('keydown', () => {})")
    await type_into(client, plain, "Alan Turing, 1912")
    assert await seen.taken() == [["insertText", ch] for ch in "Alan Turing, 1912"]
    assert await tab.input_value("#plain") == "Alan Turing, 1912"


async def test_a_listener_anywhere_on_the_way_or_added_as_the_field_takes_the_focus_gets_keys(
        panel: Page, client: Client, context: BrowserContext, site: str) -> None:
    snap, tab = await open_typing(client, context, site)
    seen = await InputSeen.watching(tab)
    keys = [["insertText", ch] for ch in "Ada Lovelace"]
    # The host of the field's shadow root listens for keys: the way goes through it.
    await type_into(client, ref_of(snap, 'textbox "Shadowed"'), "Ada Lovelace")
    assert await seen.taken() == keys
    assert await tab.evaluate("window.keyed.splice(0)") == list("Ada Lovelace")
    # The page listens only once the field has the focus, as the call gives it: the look comes after.
    await type_into(client, ref_of(snap, 'textbox "Late"'), "Ada Lovelace")
    assert await seen.taken() == keys
    assert await tab.evaluate("window.keyed.splice(0)") == list("Ada Lovelace")
    # A handler set as the field's attribute is a listener too.
    await type_into(client, ref_of(snap, 'textbox "Handled"'), "Ada Lovelace")
    assert await seen.taken() == keys
    assert await tab.evaluate("window.handled") == list("Ada Lovelace")


async def test_each_document_is_looked_at_as_its_own_after_a_navigation_and_back(
        panel: Page, client: Client, context: BrowserContext, site: str) -> None:
    # The look keeps the document's objects for the next field of the same document: another document in the
    # tab (the same page with its own key listener, then the first again, from the history) is looked at afresh.
    snap, tab = await open_typing(client, context, site)
    seen = await InputSeen.watching(tab)
    await type_into(client, ref_of(snap, 'textbox "Plain"'), "Grace Hopper, 1906")
    assert await seen.taken() == [["insertText", "G"], ["insertText", "race Hopper, 1906"]]
    snap, tab = await opened(client, context, f"{site}/typing.html?listen")
    seen = await InputSeen.watching(tab)
    await type_into(client, ref_of(snap, 'textbox "Plain"'), "Ada Lovelace")
    assert await seen.taken() == [["insertText", ch] for ch in "Ada Lovelace"]
    said, is_error = await call(client, "browser_back", {})
    assert not is_error, said
    snap, is_error = await call(client, "browser_snapshot", {})
    assert not is_error, snap
    tab = await page_at(context, f"{site}/typing.html")
    seen = await InputSeen.watching(tab)
    await type_into(client, ref_of(snap, 'textbox "Plain"'), "Alan Turing, 1912")
    assert await seen.taken() == [["insertText", "A"], ["insertText", "lan Turing, 1912"]]
    assert await tab.input_value("#plain") == "Alan Turing, 1912"
