"""The built-in agent's developer instructions in the panel: "console" and "network" read the page's console and
requests for the person, in plain words, with the token the page printed redacted (the real pod's built-in agent,
real Chromium, the real extension; tests/site/devtools.html)."""

from __future__ import annotations

import re

import pytest
from playwright.async_api import Page, expect

from .conftest import builtin_agent_browser
from .harness import snap
from .test_steps import ENVELOPE, place, say

pytestmark = pytest.mark.anyio

gateway, context, panel = builtin_agent_browser("builtin_devtools")


async def test_console_and_network_are_read_for_the_person(panel: Page, site: str) -> None:
    await say(panel, f"open {site}/devtools.html; console; network")
    rows = panel.locator(".step")
    await expect(rows.locator(".title")).to_have_text(
        [f"Opened {place(site)}/devtools.html", "Read the console", "Read the network requests"], timeout=30_000)
    await expect(rows).to_have_class([re.compile(r"\bcompleted\b")] * 3)
    await expect(panel.locator("#send")).to_be_enabled(timeout=30_000)
    reply = "\n".join(await panel.locator(".msg.agent").all_inner_texts())
    assert "The page's console:" in reply and "The page's requests:" in reply
    assert "warning /devtools.html:11 deprecated: use /api/v2" in reply
    # Logged before openab watched the new tab, the message is Chrome's replay: its object is previewed on request
    # when the replay hands it over, else named by its class.
    assert re.search(r"log /devtools\.html:9 app started (\{build: 42, debug: true\}|Object)\n", reply), reply
    assert "auth token is [redacted]" in reply and "ghp_" not in reply
    # The agent's new tab loaded before openab watched it: its first request is from the page's own record.
    assert re.search(r"\n#\d+ (GET|\?) 200 document /devtools\.html \d+ ms", reply), reply
    assert not ENVELOPE.search(reply), reply
    await snap(panel, "panel-builtin-console.png")
