"""Typing where the page listens for it and where it does not (issue 39): where no script of the page listens for
typing on the way to the field, its text after the first key goes in as one insertion, and the field holds the same
text as key by key; where one does (an input listener around the field), each character is its own key, as before.

Real Chromium with the real extension and gateway; the agent's calls come through the official MCP client.
tests/site/typing.html has two plain fields and one inside a box that records each input event.
"""

from __future__ import annotations

import pytest
from mcp import Client
from playwright.async_api import BrowserContext, Page
from refs import ref_of

from .conftest import person_browser
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
