"""Run a command with no network but loopback, yet able to reach chosen ports on the host's 127.0.0.1.

``unshare -n`` gives the agent CLI a network namespace of its own: only a loopback device, so
telemetry, update checks and plugin installs fail at once instead of leaving the machine. The
fake model and the MCP server under test run in the test process, in the host namespace; a
Unix socket (a file path, which crosses namespaces) carries each of their ports in:

    agent -> 127.0.0.1:P (in the namespace) -> this script -> P.sock -> HostRelay -> 127.0.0.1:P

Inside the namespace: ``python offline.py SOCKDIR -- COMMAND [ARGS...]``.
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
import time
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
    """In the test process: serve ``SOCKDIR/P.sock`` for each port P, forwarding to 127.0.0.1:P.

    Ports can be added while wrapped commands run (``add``): a per-session server whose port is
    only known after the agent started. Each namespace picks new sockets up and acknowledges them.
    """

    def __init__(self, ports: list[int]) -> None:
        self.ports: list[int] = []
        # Short path: a Unix socket path must fit in 108 bytes, pytest's tmp_path may not.
        self.dir = Path(tempfile.mkdtemp(prefix="openab-net-"))
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="host-relay", daemon=True)
        self._servers: list[asyncio.Server] = []
        self._initial = ports

    def __enter__(self) -> HostRelay:
        self._thread.start()
        for port in self._initial:
            self.add(port)
        return self

    def add(self, port: int, timeout: float = 10) -> None:
        """Carry 127.0.0.1:``port`` into every namespace, and wait until the running ones listen on it."""
        if port in self.ports:
            return
        handle = _splice(functools.partial(asyncio.open_connection, "127.0.0.1", port))
        start = asyncio.start_unix_server(handle, str(self.dir / f"{port}.sock"))
        self._servers.append(asyncio.run_coroutine_threadsafe(start, self._loop).result(timeout))
        self.ports.append(port)
        deadline = time.monotonic() + timeout
        while any(not (self.dir / f"{port}.{inside.stem}.ready").exists() for inside in self.dir.glob("*.inside")):
            if time.monotonic() > deadline:
                raise TimeoutError(f"no namespace picked up port {port} in {timeout} s")
            time.sleep(0.01)

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
        return ["unshare", "-n", sys.executable, str(Path(__file__).resolve()), str(self.dir), "--", *argv]


def _loopback_up() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        flags = struct.unpack("16sh", fcntl.ioctl(s, _SIOCGIFFLAGS, struct.pack("16sh", b"lo", 0)))[1]
        fcntl.ioctl(s, _SIOCSIFFLAGS, struct.pack("16sh", b"lo", flags | _IFF_UP))


def _touch(path: str) -> None:
    os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))


async def _listen_for_new_ports(sockdir: str, ready: asyncio.Event) -> None:
    """Listen on 127.0.0.1:P for every ``P.sock`` the host relay adds, and say so with ``P.<pid>.ready``."""
    me = str(os.getpid())
    known: set[str] = set()
    while True:
        for name in sorted(os.listdir(sockdir)):
            port = name.removesuffix(".sock")
            if not name.endswith(".sock") or port in known:
                continue
            handle = _splice(functools.partial(asyncio.open_unix_connection, os.path.join(sockdir, name)))
            await asyncio.start_server(handle, "127.0.0.1", int(port))
            known.add(port)
            _touch(os.path.join(sockdir, f"{port}.{me}.ready"))
        # From now on, the host waits for our acknowledgement of each port it adds.
        _touch(os.path.join(sockdir, f"{me}.inside"))
        ready.set()
        await asyncio.sleep(0.01)


async def _inside(sockdir: str, argv: list[str]) -> int:
    _loopback_up()
    ready = asyncio.Event()
    watcher = asyncio.create_task(_listen_for_new_ports(sockdir, ready))
    await ready.wait()  # the ports known so far are listening
    try:
        # The command inherits our stdin/stdout/stderr: ACP over stdio passes straight through.
        process = await asyncio.create_subprocess_exec(*argv)
        return await process.wait()
    finally:
        watcher.cancel()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(os.path.join(sockdir, f"{os.getpid()}.inside"))


def main() -> None:
    sockdir, dashes, *argv = sys.argv[1:]
    assert dashes == "--", "usage: offline.py SOCKDIR -- COMMAND [ARGS...]"
    sys.exit(asyncio.run(_inside(sockdir, argv)))


if __name__ == "__main__":
    main()
