"""A password field with no one to ask (issue 23): the call answers at once that the person must do this step and
points to browser_handoff, instead of waiting minutes on a card no one sees; with a panel open the card comes as
before.

Real Chromium under Playwright with the real extension and gateway, the agent's calls through the official MCP
client. No panel is open until the last test opens one, so only Playwright sees the page.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from mcp import Client
from playwright.async_api import BrowserContext, expect

from openab_browser.core.tunnel.tunnel import Tunnel

from .harness import open_panel, page_at, panel_browser, service_worker_url
from .live_pod import KEY, LiveGateway, call
from .test_panel import guard_said, in_background, result_text

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
async def context(gateway: LiveGateway, site: str, tmp_path_factory: pytest.TempPathFactory
                  ) -> AsyncIterator[BrowserContext]:
    async with panel_browser(gateway.url, KEY, site, tmp_path_factory.mktemp("unattended")) as ctx:
        await service_worker_url(ctx)
        yield ctx


@pytest.fixture(scope="module")
async def tunnel(gateway: LiveGateway, context: BrowserContext) -> Tunnel:
    # The extension dials the gateway with no panel open: nothing here waits for one.
    return await gateway.attached(await gateway.browser_socket(0))


async def test_a_password_field_with_no_panel_open_answers_at_once_and_names_the_handoff(
        client: Client, context: BrowserContext, site: str) -> None:
    text, is_error = await call(client, "browser_navigate", {"url": f"{site}/form.html"})
    assert not is_error, text
    tab = await page_at(context, f"{site}/form.html")
    res = await client.call_tool("browser_type", {"selector": "#pw", "text": "typed-by-agent"})
    said = result_text(res)
    assert res.is_error and guard_said(res) == "denied", said
    assert "this step needs the person and was not taken: fill a password field" in said
    assert "no openab panel is open" in said and "call browser_handoff" in said
    assert await tab.input_value("#pw") == "hunter2-default"  # nothing was typed
    # A routine step still runs with no one there.
    text, is_error = await call(client, "browser_type", {"selector": "#user", "text": "ada"})
    assert not is_error, text
    assert await tab.input_value("#user") == "ada"


async def test_with_a_panel_open_the_password_field_still_asks_there(client: Client, context: BrowserContext) -> None:
    panel = await open_panel(context)
    async with in_background(client.call_tool("browser_type", {"selector": "#pw", "text": "typed-by-agent"})) as out:
        card = panel.locator(".card")
        await expect(card.locator(".title")).to_contain_text("fill the password field")
        await card.locator("button[data-decision=deny]").click()
    assert out["result"].is_error and "not allowed by the user (the user declined)" in result_text(out["result"])
