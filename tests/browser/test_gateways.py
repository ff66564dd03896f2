"""Several agents and several gateways, as a person uses them in the real panel (real Chromium, the real
extension): the new-chat picker offers the pod's agents and the choice reaches session/new, the header names
the agent answering, and saved gateways (a work pod, a home pod) are added (the one in use staying connected
until the new one is saved), switched, renamed and removed, each with its own key and its own session. Two live
pods; the agents in them are scripted."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from gateway_harness import RunningGateway, run_gateway
from playwright.async_api import Page, expect
from scripted_agent import ScriptedAgent, chunk
from waits import eventually

from openab_browser.core.acp.backend import PromptTurn

from .harness import open_panel, playwright_browser, screenshot_dir, stage_extension

pytestmark = pytest.mark.anyio

WORK_KEY = "work-key_0123456789"
HOME_KEY = "home-key_9876543210"


async def whoami(turn: PromptTurn, _text: str) -> str:
    """The scripted agent says which agent its session chose: what the person sees is what the pod runs."""
    turn.send_update(chunk(f"I am {turn.session.agent}."))
    return "end_turn"


@contextlib.asynccontextmanager
async def pod(key: str, agents: list[str]) -> AsyncIterator[RunningGateway]:
    backend = ScriptedAgent()
    backend.scripts["whoami"] = whoami
    async with run_gateway(backend=backend, token=key, agent=agents) as gateway:
        yield gateway


async def ask(panel: Page, text: str) -> None:
    await panel.locator("#prompt").fill(text)
    await panel.locator("#send").click()


async def test_the_picker_and_the_gateways_list(site: str, tmp_path: Path) -> None:
    async with pod(WORK_KEY, ["claude", "codex"]) as work, pod(HOME_KEY, ["builtin"]) as home:
        # An install from before several gateways: one url and one key, which become the first saved gateway.
        ext = stage_extension(tmp_path / "ext", {"url": work.ws_url, "key": WORK_KEY, "autopilot": False})
        async with playwright_browser(ext, tmp_path / "profile", f"{site}/index.html") as ctx:
            panel = await open_panel(ctx)
            await expect(panel.locator("#pill-link")).to_have_text("connected", timeout=30_000)
            await the_picker_starts_chats_with_the_chosen_agent(panel, work)
            await gateways_are_added_switched_renamed_and_removed(panel, work, home)


async def the_picker_starts_chats_with_the_chosen_agent(panel: Page, work: RunningGateway) -> None:
    await expect(panel.locator("#agent-name")).to_have_text("Claude Code")  # the first agent is the default
    picker = panel.locator("#new-chat-agent")
    await expect(picker).to_be_visible()
    await expect(picker.locator("option")).to_have_text(["Claude Code", "Codex"])

    await picker.select_option("codex")
    await panel.locator("#new-chat").click()
    await expect(panel.locator("#agent-name")).to_have_text("Codex")
    await ask(panel, "whoami")
    await expect(panel.locator(".msg.agent").last).to_have_text("I am codex.")
    sessions = [s for s in work.pod.sessions.all() if s.owner is not None]
    assert [s.agent for s in sessions] == ["codex"], "New chat closed the claude session and opened a codex one"
    await panel.screenshot(path=str(screenshot_dir() / "panel-agent-picker.png"))


async def gateways_are_added_switched_renamed_and_removed(
    panel: Page, work: RunningGateway, home: RunningGateway
) -> None:
    await panel.locator("#toggle-settings").click()
    gateways = panel.locator("#gateways li")
    await expect(gateways).to_have_count(1)
    await expect(gateways.first).to_contain_text(work.ws_url.split("//")[1].split("/")[0])

    # Add the home pod: the form is the new gateway's, and the work pod stays connected while it is filled in.
    work_session = next(s for s in work.pod.sessions.all() if s.agent == "codex")
    await panel.locator("#add-gateway").click()
    await expect(panel.locator("#set-url")).to_have_value("")
    await panel.locator("#set-name").fill("Home pod")
    await panel.locator("#set-url").fill(home.ws_url)
    await panel.locator("#set-key").fill(HOME_KEY)
    await expect(gateways).to_have_count(1)
    await expect(panel.locator("#pill-link")).to_have_text("connected")
    assert work_session.owner is not None
    # Saved with a usable URL: now it is added, and the one in use.
    await panel.locator("#save-settings").click()
    await expect(gateways).to_have_count(2)
    await expect(gateways.nth(1)).to_have_class("gateway active")
    await expect(panel.locator("#pill-tunnel")).to_have_text("tools attached", timeout=30_000)
    await eventually(lambda: len(home.pod.sessions) == 1, timeout=15)
    await expect(panel.locator("#agent-name")).to_have_text("openab built-in agent")
    await expect(panel.locator("#new-chat-agent")).to_be_hidden()  # one agent: nothing to pick
    await expect(panel.locator(".msg")).to_have_count(0)  # the work pod's chat is not the home pod's
    await eventually(lambda: work_session.owner is None, timeout=15)  # the switch closed the work pod's socket

    # Rename the work pod, switch back to it: it resumes its own session, which still runs codex.
    first = gateways.nth(0)
    await first.get_by_role("button", name="Use").click()
    await expect(first).to_have_class("gateway active")
    await expect(panel.locator("#pill-tunnel")).to_have_text("tools attached", timeout=30_000)
    await eventually(lambda: work_session.owner is not None, timeout=15)
    await expect(panel.locator("#agent-name")).to_have_text("Codex")
    await panel.locator("#set-name").fill("Work pod")
    await panel.locator("#save-settings").click()
    await expect(first.locator("strong")).to_have_text("Work pod")
    await expect(gateways.nth(1).locator("strong")).to_have_text("Home pod")
    await panel.screenshot(path=str(screenshot_dir() / "panel-gateways.png"))

    # Each gateway kept its own key, in local storage only: never in sync storage, never shown to the panel.
    stored = await panel.evaluate("chrome.storage.local.get('openab.settings').then((s) => s['openab.settings'])")
    assert [(g["name"], g["key"]) for g in stored["gateways"]] == [("Work pod", WORK_KEY), ("Home pod", HOME_KEY)]
    assert await panel.evaluate("chrome.storage.sync.get(null)") == {}
    html = await panel.content()
    assert WORK_KEY not in html and HOME_KEY not in html

    await gateways.nth(1).get_by_role("button", name="Remove").click()
    await expect(gateways).to_have_count(1)
    await expect(panel.locator("#pill-link")).to_have_text("connected")  # removing another one keeps this one
    stored = await panel.evaluate("chrome.storage.local.get('openab.settings').then((s) => s['openab.settings'])")
    assert HOME_KEY not in str(stored), "a removed gateway's key is forgotten"


async def test_an_upgrade_moves_the_single_gateway_setting_into_the_list(site: str, tmp_path: Path) -> None:
    ext = stage_extension(tmp_path / "ext", {})
    async with playwright_browser(ext, tmp_path / "profile", f"{site}/index.html") as ctx:
        panel = await open_panel(ctx)
        # What an install from before several gateways kept in its storage. The worker writes its own
        # defaults once at start-up; the old form goes in after that, or the worker's write would win the race.
        upgraded = await panel.evaluate("""async (key) => {
            const worker = async () => (await chrome.storage.local.get('openab.settings'))['openab.settings'];
            for (let i = 0; !(await worker()) && i < 200; i++) await new Promise((r) => setTimeout(r, 50));
            if (!(await worker())) throw new Error('the worker never stored its settings');
            await chrome.storage.local.set({'openab.settings': {
                url: 'wss://work.example.com/acp', key, autopilot: true, siteRules: {'https://a.example': 'never'}}});
            const m = await import('/lib/settings.js');
            const loaded = await m.loadSettings();
            return {loaded, shown: m.publicSettings(loaded),
                    stored: (await chrome.storage.local.get('openab.settings'))['openab.settings']};
        }""", WORK_KEY)
    [gateway] = upgraded["loaded"]["gateways"]
    assert (gateway["name"], gateway["url"], gateway["key"]) == ("work.example.com", "wss://work.example.com/acp",
                                                                 WORK_KEY)
    assert upgraded["loaded"]["active"] == gateway["id"] and upgraded["stored"] == upgraded["loaded"]
    assert "url" not in upgraded["stored"] and "key" not in upgraded["stored"], "the old fields are gone once moved"
    assert upgraded["loaded"]["autopilot"] is True and upgraded["loaded"]["siteRules"] == {"https://a.example": "never"}
    assert WORK_KEY not in str(upgraded["shown"]) and upgraded["shown"]["hasKey"] is True
