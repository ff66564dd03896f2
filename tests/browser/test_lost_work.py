"""Nothing the person did is lost without their word (issue 21, point 7), in the real panel: Escape never stops a
turn, New chat asks first and lets the person close the agent's tabs, Add gateway keeps the gateway in use until
the new one is saved, a message sent while offline stays in its box with the truth about why, and Retry now dials
at once while the backoff waits.

Real Debian Chromium with the real extension, the panel page driven by Playwright as a person would; the pod is
the real gateway with a scripted agent, and the agent's browser calls come from the official MCP client.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.async_api import BrowserContext, Page, expect
from scripted_agent import ScriptedAgent, chunk
from waits import eventually

from openab_browser.core.tunnel.tunnel import Tunnel

from .conftest import person_browser
from .harness import open_panel, service_worker_url, snap
from .live_pod import KEY, TIMEOUT, LiveGateway, call

pytestmark = pytest.mark.anyio

context, tunnel = person_browser("lost-work")


@pytest.fixture(scope="module")
async def panel(context: BrowserContext) -> Page:
    """The panel at Chrome's default side panel width, 360 px: the states here are shot as a person first sees them."""
    await service_worker_url(context)
    page = await open_panel(context)
    await page.set_viewport_size({"width": 360, "height": 720})
    return page


async def ask(panel: Page, text: str) -> None:
    await panel.locator("#prompt").fill(text)
    await panel.locator("#send").click()


def cancels(gateway: LiveGateway, session_id: str) -> int:
    return sum(1 for s in gateway.browser_sockets for m in s.received
               if m.get("method") == "session/cancel" and m["params"].get("sessionId") == session_id)


async def test_escape_never_stops_the_turn(gateway: LiveGateway, agent: ScriptedAgent, panel: Page,
                                           tunnel: Tunnel) -> None:
    agent.scripts["long"] = agent.until_stopped(chunk("Working on it…"))
    await ask(panel, "long job")
    await expect(panel.locator(".msg.agent").last).to_have_text("Working on it…")
    # The person starts their next message while the agent works, and presses Escape in the box...
    box = panel.locator("#prompt")
    await box.fill("and then the invoices")
    await box.press("Escape")
    # ...and again with nothing focused.
    await box.evaluate("(el) => el.blur()")
    await panel.keyboard.press("Escape")
    await expect(panel.locator("#stop")).to_be_enabled()
    # Stop goes through the same port and socket after both: it is the only cancel the gateway got.
    await panel.locator("#stop").click()
    await expect(panel.locator(".msg.system").last).to_have_text("Stopped: cancelled")
    assert cancels(gateway, tunnel.session_id) == 1
    await expect(box).to_have_value("and then the invoices")
    await box.fill("")


async def test_new_chat_asks_first_and_can_close_the_agents_tabs(
    context: BrowserContext, gateway: LiveGateway, panel: Page, tunnel: Tunnel, site: str
) -> None:
    sock = gateway.browser_sockets[-1]
    old = tunnel.session_id
    async with gateway.agent_client(old) as agent:
        for page in ("page2.html", "form.html"):
            text, is_error = await call(agent, "browser_tabs", {"action": "open", "url": f"{site}/{page}"})
            assert not is_error, text
    await expect(panel.locator("#agent-tab-list li.agent-tab")).to_have_count(2)
    opened = {f"{site}/page2.html", f"{site}/form.html"}

    # The question, in the panel; Cancel (or Escape) leaves everything as it was.
    await panel.locator("#new-chat").click()
    confirm = panel.locator("#new-chat-confirm")
    await expect(confirm).to_be_visible()
    await expect(confirm).to_contain_text("Start a new chat? This conversation will be cleared.")
    await expect(panel.locator("#new-chat-tabs")).to_contain_text("The 2 tabs the agent opened:")
    await expect(confirm.get_by_label("Keep them open as yours")).to_be_checked()
    await snap(panel, "panel-new-chat-confirm.png")
    await confirm.get_by_role("button", name="Cancel").click()
    await expect(confirm).to_be_hidden()
    await panel.locator("#new-chat").click()
    await panel.keyboard.press("Escape")
    await expect(confirm).to_be_hidden()
    await expect(panel.locator(".msg.user")).to_have_count(1)

    await panel.locator("#new-chat").click()
    await confirm.get_by_label("Close them").check()
    await confirm.get_by_role("button", name="Start new chat").click()
    await expect(panel.locator("#notice")).to_have_text("New chat. The 2 tabs the agent opened were closed.")
    await expect(panel.locator(".msg")).to_have_count(0)
    await expect(panel.locator("#agent-tabs")).to_be_hidden()
    # Only the confirmed New chat ended the session: the two dismissed questions closed nothing.
    assert [c["params"]["sessionId"] for c in sock.requests("session/close")] == [old]

    async def closed() -> bool:
        return not {t["url"] for t in await panel.evaluate("chrome.tabs.query({})")} & opened

    await eventually(closed, TIMEOUT, what="the agent's two tabs closed")
    assert any(p.url == f"{site}/index.html" for p in context.pages), "the person's own tab stays"


async def test_add_gateway_keeps_the_one_in_use_connected(gateway: LiveGateway, panel: Page) -> None:
    sock = gateway.browser_sockets[-1]
    await panel.locator("#toggle-settings").click()
    gateways = panel.locator("#gateways li")
    await expect(gateways).to_have_count(1)
    await panel.locator("#add-gateway").click()
    await expect(panel.locator("#set-url")).to_have_value("")
    await expect(panel.locator("#save-settings")).to_have_text("Add and use")
    await expect(panel.locator("#adding-note")).to_have_text(
        "A new gateway. The one in use stays connected until you add this one.")
    await panel.locator("#set-name").fill("Home pod")
    await panel.locator("#set-url").fill("wss://home.example.com/acp")
    await snap(panel, "panel-add-gateway.png")
    # An unusable URL is refused, and nothing is saved: the worker has read the message by then.
    await panel.locator("#set-url").fill("http://gateway.example.com/acp")
    await panel.locator("#save-settings").click()
    await expect(panel.get_by_text("must start with wss://")).to_be_visible()
    await expect(gateways).to_have_count(1)
    await expect(panel.locator("#pill-link")).to_have_text("connected")
    assert not sock.closed.is_set(), "adding a gateway kept the one in use connected"
    # Given up: the form is the gateway in use again.
    await panel.locator("#add-gateway").click()
    await expect(panel.locator("#set-url")).to_have_value(gateway.url)
    await expect(panel.locator("#save-settings")).to_have_text("Save")
    await expect(panel.locator("#adding-note")).to_have_count(0)
    await panel.locator("#toggle-settings").click()


async def test_an_offline_message_is_kept_and_retry_now_dials_at_once(gateway: LiveGateway, panel: Page) -> None:
    # What the worker tells panels, as each arrives, on a port of the panel page's own (so also when each came).
    await panel.evaluate("""() => {
        window.seen = [];
        const port = chrome.runtime.connect({name: 'panel'});
        port.onMessage.addListener((m) => m.type === 'state' && window.seen.push({...m.link, at: Date.now()}));
    }""")
    await expect(panel.locator("#retry-now")).to_be_hidden()
    await gateway.stop()
    await expect(panel.locator("#pill-link")).to_have_text("retrying")
    await expect(panel.locator("#retry-now")).to_be_visible()

    box = panel.locator("#prompt")
    await ask(panel, "echo are you there?")
    note = panel.locator("#composer-note")
    await expect(note).to_have_text(re.compile(
        r"Not sent: the gateway is not reachable \(retrying (in \d+\ss|now)\)\. Your message is kept\."))
    await expect(note).not_to_contain_text("settings")
    await expect(box).to_have_value("echo are you there?")
    await expect(panel.locator(".msg.user", has_text="are you there")).to_have_count(0)
    await snap(panel, "panel-offline-kept.png")

    # The backoff climbs; once the next try is a while off, the gateway is back and the person presses Retry now.
    waited: dict[str, Any] = {}

    async def a_long_wait() -> bool:
        last: dict[str, Any] = (await panel.evaluate("window.seen.at(-1)")) or {}
        waited.update(last)
        return last.get("status") == "retrying" and last["retryAt"] - last["at"] >= 10_000

    await eventually(a_long_wait, 90, what="a backoff of 10 s or more")
    await gateway.start()
    await snap(panel, "panel-retry-now.png")
    before = await panel.evaluate("window.seen.length")
    await panel.locator("#retry-now").click()
    await expect(panel.locator("#pill-link")).to_have_text("connected", timeout=30_000)
    after = await panel.evaluate("(n) => window.seen.slice(n)", before)
    dialled = next(s for s in after if s["status"] == "connecting")
    assert dialled["at"] < waited["retryAt"], "Retry now dialled before the backoff's own try was due"
    await expect(panel.locator("#retry-now")).to_be_hidden()

    # Back: the note says so, and Send sends what was kept.
    await expect(note).to_have_text("Connected again. Your message is kept: press Send to send it.")
    await panel.locator("#send").click()
    await expect(panel.locator(".msg.user").last).to_have_text("echo are you there?")
    await expect(panel.locator(".msg.agent").last).to_have_text("are you there?")
    await expect(box).to_have_value("")
    await expect(note).to_be_hidden()


async def test_an_offline_message_points_to_the_settings_only_when_they_are_wrong(
    gateway: LiveGateway, panel: Page
) -> None:
    await panel.evaluate("""() => {
        window.states = [];
        const port = chrome.runtime.connect({name: 'panel'});
        port.onMessage.addListener((m) => m.type === 'state' && window.states.push({...m.link}));
    }""")
    await expect(panel.locator("#pill-link")).to_have_text("connected")
    await panel.locator("#toggle-settings").click()
    await panel.locator("#set-key").fill("not-the-key")
    await panel.locator("#save-settings").click()
    await expect(panel.locator("#link-detail")).to_contain_text("refused the key")

    # The panel dials again in a moment with the same key: while that try runs the refusal still stands, so the panel
    # keeps saying it, and a message sent then is told to fix the key, not that the panel is "still connecting".
    def tries(states: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
        """What the panel said while the new key was tried before its first refusal, and while tried after it."""
        first = next((i for i, st in enumerate(states) if "refused the key" in st.get("detail", "")), len(states))
        return ([st["detail"] for st in states[:first] if st.get("status") == "connecting"],
                [st["detail"] for st in states[first:] if st.get("status") == "connecting"])

    async def redialled() -> bool:
        return bool(tries(await panel.evaluate("window.states"))[1])

    await eventually(redialled, 30, what="a second try with the refused key")
    first, again = tries(await panel.evaluate("window.states"))
    assert first and all(detail.startswith("Connecting to ") for detail in first), first  # nothing refused it yet
    assert all("refused the key" in detail for detail in again), again
    await ask(panel, "echo hello")
    note = panel.locator("#composer-note")
    await expect(note).to_contain_text(f"Not sent: the gateway at 127.0.0.1:{gateway.port} refused the key. Paste "
                                       "the key from the gateway's pairing line into the settings.")
    await expect(note).to_contain_text("Your message is kept.")
    await expect(panel.locator("#prompt")).to_have_value("echo hello")
    await snap(panel, "panel-offline-refused-key.png")
    await panel.locator("#set-key").fill(KEY)
    await panel.locator("#save-settings").click()
    await expect(panel.locator("#pill-link")).to_have_text("connected")
    await panel.locator("#send").click()
    await expect(panel.locator(".msg.agent").last).to_have_text("hello")
    await expect(note).to_be_hidden()
    # A note about a message the person then deleted goes with it.
    await panel.locator("#set-key").fill("not-the-key")
    await panel.locator("#save-settings").click()
    await expect(panel.locator("#link-detail")).to_contain_text("refused the key")
    await ask(panel, "echo again")
    await expect(note).to_contain_text("refused the key")
    await panel.locator("#prompt").fill("")
    await expect(note).to_be_hidden()
    await panel.locator("#set-key").fill(KEY)
    await panel.locator("#save-settings").click()
    await expect(panel.locator("#pill-link")).to_have_text("connected")
    await panel.locator("#toggle-settings").click()
