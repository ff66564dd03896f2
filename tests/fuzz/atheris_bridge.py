"""Coverage-guided fuzzing of the bridge's framing and message dispatch (``bridge/framing.py``,
``bridge/server.py``'s read loop, the MCP server behind it), on the real socket: a :class:`BridgeServer` on a
Unix socket in a temporary folder, dialled through a child registered as the session's agent, so each input
crosses the real ancestry check once and the real read loop every time.

Per input: its bytes, a newline, then a sentinel ``ping``; the sentinel must be answered within
:data:`DEADLINE` (else a hang), every line back must be well-formed JSON-RPC, and nothing may be logged as a
failure. The connection may end only after a frame that names a channel (by contract); it is dialled again.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import tempfile
from pathlib import Path

import atheris

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fuzz.atheris_support import LogTrap, check_answer, run
from fuzz.oracles import next_line

with atheris.instrument_imports(include=["openab_browser.bridge", "openab_browser.core.mcp",
                                         "openab_browser.core.jsonrpc"]):
    from fuzz.dialler import Dialler
    from openab_browser.bridge.framing import CHANNEL_CLAIM
    from openab_browser.bridge.server import BridgeServer
    from openab_browser.core.sessions import SessionStore
    from openab_browser.core.tunnel.registry import TunnelRegistry

DEADLINE = 5.0
SENTINEL = b'{"jsonrpc":"2.0","id":"openab-fuzz-sentinel","method":"ping"}\n'

loop = asyncio.new_event_loop()
trap = LogTrap()
# libFuzzer ends the process with exit(), past any cleanup of ours: the socket goes in the folder the caller
# names (the test's tmp_path) and the dialler ends when its stdin does.
root = Path(os.environ.get("OPENAB_FUZZ_DIR") or tempfile.mkdtemp(prefix="oab-atheris-"))
bridge = BridgeServer(TunnelRegistry(), root / "browser" / "browser.sock", max_frame_bytes=1 << 16)
loop.run_until_complete(bridge.start())
session, _ = SessionStore().open(None, owner="fuzz", owner_generation=1)
dialler = Dialler(bridge.path, session.channel, timeout=DEADLINE)
bridge.agent_started(session, dialler.pid)


async def connect() -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    reader, writer = await dialler.dial()
    check_answer(await reader.readline())  # the greeting
    return reader, writer


connection = loop.run_until_complete(connect())


async def exchange(data: bytes) -> bool:
    """Send the input and the sentinel; whether the connection is still there after."""
    reader, writer = connection
    writer.write(data + b"\n" + SENTINEL)
    async with asyncio.timeout(DEADLINE):
        with contextlib.suppress(ConnectionError):  # it hung up: the read below says so
            await writer.drain()
        while True:
            line = await next_line(reader)
            if not line:
                writer.close()
                return False
            check_answer(line)
            if line.startswith(b'{"jsonrpc":"2.0","id":"openab-fuzz-sentinel"'):
                return True


def test_one_input(data: bytes) -> None:
    global connection
    try:
        alive = loop.run_until_complete(exchange(data))
    except TimeoutError:
        raise AssertionError(f"no answer to the sentinel within {DEADLINE} s after {data[:200]!r}") from None
    if not alive:
        # Only a frame that names a channel may end the connection.
        assert CHANNEL_CLAIM.encode() in data or b"\\u" in data, f"the bridge hung up after {data[:200]!r}"
        connection = loop.run_until_complete(connect())
    trap.check()


if __name__ == "__main__":
    run(test_one_input)
