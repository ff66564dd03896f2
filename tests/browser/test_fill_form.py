"""Several steps in one call: browser_fill_form and browser_batch, each step judged as it would be alone.

The person plays the panel with autopilot off (tests/site/form.html): text, a list and a check box are filled in one
call with no card; a password field in the list stops the call there with nothing asked, the fields before it filled
and the ones after it untouched; a batch that types, chooses and clicks Preview runs whole, and one whose step would
submit the sign-in form stops at that step, which never reaches the page.
"""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client
from playwright.async_api import BrowserContext, Page, expect

from .conftest import person_browser
from .live_pod import call
from .test_untrusted import split

pytestmark = pytest.mark.anyio

context, tunnel = person_browser("fill_form")


@pytest.fixture(scope="module", autouse=True)
def dialogs_left_to_the_extension(context: BrowserContext) -> None:
    """Playwright dismisses a page's dialog itself unless someone listens: this module's dialogs are the extension's."""
    context.on("dialog", lambda dialog: None)


async def form(client: Client, site: str) -> None:
    text, is_error = await call(client, "browser_navigate", {"url": f"{site}/form.html"})
    assert not is_error, text


async def page_says(client: Client) -> str:
    """What the page's Preview button shows of the form (its script writes the fields' values into #out)."""
    text, is_error = await call(client, "browser_click", {"selector": "#preview", "repeat": True})
    assert not is_error, text
    text, is_error = await call(client, "browser_read_dom", {"selector": "#out"})
    assert not is_error, text
    return split(text)[1].removeprefix('<p id="out">').removesuffix("</p>")


async def fill(client: Client, fields: list[dict[str, Any]]) -> tuple[str, bool]:
    return await call(client, "browser_fill_form", {"fields": fields, "repeat": True})


async def test_text_a_choice_and_a_check_in_one_call(panel: Page, client: Client, site: str) -> None:
    await form(client, site)
    text, is_error = await fill(client, [
        {"selector": "#user", "value": "ada"},
        {"selector": "#country", "value": "Japan"},
        {"selector": "#remember", "checked": True},
    ])
    assert not is_error, text
    assert text.startswith("browser_fill_form: all 3 steps done.")
    assert "1. type into #user: typed into #user" in text
    assert "2. choose in #country: selected an option in #country" in text
    assert "3. check #remember: clicked #remember" in text
    await expect(panel.locator(".card")).to_have_count(0)
    assert await page_says(client) == "preview: user=ada country=jp remember=true"

    # A box already as asked is left alone (a click would uncheck it).
    text, is_error = await fill(client, [{"selector": "#remember", "checked": True}])
    assert not is_error and "1. #remember: already checked" in text, text
    assert await page_says(client) == "preview: user=ada country=jp remember=true"


async def test_a_password_field_stops_the_fill_there_without_a_card(panel: Page, client: Client, site: str) -> None:
    await form(client, site)
    text, is_error = await fill(client, [
        {"selector": "#user", "value": "grace"},
        {"selector": "#pw", "value": "not-the-agents-to-type"},
        {"selector": "#country", "value": "France"},
    ])
    assert is_error
    assert text.startswith("browser_fill_form: 1 of 3 steps done, then step 2 needs the person and was not taken; "
                           "the 1 after it were not run."), text
    assert "Call it alone (its card asks them), or hand them the tab with browser_handoff" in text
    assert "not-the-agents-to-type" not in text
    await expect(panel.locator(".card")).to_have_count(0)
    assert await page_says(client) == "preview: user=grace country= remember=false"


async def test_a_batch_runs_its_steps_in_one_call(panel: Page, client: Client, site: str) -> None:
    await form(client, site)
    text, is_error = await call(client, "browser_batch", {"steps": [
        {"tool": "browser_type", "arguments": {"selector": "#user", "text": "lin"}},
        {"tool": "browser_select_option", "arguments": {"selector": "#country", "value": "fr"}},
        {"tool": "browser_click", "arguments": {"selector": "#preview"}},
        {"tool": "browser_read_dom", "arguments": {"selector": "#out"}},
    ]})
    assert not is_error, text
    assert text.startswith("browser_batch: all 4 steps done.")
    assert "preview: user=lin country=fr remember=false" in split(text)[1]
    await expect(panel.locator(".card")).to_have_count(0)


async def test_a_batch_stops_at_the_step_that_would_submit_and_refuses_the_persons_own_steps(
        panel: Page, client: Client, site: str) -> None:
    await form(client, site)
    text, is_error = await call(client, "browser_batch", {"steps": [
        {"tool": "browser_type", "arguments": {"selector": "#user", "text": "mo"}},
        {"tool": "browser_click", "arguments": {"selector": "#signin"}},
        {"tool": "browser_click", "arguments": {"selector": "#preview"}},
    ], "repeat": True})
    assert is_error
    assert text.startswith("browser_batch: 1 of 3 steps done, then step 2 needs the person and was not taken; "
                           "the 1 after it were not run."), text
    await expect(panel.locator(".card")).to_have_count(0)
    text, _ = await call(client, "browser_read_dom", {"selector": "#out"})
    assert split(text)[1] == '<p id="out">nothing yet</p>'  # neither submitted nor previewed

    text, is_error = await call(client, "browser_batch", {"steps": [
        {"tool": "browser_type", "arguments": {"selector": "#user", "text": "x"}},
        {"tool": "browser_handoff", "arguments": {"reason": "sign in"}},
    ]})
    assert is_error and "step 2: browser_handoff is the person's (it waits for them); nothing was run" in text, text


async def test_a_field_that_asks_for_nothing_leaves_the_whole_form_as_it_was(client: Client, site: str) -> None:
    await form(client, site)
    text, is_error = await fill(client, [{"selector": "#user", "value": "zed"}, {"selector": "#country"}])
    assert is_error, text
    assert 'field 2 needs "value" (text or an option), "values" (options) or "checked"; nothing was filled' in text
    assert await page_says(client) == "preview: user= country= remember=false"


async def test_a_batch_answers_the_dialog_its_click_opened_and_stops_at_one_left_open(
        client: Client, site: str) -> None:
    text, is_error = await call(client, "browser_navigate", {"url": f"{site}/dialogs.html"})
    assert not is_error, text
    text, is_error = await call(client, "browser_batch", {"steps": [
        {"tool": "browser_click", "arguments": {"selector": "#confirm"}},
        {"tool": "browser_handle_dialog", "arguments": {"accept": True}},
        {"tool": "browser_read_dom", "arguments": {"selector": "#out"}},
    ]})
    assert not is_error, text
    assert '<p id="out">confirm: true</p>' in split(text)[1]

    text, is_error = await call(client, "browser_batch", {"steps": [
        {"tool": "browser_click", "arguments": {"selector": "#confirm"}},
        {"tool": "browser_read_dom", "arguments": {"selector": "#out"}},
    ], "repeat": True})
    assert is_error
    assert text.startswith("browser_batch: 1 of 2 steps done, then step 2 failed."), text
    assert "browser_read_dom was not run: a JavaScript confirm dialog is open in the agent tab" in text
    text, is_error = await call(client, "browser_handle_dialog", {"accept": False})
    assert not is_error, text
