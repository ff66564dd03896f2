"""Chromium's own WebSocket beside openab's file path (bench/bench_files.py): a plain ``websockets`` server, and the
script that opens Chromium's socket to it in the extension's service worker and moves the file one way an exchange.
"""

from __future__ import annotations

import contextlib
import json
import random
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import websockets

from bench.cdp import JsonObject, evaluate
from bench.raw_socket import push_or_take

# An exchange of 100 MiB on a loaded machine takes seconds; this bounds a socket that stopped.
EXCHANGE_TIMEOUT = 300.0


@contextlib.asynccontextmanager
async def browser_raw_server(size: int, *, ws_deflate: bool) -> AsyncIterator[str]:
    """A plain ``websockets`` server (deflate as the pod is set) for Chromium's own WebSocket, in the extension's SW:
    ``push`` sends ``size`` bytes in CHUNK binary frames then ``end``; ``take`` reads as many then says ``ok``."""
    payload = random.Random(24).randbytes(size)

    async def handler(ws: Any) -> None:
        async for what in ws:
            await push_or_take(ws, what, payload)

    async with websockets.serve(handler, "127.0.0.1", 0, max_size=4 << 20,
                                compression="deflate" if ws_deflate else None) as server:
        yield f"ws://127.0.0.1:{next(iter(server.sockets)).getsockname()[1]}/"


# Chromium's WebSocket in the extension's service worker, where its socket to the pod is (an extension page in a
# background tab runs at the renderer's background priority): opened once, then each exchange moves the file one way
# in CHUNK frames (the upload's frames sent at once: the socket's own buffer is the window).
BROWSER_SOCKET = """async ([url, size, chunk]) => {
    const ws = new WebSocket(url);
    ws.binaryType = 'arraybuffer';
    await new Promise((ok, no) => { ws.onopen = ok; ws.onerror = no; });
    const inbox = [];
    let wake = null;
    ws.onmessage = (ev) => { inbox.push(ev.data); if (wake) { wake(); wake = null; } };
    const next = async () => { while (!inbox.length) await new Promise((r) => { wake = r; }); return inbox.shift(); };
    const data = new Uint8Array(size);
    for (let i = 0; i < size; i += 65536) crypto.getRandomValues(data.subarray(i, i + 65536));
    globalThis.__rawSocket = {
      async push() { ws.send('push'); for (;;) { if (typeof (await next()) === 'string') return; } },
      async take() {
        ws.send('take');
        for (let i = 0; i < size; i += chunk) ws.send(data.subarray(i, i + chunk));
        await next();
      },
    };
}"""


def service_worker(extension_id: str) -> Callable[[JsonObject], bool]:
    """Picks the extension's service worker among Chromium's DevTools targets."""
    return lambda t: t.get("type") == "service_worker" and str(t.get("url")).startswith(
        f"chrome-extension://{extension_id}/")


async def open_browser_socket(port: int, extension_id: str, url: str, size: int, chunk: int) -> None:
    """:data:`BROWSER_SOCKET` run in the extension's service worker (DevTools on ``port``), opened to ``url``."""
    await evaluate(port, service_worker(extension_id), f"({BROWSER_SOCKET})({json.dumps([url, size, chunk])})",
                   timeout=60, what="the extension's service worker")


async def browser_socket(port: int, extension_id: str, way: str) -> float:
    """Seconds one exchange (``push`` or ``take``) takes on the socket :func:`open_browser_socket` opened."""
    start = time.perf_counter()
    await evaluate(port, service_worker(extension_id), f"globalThis.__rawSocket.{way}()", timeout=EXCHANGE_TIMEOUT,
                   what="the extension's service worker")
    return time.perf_counter() - start
