"""Ask before acting: the agent's plan, with the sites it will use, approved by the person before it changes anything.

Real Chromium with the real extension and the real gateway; the agent's calls come through the official MCP client,
and Playwright plays the person on the panel: the setting in the settings form, the plan card, the guard's cards,
a message in the chat. Autopilot is off, as a cautious person has it. The page (tests/site/form.html) shows what
its buttons did in `#out`, read after the tool's answer, which comes after any effect. The site is served on
127.0.0.1; the same server as `localhost` is the site the plans leave out.

The tests run in order: each starts where the one before left the approval.
"""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client
from playwright.async_api import BrowserContext, Page, expect

from .conftest import person_browser
from .harness import page_at, snap
from .live_pod import call
from .test_panel import guard_said, in_background, result_text

pytestmark = pytest.mark.anyio

NEEDS_PLAN = "Call browser_plan first"
STEPS = ["Open the sign-in form", "Post a review", "Stop before signing in"]


context, tunnel = person_browser("plan")


def other(site: str) -> str:
    """The same server under another host: a site no plan here lists."""
    return site.replace("127.0.0.1", "localhost")


def host(site: str) -> str:
    return site.removeprefix("http://")


async def out_text(client: Client) -> str:
    text, is_error = await call(client, "browser_read_dom", {"selector": "#out"})
    assert not is_error, text
    return text


async def answer(panel: Page, client: Client, tool: str, args: dict[str, Any], kind: str,
                 decision: str) -> tuple[str, Any]:
    """Calls `tool`, waits for its one card (of `kind`) and answers it; the card's title and the call's result."""
    async with in_background(client.call_tool(tool, args)) as out:
        card = panel.locator(f".card[data-kind={kind}]")
        await expect(card).to_have_count(1)
        title = await card.locator(".title").text_content() or ""
        await card.locator(f"button[data-decision={decision}]").click()
    await expect(panel.locator(".card")).to_have_count(0)
    return title, out["result"]


async def set_ask_first(panel: Page, on: bool) -> None:
    await panel.locator("#toggle-settings").click()
    box = panel.locator("#set-ask-first")
    await box.set_checked(on)
    await panel.locator("#save-settings").click()
    await expect(panel.locator("#notice")).to_contain_text("Settings saved")
    await panel.locator("#toggle-settings").click()
    await expect(panel.locator("#settings")).to_be_hidden()


def plan_args(site: str, **more: Any) -> dict[str, Any]:
    return {"summary": "Post a review on the shop, without signing in", "steps": STEPS, "sites": [host(site)], **more}


async def test_with_the_setting_off_a_step_needs_no_plan_and_a_risky_click_asks(panel: Page, client: Client,
                                                                                site: str) -> None:
    text, is_error = await call(client, "browser_navigate", {"url": f"{site}/form.html"})
    assert not is_error, text
    title, result = await answer(panel, client, "browser_click", {"selector": "#post"}, "action", "deny")
    assert title == 'The agent wants to click button "Post a review"'
    assert result.is_error and guard_said(result) == "denied"


async def test_ask_before_acting_is_off_by_default_and_set_beside_autopilot(panel: Page) -> None:
    await panel.locator("#toggle-settings").click()
    box = panel.locator("#set-ask-first")
    await expect(box).not_to_be_checked()
    label = panel.locator("label.check", has=box)
    await expect(label).to_have_text(
        "Ask before acting: the agent shows its plan and the sites it will use before it starts")
    await panel.locator("#toggle-settings").click()
    await set_ask_first(panel, True)


async def test_a_step_before_a_plan_is_refused_and_tells_the_agent_to_call_browser_plan(client: Client) -> None:
    text, is_error = await call(client, "browser_click", {"selector": "#preview"})
    assert is_error and text.startswith("browser_click was not run: the person asks to approve a plan"), text
    assert NEEDS_PLAN in text
    text, is_error = await call(client, "browser_navigate", {"url": "https://example.com/"})
    assert is_error and NEEDS_PLAN in text, text
    # Reading and scrolling change nothing: they need no plan.
    text, is_error = await call(client, "browser_snapshot")
    assert not is_error and 'button "Preview"' in text, text
    text, is_error = await call(client, "browser_scroll", {"direction": "down"})
    assert not is_error, text
    assert "nothing yet" in await out_text(client)  # the refused click never ran


async def test_a_plan_the_person_does_not_approve_leaves_every_step_refused(panel: Page, client: Client,
                                                                          site: str) -> None:
    title, result = await answer(panel, client, "browser_plan", plan_args(site), "plan", "deny")
    assert title == "The agent's plan"
    assert result.is_error and result_text(result).startswith("the user did not approve the plan."), result_text(result)
    text, is_error = await call(client, "browser_click", {"selector": "#post"})
    assert is_error and NEEDS_PLAN in text, text


async def test_the_card_shows_the_plan_and_its_sites_and_approving_lets_a_risky_click_there_run(
        panel: Page, client: Client, site: str) -> None:
    args = plan_args(site, sites=[host(site), "https://pay.example/checkout", host(site)])
    async with in_background(client.call_tool("browser_plan", args)) as out:
        card = panel.locator(".card[data-kind=plan]")
        await expect(card.locator(".title")).to_have_text("The agent's plan")
        await expect(card.locator(".reason")).to_have_text(args["summary"])
        await expect(card.locator(".plan-steps li")).to_have_text(STEPS)
        # Each site as the host (or origin) it covers, once; a path after it is no part of it.
        await expect(card.locator(".plan-sites li")).to_have_text([host(site), "https://pay.example"])
        await expect(card.locator("button")).to_have_text(["Approve", "Don't approve"])
        await snap(panel, "panel-plan.png")
        assert "result" not in out  # the call waits for the person
        await card.locator("button[data-decision=approve]").click()
    result = out["result"]
    text = result_text(result)
    assert not result.is_error, text
    assert text.startswith(f"The person approved the plan. Sites in it: {host(site)}, https://pay.example.")
    assert "it ends when the person sends their next message or starts a new chat" in text
    # The risky click that asked before runs on the listed site with no card of its own.
    res = await client.call_tool("browser_click", {"selector": "#post"})
    assert not res.is_error, result_text(res)
    assert guard_said(res) == "allowed"
    assert "posted" in await out_text(client)
    await expect(panel.locator(".card")).to_have_count(0)


async def test_a_password_field_still_asks_after_the_approval(panel: Page, client: Client) -> None:
    typed = {"selector": "#pw", "text": "hunter3"}
    title, result = await answer(panel, client, "browser_type", typed, "action", "deny")
    assert title == 'The agent wants to fill the password field textbox "Password"'
    assert result.is_error and "not allowed by the user" in result_text(result)


async def test_a_link_on_a_listed_site_that_leads_off_the_plan_asks(
        panel: Page, client: Client, context: BrowserContext, site: str) -> None:
    tab = await page_at(context, f"{site}/form.html")
    # The page's own link to a site the plan leaves out, as a page steering the agent away would have.
    await tab.evaluate("(href) => { const a = document.createElement('a'); a.id = 'away'; a.href = href; "
                       "a.textContent = 'Read more'; document.body.append(a); }", f"{other(site)}/page2.html")
    title, result = await answer(panel, client, "browser_click", {"selector": "#away"}, "off-plan", "deny")
    assert title == f'Not in the approved plan: the agent wants to click link "Read more", which leads to {other(site)}'
    assert result.is_error and guard_said(result) == "denied"
    assert tab.url == f"{site}/form.html"  # the click never happened


async def test_a_page_or_a_step_on_a_site_not_in_the_plan_asks(panel: Page, client: Client, site: str) -> None:
    away = other(site)
    url = f"{away}/form.html"
    async with in_background(client.call_tool("browser_navigate", {"url": url})) as out:
        card = panel.locator(".card[data-kind=off-plan]")
        await expect(card.locator(".title")).to_have_text(f"Not in the approved plan: the agent wants to open {away}")
        await expect(card.locator("button")).to_have_text(["Allow once", f"Add {away} to the plan", "Don't allow"])
        await snap(panel, "panel-plan-off.png")
        await card.locator("button[data-decision=allow]").click()
    assert not out["result"].is_error, result_text(out["result"])
    assert guard_said(out["result"]) == "asked-allowed"
    # Allowed once: the next step there asks again, routine as it is, and a no keeps it from the page.
    title, result = await answer(panel, client, "browser_click", {"selector": "#preview"}, "off-plan", "deny")
    assert title == f'Not in the approved plan: the agent wants to click button "Preview" on {away}'
    text = result_text(result)
    assert result.is_error and f"{away} is not in the plan the person approved" in text, text
    assert guard_said(result) == "denied"
    assert "nothing yet" in await out_text(client)
    # Added to the plan: from then on the site is the plan's, its risky steps too.
    _, result = await answer(panel, client, "browser_click", {"selector": "#preview"}, "off-plan", "add")
    assert not result.is_error, result_text(result)
    res = await client.call_tool("browser_click", {"selector": "#post"})
    assert not res.is_error and guard_said(res) == "allowed", result_text(res)
    assert "posted" in await out_text(client)


async def test_the_persons_next_message_ends_the_approval(panel: Page, client: Client) -> None:
    await panel.locator("#prompt").fill("echo thanks, now something else")
    await panel.locator("#send").click()
    await expect(panel.locator(".msg.agent").last).to_have_text("thanks, now something else")
    text, is_error = await call(client, "browser_click", {"selector": "#preview"})
    assert is_error and NEEDS_PLAN in text, text


async def test_a_plan_names_real_sites_and_its_words_are_text(panel: Page, client: Client, site: str) -> None:
    for bad in (["javascript:alert(1)"], ["exa mple.com"], [], ["ftp://files.example"]):
        text, is_error = await call(client, "browser_plan", plan_args(site, sites=bad))
        assert is_error and '"sites" must be' in text, (bad, text)
    args = plan_args(site, summary="<img src=x onerror=alert(1)><b>Buy</b>", steps=["<i>step</i>"])
    async with in_background(client.call_tool("browser_plan", args)) as out:
        card = panel.locator(".card[data-kind=plan]")
        await expect(card.locator(".reason")).to_have_text(args["summary"])
        await expect(card.locator(".plan-steps li")).to_have_text(["<i>step</i>"])
        await expect(card.locator("img, b, i")).to_have_count(0)
        await card.locator("button[data-decision=deny]").click()
    assert out["result"].is_error


async def test_with_the_setting_off_an_approved_plan_has_the_same_effect(panel: Page, client: Client,
                                                                         site: str) -> None:
    await set_ask_first(panel, False)
    text, is_error = await call(client, "browser_navigate", {"url": f"{site}/form.html"})
    assert not is_error, text
    _, result = await answer(panel, client, "browser_plan", plan_args(site), "plan", "approve")
    assert not result.is_error, result_text(result)
    res = await client.call_tool("browser_click", {"selector": "#post"})
    assert not res.is_error and guard_said(res) == "allowed", result_text(res)
    assert "posted" in await out_text(client)
