"""The panel's header and the composer's buttons at the widths Chrome gives its side panel (320 to 400 px, 360 by
default): nothing in the header is cut, the agent's name is whole (or its tooltip says it), "browser in use" shows
while a tool call runs, and the picker says its agent is the next chat's.

Real Chromium with the real extension, its panel as a page sized like the side panel; a real gateway offering two
agents (the built-in one, whose name is the longest, and Codex), with a scripted agent behind them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from mcp import Client
from playwright.async_api import Page, expect
from scripted_agent import ScriptedAgent

from .conftest import person_browser
from .harness import screenshot_dir
from .live_pod import LiveGateway, call
from .test_panel import in_background

pytestmark = pytest.mark.anyio

WIDTHS = (320, 360, 400)

# What does not fit, in words: an empty list when the header and the composer's row lay out whole.
MISFITS = """() => {
  const bad = [];
  const shown = (el) => !el.closest('[hidden]') && el.getClientRects().length > 0;
  const name = (el) => el.id || el.className || el.tagName;
  const header = document.querySelector('header').getBoundingClientRect();
  for (const el of document.querySelectorAll('header *')) {
    if (!shown(el)) continue;
    const r = el.getBoundingClientRect();
    if (r.left < header.left - 0.5 || r.right > header.right + 0.5) bad.push(`${name(el)} outside the header`);
  }
  for (const el of [document.getElementById('pill'), ...document.querySelectorAll('#pill .seg')]) {
    if (el.scrollWidth > el.clientWidth) bad.push(`${name(el)} cut: "${el.textContent}"`);
  }
  const agent = document.getElementById('agent-name');
  if (shown(agent) && agent.scrollWidth > agent.clientWidth && !agent.title.includes(agent.textContent)) {
    bad.push(`the agent's name cut with no tooltip: "${agent.textContent}"`);
  }
  // The composer's buttons: on one row, or wrapped onto whole rows, each inside the composer and none on another.
  const composer = document.getElementById('composer').getBoundingClientRect();
  const buttons = [...document.querySelectorAll('#composer .row > *')].filter(shown);
  const boxes = buttons.map((b) => b.getBoundingClientRect());
  boxes.forEach((r, i) => {
    if (r.left < composer.left || r.right > composer.right) bad.push(`${name(buttons[i])} outside the composer`);
    if (buttons[i].scrollWidth > buttons[i].clientWidth) bad.push(`${name(buttons[i])} cut`);
    boxes.slice(i + 1).forEach((o, j) => {
      if (r.left < o.right && o.left < r.right && r.top < o.bottom && o.top < r.bottom) {
        bad.push(`${name(buttons[i])} over ${name(buttons[i + 1 + j])}`);
      }
    });
  });
  if (document.documentElement.scrollWidth > innerWidth) bad.push('the panel scrolls sideways');
  return bad;
}"""


# The font sizes of what the person reads while a card waits, by selector.
READ_SIZES = """() => Object.fromEntries(['.card .title', '.card .where', '.card button', '#prompt', '#link-detail',
  '#pill .seg', '#agent-name'].map((s) => [s, [...document.querySelectorAll(s)].map((e) =>
  parseFloat(getComputedStyle(e).fontSize))]))"""


@pytest.fixture(scope="module")
async def gateway(agent: ScriptedAgent, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[LiveGateway]:
    async with LiveGateway(tmp_path_factory.mktemp("state"), agent, agent=["builtin", "codex"]) as gw:
        yield gw


context, tunnel = person_browser("header")


async def fits_at_every_width(panel: Page) -> None:
    for width in WIDTHS:
        await panel.set_viewport_size({"width": width, "height": 720})
        assert await panel.evaluate(MISFITS) == [], width
    await panel.set_viewport_size({"width": 360, "height": 720})


async def test_the_header_is_whole_from_320_to_400_px(panel: Page, tunnel: object) -> None:
    await expect(panel.locator("#pill-link")).to_have_text("connected")
    await expect(panel.locator("#pill-tunnel")).to_have_text("tools attached")
    await expect(panel.locator("#pill-tools")).to_have_text("idle")
    await expect(panel.locator("#agent-name")).to_have_text("openab built-in agent")
    await expect(panel.locator("#new-chat-agent")).to_be_visible()
    await fits_at_every_width(panel)
    await panel.set_viewport_size({"width": 320, "height": 720})
    await panel.screenshot(path=str(screenshot_dir() / "panel-header-320.png"))
    await panel.set_viewport_size({"width": 360, "height": 720})
    await panel.screenshot(path=str(screenshot_dir() / "panel-header-360.png"))


async def test_browser_in_use_shows_while_a_tool_call_runs(panel: Page, client: Client, site: str) -> None:
    text, is_error = await call(client, "browser_navigate", {"url": f"{site}/form.html"})
    assert not is_error, text
    # The click waits on the person's card: the call runs all along.
    async with in_background(client.call_tool("browser_click", {"selector": "#post"})) as out:
        await expect(panel.locator(".card")).to_have_count(1)
        await expect(panel.locator("#pill-tools")).to_have_text("browser in use")
        await expect(panel.locator("#pill-tools")).to_have_class("seg busy")
        await fits_at_every_width(panel)
        # Read at the panel's own sizes, not Chrome's 75% for an extension page's body (9.75 px).
        sizes = await panel.evaluate(READ_SIZES)
        assert sizes[".card .title"] == [13.0] and min(min(v) for v in sizes.values()) >= 11, sizes
        await panel.screenshot(path=str(screenshot_dir() / "panel-browser-in-use.png"))
        await panel.locator(".card button[data-decision=allow]").click()
    assert not out["result"].is_error
    await expect(panel.locator("#pill-tools")).to_have_text("idle")


async def test_the_picker_says_its_agent_is_the_next_chats(panel: Page) -> None:
    label = panel.locator("#next-chat")
    await expect(label).to_contain_text("Next chat")
    picker = panel.locator("#new-chat-agent")
    await expect(picker.locator("option")).to_have_text(["openab built-in agent", "Codex"])
    note = panel.locator("#next-chat-note")
    await expect(note).to_be_hidden()  # the next chat's agent is this one's: nothing to say

    await picker.select_option("codex")
    await expect(note).to_have_text("Codex answers from your next chat (New chat); this chat stays with "
                                    "openab built-in agent.")
    await expect(panel.locator("#agent-name")).to_have_text("openab built-in agent")  # the pick changed nothing yet
    await fits_at_every_width(panel)
    await panel.screenshot(path=str(screenshot_dir() / "panel-agent-picker-next.png"))

    await panel.locator("#new-chat").click()
    confirm = panel.locator("#new-chat-yes")
    if await confirm.count():  # New chat asks first where it asks before the conversation goes
        await confirm.click()
    await expect(panel.locator("#agent-name")).to_have_text("Codex")
    await expect(note).to_be_hidden()
    await fits_at_every_width(panel)
