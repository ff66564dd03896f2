"""The person's side of a Chromium started with a DevTools port, spoken in the raw protocol: which tab is in
front, and what a page of theirs says.

Playwright attaching to a browser turns on focus emulation in every page it knows, which makes a tab behind
another read as visible and take input at once; the background-tab tests and bench/bench_browser_tools.py need
Chrome as a person has it, so they use this instead. Only the person's own tab is ever attached to here, never the
agent's: a second client on the agent tab would change what is measured.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import websockets
from waits import eventually

ANSWER_S = 30.0


class DevTools:
    """One browser-level connection: tabs opened, brought to the front, looked into. Every answer is bounded."""

    def __init__(self, socket: Any) -> None:
        self._socket = socket
        self._ids = itertools.count(1)
        self._waiting: dict[int, asyncio.Future[dict[str, Any]]] = {}

    async def _read(self) -> None:
        async for raw in self._socket:
            message = json.loads(raw)
            waiter = self._waiting.pop(message.get("id", -1), None)
            if waiter is not None and not waiter.done():
                waiter.set_result(message)

    async def send(self, method: str, params: dict[str, Any] | None = None, session: str = "") -> dict[str, Any]:
        ident = next(self._ids)
        waiter: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[ident] = waiter
        await self._socket.send(json.dumps({"id": ident, "method": method, "params": params or {},
                                            **({"sessionId": session} if session else {})}))
        answer = await asyncio.wait_for(waiter, ANSWER_S)
        if "error" in answer:
            raise RuntimeError(f"{method}: {answer['error']}")
        result: dict[str, Any] = answer.get("result", {})
        return result

    async def open_tab(self, url: str) -> str:
        """A tab the person opens: in front of the others."""
        return str((await self.send("Target.createTarget", {"url": url}))["targetId"])

    async def front(self, target: str) -> None:
        """The person clicks the tab: it comes to the front."""
        await self.send("Target.activateTarget", {"targetId": target})

    async def tab_at(self, url_start: str) -> str:
        """The id of the page whose address starts with `url_start` (waits for it, bounded)."""
        found: list[str] = []

        async def look() -> bool:
            pages = (await self.send("Target.getTargets"))["targetInfos"]
            found[:] = [p["targetId"] for p in pages if p["type"] == "page" and p["url"].startswith(url_start)]
            return bool(found)

        await eventually(look, 15)
        return found[0]

    async def evaluate(self, target: str, expression: str) -> Any:
        """The value of `expression` in a page of the person's, through a session opened and closed for it."""
        session = (await self.send("Target.attachToTarget", {"targetId": target, "flatten": True}))["sessionId"]
        try:
            said = await self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True}, session)
            return said["result"].get("value")
        finally:
            await self.send("Target.detachFromTarget", {"sessionId": session})


async def devtools_port(profile: Path) -> str:
    """The browser's DevTools address, once Chromium has written it into its profile."""
    port_file = profile / "DevToolsActivePort"
    await eventually(lambda: port_file.exists() and len(port_file.read_text().split()) >= 2, 30)
    port, path = port_file.read_text().split()[:2]
    return f"ws://127.0.0.1:{port}{path}"


@contextlib.asynccontextmanager
async def devtools(profile: Path) -> AsyncIterator[DevTools]:
    """A connection to the Chromium whose profile is `profile` (started with --remote-debugging-port=0)."""
    async with websockets.connect(await devtools_port(profile), max_size=None) as socket:
        tools = DevTools(socket)
        reader = asyncio.create_task(tools._read())
        try:
            yield tools
        finally:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader
