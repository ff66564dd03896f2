"""The pod's browser socket: one Unix socket that every session's ``openab browser-bridge`` relay dials.

Who is on the other end is never taken from what they send. On accept, the kernel's peer credentials
(``SO_PEERCRED``) give the peer's uid, which must be the pod's, and its pid, whose process ancestry names the
session (:mod:`openab_browser.bridge.ancestry`) and must pass through the agent the pod started for that session
(registered by :meth:`BridgeServer.agent_started`, by pid and start time). The connection then serves that
session's browser tools through :class:`openab_browser.core.mcp.server.BrowserMcp`, the same MCP server the proxy
runs, one per connection. The wire is in :mod:`openab_browser.bridge.framing`.

:class:`BridgeServer` is the pod's :class:`openab_browser.core.mcp.access.BrowserAccess` for mode ``bridge``:
:meth:`BridgeServer.open` tells the agent runtime what to hand a session's agent.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import shutil
import socket
import stat
import struct
import sys
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Final, Literal

import orjson

from openab_browser.core.errors import BridgeError
from openab_browser.core.files import Transfers
from openab_browser.core.jsonrpc import (
    SERVER_OVERLOADED,
    JsonObject,
    LocalRpcError,
    dumps,
    error_message,
    notification_message,
)
from openab_browser.core.jsonrpc.protocol import reply_id, unreadable_error
from openab_browser.core.mcp.access import BROWSER_CHANNEL_ENV, BrowserEndpoint, StdioCommand
from openab_browser.core.mcp.audit import AuditLog
from openab_browser.core.mcp.journal import ActionJournal
from openab_browser.core.mcp.server import BrowserMcp, Limits
from openab_browser.core.session_naming import CHANNEL_PATTERN
from openab_browser.core.sessions import Session
from openab_browser.core.tunnel.registry import TunnelRegistry

from .ancestry import AncestryError, ProcessIdentity, descends_from, process_identity, resolve_channel
from .framing import (
    BRIDGE_REFUSED,
    CHANNEL_CLAIM,
    MAX_FRAME_BYTES,
    PROTOCOL_VERSION,
    READY_METHOD,
    TOO_LARGE,
    TooLarge,
    error_line,
    frame_too_large,
)

__all__ = ["BROWSER_SOCKET_ENV", "BridgeError", "BridgeServer", "PeerCredentials", "peer_credentials"]

log = logging.getLogger(__name__)

BROWSER_SOCKET_ENV: Final = "OPENAB_BROWSER_SOCKET"
# Linux's sun_path is 108 bytes including the terminating NUL.
_MAX_SOCKET_PATH: Final = 107


class PeerCredentials:
    """The connecting process's pid, uid and gid, as the kernel reports them (``SO_PEERCRED``)."""

    __slots__ = ("gid", "pid", "uid")

    def __init__(self, pid: int, uid: int, gid: int) -> None:
        self.pid, self.uid, self.gid = pid, uid, gid

    def __repr__(self) -> str:
        return f"PeerCredentials(pid={self.pid}, uid={self.uid}, gid={self.gid})"


def peer_credentials(sock: socket.socket) -> PeerCredentials:
    """The pid, uid and gid the kernel recorded for the process that connected ``sock``."""
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, gid = struct.unpack("3i", raw)
    return PeerCredentials(pid, uid, gid)


def _relay_command() -> StdioCommand:
    """``openab browser-bridge`` as this installation runs it, so an agent with a bare PATH still finds it."""
    beside = Path(sys.executable).parent / "openab"
    if beside.is_file() and os.access(beside, os.X_OK):
        return StdioCommand(command=str(beside))
    found = shutil.which("openab")
    return StdioCommand(command=found) if found else StdioCommand()


class _Connection:
    """One relay's connection: its session, its MCP server, and a bounded write side."""

    def __init__(
        self,
        server: BridgeServer,
        writer: asyncio.StreamWriter,
        session_id: str,
        channel: str,
        pid: int,
    ) -> None:
        self.server = server
        self.writer = writer
        self.session_id = session_id
        self.channel = channel
        self.pid = pid
        self.mcp = BrowserMcp(server.tunnels, session_id, send=self.send, limits=server.limits, audit=server.audit,
                              files=server.files, journal=server.journal)
        self.tasks: set[asyncio.Task[None]] = set()
        self.closed = False

    def write_line(self, line: bytes) -> None:
        if self.closed or self.writer.is_closing():
            return
        self.writer.write(line)
        if self.writer.transport.get_write_buffer_size() > self.server.max_send_buffer:
            self.close("the relay is not reading its socket")

    def send(self, message: JsonObject) -> None:
        """Write one message; one that would break the frame bound becomes an error for its request."""
        line = dumps(message)
        if len(line) > self.server.max_frame_bytes:
            log.warning("bridge: a %d-byte message for session %s is over the frame bound", len(line),
                        self.session_id)
            if "id" not in message:
                return
            line = dumps(error_message(message["id"], LocalRpcError(
                SERVER_OVERLOADED,
                f"The answer is {len(line)} bytes, over the bridge's {self.server.max_frame_bytes}-byte frame "
                "limit; ask for less (a smaller max_chars, a selector, a screenshot without full_size)",
            )))
        self.write_line(line + b"\n")

    async def answer(self, message: Any) -> None:
        try:
            response = await self.mcp.handle(message)
        except Exception:
            method = message.get("method") if isinstance(message, dict) else None
            log.exception("bridge: %s failed for session %s", method, self.session_id)
            if not isinstance(message, dict) or "id" not in message:
                return
            response = error_message(message["id"], LocalRpcError.internal(f"Internal error in {method}"))
        if response is not None:
            self.send(response)

    def close(self, reason: str) -> None:
        if self.closed:
            return
        log.info("bridge: closing the connection of pid %d (session %s): %s", self.pid, self.session_id, reason)
        self.closed = True
        self.mcp.close()
        for task in self.tasks:
            task.cancel()
        self.writer.close()


@dataclass(frozen=True, slots=True)
class _Admitted:
    pid: int
    channel: str
    session_id: str


class BridgeServer:
    """The per-pod Unix socket server at ``path`` and the ``bridge``
    :class:`~openab_browser.core.mcp.access.BrowserAccess`.

    Use ``async with BridgeServer(tunnels, path):`` or :meth:`start` / :meth:`aclose`. A relay finds its
    session when it connects, and is admitted only below the agent :meth:`agent_started` registered for that
    session. Bounds: ``max_connections`` relays in all and ``max_connections_per_channel`` per session (so one
    session cannot lock the others out), each with at most ``max_requests_per_connection`` calls running and
    ``max_send_buffer`` bytes queued toward it, and frames of at most ``max_frame_bytes``. Every tool call is
    recorded in ``audit`` when given; ``files`` (the pod's transfers) carries the file tools' files; ``journal``
    (the pod's action journal) holds the state-changing calls.
    """

    def __init__(
        self,
        tunnels: TunnelRegistry,
        path: Path | str,
        *,
        max_frame_bytes: int = MAX_FRAME_BYTES,
        max_connections: int = 256,
        max_connections_per_channel: int = 16,
        max_requests_per_connection: int = 256,
        max_send_buffer: int = 64 << 20,
        limits: Limits | None = None,
        audit: AuditLog | None = None,
        trusted_parent: int | None = None,
        files: Transfers | None = None,
        journal: ActionJournal | None = None,
    ) -> None:
        self.tunnels = tunnels
        self.files = files
        self.journal = journal
        self.path = Path(path)
        self.max_frame_bytes = max_frame_bytes
        self.max_connections = max_connections
        self.max_connections_per_channel = max_connections_per_channel
        self.max_requests = max_requests_per_connection
        self.max_send_buffer = max_send_buffer
        self.limits = limits
        self.audit = audit
        # The ancestry walk stops at the pod's own process: its environment and its ancestors' are nobody's
        # session (a pod started inside an agent would otherwise look like a conflicting claim).
        self.trusted_parent = os.getpid() if trusted_parent is None else trusted_parent
        self._server: asyncio.Server | None = None
        self._inode: tuple[int, int] | None = None
        self._connections: set[_Connection] = set()
        self._handlers: set[asyncio.Task[Any]] = set()
        # channel -> the session and the agent the pod started for it; a relay is admitted only below that very
        # process, and serves that session (the channel does not reveal the session's id: see session_naming.py).
        self._agents: dict[str, tuple[str, ProcessIdentity]] = {}

    # -- life ---------------------------------------------------------------------------------------------

    async def start(self) -> None:
        if self._server is not None:
            return
        if len(os.fsencode(self.path)) > _MAX_SOCKET_PATH:
            raise BridgeError(
                f"socket path {self.path} is longer than the {_MAX_SOCKET_PATH} bytes a Unix socket address can "
                f"hold; set {BROWSER_SOCKET_ENV} to a shorter path"
            )
        self._prepare_directory()
        self._remove_stale()
        try:
            self._server = await asyncio.start_unix_server(
                self._accept, path=str(self.path), limit=self.max_frame_bytes
            )
        except OSError as exc:
            raise BridgeError(f"cannot listen on {self.path}: {exc.strerror or exc}") from exc
        # The directory is 0700, so there is no window in which another user could reach the socket.
        os.chmod(self.path, 0o600)
        st = os.stat(self.path)
        self._inode = (st.st_dev, st.st_ino)
        log.info("bridge: serving the browser tools on %s", self.path)

    def _prepare_directory(self) -> None:
        folder = self.path.parent
        try:
            created = not folder.exists()
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            st = os.lstat(folder)
        except OSError as exc:
            raise BridgeError(f"cannot create the socket directory {folder}: {exc.strerror or exc}") from exc
        if not stat.S_ISDIR(st.st_mode):
            raise BridgeError(f"{folder} is not a directory; set {BROWSER_SOCKET_ENV} to a path in a directory")
        if st.st_uid != os.geteuid():
            raise BridgeError(
                f"the socket directory {folder} belongs to uid {st.st_uid}, not to this pod's uid {os.geteuid()}; "
                f"set {BROWSER_SOCKET_ENV} to a path in a directory of our own"
            )
        if created:
            os.chmod(folder, 0o700)  # exactly, whatever the umask
        elif stat.S_IMODE(st.st_mode) & 0o077:
            # Never tighten a directory we did not make: it may be /tmp, or someone's home.
            raise BridgeError(
                f"{folder} can be entered by other users (mode {stat.S_IMODE(st.st_mode):04o}); the socket needs a "
                f"directory only this uid can enter: `chmod 700 {folder}`, or set {BROWSER_SOCKET_ENV} to a path "
                "in a directory that does not exist yet (openab creates it 0700)"
            )

    def _remove_stale(self) -> None:
        try:
            st = os.lstat(self.path)
        except FileNotFoundError:
            return
        if not stat.S_ISSOCK(st.st_mode):
            raise BridgeError(f"{self.path} exists and is not a socket; remove it or choose another path")
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        probe.settimeout(1.0)
        try:
            probe.connect(str(self.path))
        except OSError as exc:
            if exc.errno not in (errno.ECONNREFUSED, errno.ENOENT):
                raise BridgeError(f"cannot tell whether {self.path} is in use: {exc.strerror or exc}") from exc
            log.info("bridge: removing the stale socket %s", self.path)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)
            return
        finally:
            probe.close()
        raise BridgeError(f"another process is serving {self.path}: stop it, or set {BROWSER_SOCKET_ENV} elsewhere")

    async def aclose(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        server.close()
        for connection in list(self._connections):
            connection.close("the pod's browser socket is shutting down")
        for task in list(self._handlers):
            task.cancel()
        for task in list(self._handlers):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(5):
                await server.wait_closed()
        self._unlink_own_socket()

    def _unlink_own_socket(self) -> None:
        # Only our own file: a successor pod may already have bound a new socket at the same path.
        with contextlib.suppress(OSError):
            st = os.lstat(self.path)
            if (st.st_dev, st.st_ino) == self._inode:
                os.unlink(self.path)

    async def __aenter__(self) -> BridgeServer:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    # -- BrowserAccess ------------------------------------------------------------------------------------

    @property
    def mode(self) -> Literal["bridge"]:
        return "bridge"

    def agent_started(self, session: Session, pid: int) -> None:
        """Remember process ``pid``, by its start time too, as the session's agent: from now on a relay of the
        session is admitted only if it is that process or one of its descendants (see ``docs/bridge.md``).

        The runtime calls this right after spawning the agent, before sending it anything, so whatever the
        agent spawns finds it registered. A later agent of the same session replaces the earlier one.
        """
        identity = process_identity(pid)
        if identity is None:
            # Gone already (it failed at once): nothing may connect for it, and a recycled pid must not either.
            self._agents.pop(session.channel, None)
            log.warning("bridge: the agent of session %s (pid %d) exited before it was registered", session.id, pid)
            return
        self._agents[session.channel] = (session.id, identity)

    async def close(self, session: Session) -> None:
        """Forget the session's agent, so nothing connects for the session any more.

        Its relays that are connected stay, and reach no browser: cutting them off would only turn their next
        call into "may or may not have run", and the runtime stopping the session's agent ends them anyway.
        """
        self._agents.pop(session.channel, None)

    async def open(self, session: Session) -> BrowserEndpoint:
        # The socket path travels in the agent's environment too: its HOME may not be the pod's, and the
        # relay finds both variables in its ancestry when the agent's MCP client scrubs them.
        env = {BROWSER_CHANNEL_ENV: session.channel, BROWSER_SOCKET_ENV: str(self.path)}
        return BrowserEndpoint(mode="bridge", entry=_relay_command(), env=env)

    @property
    def connections(self) -> int:
        return len(self._connections)

    # -- connections --------------------------------------------------------------------------------------

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        try:
            await self._serve(reader, writer)
        except (ConnectionError, OSError) as exc:
            log.debug("bridge: connection ended: %s", exc)
        except Exception:
            log.exception("bridge: a connection failed; the socket keeps serving the others")
        finally:
            self._handlers.discard(task)
            writer.close()

    def _establish(self, writer: asyncio.StreamWriter) -> _Admitted | str:
        """The peer, its channel and its session; or why it is refused."""
        sock = writer.get_extra_info("socket")
        try:
            creds = peer_credentials(sock)
        except OSError as exc:
            return f"cannot read the peer's credentials: {exc.strerror or exc}"
        if len(self._connections) >= self.max_connections:
            return f"too many relays connected (max {self.max_connections})"
        if creds.uid != os.geteuid():
            return (
                f"refused: the connecting process runs as uid {creds.uid}, and only this pod's uid "
                f"{os.geteuid()} may use its browser socket"
            )
        try:
            found = resolve_channel(creds.pid, BROWSER_CHANNEL_ENV, stop_at=self.trusted_parent)
            if not CHANNEL_PATTERN.fullmatch(found.value):
                return f"refused: {BROWSER_CHANNEL_ENV}={found.value!r} is not a channel of the form acp_<hex>"
            # The variable is only a claim (anything of this uid can set it): the process must be the agent the
            # pod started for that channel, or descend from it.
            session_id, agent = self._agents.get(found.value, (None, None))
            descends_from(found, agent, connecting=creds.pid)
        except AncestryError as exc:
            return f"refused: {exc}"
        assert session_id is not None  # descends_from refuses a channel with no agent
        held = sum(1 for connection in self._connections if connection.channel == found.value)
        if held >= self.max_connections_per_channel:
            return (
                f"refused: channel {found.value} already has {held} connections open, the most one "
                f"session may hold (max {self.max_connections_per_channel}); close some of its relays (each MCP "
                "client of the agent spawns one) and try again"
            )
        return _Admitted(creds.pid, found.value, session_id)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        admitted = self._establish(writer)
        if isinstance(admitted, str):
            log.warning("bridge: %s", admitted)
            writer.write(error_line(LocalRpcError(BRIDGE_REFUSED, admitted)))
            await _drain(writer)
            return
        connection = _Connection(self, writer, admitted.session_id, admitted.channel, admitted.pid)
        self._connections.add(connection)
        log.info("bridge: pid %d connected on channel %s", admitted.pid, admitted.channel)
        try:
            connection.send(notification_message(
                READY_METHOD, {"channel": admitted.channel, "version": PROTOCOL_VERSION}
            ))
            await self._read_loop(connection, reader)
        finally:
            self._connections.discard(connection)
            connection.close("the relay disconnected")

    async def _read_loop(self, connection: _Connection, reader: asyncio.StreamReader) -> None:
        while not connection.closed:
            frame = await read_frame(reader)
            if frame is None:
                return
            if frame is TOO_LARGE:
                connection.write_line(error_line(frame_too_large(self.max_frame_bytes)))
                continue
            assert isinstance(frame, bytes)
            if not frame.strip():
                continue
            try:
                message = orjson.loads(frame)
            except orjson.JSONDecodeError as exc:
                connection.write_line(error_line(unreadable_error(exc)))
                continue
            if isinstance(message, dict) and CHANNEL_CLAIM in message and message[CHANNEL_CLAIM] != connection.channel:
                connection.write_line(error_line(LocalRpcError(
                    BRIDGE_REFUSED,
                    f"refused: this connection belongs to {connection.channel} by its process ancestry, and a "
                    f"frame may not name another channel ({message[CHANNEL_CLAIM]!r})",
                ), reply_id(message, ids="mcp")))
                log.warning("bridge: pid %d named channel %r on a connection of %s", connection.pid,
                            message[CHANNEL_CLAIM], connection.channel)
                await _drain(connection.writer)
                connection.close("a frame claimed another channel")
                return
            if isinstance(message, dict) and "id" in message and "method" in message:
                if len(connection.tasks) >= self.max_requests:
                    connection.write_line(error_line(
                        LocalRpcError(SERVER_OVERLOADED, f"Too many requests in flight (max {self.max_requests})"),
                        message["id"],
                    ))
                    continue
                task = asyncio.get_running_loop().create_task(connection.answer(message))
                connection.tasks.add(task)
                task.add_done_callback(connection.tasks.discard)
            else:
                # Notifications (cancelled, initialized) take effect at once, in order.
                await connection.answer(message)


async def read_frame(reader: asyncio.StreamReader) -> bytes | TooLarge | None:
    """The next line without its ``\\n``, :data:`TOO_LARGE`, or ``None`` at end of stream.

    ``reader`` must have been made with ``limit`` set to the frame bound: a longer line is skipped up to its
    newline without ever holding more than that bound (times the stream's own read-ahead) in memory.
    """
    try:
        return (await reader.readuntil(b"\n"))[:-1]
    except asyncio.IncompleteReadError as exc:
        return exc.partial or None  # a last line without its newline still counts
    except asyncio.LimitOverrunError as exc:
        consumed = exc.consumed
    while True:
        await reader.readexactly(consumed)
        try:
            await reader.readuntil(b"\n")
            return TOO_LARGE
        except asyncio.IncompleteReadError:
            return TOO_LARGE
        except asyncio.LimitOverrunError as exc:
            consumed = exc.consumed



async def _drain(writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(TimeoutError, ConnectionError):
        async with asyncio.timeout(5):
            await writer.drain()
