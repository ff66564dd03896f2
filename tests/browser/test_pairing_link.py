"""Pairing by the one-click link, as a person does it: a real `openab run` prints the link to its terminal (a pty);
the person opens it in a tab of real Chromium with the real extension (no gateway set yet); the extension shows
its own confirmation naming the gateway's host in place of the page; Cancel saves nothing and spends no code;
Connect saves the gateway and the side panel connects to it. A page of another site at a /pair#code= address
gets the same question naming its own host, and pairs nothing when it cannot hand out a gateway of its own.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from playwright.async_api import BrowserContext, Page, expect
from terminal_run import terminal_run

from .harness import extension_id, open_panel, playwright_browser, service_worker_url, snap, stage_extension

pytestmark = pytest.mark.anyio

PAIR_PAGE = f"chrome-extension://{extension_id()}/pair/pair.html"


@pytest.fixture(scope="module")
def printed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, str]]:
    """The link a real `openab run` printed to its terminal, the gateway URL and the key it made."""
    state = tmp_path_factory.mktemp("pair-pod") / "state"
    with terminal_run(state) as shown:
        found = re.search(r": (http://127\.0\.0\.1:(\d+)/pair#code=[A-Za-z0-9_-]+)\n", shown)
        assert found is not None, shown
        key = re.search(r"Key: {9}(\S+)\n", shown)  # shown once, kept nowhere: the pod keeps its verifier
        assert key is not None, shown
        yield found.group(1), f"ws://127.0.0.1:{found.group(2)}/acp", key.group(1)


@pytest.fixture(scope="module")
async def context(site: str, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[BrowserContext]:
    tmp = tmp_path_factory.mktemp("pair-link")
    ext = stage_extension(tmp / "ext", {})  # a fresh install: no gateway set
    async with playwright_browser(ext, tmp / "profile", f"{site}/index.html") as ctx:
        await service_worker_url(ctx)
        yield ctx


async def saved(context: BrowserContext) -> list[dict[str, Any]]:
    """The gateways the extension keeps (chrome.storage.local, read from an extension page)."""
    page = await open_panel(context)
    try:
        stored = await page.evaluate(
            "async () => (await chrome.storage.local.get('openab.settings'))['openab.settings']")
    finally:
        await page.close()
    return list(stored["gateways"])


async def open_link(context: BrowserContext, link: str) -> Page:
    """The link typed into a new tab; the tab ends on the extension's confirmation."""
    tab = await context.new_page()
    await tab.set_viewport_size({"width": 800, "height": 520})
    await tab.goto(link)
    await tab.wait_for_url(f"{PAIR_PAGE}#*")
    return tab


async def test_cancel_saves_nothing(context: BrowserContext, printed: tuple[str, str, str]) -> None:
    link, _url, _key = printed
    tab = await open_link(context, link)
    host = link.split("/")[2]
    await expect(tab.locator("#ask")).to_contain_text(f"Connect this browser to the openab gateway at {host}?")
    await expect(tab.locator("#ask")).to_contain_text(
        "The agent there will be able to use the tabs you share with it and tabs it opens")
    await snap(tab, "pair-confirm.png")
    await tab.locator("#cancel").click()
    await expect(tab.locator("#status")).to_contain_text("nothing was saved")
    assert "code=" not in tab.url, "the code leaves the address bar once answered"
    assert [g["url"] for g in await saved(context)] == [""]
    await tab.close()


async def test_another_site_at_a_pair_address_is_named_and_pairs_nothing(context: BrowserContext, site: str) -> None:
    tab = await open_link(context, f"{site}/pair#code=abcdefghijklmnopqrstuvwx")
    host = site.split("/")[2]
    await expect(tab.locator("#host")).to_have_text(host)
    await tab.locator("#connect").click()
    await expect(tab.locator("#status")).to_contain_text(f"The gateway at {host}")
    await expect(tab.locator("#status")).to_contain_text("Nothing was saved")
    assert [g["url"] for g in await saved(context)] == [""]
    await tab.close()


async def test_connect_saves_the_gateway_and_the_panel_connects(
        context: BrowserContext, printed: tuple[str, str, str]) -> None:
    link, url, key = printed
    tab = await open_link(context, link)  # the same link: Cancel spent no code
    await tab.locator("#connect").click()
    host = link.split("/")[2]
    await expect(tab.locator("#status")).to_have_text(
        f"Connected: the openab side panel now uses the gateway at {host}. You can close this tab.")
    gateways = await saved(context)
    assert [(g["name"], g["url"], g["key"]) for g in gateways] == [(host, url, key)], \
        "the fresh install's blank gateway gave way to the paired one"
    panel = await open_panel(context)
    await expect(panel.locator("#pill-link")).to_have_text("connected", timeout=30_000)

    again = await open_link(context, link)  # a code is good once
    await again.locator("#connect").click()
    await expect(again.locator("#status")).to_contain_text("wrong or was used already")
    assert len(await saved(context)) == 1


def test_the_pair_page_is_not_reachable_from_the_web() -> None:
    # No web_accessible_resources: a web page cannot navigate a tab to the confirmation with its own answers.
    import json

    from .harness import EXTENSION_SRC

    manifest = json.loads((EXTENSION_SRC / "manifest.json").read_text())
    assert "web_accessible_resources" not in manifest
