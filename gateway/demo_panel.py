"""The side panel as the person would see it, for `openab demo`: a screenshot of the extension's panel page, taken
in the demo's headless Chromium over the DevTools protocol (the browser runs with ``--remote-debugging-port=0``
and writes the port it chose to ``<profile>/DevToolsActivePort``).

Headless Chromium has no toolbar to open a side panel from, so the panel's page opens as a tab at a side panel's
default width: the same page, the same conversation and cards from the service worker. Every step is bounded; a
panel that cannot be shown is said in one line, never a failed demo.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
from pathlib import Path
from typing import Any

__all__ = ["DEVTOOLS_FLAG", "PANEL_WIDTH", "panel_screenshot"]

DEVTOOLS_FLAG = "--remote-debugging-port=0"
PANEL_WIDTH, PANEL_HEIGHT = 360, 720  # Chrome's default side panel width
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


async def _devtools_port(profile: Path, timeout: float) -> int:
    path = profile / "DevToolsActivePort"
    async with asyncio.timeout(timeout):
        while True:
            try:
                first = (await asyncio.to_thread(path.read_text)).splitlines()
                if first and first[0].isdigit():
                    return int(first[0])
            except OSError:
                pass
            await asyncio.sleep(0.1)  # a file another process writes: polled, bounded by the timeout above


async def _extension_id(http: Any, base: str) -> str:
    targets = (await http.get(f"{base}/json/list")).json()
    for target in targets:
        url = str(target.get("url", ""))
        if target.get("type") == "service_worker" and url.startswith("chrome-extension://"):
            return url.split("/")[2]
    raise PanelError("the extension's service worker is not running")


class _Cdp:
    """One DevTools page session: a request and its answer at a time, events skipped."""

    def __init__(self, socket: Any) -> None:
        self._socket = socket
        self._ids = itertools.count(1)

    async def call(self, method: str, **params: Any) -> dict[str, Any]:
        request_id = next(self._ids)
        await self._socket.send(json.dumps({"id": request_id, "method": method, "params": params}))
        while True:
            message = json.loads(await self._socket.recv())
            if message.get("id") == request_id:
                if "error" in message:
                    raise PanelError(f"{method}: {message['error'].get('message')}")
                return dict(message.get("result") or {})

    async def evaluate(self, expression: str) -> Any:
        result = await self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        return result.get("result", {}).get("value")


async def panel_screenshot(profile: Path, output: Path, *, timeout: float = 20.0) -> Path:
    """Open the side panel's page in the running Chromium of ``profile``, let it show the conversation, and save
    a PNG of it to ``output``; returns its resolved path. Raises :class:`PanelError` or ``TimeoutError``."""
    import httpx
    import websockets

    async with asyncio.timeout(timeout):
        port = await _devtools_port(profile, timeout)
        base = f"http://127.0.0.1:{port}"
        async with httpx.AsyncClient(timeout=timeout) as http:
            extension = await _extension_id(http, base)
            url = f"chrome-extension://{extension}/panel/sidepanel.html"
            target = (await http.put(f"{base}/json/new?about:blank")).json()
            try:
                async with websockets.connect(target["webSocketDebuggerUrl"], max_size=64 << 20) as socket:
                    cdp = _Cdp(socket)
                    await cdp.call("Emulation.setDeviceMetricsOverride", width=PANEL_WIDTH, height=PANEL_HEIGHT,
                                   deviceScaleFactor=1, mobile=False)
                    # Navigated after the size is set, and evaluated once it committed: in the panel's document.
                    await cdp.call("Page.navigate", url=url)
                    await cdp.evaluate(_SHOWN)
                    shot = await cdp.call("Page.captureScreenshot", format="png")
            finally:
                await http.get(f"{base}/json/close/{target['id']}")
    data = base64.b64decode(shot["data"])
    await asyncio.to_thread(output.write_bytes, data)
    return await asyncio.to_thread(output.resolve)
