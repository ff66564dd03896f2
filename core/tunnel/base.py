"""What both MCP-over-ACP wire forms share: who owns a tunnel, its tool cache, progress routing, and the one
``mcp/message`` round trip with its timeout, loss and cancel handling.

The forms themselves are :mod:`.connection_form` and :mod:`.stateless_form`; :func:`.tunnel.establish`
picks one per server.
"""

from __future__ import annotations

import abc
import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from .. import package_version
from ..errors import OpenabError, TunnelError, TunnelFailure
from ..jsonrpc import ConnectionClosed, JsonObject, RequestTimeout, RpcConnection, TooManyPendingRequests
from ..turn_watch import CALL, Person

__all__ = ["Form", "ProgressCallback", "Tunnel", "TunnelAddress",
    "TunnelOwner", "client_info"]

log = logging.getLogger(__name__)

ProgressCallback = Callable[[JsonObject], None]
Form = Literal["connection", "stateless"]

# A bound on tools/list pages: a server that cycles its cursor must not keep us asking forever.
_MAX_TOOL_PAGES = 100


@dataclass(frozen=True, slots=True)
class TunnelOwner:
    """Which socket installed a tunnel, and in what order, for last-attach-wins and scoped teardown; and the person
    at that socket's panel, whose cards stop the clock of each call on the tunnel."""

    connection_id: str
    connection_generation: int
    person: Person = field(default_factory=Person, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class TunnelAddress:
    """Where a declared server lives and how it ranks: what opening a tunnel in either wire form needs.

    ``session_id``: the ACP session the server was declared in; ``server_id``: the id the declaration gave it
    (``acpId``/``serverId``); ``name``: the declaration's name (last attach wins among tunnels of one name);
    ``owner``: the socket that installs it; ``generation``: attach order among all tunnels.
    """

    session_id: str
    server_id: str
    name: str
    owner: TunnelOwner
    generation: int


def client_info() -> JsonObject:
    """How the gateway introduces itself to a browser's MCP server, in either form."""
    return {"name": "openab-gateway", "version": package_version()}


@dataclass(eq=False)
class Tunnel(abc.ABC):
    """One MCP server that a browser provides over its `/acp` socket, as the gateway's MCP client.

    A tunnel owns the inner MCP exchange with that one server: it wraps each request in ``mcp/message``,
    unwraps the answer, routes progress notifications to the call waiting for them, withdraws a call the
    caller abandoned, and caches the server's tool list. Subclasses speak one wire form each.

    It does not own the socket (:class:`RpcConnection` does, shared by every tunnel and the ACP session on
    it), nor decide which tunnel serves a session (:class:`.registry.TunnelRegistry` does): the registry
    marks a retired tunnel ``closed``, after which every request fails at once with ``browser disconnected``.

    :meth:`request` returns the inner MCP result; it raises :class:`~openab_browser.core.jsonrpc.RpcError` for an
    MCP error the browser sent, and :class:`~openab_browser.core.errors.TunnelError` (a ``TimeoutError`` or
    ``ConnectionError`` where it is one) when the tunnel could not carry the call. Every ``TunnelError``
    names the server and the session, so an operator can tell which browser went away.

    Args:
        conn: The extension's socket.
        session_id: The ACP session the server was declared in.
        server_id: The id the declaration gave it (``acpId``/``serverId``).
        name: The declaration's name: last attach wins among tunnels of one name.
        owner: The socket that installed it.
        generation: Attach order among all tunnels, for last-attach-wins.
    """

    conn: RpcConnection
    session_id: str
    server_id: str
    name: str
    owner: TunnelOwner
    generation: int
    # What the handshake (or discovery) learnt of the server.
    server_info: JsonObject = field(default_factory=dict, init=False)
    protocol_version: str = field(default="", init=False)
    # The server's tools as last listed; None until asked.
    tools: list[JsonObject] | None = field(default=None, init=False)
    # Their names, looked up on every call routed (TunnelRegistry): a set, not a scan of the list.
    tool_names: frozenset[str] = field(default=frozenset(), init=False)
    closed: bool = field(default=False, init=False)
    _disconnected: bool = field(default=False, init=False, repr=False)
    _progress: dict[Any, ProgressCallback] = field(default_factory=dict, init=False, repr=False)

    @property
    @abc.abstractmethod
    def form(self) -> Form:
        """Which MCP-over-ACP wire form this tunnel speaks."""

    @property
    def order(self) -> tuple[int, int]:
        """Newer sockets win over older ones, then later attaches over earlier ones."""
        return (self.owner.connection_generation, self.generation)

    def _error(self, detail: str, reason: TunnelFailure) -> TunnelError:
        return TunnelError.build(detail, reason=reason, session_id=self.session_id, server=self.name)

    # -- requests -------------------------------------------------------------------------------------------

    async def request(
        self,
        method: str,
        params: JsonObject | None = None,
        *,
        timeout: float,
        progress: ProgressCallback | None = None,
    ) -> Any:
        """One inner MCP request; see the class docstring for what it raises."""
        if self.closed:
            raise self._error("browser disconnected", TunnelFailure.DISCONNECTED)
        try:
            return await self._request(method, params, timeout=timeout, progress=progress)
        except TooManyPendingRequests as exc:
            raise self._error(
                f"too many calls in flight to this browser ({exc}); retry when some finish", TunnelFailure.OVERLOADED
            ) from None

    @abc.abstractmethod
    async def _request(
        self, method: str, params: JsonObject | None, *, timeout: float, progress: ProgressCallback | None
    ) -> Any:
        """Carry one inner request in this form's envelope and return the inner result."""

    async def _send(
        self,
        method: str,
        envelope: JsonObject,
        *,
        timeout: float,
        progress_key: Any,
        progress: ProgressCallback | None,
    ) -> Any:
        """Send one ``mcp/message`` request and return the outer result, withdrawing it if it is abandoned.

        Progress for the call is routed to ``progress`` under ``progress_key`` while it runs. An outer
        :class:`RpcError` passes through: what it means differs by form.
        """
        if progress is not None and progress_key is not None:
            self._progress[progress_key] = progress
        outer_id: list[int] = []
        # The request's deadline is the clock's: a card open in the panel (now or later) moves it, and an answer
        # gives the call its whole timeout again (the person may have been asked about that very call).
        clock = self.owner.person.clock()
        clock.arm(CALL, timeout)

        def moved() -> None:
            if outer_id:
                self.conn.set_timeout(outer_id[0], clock.runs_out_in(CALL))

        clock.subscribe(moved)
        try:
            return await self.conn.request("mcp/message", envelope, timeout=clock.runs_out_in(CALL),
                                           sent=outer_id.append)
        except RequestTimeout as exc:
            self._withdraw_timed_out(exc.request_id)
            raise self._error(f"{method} timed out after {timeout:g} s", TunnelFailure.TIMED_OUT) from None
        except ConnectionClosed as exc:
            raise self._error(f"browser disconnected: {exc}", TunnelFailure.DISCONNECTED) from None
        except asyncio.CancelledError:
            # The caller gave up (the agent cancelled): the browser must stop working for nobody.
            if outer_id:
                self._withdraw_cancelled(outer_id[0])
            raise
        finally:
            clock.close()
            if progress_key is not None:
                self._progress.pop(progress_key, None)

    @abc.abstractmethod
    def _withdraw_timed_out(self, outer_id: int) -> None:
        """Tell the browser to stop a call we stopped waiting for."""

    @abc.abstractmethod
    def _withdraw_cancelled(self, outer_id: int) -> None:
        """Tell the browser to stop a call our caller cancelled."""

    async def list_tools(self, *, timeout: float) -> list[JsonObject]:
        """Ask the browser for its tools (every page of them) and cache the answer."""
        tools: list[JsonObject] = []
        cursor: str | None = None
        for _ in range(_MAX_TOOL_PAGES):
            result = await self.request("tools/list", {"cursor": cursor} if cursor else {}, timeout=timeout)
            if not isinstance(result, dict) or not isinstance(result.get("tools"), list):
                raise self._error("tools/list: malformed result (no `tools` array)", TunnelFailure.MALFORMED)
            tools.extend(t for t in result["tools"] if isinstance(t, dict) and isinstance(t.get("name"), str))
            next_cursor = result.get("nextCursor")
            if not isinstance(next_cursor, str) or not next_cursor:
                break
            cursor = next_cursor
        self.listed(tools)
        return tools

    def listed(self, tools: list[JsonObject]) -> None:
        """Keeps the server's tools as it listed them (each an object with a string ``name``)."""
        self.tools = tools
        self.tool_names = frozenset(t["name"] for t in tools)

    # -- inbound --------------------------------------------------------------------------------------------

    def addressed_by(self, message: JsonObject) -> bool:
        """Whether an ``mcp/message`` notification from this tunnel's socket names this tunnel.

        A message without a connection id names its server; either form answers to that, as it always has.
        """
        return not isinstance(message.get("connectionId"), str) and message.get("serverId") == self.server_id

    async def receive(self, message: JsonObject, *, timeout: float) -> bool:
        """Act on an ``mcp/message`` notification addressed to this tunnel; True when its tools changed.

        Progress goes to the waiting call; ``tools/list_changed`` refreshes the tool cache (within
        ``timeout``). A refresh that fails keeps the old cache: the browser will say so again.
        """
        method = message.get("method")
        raw_inner = message.get("params")
        inner: JsonObject = raw_inner if isinstance(raw_inner, dict) else {}
        if method == "notifications/progress":
            # Named by connection, it carries MCP's own progressToken; named by server, the requestId of the
            # call it reports on (the stateless carrier's id).
            key = inner.get("progressToken") if isinstance(message.get("connectionId"), str) else message.get(
                "requestId"
            )
            if key is not None:
                self.deliver_progress(key, inner)
            return False
        if method == "notifications/tools/list_changed":
            try:
                await self.list_tools(timeout=timeout)
            except OpenabError:
                return False
            return True
        return False

    def deliver_progress(self, key: Any, params: JsonObject) -> bool:
        """Route a progress notification to the call waiting for it; False when none is waiting."""
        callback = self._progress.get(key)
        if callback is None:
            return False
        try:
            callback(params)
        except Exception:
            log.exception("progress callback failed")
        return True

    # -- retirement -----------------------------------------------------------------------------------------

    async def disconnect(self, *, timeout: float = 5.0) -> None:
        """Retire this tunnel and tell the browser, best effort (the socket may be gone already).

        The registry marks a retired tunnel ``closed`` first (no new calls); the browser still has to hear it.
        """
        if self._disconnected:
            return
        self._disconnected = self.closed = True
        await self._hang_up(timeout=timeout)

    @abc.abstractmethod
    async def _hang_up(self, *, timeout: float) -> None:
        """Say goodbye on the wire, best effort: never raises."""
