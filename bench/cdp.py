"""A bare DevTools client for the browser benchmarks: ``Runtime.evaluate`` in one target (a tab, the extension's
service worker), over a socket opened for that one call and closed after it.

Why not Playwright for these: a Playwright client stays attached to every page and service worker with the
``Network`` domain on, so Chromium reports each WebSocket frame the extension sends or receives to it, payload and
all, in base64. On a 100 MiB file that costs the browser process more CPU than the transfer itself (bench_files
measured a file path two to four times slower with it attached). A person's browser has no DevTools client: the
timed paths run with none but this one, which enables no domain.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import httpx
import websockets

__all__ = ["CdpError", "evaluate", "targets", "wait_target"]

JsonObject = dict[str, Any]


class CdpError(RuntimeError):
    """The target threw, or DevTools refused the call."""


async def targets(port: int) -> list[JsonObject]:
    """Chromium's DevTools targets (``/json/list``): tabs, service workers, extension pages."""
    async with httpx.AsyncClient(timeout=10) as http:
        listed = (await http.get(f"http://127.0.0.1:{port}/json/list")).json()
    assert isinstance(listed, list)
    return listed


async def wait_target(port: int, match: Callable[[JsonObject], bool], timeout: float, what: str) -> JsonObject:
    """The one target ``match`` picks, once Chromium lists it."""
    async with asyncio.timeout(timeout):
        while True:
            found = [t for t in await targets(port) if match(t)]
            if len(found) == 1:
                return found[0]
            if len(found) > 1:
                raise CdpError(f"{len(found)} targets are {what}: {[t.get('url') for t in found]}")
            await asyncio.sleep(0.1)


async def evaluate(port: int, match: Callable[[JsonObject], bool], expression: str, *, timeout: float,
                   what: str) -> Any:
    """``expression``'s value (awaited when it is a promise) in the target ``match`` picks, within ``timeout``."""
    target = await wait_target(port, match, min(timeout, 30), what)
    async with (
        asyncio.timeout(timeout),
        websockets.connect(target["webSocketDebuggerUrl"], max_size=64 << 20, open_timeout=10) as ws,
    ):
        await ws.send(json.dumps({"id": 1, "method": "Runtime.evaluate", "params": {
            "expression": expression, "awaitPromise": True, "returnByValue": True}}))
        while True:
            message = json.loads(await ws.recv())
            if message.get("id") == 1:
                break
    if "error" in message:
        raise CdpError(f"DevTools refused to evaluate in {what}: {message['error']}")
    result = message["result"]
    if "exceptionDetails" in result:
        details = result["exceptionDetails"]
        thrown = details.get("exception", {}).get("description") or details.get("text")
        raise CdpError(f"the script threw in {what}: {str(thrown)[:500]}")
    return result["result"].get("value")
