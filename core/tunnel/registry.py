"""Which browser tunnels each session has, and the API the proxy and the bridge use to reach them.

Rules (the `/acp` contract, §2.6 of upstream's design, with its owner/generation fencing):

* keyed by (session, server id); a new tunnel evicts an older one of the same *name* in the same session
  ("last attach wins"), ordered by (connection generation, attach generation), so a slow establish that
  finishes after a newer one stands down instead of winning;
* a socket that closes takes only the tunnels it installed; a successor that resumed the session on another
  socket keeps its own;
* a ``session/resume`` carrying an ``mcpServers`` array withdraws the session's tunnels it no longer lists.

Consumers call :meth:`TunnelRegistry.list_tools` / :meth:`call_tool` by session and watch attach and detach
with :meth:`add_listener`. Tool payloads are returned exactly as the browser sent them.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Final

from ..errors import BrowserNotConnected, TunnelError, TunnelFailure
from ..jsonrpc import JsonObject
from .base import ProgressCallback, Tunnel

__all__ = [
    "BROWSER_NOT_CONNECTED",
    "BrowserNotConnected",
    "ToolsChanged",
    "TunnelAttached",
    "TunnelDetached",
    "TunnelEvent",
    "TunnelRegistry",
]

log = logging.getLogger(__name__)

# The words an agent sees when the session has no browser: they name the fix.
BROWSER_NOT_CONNECTED: Final = "browser not connected: open the openab side panel"


def _not_connected(session_id: str) -> TunnelError:
    return TunnelError.build(
        BROWSER_NOT_CONNECTED, reason=TunnelFailure.NOT_CONNECTED, session_id=session_id, server="browser"
    )


@dataclass(frozen=True, slots=True)
class TunnelAttached:
    """A tunnel was installed: its session can reach the browser server it carries."""

    tunnel: Tunnel

    @property
    def session_id(self) -> str:
        return self.tunnel.session_id


@dataclass(frozen=True, slots=True)
class TunnelDetached:
    """A tunnel was retired (``reason`` says why); it is ``closed`` and fails every call."""

    tunnel: Tunnel
    reason: str

    @property
    def session_id(self) -> str:
        return self.tunnel.session_id


@dataclass(frozen=True, slots=True)
class ToolsChanged:
    """A browser said its tools changed, and the session's tool cache now holds the new list."""

    session_id: str


TunnelEvent = TunnelAttached | TunnelDetached | ToolsChanged
Listener = Callable[[TunnelEvent], None]


class TunnelRegistry:
    """Which tunnels each session has, and the one place consumers reach them through.

    It owns the set of live tunnels and its rules (see the module docstring): installing, evicting and
    withdrawing them, telling listeners, and routing each call to the tunnel that has the tool and each
    inbound ``mcp/message`` notification to the tunnel it names.

    It does not open tunnels (:func:`.tunnel.establish` does) nor say goodbye on the wire: every method that
    retires tunnels returns them, and the caller disconnects them (in the background, as the browser may be
    slow). Its bookkeeping is synchronous, for the socket's read loop; only the calls and waits are async.

    Args:
        call_timeout: How long a tool call or tool listing may take when the caller gives no timeout.
    """

    def __init__(self, *, call_timeout: float = 170.0) -> None:
        self.call_timeout = call_timeout
        # Every live tunnel, by session then server id, and by the socket that installed it: a tool call finds
        # its session's few tunnels without passing over the pod's thousands (an idle session has one each).
        self._by_session: dict[str, dict[str, Tunnel]] = {}
        self._by_owner: dict[str, dict[tuple[str, str], Tunnel]] = {}
        self._generations = itertools.count(1)
        self._listeners: list[Listener] = []
        self._changed = asyncio.Event()
        self._in_flight = 0
        self._idle = asyncio.Event()
        self._idle.set()
        self._draining = False

    # -- bookkeeping (sync: called from the read loop) -------------------------------------------------------

    def next_generation(self) -> int:
        """The attach order for a tunnel about to be established: later ones win."""
        return next(self._generations)

    def install(self, tunnel: Tunnel) -> list[Tunnel]:
        """Register a freshly established tunnel; returns the tunnels that must now be disconnected.

        That list holds ``tunnel`` itself when a newer tunnel of the same name got there first.
        """
        rivals = [
            t
            for t in self._by_session.get(tunnel.session_id, {}).values()
            if t.name == tunnel.name or t.server_id == tunnel.server_id
        ]
        if any(r.order > tunnel.order for r in rivals):
            return [tunnel]
        for rival in rivals:
            self._remove(rival, "replaced by a newer attach of the same browser server")
        self._by_session.setdefault(tunnel.session_id, {})[tunnel.server_id] = tunnel
        self._by_owner.setdefault(tunnel.owner.connection_id, {})[(tunnel.session_id, tunnel.server_id)] = tunnel
        log.info("browser tunnel attached: session %s, server %r (%s form)", tunnel.session_id, tunnel.name,
                 tunnel.form)
        self._emit(TunnelAttached(tunnel))
        return rivals

    def remove_owner(self, connection_id: str, reason: str, *, session_id: str | None = None) -> list[Tunnel]:
        """A socket closed (or lost ``session_id`` to another socket): drop exactly the tunnels it installed."""
        gone = [
            t for t in self._by_owner.get(connection_id, {}).values()
            if session_id is None or t.session_id == session_id
        ]
        for tunnel in gone:
            self._remove(tunnel, reason)
        return gone

    def withdraw(self, session_id: str, keep: Iterable[str], connection_generation: int) -> list[Tunnel]:
        """Retire the session's tunnels whose id a resume no longer declares (unless a newer socket owns them)."""
        keep_ids = set(keep)
        gone = [
            t
            for server_id, t in self._by_session.get(session_id, {}).items()
            if server_id not in keep_ids and t.owner.connection_generation <= connection_generation
        ]
        for tunnel in gone:
            self._remove(tunnel, "withdrawn by session/resume")
        return gone

    def drop_session(self, session_id: str, reason: str) -> list[Tunnel]:
        """The session ended: drop all its tunnels."""
        gone = self.tunnels(session_id)
        for tunnel in gone:
            self._remove(tunnel, reason)
        return gone

    def _remove(self, tunnel: Tunnel, reason: str) -> None:
        servers = self._by_session.get(tunnel.session_id, {})
        if servers.get(tunnel.server_id) is not tunnel:
            return
        del servers[tunnel.server_id]
        if not servers:
            del self._by_session[tunnel.session_id]
        owned = self._by_owner[tunnel.owner.connection_id]
        del owned[(tunnel.session_id, tunnel.server_id)]
        if not owned:
            del self._by_owner[tunnel.owner.connection_id]
        tunnel.closed = True
        log.info("browser tunnel detached: session %s, server %r: %s", tunnel.session_id, tunnel.name, reason)
        self._emit(TunnelDetached(tunnel, reason))

    def tunnels(self, session_id: str) -> list[Tunnel]:
        """The session's live tunnels, oldest attach first."""
        return sorted(self._by_session.get(session_id, {}).values(), key=lambda t: t.order)

    def find_server(self, connection_owner: str, server_id: str) -> Tunnel | None:
        """The tunnel that socket ``connection_owner`` installed for ``server_id``, if any."""
        for (_, sid), tunnel in self._by_owner.get(connection_owner, {}).items():
            if sid == server_id:
                return tunnel
        return None

    def attached(self, session_id: str) -> bool:
        """Whether the session has any browser attached."""
        return session_id in self._by_session

    # -- events ----------------------------------------------------------------------------------------------

    def add_listener(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener`` on every attach, detach and tool-set change; returns the unsubscribe function."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    def _emit(self, event: TunnelEvent) -> None:
        self._changed.set()
        self._changed = asyncio.Event()
        for listener in list(self._listeners):
            try:
                listener(event)
            except Exception:
                log.exception("tunnel listener failed on %s", type(event).__name__)

    async def wait_attached(self, session_id: str | None = None, *, timeout: float) -> Tunnel:
        """Wait until a browser attaches (to ``session_id``, or to any session)."""
        async with asyncio.timeout(timeout):
            while True:
                changed = self._changed
                if session_id is not None:
                    servers = self._by_session.get(session_id)
                else:
                    servers = next(iter(self._by_session.values()), None)
                if servers:
                    return next(iter(servers.values()))
                await changed.wait()

    # -- the consumer API -------------------------------------------------------------------------------------

    async def list_tools(self, session_id: str) -> list[JsonObject]:
        """Every tool of the session's browser servers (first attach wins a name clash).

        Raises :class:`BrowserNotConnected` when none is attached.
        """
        tunnels = self.tunnels(session_id)
        if not tunnels:
            raise _not_connected(session_id)
        tools: dict[str, JsonObject] = {}
        for tunnel in tunnels:
            cached = tunnel.tools
            if cached is None:
                cached = await tunnel.list_tools(timeout=self.call_timeout)
            for tool in cached:
                tools.setdefault(tool["name"], tool)
        return list(tools.values())

    async def call_tool(
        self,
        session_id: str,
        name: str,
        arguments: Any,
        *,
        meta: JsonObject | None = None,
        progress: ProgressCallback | None = None,
        timeout: float | None = None,
    ) -> Any:
        """Run one tool in the session's browser; returns the browser's ``CallToolResult`` as sent.

        Raises :class:`openab_browser.core.jsonrpc.RpcError` for an MCP error from the browser and
        :class:`TunnelError` (or :class:`BrowserNotConnected`) when the call could not be carried.
        """
        if self._draining:
            # Refused before it is sent, so the agent knows it did not run and the drain is not prolonged.
            raise TunnelError.build("the gateway is shutting down; call it again once the side panel has "
                                    "reconnected", reason=TunnelFailure.SHUTTING_DOWN, session_id=session_id,
                                    server="browser")
        tunnel = self._route(session_id, name)
        params: JsonObject = {"name": name, "arguments": arguments if arguments is not None else {}}
        if meta:
            params["_meta"] = meta
        self._in_flight += 1
        self._idle.clear()
        try:
            return await tunnel.request(
                "tools/call", params, timeout=timeout or self.call_timeout, progress=progress
            )
        finally:
            self._in_flight -= 1
            if not self._in_flight:
                self._idle.set()

    @property
    def calls_in_flight(self) -> int:
        """Tool calls sent to a browser and not yet answered, in the whole pod."""
        return self._in_flight

    async def drain(self, timeout: float) -> int:
        """Refuse new tool calls and wait up to ``timeout`` s for those in flight to be answered; returns how many
        are still running (the caller then closes the sockets, and those end with an outcome-unknown result)."""
        self._draining = True
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self._idle.wait()
        return self._in_flight

    def _route(self, session_id: str, tool_name: str) -> Tunnel:
        tunnels = self.tunnels(session_id)
        if not tunnels:
            raise _not_connected(session_id)
        for tunnel in tunnels:
            if tool_name in tunnel.tool_names:
                return tunnel
        # Unknown to every cache: let the newest browser answer (it says "unknown tool" itself).
        return tunnels[-1]

    # -- notifications from the browser ---------------------------------------------------------------------

    async def deliver(self, connection_owner: str, params: Any) -> None:
        """Route an ``mcp/message`` notification that socket ``connection_owner`` sent to the tunnel it names."""
        if not isinstance(params, dict):
            return
        tunnel = next(
            (t for t in self._by_owner.get(connection_owner, {}).values() if t.addressed_by(params)),
            None,
        )
        if tunnel is None or tunnel.closed:
            return
        if await tunnel.receive(params, timeout=self.call_timeout):
            self._emit(ToolsChanged(tunnel.session_id))
