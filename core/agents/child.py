"""A child process and its three pipes, the same on any event loop (:mod:`openab_browser.core.event_loop`).

The child is started by :class:`subprocess.Popen`, not by the loop: uvloop starts a child through libuv, which
leaves second descriptors of its stdio (and of any descriptor passed in) open in the child, so an agent that
closed its stdin would still hold it open, and every write to it would succeed until the buffer filled instead of
failing at once. ``Popen`` closes every descriptor but the three. asyncio's own loop calls the same ``Popen`` in
the loop's thread, so the start costs what it did.

Its exit is read from a pidfd (Linux 5.3 and later) the loop watches, else by looking every
:data:`EXIT_LOOK_INTERVAL`; either way the one ``waitpid`` is ``Popen``'s own.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

__all__ = ["EXIT_LOOK_INTERVAL", "Child", "Stdio"]

EXIT_LOOK_INTERVAL: Final = 0.2
"""How often an exit is looked for when no pidfd says so (and, with one, a bound on a missed wake-up)."""


class Stdio:
    """The pod's ends of a child's three pipes as asyncio streams; :meth:`close` lets go of all three."""

    def __init__(self, stdin: asyncio.StreamWriter, stdout: asyncio.StreamReader, stderr: asyncio.StreamReader,
                 transports: Sequence[asyncio.BaseTransport]) -> None:
        self.stdin, self.stdout, self.stderr = stdin, stdout, stderr
        self._transports = transports

    @classmethod
    async def connect(cls, stdin: int, stdout: int, stderr: int, *, limit: int) -> Stdio:
        """Streams over the three descriptors, which it owns from then on (closed on failure too)."""
        loop = asyncio.get_running_loop()
        files = [os.fdopen(stdin, "wb", buffering=0), os.fdopen(stdout, "rb", buffering=0),
                 os.fdopen(stderr, "rb", buffering=0)]
        transports: list[asyncio.BaseTransport] = []
        try:
            # A writer's drain needs a protocol with flow control: asyncio's own for subprocess pipes is this one.
            written, flow = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, files[0])
            transports.append(written)
            readers = [asyncio.StreamReader(limit=limit, loop=loop) for _ in range(2)]
            for reader, file in zip(readers, files[1:], strict=True):
                read, _ = await loop.connect_read_pipe(functools.partial(asyncio.StreamReaderProtocol, reader), file)
                transports.append(read)
        except BaseException:
            for transport in transports:
                transport.close()
            for file in files[len(transports):]:
                file.close()
            raise
        return cls(asyncio.StreamWriter(written, flow, None, loop), readers[0], readers[1], transports)

    def close(self) -> None:
        for transport in self._transports:
            transport.close()


class Child:
    """A started child: its ``pid``, its ``returncode`` once it exited (read when asked), :meth:`wait` for its
    exit, ``stdio`` its pipes. :meth:`close` lets go of the pipes and the pidfd (the process is not signalled)."""

    def __init__(self, popen: subprocess.Popen[bytes], stdio: Stdio) -> None:
        self._popen = popen
        self.pid = popen.pid
        self.stdio = stdio
        self._exit_seen = asyncio.Event()
        self._pidfd: int | None = None
        with contextlib.suppress(OSError, AttributeError):  # no pidfd here (old kernel, seccomp): looked for
            self._pidfd = os.pidfd_open(popen.pid)
            # Readable from the exit on until closed: the first wake-up stops watching it.
            asyncio.get_running_loop().add_reader(self._pidfd, self._on_exit)

    @classmethod
    async def spawn(cls, argv: Sequence[str], *, env: Mapping[str, str], cwd: Path, limit: int) -> Child:
        """Starts ``argv`` in a session of its own with three fresh pipes; ``limit`` bounds a line read from its
        stdout or stderr. Raises what ``Popen`` raises (``FileNotFoundError``, ``PermissionError``)."""
        pipes = [os.pipe2(os.O_CLOEXEC) for _ in range(3)]
        theirs = (pipes[0][0], pipes[1][1], pipes[2][1])
        ours = (pipes[0][1], pipes[1][0], pipes[2][0])
        try:
            # In the loop's thread, as asyncio's own subprocess_exec does: fork and exec take about a millisecond.
            popen = subprocess.Popen(  # noqa: ASYNC220
                argv, stdin=theirs[0], stdout=theirs[1], stderr=theirs[2], env=dict(env), cwd=cwd,
                start_new_session=True, close_fds=True,
            )
        except BaseException:
            for fd in ours:
                os.close(fd)
            raise
        finally:
            for fd in theirs:
                os.close(fd)
        try:
            stdio = await Stdio.connect(*ours, limit=limit)
        except BaseException:
            popen.kill()
            popen.wait()
            raise
        return cls(popen, stdio)

    @property
    def returncode(self) -> int | None:
        return self._popen.poll()

    async def wait(self) -> int:
        """The exit code, once the child exited (negative: the signal that killed it)."""
        while (code := self._popen.poll()) is None:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(EXIT_LOOK_INTERVAL):
                    await self._exit_seen.wait()
        self._forget_pidfd()
        return code

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self._popen.kill()

    def close(self) -> None:
        self.stdio.close()
        self._forget_pidfd()

    def _on_exit(self) -> None:
        if self._pidfd is not None:
            asyncio.get_running_loop().remove_reader(self._pidfd)
        self._exit_seen.set()

    def _forget_pidfd(self) -> None:
        if self._pidfd is not None:
            with contextlib.suppress(Exception):
                asyncio.get_running_loop().remove_reader(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = None
