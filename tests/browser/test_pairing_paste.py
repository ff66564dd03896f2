"""Pairing as a person does it: the text a real `openab run` printed to its terminal, copied and pasted whole
into the side panel's Gateway URL box (a real clipboard, Ctrl+V in real Chromium with the real extension),
fills both the URL and the key, and Save connects. What is not a usable URL or key is never filled in.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import BrowserContext, Page, expect
from terminal_run import terminal_run

from .harness import open_panel, playwright_browser, stage_extension

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def terminal_pod() -> Iterator[tuple[str, str]]:
    """`openab run` on a fresh state dir with its stderr a terminal (a pty); yields what that terminal showed and
    the key the pod made."""
    root = Path(tempfile.mkdtemp(prefix="oab-paste-"))
    try:
        with terminal_run(root / "state") as shown:
            key = re.search(r"Key: {9}(\S+)\n", shown)  # shown once, kept nowhere: the pod keeps its verifier
            assert key is not None, shown
            yield shown, key.group(1)
    finally:
        subprocess.run(["rm", "-rf", str(root)], check=False, timeout=30)


@pytest.fixture(scope="module")
async def context(site: str, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[BrowserContext]:
    tmp = tmp_path_factory.mktemp("paste")
    ext = stage_extension(tmp / "ext", {"autopilot": True})  # no gateway configured yet
    async with playwright_browser(ext, tmp / "profile", f"{site}/index.html") as ctx:
        # Copied from an ordinary page (Chrome grants no clipboard permission to an extension's origin here).
        await ctx.grant_permissions(["clipboard-read", "clipboard-write"], origin=site)
        yield ctx


@pytest.fixture(scope="module")
async def panel(context: BrowserContext) -> Page:
    page = await open_panel(context)
    await page.bring_to_front()
    return page


async def paste_into(panel: Page, box: str, text: str) -> None:
    """Copy ``text`` to the browser's clipboard and paste it into ``box`` with the keyboard, as a person does."""
    copier = panel.context.pages[0]
    await copier.bring_to_front()
    await copier.evaluate("(t) => navigator.clipboard.writeText(t)", text)
    await panel.bring_to_front()
    if await panel.locator(box).is_hidden():
        await panel.locator("#toggle-settings").click()
    await panel.locator(box).fill("")
    await panel.locator(box).focus()
    await panel.keyboard.press("Control+V")


async def test_the_whole_pairing_text_pasted_fills_url_and_key_and_connects(
        panel: Page, terminal_pod: tuple[str, str]) -> None:
    shown, key = terminal_pod
    url = re.search(r"Gateway URL: (ws://127\.0\.0\.1:\d+/acp)\n", shown)
    assert url is not None and f"Key:         {key}\n" in shown, shown
    start = shown.index("  Pair the openab")  # the whole block, as a person selects it in the terminal
    block = shown[start:shown.index("\n", shown.index("Treat the key like a password"))]

    await paste_into(panel, "#set-url", block)
    await expect(panel.locator("#set-url")).to_have_value(url.group(1))
    await expect(panel.locator("#set-key")).to_have_value(key)
    await panel.locator("#save-settings").click()
    await expect(panel.locator("#pill-link")).to_have_text("connected", timeout=30_000)


@pytest.mark.parametrize(("text", "expected"), [
    # The one log line a pod writes when stderr is no terminal: the URL, and no key to take.
    ("INFO openab_browser.run: pair the side panel: Gateway URL: wss://pod.example/acp; Key: not printed (stderr is "
     "not a terminal, it may be a log) and not kept (only its verifier is, in /s/keys/acp.verifier): `openab key "
     "rotate --state-dir /s` makes a new one and prints it once",
     {"url": "wss://pod.example/acp", "key": ""}),
    ('{"message": "pair the side panel: Gateway URL: wss://pod.example/acp; Key: the one in OPENAB_ACP_AUTH_KEY"}',
     {"url": "wss://pod.example/acp", "key": ""}),
    ("Gateway URL: the ingress's wss:// address\n  (ending /acp; give --public-url)\nKey:         abc_DEF-123",
     None),  # no URL to take: an ordinary paste
    ("Gateway URL: ws://evil.example/acp\nKey:         k", None),  # the panel's own rule: no ws:// off loopback
    ("Gateway URL: javascript:alert(1)\nKey: k", None),
    ("Gateway URL: wss://pod.example/acp\nKey:         a/b=c", {"url": "wss://pod.example/acp", "key": ""}),
    ("wss://pod.example/acp", None),  # a bare URL is pasted as it is
])
async def test_only_a_usable_url_and_key_are_taken_from_pasted_text(
        panel: Page, text: str, expected: dict[str, Any] | None) -> None:
    got = await panel.evaluate(
        "async (t) => (await import('/lib/settings.js')).parsePairing(t)", text)
    assert got == expected


async def test_a_paste_that_is_no_pairing_text_is_an_ordinary_paste(panel: Page) -> None:
    await paste_into(panel, "#set-url", "wss://other.example/acp")
    await expect(panel.locator("#set-url")).to_have_value("wss://other.example/acp")
    await expect(panel.locator("#set-key")).to_have_value("")
