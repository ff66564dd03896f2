"""The built-in agent as a process: ACP over its own stdin/stdout, configured from the environment.

``python -m openab_browser.core.agents.builtin`` runs :func:`main`. With ``OPENAB_MODEL_URL`` (any OpenAI-compatible
Chat Completions endpoint) it runs a real tool loop, capped at ``OPENAB_MAX_TOOL_CALLS`` tool calls per turn
(default 25); without it, the scripted planner.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
from typing import Final

from .agent import BuiltinAgent

__all__ = ["main", "serve_stdio"]

# One ACP message per line; a screenshot's base64 makes a long one.
MAX_LINE_BYTES: Final = 8 << 20


async def serve_stdio(agent: BuiltinAgent) -> None:
    """Speak ACP on our own stdin/stdout until stdin closes."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=MAX_LINE_BYTES)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, sys.stdout)
    writer = asyncio.StreamWriter(transport, protocol, None, loop)

    async def send(message: bytes) -> None:
        writer.write(message + b"\n")
        await writer.drain()

    pump = loop.create_task(agent.rpc.run(send))
    try:
        while line := await reader.readline():
            if line.strip():
                agent.rpc.feed(line)
    finally:
        agent.rpc.close("stdin closed")
        await agent.aclose()
        pump.cancel()


def main() -> None:
    """Run the built-in agent on stdio until its client closes stdin."""
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    agent = BuiltinAgent(
        model_url=os.environ.get("OPENAB_MODEL_URL") or None,
        model=os.environ.get("OPENAB_MODEL") or None,
        api_key=os.environ.get("OPENAB_MODEL_API_KEY") or None,
        max_tool_calls=int(os.environ.get("OPENAB_MAX_TOOL_CALLS") or 25),
    )
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve_stdio(agent))
