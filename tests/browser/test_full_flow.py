"""The whole product, once: a person types in the panel, a real agent in the pod uses their browser.

Real gateway (`openab_browser.gateway`) with the agent runtime and the proxy; the agent is the built-in
ACP agent process (it follows plain instructions without a model); the browser is Debian Chromium
with the real extension, its panel driven by Playwright. The test checks the effect in the page,
not the agent's words about it.
"""

from __future__ import annotations

import asyncio
import contextlib

import pytest
from fake_extension import connect_extension
from playwright.async_api import BrowserContext, Page, expect
from playwright.async_api import TimeoutError as PlaywrightTimeoutError
from waits import eventually

from openab_browser.core.tunnel.registry import TunnelAttached, TunnelEvent

from .conftest import KEY, BuiltinGateway, builtin_agent_browser
from .harness import page_at, screenshot_dir

pytestmark = pytest.mark.anyio


gateway, context, panel = builtin_agent_browser("flow")


@pytest.fixture(autouse=True)
async def fresh_start(gateway: BuiltinGateway, context: BrowserContext, panel: Page) -> None:
    """Each test starts where a person opening the panel would: no turn or question left over from another
    test, no agent tab, and a new chat (an empty transcript, a new session with its browser tools attached)."""
    if await panel.locator("#stop").is_enabled():  # an earlier test stopped mid-turn
        # Its turn may end on its own between the look and the click: then there is nothing left to stop.
        with contextlib.suppress(PlaywrightTimeoutError):
            await panel.locator("#stop").click(timeout=2_000)
    await expect(panel.locator("#send")).to_be_enabled(timeout=30_000)
    await expect(panel.locator(".card")).to_have_count(0)
    # The agent's tabs go (the person's first tab and the panel stay): its next `open` starts afresh.
    start = context.pages[0]
    for page in context.pages:
        if page not in (start, panel):
            await page.close()
    attached = asyncio.Event()

    def on_tunnel(event: TunnelEvent) -> None:
        if isinstance(event, TunnelAttached):
            attached.set()

    stop_listening = gateway.pod.tunnels.add_listener(on_tunnel)
    try:
        # A row only a transcript replaced by the new chat's empty one removes.
        await panel.evaluate("document.getElementById('log').append(document.createElement('div'))")
        await panel.locator("#new-chat").click()
        await panel.locator("#new-chat-yes").click()  # New chat asks first when there is a conversation to clear
        await expect(panel.locator("#log > *")).to_have_count(0, timeout=30_000)
        async with asyncio.timeout(30):  # the new session's tunnel: nothing else attaches meanwhile
            await attached.wait()
    finally:
        stop_listening()


async def say(panel: Page, text: str) -> None:
    await panel.locator("#prompt").fill(text)
    await panel.locator("#send").click()


async def opened(context: BrowserContext, panel: Page, url: str) -> Page:
    """The agent's tab once its "Open URL" step is done."""
    await expect(panel.locator(".step", has_text=f"Open {url}").locator(".status")).to_have_text(
        "completed", timeout=30_000
    )
    return await page_at(context, url)


async def test_a_typed_request_is_carried_out_in_the_browser(context: BrowserContext, panel: Page,
                                                             site: str) -> None:
    await say(panel, f"open {site}/form.html; type Ada into Username; click Preview")
    # The agent's steps show up as rows in the panel, and their effect is in the page.
    for step in (f"Open {site}/form.html", "Type into Username", "Click Preview"):
        row = panel.locator(".step", has_text=step)
        await expect(row.locator(".status")).to_have_text("completed", timeout=30_000)
    page = await page_at(context, f"{site}/form.html")
    await expect(page.locator("#out")).to_have_text("preview: user=Ada country= remember=false", timeout=30_000)
    await expect(panel.locator("#send")).to_be_enabled(timeout=30_000)
    await expect(panel.locator(".msg.error")).to_have_count(0)
    await panel.bring_to_front()
    await panel.screenshot(path=str(screenshot_dir() / "flow-agent-steps.png"))


async def test_a_risky_step_waits_for_the_person(context: BrowserContext, panel: Page, site: str) -> None:
    await say(panel, f"open {site}/form.html; click Buy now")
    page = await opened(context, panel, f"{site}/form.html")
    card = panel.locator(".card")
    await expect(card.locator(".title")).to_have_text('The agent wants to click button "Buy now"', timeout=30_000)
    await expect(page.locator("#out")).not_to_have_text("bought")
    await panel.bring_to_front()
    await panel.screenshot(path=str(screenshot_dir() / "flow-confirm.png"))
    await card.locator("button[data-decision=allow]").click()
    await expect(page.locator("#out")).to_have_text("bought", timeout=30_000)
    await expect(panel.locator(".card")).to_have_count(0)


async def test_a_declined_step_does_not_happen(context: BrowserContext, panel: Page, site: str) -> None:
    await say(panel, f"open {site}/form.html; click Sign in")
    page = await opened(context, panel, f"{site}/form.html")
    card = panel.locator(".card")
    await expect(card.locator(".title")).to_contain_text("submit a form", timeout=30_000)
    await expect(page.locator("#out")).to_have_text("nothing yet")
    await card.locator("button[data-decision=deny]").click()
    await expect(panel.locator("#log")).to_contain_text("not allowed by the user", timeout=30_000)
    await expect(page.locator("#out")).to_have_text("nothing yet")  # unchanged: the form was not sent


def held_session(gateway: BuiltinGateway) -> str:
    """The session the panel's socket holds now."""
    [session_id] = [s.id for s in gateway.pod.sessions.all() if s.owner is not None]
    return session_id


async def test_new_chat_ends_the_chat_it_replaces_and_stops_its_agent(gateway: BuiltinGateway,
                                                                      context: BrowserContext, panel: Page,
                                                                      site: str) -> None:
    await say(panel, f"open {site}/form.html")
    await opened(context, panel, f"{site}/form.html")
    old = held_session(gateway)
    agents = gateway.pod.backend.agents  # type: ignore[attr-defined]
    pid = agents[old]
    assert pid is not None
    await expect(panel.locator("#send")).to_be_enabled(timeout=30_000)
    await panel.locator("#new-chat").click()
    await panel.locator("#new-chat-yes").click()
    await expect(panel.locator("#log > *")).to_have_count(0, timeout=30_000)
    # Gone now, not after the idle timeout: the session, its agent process and its browser tools.
    await eventually(lambda: gateway.pod.sessions.get(old) is None and not _alive(pid), 30)
    assert not gateway.pod.tunnels.tunnels(old)
    assert held_session(gateway) != old


async def test_a_chat_taken_over_elsewhere_says_so_and_new_chat_goes_on_here(gateway: BuiltinGateway,
                                                                            panel: Page) -> None:
    taken = held_session(gateway)
    # Another connection (another window, or anyone holding the id and the key) resumes the panel's session.
    async with connect_extension(gateway.url, KEY) as other:
        await other.initialize()
        await other.request("session/resume", {"sessionId": taken, "cwd": "/", "mcpServers": []})
        await expect(panel.locator("#link-detail")).to_contain_text("taken over by another connection",
                                                                    timeout=30_000)
        await expect(panel.locator("#pill-link")).to_contain_text("chat moved")
        # A prompt now would go to a chat the panel no longer holds: it is refused with the same words, and kept.
        await say(panel, "hello")
        await expect(panel.locator("#composer-note")).to_contain_text("taken over by another connection")
        await expect(panel.locator("#prompt")).to_have_value("hello")
        # New chat starts afresh here (nothing here to clear: it does not ask), and leaves the other connection's
        # session alone.
        await panel.locator("#new-chat").click()
        await expect(panel.locator("#pill-link")).to_contain_text("connected", timeout=30_000)
        await expect(panel.locator("#link-detail")).not_to_contain_text("taken over")
        owned = {s.id for s in gateway.pod.sessions.all() if s.owner is not None}
        assert taken in owned and len(owned) == 2, "the other connection keeps the chat it took"


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return False
