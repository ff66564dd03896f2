"""Coverage-guided fuzzing of the ACP server's handling of `/acp` frames (``core/acp``, ``core/tunnel`` and the
``core/jsonrpc`` connection under them), in memory: the frames go where the WebSocket endpoint puts them,
``AcpServerConnection.rpc.feed``, with a scripted agent behind.

Per input (one text frame; bytes that are not UTF-8 never reach the server, the socket closes on them): nothing
raises, every message the server writes is well-formed JSON-RPC, nothing is logged as a failure. The
connection is replaced every :data:`INPUTS_PER_CONNECTION` inputs, as sessions pile up on it to their bound.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import atheris

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fuzz.atheris_support import LogTrap, check_answer, run

# Everything of openab is imported in here, the scripted agent's imports too: a module imported before is
# not instrumented, and its branches would be invisible to the fuzzer.
with atheris.instrument_imports(include=["openab_browser.core.acp", "openab_browser.core.tunnel",
                                         "openab_browser.core.jsonrpc"]):
    from scripted_agent import ScriptedAgent

    from openab_browser.core.acp.server import AcpServerConnection
    from openab_browser.core.settings import Settings
    from openab_browser.gateway.assemble import assemble

INPUTS_PER_CONNECTION = 500
STEPS = 8  # loop turns per input: enough for an inline answer, a task's answer, a tunnel's first request

loop = asyncio.new_event_loop()
trap = LogTrap()
pod = assemble(Settings(prompt_idle_timeout=0.2, cancel_grace=0.1, tunnel_connect_timeout=0.2),
               backend=ScriptedAgent(), browser=False)


class Connection:
    def __init__(self) -> None:
        self.server: AcpServerConnection = pod.accept()
        self.written: list[bytes] = []
        self.writer = loop.create_task(self.server.rpc.run(self.write))
        self.inputs = 0

    async def write(self, message: bytes) -> None:
        self.written.append(message)

    def close(self) -> None:
        self.server.connection_lost("the fuzz moves on")
        self.writer.cancel()
        loop.run_until_complete(turns(STEPS))


async def turns(count: int) -> None:
    for _ in range(count):
        await asyncio.sleep(0)


async def feed(text: str) -> None:
    """As the endpoint's reader does it: inside the loop, then the loop runs on."""
    current.server.rpc.feed(text)
    await turns(STEPS)


current = Connection()


def test_one_input(data: bytes) -> None:
    global current
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return
    loop.run_until_complete(feed(text))
    assert not current.server.rpc.closed, current.server.rpc.closed_reason
    for raw in current.written:
        check_answer(raw)
    current.written.clear()
    trap.check()
    current.inputs += 1
    if current.inputs >= INPUTS_PER_CONNECTION:
        current.close()
        trap.check()
        current = Connection()


if __name__ == "__main__":
    run(test_one_input)
