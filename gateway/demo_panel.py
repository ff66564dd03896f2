"""The side panel as the person would see it, for `openab demo`: a screenshot of the extension's panel page, taken
in the demo's headless Chromium over the DevTools protocol on the pipes only the demo holds (.demo_browser).

Headless Chromium has no toolbar to open a side panel from, so the panel's page opens as a tab at a side panel's
default width: the same page, the same conversation and cards from the service worker. Every step is bounded; a
panel that cannot be shown is said in one line, never a failed demo.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import os
from pathlib import Path
from typing import Any

from .demo_browser import DemoChromium

__all__ = ["PANEL_WIDTH", "PanelError", "panel_screenshot"]

PANEL_WIDTH, PANEL_HEIGHT = 360, 720  # Chrome's default side panel width
# A DevTools message on the pipe ends with a NUL byte; a screenshot of the panel is well under this.
MAX_MESSAGE = 64 << 20
# Resolves once the panel has shown what the worker sent it over its port (it opens as the page loads): the state
# has come when the connection pill leaves its first word, "offline" (the gateway is up during the demo).
_SHOWN = """new Promise((resolve) => {
  const shown = () => document.readyState === 'complete'
    && (document.querySelector('#pill-link')?.textContent || 'offline') !== 'offline';
  const check = () => { if (shown()) { observer.disconnect(); resolve(true); } };
  const observer = new MutationObserver(check);
  observer.observe(document, { subtree: true, childList: true, characterData: true });
  window.addEventListener('load', check);
  check();
})"""


class PanelError(Exception):
    pass


class _Cdp:
    """The browser's DevTools session over its pipe: one request and its answer at a time, events skipped. A
    page's commands carry the ``sessionId`` of the target attached with ``flatten``."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.WriteTransport) -> None:
        self._reader = reader
        self._writer = writer
        self._ids = itertools.count(1)

    async def call(self, method: str, session: str | None = None, **params: Any) -> dict[str, Any]:
        request_id = next(self._ids)
        message: dict[str, Any] = {"id": request_id, "method": method, "params": params}
        if session is not None:
            message["sessionId"] = session
        self._writer.write(json.dumps(message).encode() + b"\0")
        while True:
            try:
                raw = await self._reader.readuntil(b"\0")
            except asyncio.IncompleteReadError as exc:
                raise PanelError("the browser closed its DevTools pipe") from exc
            except asyncio.LimitOverrunError as exc:
                raise PanelError("the browser sent a DevTools message too large to read") from exc
            answer = json.loads(raw[:-1])
            if answer.get("id") == request_id:
                if "error" in answer:
                    raise PanelError(f"{method}: {answer['error'].get('message')}")
                return dict(answer.get("result") or {})

    async def evaluate(self, session: str, expression: str) -> Any:
        result = await self.call("Runtime.evaluate", session, expression=expression, returnByValue=True,
                                 awaitPromise=True)
        return result.get("result", {}).get("value")


async def _extension_id(cdp: _Cdp) -> str:
    targets = (await cdp.call("Target.getTargets")).get("targetInfos", [])
    for target in targets:
        url = str(target.get("url", ""))
        if target.get("type") == "service_worker" and url.startswith("chrome-extension://"):
            return url.split("/")[2]
    raise PanelError("the extension's service worker is not running")


async def _connected(browser: DemoChromium) -> tuple[asyncio.StreamReader, asyncio.WriteTransport]:
    # Duplicates: the transports close what they hold, and the browser's own descriptors stay .demo_browser's.
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=MAX_MESSAGE)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader),
                                 os.fdopen(os.dup(browser.devtools_receive), "rb", buffering=0))
    writer, _ = await loop.connect_write_pipe(asyncio.Protocol, os.fdopen(os.dup(browser.devtools_send), "wb",
                                                                          buffering=0))
    return reader, writer


async def panel_screenshot(browser: DemoChromium, output: Path, *, timeout: float = 20.0) -> Path:
    """Open the side panel's page in the demo's running Chromium, let it show the conversation, and save a PNG of
    it to ``output``; returns its resolved path. Raises :class:`PanelError` or ``TimeoutError``."""
    async with asyncio.timeout(timeout):
        reader, writer = await _connected(browser)
        try:
            cdp = _Cdp(reader, writer)
            url = f"chrome-extension://{await _extension_id(cdp)}/panel/sidepanel.html"
            target = (await cdp.call("Target.createTarget", url="about:blank"))["targetId"]
            try:
                session = (await cdp.call("Target.attachToTarget", targetId=target, flatten=True))["sessionId"]
                await cdp.call("Emulation.setDeviceMetricsOverride", session, width=PANEL_WIDTH,
                               height=PANEL_HEIGHT, deviceScaleFactor=1, mobile=False)
                # Navigated after the size is set, and evaluated once it committed: in the panel's document.
                await cdp.call("Page.navigate", session, url=url)
                await cdp.evaluate(session, _SHOWN)
                shot = await cdp.call("Page.captureScreenshot", session, format="png")
            finally:
                await cdp.call("Target.closeTarget", targetId=target)
        finally:
            writer.close()
            reader.feed_eof()
    data = base64.b64decode(shot["data"])
    await asyncio.to_thread(output.write_bytes, data)
    return await asyncio.to_thread(output.resolve)
