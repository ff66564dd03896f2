"""The pairing link is the person's to open: a tab the agent opens at a `/pair#code=` address is never turned into
the confirmation (the agent could pick a pairing link of its own choosing, and the person's consent is for the
person's tabs), while a tab of the person's at the same address is. Real Chromium, the real extension connected to
a real gateway, the agent's call through the official MCP client."""

from __future__ import annotations

import pytest
from mcp import Client
from playwright.async_api import BrowserContext, Page

from .conftest import person_browser
from .harness import extension_id
from .live_pod import call

pytestmark = pytest.mark.anyio

context, tunnel = person_browser("pair-agent")
PAIR_PAGE = f"chrome-extension://{extension_id()}/pair/pair.html"


async def test_a_tab_the_agent_opens_at_a_pairing_address_stays_as_it_is(
        context: BrowserContext, panel: Page, client: Client, site: str) -> None:
    link = f"{site}/pair#code=abcdefghijklmnopqrstuvwx"
    async with context.expect_page() as opened:
        text, error = await call(client, "browser_tabs", {"action": "open", "url": link})
    assert not error, text
    agents = await opened.value
    # The call answered once the tab had loaded. Playwright's page, made while the tab went from about:blank to the
    # link, can miss that document's load event (a CI run waited 30 s for it with the page long loaded), so only
    # its URL is waited for: the document's commit, which it does not miss.
    await agents.wait_for_url(link, wait_until="commit")

    # A later navigation of the person's, to the same kind of address, is replaced: the worker has heard both.
    persons = await context.new_page()
    await persons.goto(f"{site}/pair#code=zyxwvutsrqponmlkjihgfedc")
    await persons.wait_for_url(f"{PAIR_PAGE}#*")
    assert agents.url == link, "the agent's own tab is never the pairing confirmation"
