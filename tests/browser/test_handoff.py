"""browser_handoff: the agent hands its tab to the person, who acts there and answers on a "your turn" card.

Real Chromium with the real extension and the real gateway; Playwright plays the person: their clicks on the
card, and their typing in the page as trusted input (CDP Input events, as a keyboard makes them). What they
type must never reach the agent, in the handoff's own result or in any later snapshot, read or wait.
"""

from __future__ import annotations

import asyncio
import re

import pytest
from mcp import Client
from playwright.async_api import BrowserContext, Page, expect

from .conftest import person_browser
from .harness import page_at, screenshot_dir
from .live_pod import call
from .test_panel import in_background, result_text
from .test_untrusted import split

pytestmark = pytest.mark.anyio

TYPED = "person-typed-7741"
MEMO = "memo-typed-3390"


context, tunnel = person_browser("handoff")


async def test_the_card_shows_the_reason_and_done_returns_a_fresh_snapshot(
        context: BrowserContext, panel: Page, client: Client, site: str) -> None:
    text, is_error = await call(client, "browser_navigate", {"url": f"{site}/handoff.html"})
    assert not is_error, text
    # The agent's own typing is the agent's: it stays visible to it.
    await call(client, "browser_type", {"selector": "#user", "text": "alice"})
    reason = "Please answer the security question for example.com, then press Done."
    async with in_background(client.call_tool("browser_handoff", {"reason": reason})) as out:
        card = panel.locator(".card[data-kind=handoff]")
        await expect(card.locator(".title")).to_have_text("Your turn")
        await expect(card.locator(".reason")).to_have_text(reason)
        await expect(card.locator(".where")).to_contain_text(site)
        await expect(card.locator(".note")).to_contain_text("The agent does not see what you type")
        await panel.bring_to_front()
        await panel.screenshot(path=str(screenshot_dir() / "panel-handoff.png"))
        assert "result" not in out  # the call waits for the person
        # The person does it, in the agent's tab, with a real keyboard.
        tab = await page_at(context, f"{site}/handoff.html", prefix=True)
        await tab.locator("#nick").press_sequentially(TYPED)
        await tab.locator("#memo").press_sequentially(MEMO)
        await card.locator("button[data-decision=done]").click()
    res = out["result"]
    text = result_text(res)
    assert not res.is_error, text
    ours, theirs = split(text)
    assert ours.startswith("The person says they are done. The page as it is now:")
    assert "Page: Account check" in theirs
    assert re.search(r'textbox "Username" \[ref=e\d+\]: alice$', theirs, re.MULTILINE), theirs
    assert re.search(r'textbox "Mother\'s maiden name" \[ref=e\d+\] \[typed by the person\]: \[redacted\]$', theirs,
                     re.MULTILINE), theirs
    assert re.search(r'textbox "Message to support" .*\[typed by the person\]: \[redacted\]$', theirs,
                     re.MULTILINE), theirs
    assert TYPED not in text and MEMO not in text
    await expect(panel.locator(".card")).to_have_count(0)
    # The person's typing is really in the page: what the agent was not shown exists.
    assert await tab.evaluate("document.getElementById('nick').value") == TYPED


async def test_what_the_person_typed_never_reaches_the_agent_later(client: Client) -> None:
    seen = [
        await call(client, "browser_snapshot"),
        await call(client, "browser_read_dom"),
        await call(client, "browser_read_dom", {"selector": "#memo"}),
        await call(client, "browser_type", {"selector": "#nick", "text": " and more", "clear": False}),
        await call(client, "browser_snapshot"),
    ]
    for text, is_error in seen:
        assert not is_error, text
        assert TYPED not in text and MEMO not in text, text
    # Waiting for the text cannot probe it either.
    text, is_error = await call(client, "browser_wait_for", {"text": MEMO, "timeout_ms": 500})
    assert is_error and "timed out" in text, text


async def test_cancel_returns_a_clear_result(panel: Page, client: Client) -> None:
    async with in_background(client.call_tool("browser_handoff", {"reason": "Solve the CAPTCHA"})) as out:
        await panel.locator(".card[data-kind=handoff] button[data-decision=cancel]").click()
    res = out["result"]
    assert res.is_error
    ours, theirs = split(result_text(res))
    assert ours.startswith("The person cancelled: they did not do it.")
    assert "Page: Account check" in theirs  # still with the page as it is


async def test_no_answer_ends_with_the_timeout(panel: Page, client: Client) -> None:
    started = asyncio.get_running_loop().time()
    res = await client.call_tool("browser_handoff", {"reason": "Enter the code from your phone", "timeout_s": 5})
    waited = asyncio.get_running_loop().time() - started
    assert res.is_error
    assert result_text(res).startswith("The person did not answer in 5 s and the card was taken away.")
    assert 4.5 <= waited < 30
    await expect(panel.locator(".card")).to_have_count(0)


async def test_a_second_handoff_while_one_waits_is_refused(panel: Page, client: Client) -> None:
    async with in_background(client.call_tool("browser_handoff", {"reason": "Sign in"})) as out:
        card = panel.locator(".card[data-kind=handoff]")
        await expect(card).to_have_count(1)
        text, is_error = await call(client, "browser_handoff", {"reason": "Sign in again"})
        assert is_error and text.startswith("refused: a browser_handoff already waits for the person"), text
        # Nor does the agent act in the tab while the person has it.
        text, is_error = await call(client, "browser_click", {"selector": "#go"})
        assert is_error and "the person has the agent tab" in text, text
        await expect(card).to_have_count(1)
        await card.locator("button[data-decision=done]").click()
    assert not out["result"].is_error
    text, _ = await call(client, "browser_read_dom", {"selector": "#out"})
    assert "waiting" in text  # the refused click never ran


async def test_a_hostile_reason_is_shown_as_text_and_cut(panel: Page, client: Client) -> None:
    text, is_error = await call(client, "browser_handoff", {"reason": "   "})
    assert is_error and '"reason" must say what the person should do' in text, text
    reason = "<img src=x onerror=alert(1)><b>Sign in</b> " + "x" * 5000
    async with in_background(client.call_tool("browser_handoff", {"reason": reason})) as out:
        card = panel.locator(".card[data-kind=handoff]")
        shown = await card.locator(".reason").text_content()
        assert shown is not None and shown.startswith("<img src=x onerror=alert(1)><b>Sign in</b>")
        assert len(shown) == 300
        await expect(card.locator("img, b")).to_have_count(0)
        await card.locator("button[data-decision=cancel]").click()
    assert out["result"].is_error


async def test_a_new_chat_takes_the_card_away_and_ends_the_call(panel: Page, client: Client) -> None:
    async with in_background(client.call_tool("browser_handoff", {"reason": "Pay for the order"})) as out:
        card = panel.locator(".card[data-kind=handoff]")
        await expect(card).to_have_count(1)
        await panel.locator("#new-chat").click()
        await panel.locator("#new-chat-yes").click()  # New chat asks first while a card waits
        await expect(card).to_have_count(0)
    res = out["result"]
    assert res.is_error
    assert "The person says they are done" not in result_text(res)
