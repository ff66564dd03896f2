"""A bridge connection that passes the ancestry check, for a test: a child registered as the session's agent
dials the socket and hands each connection back over ``SCM_RIGHTS``. The kernel recorded the child as the peer,
so the bridge admits it, and the test writes on it directly, with no relay in between."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
from pathlib import Path

from openab_browser.core.mcp.access import BROWSER_CHANNEL_ENV

# Dials the socket once per line on its stdin, passing each connection back on the descriptor in argv[1].
DIALLER = r"""
import os, socket, sys
back = socket.socket(fileno=int(sys.argv[1]))
while sys.stdin.buffer.readline():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(os.environ["OPENAB_BROWSER_SOCKET"])
    socket.send_fds(back, [b"c"], [s.fileno()])
    s.close()
"""


class Dialler:
    """The child (start it, then register ``pid`` as the agent, then :meth:`dial`). ``timeout`` bounds a dial."""

    def __init__(self, socket_path: Path, channel: str, *, timeout: float = 10.0) -> None:
        self.inbound, outbound = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.inbound.settimeout(timeout)  # a blocking receive in a thread, which cannot be cancelled
        env = {"PATH": os.environ["PATH"], BROWSER_CHANNEL_ENV: channel, "OPENAB_BROWSER_SOCKET": str(socket_path)}
        self.process = subprocess.Popen(
            [sys.executable, "-I", "-c", DIALLER, str(outbound.fileno())], env=env, stdin=subprocess.PIPE,
            pass_fds=(outbound.fileno(),),
        )
        outbound.close()  # the child holds its copy

    @property
    def pid(self) -> int:
        return self.process.pid

    async def dial(self, *, limit: int = 16 << 20) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        assert self.process.stdin is not None
        self.process.stdin.write(b"dial\n")
        self.process.stdin.flush()
        _, fds, _, _ = await asyncio.get_running_loop().run_in_executor(None, socket.recv_fds, self.inbound, 1, 1)
        assert fds, "the dialler passed no connection back"
        return await asyncio.open_unix_connection(sock=socket.socket(fileno=fds[0]), limit=limit)

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        self.process.kill()
        self.process.wait(timeout=10)
        self.inbound.close()
