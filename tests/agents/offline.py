"""Run a command with no network but loopback, yet able to reach chosen ports on the host's 127.0.0.1.

``unshare -n`` gives the agent CLI a network namespace of its own: only a loopback device, so
telemetry, update checks and plugin installs fail at once instead of leaving the machine. The
fake model and the MCP server under test run in the test process, in the host namespace; a
Unix socket (a file path, which crosses namespaces) carries each of their ports in:

    agent -> 127.0.0.1:P (in the namespace) -> this script -> P.sock -> HostRelay -> 127.0.0.1:P

Inside the namespace: ``python offline.py SOCKDIR PORT [PORT...] -- COMMAND [ARGS...]``.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import functools
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path

_SIOCGIFFLAGS, _SIOCSIFFLAGS, _IFF_UP = 0x8913, 0x8914, 0x1


def can_unshare() -> bool:
    """Whether this machine lets us make a network namespace (root, or user namespaces on)."""
    if not shutil.which("unshare"):
        return False
    return subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode == 0


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        with contextlib.suppress(Exception):
            writer.close()


def _splice(
    connect: Callable[[], Awaitable[tuple[asyncio.StreamReader, asyncio.StreamWriter]]],
) -> Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await connect()
        except OSError:
            writer.close()
            return
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))

    return handle


class HostRelay:
    """In the test process: serve ``SOCKDIR/P.sock`` for each port P, forwarding to 127.0.0.1:P."""

    def __init__(self, ports: list[int]) -> None:
        self.ports = ports
        # Short path: a Unix socket path must fit in 108 bytes, pytest's tmp_path may not.
        self.dir = Path(tempfile.mkdtemp(prefix="openab-net-"))
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="host-relay", daemon=True)
        self._servers: list[asyncio.Server] = []

    def __enter__(self) -> HostRelay:
        self._thread.start()
        for port in self.ports:
            handle = _splice(functools.partial(asyncio.open_connection, "127.0.0.1", port))
            path = str(self.dir / f"{port}.sock")
            start = asyncio.start_unix_server(handle, path)
            self._servers.append(asyncio.run_coroutine_threadsafe(start, self._loop).result(10))
        return self

    def __exit__(self, *exc: object) -> None:
        async def close() -> None:
            for server in self._servers:
                server.close()
                await server.wait_closed()

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(close(), self._loop).result(5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        self._loop.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def wrap(self, argv: list[str]) -> list[str]:
        """``argv`` run in a fresh network namespace that reaches only our ports."""
        ports = [str(p) for p in self.ports]
        return ["unshare", "-n", sys.executable, str(Path(__file__).resolve()), str(self.dir), *ports, "--", *argv]


def _loopback_up() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        flags = struct.unpack("16sh", fcntl.ioctl(s, _SIOCGIFFLAGS, struct.pack("16sh", b"lo", 0)))[1]
        fcntl.ioctl(s, _SIOCSIFFLAGS, struct.pack("16sh", b"lo", flags | _IFF_UP))


async def _inside(sockdir: str, ports: list[int], argv: list[str]) -> int:
    _loopback_up()
    for port in ports:
        path = os.path.join(sockdir, f"{port}.sock")
        handle = _splice(functools.partial(asyncio.open_unix_connection, path))
        await asyncio.start_server(handle, "127.0.0.1", port)
    # The command inherits our stdin/stdout/stderr: ACP over stdio passes straight through.
    process = await asyncio.create_subprocess_exec(*argv)
    return await process.wait()


def main() -> None:
    args = sys.argv[1:]
    split = args.index("--")
    sockdir, ports, argv = args[0], [int(p) for p in args[1:split]], args[split + 1 :]
    sys.exit(asyncio.run(_inside(sockdir, ports, argv)))


if __name__ == "__main__":
    main()
