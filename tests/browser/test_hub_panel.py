"""Two people's real side panels in real Chromium, each paired with their own pod through a real JupyterHub: the
hub's proxy routes /user/<name>/acp to the pod, the key in the panel's settings is a token made on the hub.

What a person notices: their panel connects; a panel given someone else's pod and their own token says it may not
open that pod; with Chrome closed overnight the hub's idle culler stops the pod, while a colleague whose panel is
open keeps theirs; on opening Chrome again the panel says the pod is starting, has the hub start it, and connects.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hub_harness import Hub, available, running_hub, two_people
from playwright.async_api import BrowserContext, Page, expect
from waits import eventually

from .harness import open_panel, playwright_browser, stage_extension

pytestmark = [pytest.mark.anyio, pytest.mark.skipif(available() is not None, reason=available() or "")]

CULL_TIMEOUT = 10
NEVER = datetime.min.replace(tzinfo=UTC)


@pytest.fixture
def hub(tmp_path: Path) -> Iterator[Hub]:
    with two_people(tmp_path / "hub") as running:
        yield running


class Person:
    """One person's Chrome profile with the extension paired to ``url`` with ``token``; opened and closed at will,
    keeping its profile (the panel's saved session) between openings."""

    def __init__(self, folder: Path, url: str, token: str, site: str) -> None:
        self.ext = stage_extension(folder / "ext", {"url": url, "key": token})
        self.profile = folder / "profile"
        self.site = site

    def chrome(self) -> contextlib.AbstractAsyncContextManager[BrowserContext]:
        return playwright_browser(self.ext, self.profile, f"{self.site}/index.html")


@contextlib.asynccontextmanager
async def panel_of(person: Person) -> AsyncIterator[Page]:
    async with person.chrome() as ctx:
        yield await open_panel(ctx)


async def test_each_persons_panel_reaches_their_own_pod_only(hub: Hub, site: str, tmp_path: Path) -> None:
    _, alice = hub.token("alice")
    _, bob = hub.token("bob")
    mine = Person(tmp_path / "alice", hub.acp_url("alice"), alice, site)
    theirs = Person(tmp_path / "mallory", hub.acp_url("bob"), alice, site)
    async with panel_of(mine) as panel:
        await expect(panel.locator("#pill-link")).to_have_text("connected", timeout=30_000)
    async with panel_of(theirs) as panel:
        await expect(panel.locator("#link-detail")).to_contain_text(
            "This token may not open bob's pod", timeout=30_000)
        await expect(panel.locator("#pill-link")).not_to_have_text("connected")
    wrong = Person(tmp_path / "typo", hub.acp_url("bob"), bob[:-1] + ("0" if bob[-1] != "0" else "1"), site)
    async with panel_of(wrong) as panel:
        await expect(panel.locator("#link-detail")).to_contain_text("The hub did not take this token",
                                                                     timeout=30_000)


async def test_an_idle_pod_is_culled_and_its_panel_says_it_starts_it_again(site: str, tmp_path: Path) -> None:
    # The recipe's own culler, the hub's service, at a timeout the test can wait for.
    with running_hub(tmp_path / "hub", cull_timeout=CULL_TIMEOUT) as hub:
        hub.start("alice")
        _, alice = hub.token("alice")
        _, bob = hub.token("bob")
        colleague = Person(tmp_path / "alice", hub.acp_url("alice"), alice, site)
        person = Person(tmp_path / "bob", hub.acp_url("bob"), bob, site)
        opened = datetime.now(UTC).replace(microsecond=0)
        async with panel_of(colleague) as alices:
            await expect(alices.locator("#pill-link")).to_have_text("connected", timeout=30_000)
            # The pod tells the hub of the socket at once, so the culler's next look already sees it in use.
            await eventually(lambda: (hub.last_activity("alice") or NEVER) >= opened, timeout=5, interval=0.1,
                             what=lambda: f"alice's socket told to the hub: {hub.user('alice')}")
            # bob pairs his panel, then closes Chrome for the night.
            hub.start("bob")
            async with panel_of(person) as panel:
                await expect(panel.locator("#pill-link")).to_have_text("connected", timeout=30_000)
            await eventually(lambda: hub.stopped("bob"), timeout=CULL_TIMEOUT + 20, interval=0.25,
                             what=lambda: f"bob's idle pod culled: {hub.log_tail()}")
            culled = datetime.now(UTC)
            # alice's open panel keeps her pod: still running a whole culler timeout later, still connected.
            await eventually(
                lambda: (hub.last_activity("alice") or culled) > culled + timedelta(seconds=CULL_TIMEOUT),
                timeout=CULL_TIMEOUT + 20, interval=0.25,
                what=lambda: f"alice's pod reporting activity: {hub.user('alice')}")
            assert hub.running("alice")
            await expect(alices.locator("#pill-link")).to_have_text("connected")

        # Morning: bob opens Chrome. His pod is stopped; the panel says it is starting while the hub starts it.
        hub.start_slowly("bob")
        async with panel_of(person) as panel:
            await expect(panel.locator("#link-detail")).to_contain_text("Your pod is starting", timeout=30_000)
            await expect(panel.locator("#pill-link")).not_to_have_text("connected")
            await expect(panel.locator("#pill-link")).to_have_text("connected", timeout=30_000)
            # The pod's state folder outlived it (the person's home, a volume on Kubernetes): the chat goes on.
            await expect(panel.locator("#link-detail")).to_contain_text("Session resumed")
            assert hub.running("bob")
