"""What a person reads of the built-in agent's work: its steps in words, its replies without the envelope tool
results carry for the model, a step they declined as their choice, and the chat still there after Chrome restarts.

The real gateway runs the built-in agent (no model: it follows plain instructions); the browser is Debian Chromium
with the real extension, its panel driven by Playwright, on the test site's form page.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from agents.fake_model import Call, FakeModel, Script, serving
from playwright.async_api import Page, expect
from pydantic import SecretStr
from waits import eventually

from openab_browser.core.settings import Settings
from openab_browser.gateway.app import create_app
from openab_browser.gateway.assemble import assemble
from openab_browser.gateway.server import running_server

from .conftest import KEY, BuiltinGateway, builtin_agent_browser
from .harness import open_panel, playwright_browser, snap, stage_extension

pytestmark = pytest.mark.anyio


gateway, context, panel = builtin_agent_browser("steps")


async def say(panel: Page, text: str) -> None:
    await panel.locator("#prompt").fill(text)
    await panel.locator("#send").click()


def place(site: str) -> str:
    return site.removeprefix("http://")


# What a result says to the model and never to the person (extension/lib/results.js, lib/tools-read.js).
ENVELOPE = re.compile(r"page-content|\[ref=|Untrusted|instructions to follow|offset=|browser_snapshot")


async def test_the_agents_steps_and_reply_are_in_plain_words(panel: Page, site: str) -> None:
    await say(panel, f"open {site}/form.html; type Ada into Username; read")
    rows = panel.locator(".step")
    # The built-in agent looks at the page before typing (a snapshot for the field's ref): that reads the page too.
    await expect(rows.locator(".title")).to_have_text(
        [f"Opened {place(site)}/form.html", "Read the page", "Typed into Username", "Read the page"], timeout=30_000)
    await expect(rows).to_have_class([re.compile(r"\bcompleted\b")] * 4)
    await expect(panel.locator("#send")).to_be_enabled(timeout=30_000)
    reply = panel.locator(".msg.agent").last
    await expect(reply).to_contain_text("The page says:")
    await expect(reply).to_contain_text("Username (textbox)")
    assert not ENVELOPE.search(await reply.inner_text()), await reply.inner_text()
    # The words sum the step up; the row opens on what went to the browser and what came back, as it was.
    typed = rows.nth(2)
    # The journal's step is this row's (tied to it when its call reached the browser), so its site is the row's: what
    # "Show me" opens.
    await expect(typed).to_have_attribute("data-site", urlsplit(site).hostname or "")
    await typed.locator("summary").click()
    await expect(typed.locator(".step-input")).to_contain_text('"text": "Ada"')
    await expect(typed.locator(".step-result")).to_contain_text("typed into")
    await typed.locator("summary").click()
    await expect(typed.locator(".step-body")).to_be_hidden()
    await reply.scroll_into_view_if_needed()
    await snap(panel, "panel-builtin-steps.png")


async def test_a_declined_step_reads_as_the_persons_choice(panel: Page, site: str) -> None:
    await panel.locator("#new-chat").click()
    yes = panel.locator("#new-chat-yes")
    if await yes.count():
        await yes.click()
    await expect(panel.locator("#log > *")).to_have_count(0, timeout=30_000)
    await expect(panel.locator("#pill-tunnel")).to_have_text("tools attached", timeout=30_000)
    await say(panel, f"open {site}/form.html; click Buy now")
    card = panel.locator(".card")
    await expect(card.locator(".title")).to_have_text('The agent wants to click button "Buy now"', timeout=30_000)
    await expect(panel.locator(".step").last.locator(".title")).to_have_text('Clicking "Buy now" …')
    await card.locator("button[data-decision=deny]").click()
    row = panel.locator(".step").last
    await expect(row.locator(".title")).to_have_text('You declined: Click "Buy now"', timeout=30_000)
    await expect(row).to_have_class(re.compile(r"\bdeclined\b"))
    await expect(row.locator(".status")).to_have_text("declined")
    red = await panel.evaluate("getComputedStyle(document.documentElement).getPropertyValue('--bad').trim()")
    colour = await row.locator(".title").evaluate("(t) => getComputedStyle(t).color")
    assert colour != await panel.evaluate("""(c) => { const d = document.createElement('div'); d.style.color = c;
        document.body.append(d); const got = getComputedStyle(d).color; d.remove(); return got; }""", red)
    # The agent tells the person in their terms, not the guard's message to the model.
    reply = panel.locator(".msg.agent").last
    await expect(reply).to_contain_text("you declined it, so it was not done", timeout=30_000)
    assert not ENVELOPE.search(await reply.inner_text())
    assert "Do not retry" not in await reply.inner_text()
    await expect(panel.locator("#send")).to_be_enabled(timeout=30_000)
    await snap(panel, "panel-step-declined.png")


async def set_ask_first(panel: Page, on: bool) -> None:
    await panel.locator("#toggle-settings").click()
    await panel.locator("#set-ask-first").set_checked(on)
    await panel.locator("#save-settings").click()
    await expect(panel.locator("#notice")).to_contain_text("Settings saved")
    await panel.locator("#toggle-settings").click()


async def test_with_ask_before_acting_the_agent_shows_its_plan_first(panel: Page, site: str) -> None:
    await set_ask_first(panel, True)
    try:
        await say(panel, f"open {site}/form.html; click Post a review")
        card = panel.locator(".card[data-kind=plan]")
        # The whole task and the site it uses, before the first step that changes anything.
        await expect(card).to_contain_text(place(site), timeout=30_000)
        await expect(card).to_contain_text("click Post a review")
        await expect(panel.locator(".step .title").last).to_contain_text("plan")
        await card.locator("button[data-decision=approve]").click()
        # Approved: the refused step runs again, and a routine risky click on the plan's site asks no more.
        await expect(panel.locator(".step .title").last).to_have_text('Clicked "Post a review"', timeout=30_000)
        await expect(panel.locator(".card")).to_have_count(0)
        await expect(panel.locator("#send")).to_be_enabled(timeout=30_000)
    finally:
        await set_ask_first(panel, False)


async def test_the_chat_is_there_after_the_browser_restarts(gateway: BuiltinGateway, site: str,
                                                            tmp_path: Path) -> None:
    """Chrome empties the extension's session storage when it restarts; the person finds their chat as they left it."""
    ext = stage_extension(tmp_path / "ext", {"url": gateway.url, "key": KEY, "autopilot": False})
    profile = tmp_path / "profile"
    async with playwright_browser(ext, profile, f"{site}/index.html") as ctx:
        panel = await open_panel(ctx)
        await expect(panel.locator("#pill-tunnel")).to_have_text("tools attached", timeout=30_000)
        await say(panel, f"open {site}/form.html")
        await expect(panel.locator(".step .title")).to_have_text(f"Opened {place(site)}/form.html", timeout=30_000)
        await expect(panel.locator("#send")).to_be_enabled(timeout=30_000)
        # Saved (a short delay after the last change): the keys the conversation is kept under.
        # Wherever the extension keeps it: the test is about what the panel shows after the restart.
        saved = """() => Promise.all([chrome.storage.local.get(null), chrome.storage.session.get(null)])
            .then((areas) => areas.flatMap(Object.entries).some(([k, v]) => k.startsWith('openab.transcript:')
                && v.items.some((i) => i.status === 'completed')))"""
        await eventually(lambda: panel.evaluate(saved), what="the finished step saved")
    async with playwright_browser(ext, profile, f"{site}/index.html") as ctx:
        panel = await open_panel(ctx)
        await expect(panel.locator(".msg.user")).to_have_text(f"open {site}/form.html")
        await expect(panel.locator(".step .title")).to_have_text(f"Opened {place(site)}/form.html")
        await expect(panel.locator(".msg.agent")).to_contain_text(f"Opening {site}/form.html")
        await expect(panel.locator("#pill-link")).to_have_text("connected", timeout=30_000)
        await snap(panel, "panel-after-browser-restart.png")
        # What was kept is the chat alone: never the key that pairs the browser with the gateway.
        kept = await panel.evaluate("""() => chrome.storage.local.get(null).then((all) => JSON.stringify(
            Object.entries(all).filter(([k]) => k.startsWith('openab.transcript'))))""")
        assert KEY not in kept


async def test_a_models_reply_quoting_the_page_is_told_without_the_envelope(site: str, tmp_path: Path) -> None:
    """A model quotes what its tools returned (this one verbatim, markers and all): the person reads the words."""
    with serving(FakeModel()) as model:
        model.set_script(Script(calls=[Call("browser_navigate", {"url": f"{site}/form.html"}),
                                       Call("browser_snapshot", {})]))
        settings = Settings(token=SecretStr(KEY), port=0, state_dir=tmp_path / "state", agent="builtin",
                            model_url=f"{model.url}/v1")
        pod = assemble(settings, env={})
        async with running_server(create_app(pod), max_frame_bytes=pod.settings.max_frame_bytes) as base:
            url = "ws" + base.removeprefix("http") + "/acp"
            ext = stage_extension(tmp_path / "ext", {"url": url, "key": KEY, "autopilot": True})
            async with playwright_browser(ext, tmp_path / "profile", f"{site}/index.html") as ctx:
                panel = await open_panel(ctx)
                await expect(panel.locator("#pill-tunnel")).to_have_text("tools attached", timeout=30_000)
                await say(panel, "What does the sign-in form ask for?")
                await expect(panel.locator(".step .title")).to_have_text(
                    [f"Opened {place(site)}/form.html", "Read the page"], timeout=30_000)
                await expect(panel.locator("#send")).to_be_enabled(timeout=30_000)
                reply = panel.locator(".msg.agent").last
                await expect(reply).to_contain_text("FINAL ANSWER: tool returned")
                await expect(reply).to_contain_text("Username (textbox)")
                assert not ENVELOPE.search(await reply.inner_text()), await reply.inner_text()
    # What the model was given is the envelope whole: it is the person's copy that goes without it.
    [last] = [e for e in model.log if e.kind == "chat"][-1:]
    assert "<<<page-content" in json.dumps(last.body)
