"""The relay's I/O: :class:`~openab_browser.bridge.relay.Relay` run over stdin, stdout and the pod's Unix socket.

One thread and one ``selectors`` loop, no asyncio: an agent CLI spawns the relay at every session start, and
importing asyncio was most of its start-up (docs/benchmarks.md). Every descriptor is non-blocking but a
regular file, which a selector cannot watch and which never blocks anyway: stdin or stdout redirected to a file
is read or written directly.
"""

from __future__ import annotations

import errno
import os
import selectors
import socket
import stat
import time
from pathlib import Path

from .framing import MAX_FRAME_BYTES, LineSplitter
from .relay import Relay

__all__ = ["run_relay"]

_CHUNK = 1 << 16
# Bytes held for a side that does not read them (stdout, or the pod's socket); past it the relay stops reading
# what would add to them.
_MAX_PENDING_OUT = 2 * MAX_FRAME_BYTES
_IDLE_LOOK = 60.0


def _is_file(fd: int) -> bool:
    try:
        return stat.S_ISREG(os.fstat(fd).st_mode)
    except OSError:
        return False


class _Writer:
    """Bytes bound for one descriptor, written as it takes them."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.pending = bytearray()
        self.blocking = _is_file(fd)
        if not self.blocking:
            os.set_blocking(fd, False)

    def add(self, lines: list[bytes]) -> None:
        for line in lines:
            self.pending += line
        if self.blocking:
            self.flush()

    def drain(self, timeout: float) -> None:
        """Write everything, waiting at most ``timeout`` seconds for the descriptor to take it."""
        end = time.monotonic() + timeout
        with selectors.DefaultSelector() as selector:
            self.flush()
            if self.pending:
                selector.register(self.fd, selectors.EVENT_WRITE)
            while self.pending and (left := end - time.monotonic()) > 0:
                if selector.select(left):
                    self.flush()

    def flush(self) -> None:
        """Write what the descriptor takes now (all of it, for a file). Raises OSError when it is gone."""
        while self.pending:
            try:
                sent = os.write(self.fd, self.pending)
            except BlockingIOError:
                return
            del self.pending[:sent]


class _PodSocket:
    """The connection to the pod: connecting (non-blocking), then lines both ways."""

    def __init__(self, path: Path) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.setblocking(False)
        self.splitter = LineSplitter()
        self.pending = bytearray()
        try:
            self.sock.connect(str(path))
            self.connecting = False
        except (BlockingIOError, InterruptedError):  # a listener whose backlog is full: wait to be writable
            self.connecting = True
        except OSError:
            self.sock.close()
            raise

    def finish_connect(self) -> None:
        error = self.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if error:
            raise OSError(error, os.strerror(error))
        self.connecting = False

    def close(self) -> None:
        self.sock.close()


def run_relay(path: Path, *, wait: float = 10.0, stdin: int = 0, stdout: int = 1) -> int:
    """Relay between the agent on ``stdin``/``stdout`` and the pod at ``path`` until the agent closes stdin
    and its requests are answered; returns the exit status."""
    loop = _Loop(Relay(str(path), wait=wait), path, stdin, stdout)
    try:
        return loop.run()
    except (BrokenPipeError, ConnectionResetError):
        return 0  # the agent closed its end of stdout: nobody is left to answer
    finally:
        loop.close()


class _Loop:
    def __init__(self, relay: Relay, path: Path, stdin: int, stdout: int) -> None:
        self.relay = relay
        self.path = path
        self.stdin = stdin
        self.out = _Writer(stdout)
        self.agent_lines = LineSplitter()
        self.stdin_is_file = _is_file(stdin)
        if not self.stdin_is_file:
            os.set_blocking(stdin, False)
        self.pod: _PodSocket | None = None
        self.selector = selectors.DefaultSelector()

    def close(self) -> None:
        if self.pod is not None:
            self.pod.close()
        self.selector.close()

    def run(self) -> int:
        relay = self.relay
        while True:
            now = time.monotonic()
            relay.tick(now)
            self._follow_socket(now)
            if self.pod is not None:
                self.pod.pending += b"".join(relay.data_to_pod())
            self.out.add(relay.data_to_agent())
            if relay.finished(now, unsent=self.pod is not None and bool(self.pod.pending)):
                relay.close()
                self.out.add(relay.data_to_agent())
                self.out.drain(relay.drain_timeout)
                return 0
            self._wait_and_serve(now)

    def _follow_socket(self, now: float) -> None:
        """Open or close the pod's socket as the relay wants."""
        relay = self.relay
        if self.pod is not None and not relay.wants_socket:
            self.pod.close()
            self.pod = None
            relay.pod_closed(now)
        if self.pod is None and relay.should_connect(now):
            relay.connecting(now)
            try:
                self.pod = _PodSocket(self.path)
            except OSError as exc:
                relay.connect_failed(exc.strerror or str(exc), now)
            else:
                if not self.pod.connecting:
                    relay.connected(now)

    def _wait_and_serve(self, now: float) -> None:
        relay, out, pod = self.relay, self.out, self.pod
        # Nothing more is read from either side while the agent is not reading what it was sent, and nothing more
        # from the agent while the pod is not reading what the relay sent it.
        room = len(out.pending) < _MAX_PENDING_OUT
        pod_room = pod is None or len(pod.pending) < _MAX_PENDING_OUT
        read_stdin = relay.wants_agent_input and room and pod_room
        watched: dict[int, int] = {}
        if read_stdin and not self.stdin_is_file:
            watched[self.stdin] = selectors.EVENT_READ
        if out.pending and not out.blocking:
            watched[out.fd] = watched.get(out.fd, 0) | selectors.EVENT_WRITE
        if pod is not None:
            events = selectors.EVENT_WRITE if pod.connecting or pod.pending else 0
            if not pod.connecting and room:
                events |= selectors.EVENT_READ
            if events:
                watched[pod.sock.fileno()] = events
        deadline = relay.next_deadline()
        timeout = _IDLE_LOOK if deadline is None else max(0.0, deadline - now)
        if read_stdin and self.stdin_is_file:
            timeout = 0.0  # a file is always readable
        for fd, events in watched.items():
            self.selector.register(fd, events)
        try:
            ready = {key.fd: events for key, events in self.selector.select(timeout)} if watched else {}
            if not watched:
                time.sleep(timeout)
        finally:
            for fd in watched:
                self.selector.unregister(fd)
        now = time.monotonic()
        if out.fd in ready:
            out.flush()
        if read_stdin and (self.stdin_is_file or self.stdin in ready):
            self._read_agent(now)
        if pod is not None and pod.sock.fileno() in ready:
            self.pod = _serve_pod(relay, pod, ready[pod.sock.fileno()], now)

    def _read_agent(self, now: float) -> None:
        try:
            data = os.read(self.stdin, _CHUNK)
        except (BlockingIOError, InterruptedError):
            return
        if data:
            self.relay.agent_frames(self.agent_lines.feed(data), now)
            return
        last = self.agent_lines.end()
        self.relay.agent_frames([last] if last is not None else [], now)
        self.relay.agent_ended(now)


def _serve_pod(relay: Relay, pod: _PodSocket, events: int, now: float) -> _PodSocket | None:
    """One readiness of the pod's socket; returns the socket, or ``None`` once it has closed."""
    try:
        if pod.connecting:
            pod.finish_connect()
            relay.connected(now)
            return pod
        if events & selectors.EVENT_WRITE and pod.pending:
            sent = pod.sock.send(pod.pending)
            del pod.pending[:sent]
        if events & selectors.EVENT_READ:
            data = pod.sock.recv(_CHUNK)
            if not data:
                last = pod.splitter.end()
                relay.pod_frames([last] if last is not None else [], now)
                raise ConnectionResetError(errno.ECONNRESET, "the pod closed the socket")
            relay.pod_frames(pod.splitter.feed(data), now)
        return pod
    except (BlockingIOError, InterruptedError):
        return pod
    except OSError as exc:
        was_connecting = pod.connecting
        pod.close()
        if was_connecting:
            relay.connect_failed(exc.strerror or str(exc), now)
        else:
            relay.pod_closed(now)
        return None
