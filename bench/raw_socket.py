"""bench_files.py's baseline: the same bytes over one plain ``websockets`` socket, with no pod, extension or page
in the way, pushed in binary frames each way and in the lock-step base64 JSON the file methods speak (the
protocol's floor). The server runs as a process of its own, as the pod does; the client is the browser's end.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import random
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import websockets

from bench.common import stop_child
from openab_browser.core.files.transfers import CHUNK

__all__ = ["RawClient", "raw_process", "raw_server"]

THIS = Path(__file__).resolve()


async def push_or_take(ws: Any, what: str, payload: bytes) -> bool:
    """The ``push`` and ``take`` exchanges of :func:`raw_server` (and of Chromium's socket's server,
    bench/browser_socket.py) on ``ws``; ``False`` for any other."""
    if what == "push":
        for at in range(0, len(payload), CHUNK):
            await ws.send(payload[at:at + CHUNK])
        await ws.send("end")
        return True
    if what == "take":
        got = 0
        while got < len(payload):
            got += len(await ws.recv())
        await ws.send("ok")
        return True
    return False


async def raw_server(size: int) -> None:
    """The baseline's server (``python bench/raw_socket.py SIZE``, a process of its own): says its port, serves
    until stdin ends.

    Each exchange begins with a text frame naming it: ``push`` (SIZE bytes in CHUNK binary frames, then ``end``),
    ``take`` (binary frames until SIZE bytes came, then ``ok``), ``read`` (a JSON request per chunk answered with
    its base64), ``write`` (a JSON chunk per request, its base64 decoded, answered with the count)."""
    payload = random.Random(24).randbytes(size)

    async def handler(ws: Any) -> None:
        async for what in ws:
            if await push_or_take(ws, what, payload):
                continue
            if what == "read":
                while True:
                    offset = json.loads(await ws.recv())["params"]["offset"]
                    data = payload[offset:offset + CHUNK]
                    eof = offset + len(data) >= size
                    await ws.send(json.dumps({"jsonrpc": "2.0", "id": 1, "result": {
                        "data": base64.b64encode(data).decode("ascii"), "eof": eof}}))
                    if eof:
                        break
            elif what == "write":
                written = 0
                while written < size:
                    message = json.loads(await ws.recv())
                    written += len(base64.b64decode(message["params"]["data"], validate=True))
                    await ws.send(json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"written": written}}))

    async with websockets.serve(handler, "127.0.0.1", 0, max_size=4 << 20) as server:
        print(next(iter(server.sockets)).getsockname()[1], flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)


@contextlib.asynccontextmanager
async def raw_process(size: int) -> AsyncIterator[str]:
    child = await asyncio.create_subprocess_exec(
        sys.executable, str(THIS), str(size),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
    try:
        assert child.stdout is not None
        port = int(await asyncio.wait_for(child.stdout.readline(), 30))
        yield f"ws://127.0.0.1:{port}/"
    finally:
        await stop_child(child)


class RawClient:
    """The browser's end of the baseline, in this process: one plain socket, ``deflate`` as Chrome offers it."""

    def __init__(self, ws: Any, size: int) -> None:
        self.ws = ws
        self.size = size
        self.payload = random.Random(42).randbytes(size)

    async def push_down(self) -> float:
        start = time.perf_counter()
        await self.ws.send("push")
        got = 0
        while (frame := await self.ws.recv()) != "end":
            got += len(frame)
        seconds = time.perf_counter() - start
        assert got == self.size
        return seconds

    async def push_up(self) -> float:
        start = time.perf_counter()
        await self.ws.send("take")
        for at in range(0, self.size, CHUNK):
            await self.ws.send(self.payload[at:at + CHUNK])
        assert await self.ws.recv() == "ok"
        return time.perf_counter() - start

    async def lock_read(self) -> float:
        start = time.perf_counter()
        await self.ws.send("read")
        offset = 0
        while True:
            await self.ws.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "_openab/file/read",
                                           "params": {"sessionId": "s", "transfer": "t", "offset": offset}}))
            result = json.loads(await self.ws.recv())["result"]
            offset += len(base64.b64decode(result["data"]))
            if result["eof"]:
                break
        seconds = time.perf_counter() - start
        assert offset == self.size
        return seconds

    async def lock_write(self) -> float:
        start = time.perf_counter()
        await self.ws.send("write")
        for at in range(0, self.size, CHUNK):
            data = base64.b64encode(self.payload[at:at + CHUNK]).decode("ascii")
            await self.ws.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "_openab/file/write", "params": {
                "sessionId": "s", "transfer": "t", "offset": at, "data": data}}))
            json.loads(await self.ws.recv())
        return time.perf_counter() - start


if __name__ == "__main__":
    asyncio.run(raw_server(int(sys.argv[1])))
