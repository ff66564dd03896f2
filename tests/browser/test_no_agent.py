"""A pod that can start none of its agents (issue 36, item 2), as the person meets it in real Chromium at 360 px:
the pod `openab run` assembles, naming claude and codex with neither on its agents' PATH (the image built with no
agent CLI inside). The panel connects and says at once why nothing can answer and whom to ask; a message typed
anyway stays in its box with the same reason, instead of failing at the agent's start."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.async_api import expect
from test_runtime_pod import run_pod

from .harness import open_panel, panel_browser, snap

pytestmark = pytest.mark.anyio

WHY = ("This pod cannot start any of its agents (claude: claude-agent-acp not found on PATH; codex: codex-acp not "
       "found on PATH): ask its admin.")


async def test_the_panel_says_at_connect_that_no_agent_can_start(site: str, tmp_path: Path) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    async with run_pod(tmp_path / "state", agent=["claude", "codex"], base_env={"PATH": str(empty)}) as pod, \
            panel_browser(pod.ws_url, pod.token, site, tmp_path) as ctx:
        panel = await open_panel(ctx)
        await panel.set_viewport_size({"width": 360, "height": 720})
        await expect(panel.locator("#link-detail")).to_have_text(WHY, timeout=30_000)
        await expect(panel.locator("#pill-link")).to_have_text("no agent")
        # The reason fits the panel's width: wrapped, never cut.
        box = await panel.locator("#link-detail").bounding_box()
        assert box is not None and box["x"] + box["width"] <= 360, box
        await panel.locator("#prompt").fill("Summarise this page")
        await panel.locator("#send").click()
        await expect(panel.locator("#composer-note")).to_have_text(
            "Not sent: this pod cannot start any of its agents (claude: claude-agent-acp not found on PATH; codex: "
            "codex-acp not found on PATH): ask its admin. Your message is kept.")
        await expect(panel.locator("#prompt")).to_have_value("Summarise this page")
        await snap(panel, "panel-no-agent.png")
