"""A turn the gateway's stop ends is said to be so, not "Stopped: cancelled" as if the person pressed Stop.

A real `openab run` process with the built-in agent on a scripted model that holds its answer (the turn runs until
something ends it), the real extension in real Chromium, played as the person: Stop says "Stopped: cancelled";
SIGTERM to the gateway (how a pod is stopped) during a turn says the gateway shut down during it. The pod is
configured with three agents of which two are installed: the panel's picker lists those two only.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

import pytest
from agents.fake_model import FakeModel, Script, serving
from playwright.async_api import BrowserContext, Page, expect

from .harness import open_panel, panel_browser, service_worker_url, snap
from .live_pod import KEY

pytestmark = pytest.mark.anyio

SHUT_DOWN = "The gateway shut down during this turn, so the agent stopped before it finished."


@pytest.fixture(scope="module")
def model() -> Iterator[FakeModel]:
    with serving(FakeModel(Script(text="Working on it.", hang=True))) as fake:
        yield fake


@dataclass
class RunningPod:
    process: asyncio.subprocess.Process
    url: str  # the /acp WebSocket


@pytest.fixture(scope="module")
async def pod(model: FakeModel, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[RunningPod]:
    """`openab run` with the built-in agent on the scripted model, once it listens."""
    state = tmp_path_factory.mktemp("shutdown-pod")
    # Codex "installed" (an ACP agent under its command's name on PATH), Gemini not.
    programs = tmp_path_factory.mktemp("bin")
    (programs / "codex-acp").write_text(f"#!/bin/sh\nexec {sys.executable} -m openab_browser.core.agents.builtin\n")
    (programs / "codex-acp").chmod(0o755)
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "openab_browser.gateway.cli", "run", "--port", "0", "--state-dir", str(state),
        "--model-url", f"{model.url}/v1", "--model", "scripted", "--agent", "builtin,codex,gemini",
        env={**os.environ, "OPENAB_ACP_AUTH_KEY": KEY, "OPENAB_DRAIN_TIMEOUT": "0.5",
             "PATH": f"{programs}:/usr/bin:/bin"},
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE, start_new_session=True)
    assert process.stderr is not None
    seen: list[str] = []
    async with asyncio.timeout(60):
        while not (m := re.search(r"running on http://(\S+)", seen[-1] if seen else "", re.IGNORECASE)):
            line = (await process.stderr.readline()).decode()
            assert line, "openab run exited while starting:\n" + "".join(seen)
            seen.append(line)
    try:
        yield RunningPod(process, f"ws://{m.group(1).rstrip('/')}/acp")
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
        async with asyncio.timeout(30):
            await process.stderr.read()
            await process.wait()


@pytest.fixture(scope="module")
async def context(pod: RunningPod, site: str,
                  tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[BrowserContext]:
    async with panel_browser(pod.url, KEY, site, tmp_path_factory.mktemp("shutdown")) as ctx:
        yield ctx


@pytest.fixture(scope="module")
async def panel(context: BrowserContext) -> Page:
    await service_worker_url(context)
    return await open_panel(context)


async def turn_held(panel: Page, model: FakeModel, text: str) -> None:
    """Sends ``text`` and returns once the agent's model call is held: the turn is running."""
    model.hanging.clear()
    await expect(panel.locator("#pill-link")).to_have_text("connected", timeout=30_000)
    await panel.locator("#prompt").fill(text)
    await panel.locator("#send").click()
    await model.wait_hanging()
    await expect(panel.locator("#stop")).to_be_enabled()


async def test_the_agent_picker_lists_only_the_installed_agents(panel: Page) -> None:
    await expect(panel.locator("#pill-link")).to_have_text("connected", timeout=30_000)
    await expect(panel.locator("#new-chat-agent option")).to_have_text(["openab built-in agent", "Codex"])


async def test_stop_pressed_by_the_person_says_stopped(panel: Page, model: FakeModel) -> None:
    await turn_held(panel, model, "look at the site")
    await panel.locator("#stop").click()
    await expect(panel.locator("#log")).to_contain_text("Stopped: cancelled")
    await expect(panel.locator("#stop")).to_be_disabled()


async def test_a_gateway_stopped_during_a_turn_says_it_shut_down(
        panel: Page, model: FakeModel, pod: RunningPod) -> None:
    await turn_held(panel, model, "look at the site again")
    pod.process.send_signal(signal.SIGTERM)
    await expect(panel.locator("#log")).to_contain_text(SHUT_DOWN)
    # The person's own Stop of the turn before is the only "Stopped: cancelled".
    await expect(panel.locator("#log").get_by_text("Stopped: cancelled")).to_have_count(1)
    async with asyncio.timeout(30):
        assert await pod.process.wait() == 0  # a drained stop is a clean one
    await expect(panel.locator("#pill-link")).not_to_have_text("connected")
    await snap(panel, "panel-gateway-shutdown.png")


