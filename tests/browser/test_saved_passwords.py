"""Chrome's "Save password?" for a password the agent typed: while one may still be submitted, Chrome's offer to save
passwords is off, and the person's own setting is back once it cannot be.

Real Chromium with the real extension and the real gateway; Playwright plays the person, who is asked (as every
time) before the agent types a password. The bubble itself is browser UI a headless window does not draw, so what
is checked is the setting Chrome's password manager reads before it offers, as the extension sets it.
"""

from __future__ import annotations

import pytest
from mcp import Client
from playwright.async_api import BrowserContext, Page
from waits import eventually

from .conftest import person_browser
from .harness import page_at
from .live_pod import call
from .test_panel import in_background

pytestmark = pytest.mark.anyio

context, tunnel = person_browser("passwords")

SETTING = "chrome.privacy.services.passwordSavingEnabled.get({})"


async def tab_id_of(panel: Page, url: str) -> int:
    [tab] = [t for t in await panel.evaluate("chrome.tabs.query({})") if t["url"] == url]
    return int(tab["id"])


async def test_a_password_the_agent_types_is_never_offered_for_saving(context: BrowserContext, panel: Page,
                                                                      client: Client, site: str) -> None:
    before = await panel.evaluate(SETTING)
    assert before == {"levelOfControl": "controllable_by_this_extension", "value": True}, before
    text, is_error = await call(client, "browser_navigate", {"url": f"{site}/form.html"})
    assert not is_error, text
    # A password: the person is asked every time, and says yes.
    typing = client.call_tool("browser_type", {"selector": "#pw", "text": "agent-typed-secret"})
    async with in_background(typing) as out:
        await panel.locator(".card button[data-decision=allow]").click()
    assert not out["result"].is_error, out["result"]
    # While it may still be submitted, Chrome does not offer to save it.
    now = await panel.evaluate(SETTING)
    assert now == {"levelOfControl": "controlled_by_this_extension", "value": False}, now
    form = await page_at(context, f"{site}/form.html")
    assert await form.locator("#pw").input_value() == "agent-typed-secret"
    # Once it cannot be (its tab closed), the person's own choice applies again.
    tab = await tab_id_of(panel, f"{site}/form.html")
    text, is_error = await call(client, "browser_tabs", {"action": "close", "tab_id": tab})
    assert not is_error, text

    async def restored() -> bool:
        return bool(await panel.evaluate(SETTING) == before)

    await eventually(restored, 15, what="the password-saving setting to be the person's again")
