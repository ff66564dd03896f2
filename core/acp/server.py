"""The ACP agent side of one client connection (the extension's `/acp` socket), transport-agnostic.

It answers ``initialize`` and the ``session/*`` methods with the words of the `/acp` contract, relays prompts
to the pod's agent backend, and opens an MCP-over-ACP tunnel for each ``type:"acp"`` server the client
declares. Fast methods are answered inline so that ordering holds (``initialize`` then ``session/new`` on the
next frame); prompts run as tasks so that the read loop never waits behind one: an unknown method is
answered at once even mid-prompt, which extensions use as a heartbeat.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from .. import METHOD_PREFIX, package_version
from ..jsonrpc import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    NOT_INITIALIZED,
    SERVER_OVERLOADED,
    SESSION_BUSY,
    JsonObject,
    Later,
    LocalRpcError,
    Notification,
    PassThrough,
    Peer,
    Request,
    RpcConnection,
    RpcError,
)
from ..sessions import Session, SessionStore, TooManySessions
from ..tunnel.tunnel import TunnelAddress, TunnelError, TunnelOwner, establish
from ..turn_watch import Person
from .backend import AgentBackend
from .connections import AcpConnections
from .file_methods import FILE_READ_METHOD, FILE_WRITE_METHOD, FileMethods
from .logcontext import SESSION_TAG, log_context
from .schema import (
    AGENT_META,
    FRESH_META,
    MARKS_RUNNING_META,
    PERMISSION_RELAY_META,
    AcpServerDeclaration,
    AgentOffer,
    CancelParams,
    CloseParams,
    InitializeParams,
    NewSessionParams,
    PromptParams,
    ResumeSessionParams,
    acp_declarations,
    checked_prompt,
    initialize_result,
    parse_params,
    validate_session_id,
)
from .turns import TurnRunner

if TYPE_CHECKING:
    from ..files import Transfers
    from ..settings import Settings
    from ..tasks import Spawn
    from ..tunnel.registry import TunnelRegistry
    from ..tunnel.tunnel import Tunnel

__all__ = [
    "FILE_READ_METHOD",
    "FILE_WRITE_METHOD",
    "KEEPALIVE_METHOD",
    "PERSON_METHOD",
    "SESSION_MOVED_METHOD",
    "STEP_METHOD",
    "AcpConnections",
    "AcpServerConnection",
    "PodParts",
]

log = logging.getLogger(__name__)

KEEPALIVE_METHOD: Final = METHOD_PREFIX + "keepalive"
# From the panel: {"asking": true} while a card waits for the person, {"asking": false} once none does.
PERSON_METHOD: Final = METHOD_PREFIX + "person"
# From the extension: {"sessionId", "action", "guard", "rule"}, the guard's decision on a journalled step as it is
# made, for the journal's record of the step (docs/journal.md): kept even if the step's answer is lost.
STEP_METHOD: Final = METHOD_PREFIX + "step"
# Told to a socket whose session another socket resumed: it no longer holds it, nor serves its browser.
SESSION_MOVED_METHOD: Final = METHOD_PREFIX + "session/moved"

def _declares(meta: dict[str, Any] | None, key: str) -> bool:
    """Whether the client's ``_meta`` says ``key`` is true of it (anything but ``true`` is no)."""
    return meta is not None and meta.get(key) is True


@dataclass(frozen=True, slots=True)
class PodParts:
    """What every `/acp` connection of a pod shares, put together once by the pod: each connection gets these and
    nothing else of the pod."""

    settings: Settings
    sessions: SessionStore
    tunnels: TunnelRegistry
    backend: AgentBackend
    agents: AgentOffer
    spawn: Spawn
    session_opened: Callable[[Session], None]
    evict: Callable[[str, str], Awaitable[None]]
    connections: AcpConnections
    # The pod full: evict a session nobody holds or talked in (True: one went).
    make_room: Callable[[], bool] | None = None
    # The pod's file transfers (None: the file methods are not offered).
    files: Transfers | None = None
    # The guard's decision on a journalled step, told by the browser as it is made: (session, action, guard,
    # rule) to the pod's journal (None: not kept).
    step_decided: Callable[[str, str, str, str], None] | None = None


class AcpServerConnection:
    """One client connection. The transport feeds ``rpc`` and runs :meth:`run`, then :meth:`connection_lost`.

    A request passes one table (``initialize`` first, then every other method of the table, answered only once
    initialized); notifications another. Sessions and tunnels are this class's; prompts are :class:`TurnRunner`'s
    and the file methods :class:`FileMethods`'.
    """

    def __init__(self, parts: PodParts, *, connection_id: str | None = None) -> None:
        self.settings = settings = parts.settings
        self.sessions = parts.sessions
        self.tunnels = parts.tunnels
        self.backend = parts.backend
        self.agents = parts.agents
        self.spawn = parts.spawn
        self.connections = parts.connections
        self._parts = parts
        self.id = connection_id or f"acp_conn_{uuid.uuid4()}"
        self.generation = parts.sessions.next_owner_generation()
        self.rpc = RpcConnection(
            self,
            name=self.id,
            # A screenshot's base64 is relayed to the agent as it came, not parsed and written out again.
            peer=Peer(max_method_bytes=settings.max_method_frame_bytes, max_open_requests=512,
                      pass_through=PassThrough()),
        )
        self._initialized = False
        self._sessions: set[str] = set()
        self._establishing = 0
        # Whether a card waits for the person in this socket's panel: it stops the clocks of its turns and calls.
        self.person = Person()
        self.turns = TurnRunner(rpc=self.rpc, person=self.person, settings=settings, backend=parts.backend,
                                sessions=parts.sessions, connections=parts.connections, spawn=parts.spawn)
        self._requests: dict[str, Callable[[Request], Any]] = {
            "session/new": self._new_session,
            "session/resume": self._resume_session,
            "session/prompt": self._prompt,
            "session/close": self._close_session,
        }
        # The file methods, bound to this socket's sessions (a session must be one it holds): the JSON methods
        # here and the binary frames the endpoint reads (docs/files.md) go through the same checks.
        self.files = FileMethods(parts.files, self._owned_session) if parts.files is not None else None
        if (files := self.files) is not None:
            self._requests[FILE_READ_METHOD] = lambda request: files.read(request.params)
            self._requests[FILE_WRITE_METHOD] = lambda request: files.write(request.params)
        self._notifications: dict[str, Callable[[Any], None]] = {
            "session/cancel": self._cancel,
            PERSON_METHOD: self._person,
            STEP_METHOD: self._step,
            "mcp/message": self._mcp_message,
        }
        self.connections.add(self)

    # -- the dispatcher ----------------------------------------------------------------------------------------

    def handle_request(self, request: Request) -> Any:
        session_id = request.params.get("sessionId") if isinstance(request.params, dict) else None
        tag = self.sessions.naming.tag(session_id) if isinstance(session_id, str) and session_id else None
        with log_context(session_tag=tag, request_id=request.id):
            return self._dispatch(request)

    def _dispatch(self, request: Request) -> Any:
        if request.method == "initialize":
            return self._initialize(request.params)
        handler = self._requests.get(request.method)
        if handler is None:
            if request.method == "session/cancel":
                raise LocalRpcError(INVALID_REQUEST, "session/cancel is a notification and must not carry an id")
            raise LocalRpcError.method_not_found(request.method)
        if not self._initialized:
            raise LocalRpcError(NOT_INITIALIZED, "Not initialized")
        return handler(request)

    def handle_notification(self, notification: Notification) -> None:
        # Anything else (including request-only methods sent without an id) is ignored, as the contract says.
        handler = self._notifications.get(notification.method)
        if handler is not None:
            handler(notification.params)

    def _mcp_message(self, params: Any) -> None:
        self.rpc.spawn(self.tunnels.deliver(self.id, params))

    # -- initialize / sessions ---------------------------------------------------------------------------------

    def _initialize(self, params: Any) -> JsonObject:
        parsed = parse_params(InitializeParams, params, "initialize params")
        if parsed.protocol_version < 1:
            raise LocalRpcError(
                INVALID_PARAMS, f"Unsupported protocolVersion {parsed.protocol_version}; this agent supports 1"
            )
        self._initialized = True
        return initialize_result(package_version(), self.agents)

    def _check_declarations(self, declared: Any) -> list[AcpServerDeclaration]:
        servers = acp_declarations(declared)
        limit = self.settings.max_servers_per_session
        if len(servers) > limit:
            raise LocalRpcError(SERVER_OVERLOADED, f"Too many type:acp servers declared ({len(servers)}, max {limit})")
        return servers

    def _hold(self, session_id: str | None) -> None:
        limit = self.settings.max_sessions_per_connection
        if session_id not in self._sessions and len(self._sessions) >= limit:
            raise LocalRpcError(SERVER_OVERLOADED, f"Too many sessions on this connection (max {limit}): close one "
                                              "(session/close) before opening another")

    def _open(self, session_id: str | None, meta: dict[str, Any] | None, agent: str) -> Session:
        """Create or take over a session; ``agent`` becomes its agent unless it already has one (a resumed
        session keeps the agent it was opened with)."""
        known = session_id is not None and self.sessions.get(session_id) is not None
        if not known and self.sessions.full and self._parts.make_room is not None:
            self._parts.make_room()
        try:
            session, created = self.sessions.open(
                session_id, owner=self.id, owner_generation=self.generation
            )
        except TooManySessions as exc:
            raise LocalRpcError(SERVER_OVERLOADED, str(exc)) from None
        self._sessions.add(session.id)
        if session.agent is None:
            session.agent = agent
        session.permission_relay = _declares(meta, PERMISSION_RELAY_META)
        session.marks_running = _declares(meta, MARKS_RUNNING_META)
        # Inside handle_request's log_context, which puts it back: what session/new goes on to log names it.
        SESSION_TAG.set(self.sessions.naming.tag(session.id))
        log.info("session %s %s on %s", session.id, "created" if created else "resumed", self.id)
        self._parts.session_opened(session)
        return session

    def _new_session(self, request: Request) -> JsonObject:
        parsed = parse_params(NewSessionParams, request.params)
        servers = self._check_declarations(parsed.mcp_servers)
        self._hold(None)
        agent = self.agents.choose(parsed.meta)  # before anything is made: an unknown choice makes nothing
        # `cwd` is the browser's idea of a directory, never the agent's: each session gets its own.
        session = self._open(None, parsed.meta, agent)
        self._open_tunnels(session, servers)
        return {"sessionId": session.id, "_meta": {AGENT_META: session.agent}}

    def _resume_session(self, request: Request) -> JsonObject:
        parsed = parse_params(ResumeSessionParams, request.params)
        session_id = validate_session_id(parsed.session_id)
        servers = self._check_declarations(parsed.mcp_servers)
        existing = self.sessions.get(session_id)
        if existing is not None and existing.prompting:
            raise LocalRpcError(SESSION_BUSY, "Session busy: a prompt is in progress; cannot resume")
        self._hold(session_id)
        previous_owner = existing.owner if existing is not None else None
        session = self._open(session_id, parsed.meta, self.agents.resumed(parsed.meta))
        if previous_owner is not None and previous_owner != self.id:
            taken_from = self.connections.get(previous_owner)
            if taken_from is not None:
                taken_from.session_moved(session.id)
        if isinstance(parsed.mcp_servers, list):
            retired = self.tunnels.withdraw(session.id, (s.server_id for s in servers), self.generation)
            self._disconnect(retired)
        self._open_tunnels(session, servers)
        # Said back to a client that names its agent (a restarted pod may no longer offer it), and to one that speaks
        # our _meta, whether the pod took the id up afresh; a bare ACP client gets the bare ACP answer.
        meta: JsonObject = {AGENT_META: session.agent} if parsed.meta and AGENT_META in parsed.meta else {}
        if existing is None and parsed.meta:
            meta[FRESH_META] = True
        return {"_meta": meta} if meta else {}

    def session_moved(self, session_id: str) -> None:
        """Another socket resumed this socket's session: say so, and stop serving that session's browser here.

        Silently sharing would let whoever names a session's id drive the browser attached to it.
        """
        self._sessions.discard(session_id)
        self._disconnect(self.tunnels.remove_owner(self.id, "the session moved to another socket",
                                                   session_id=session_id))
        self.rpc.notify(SESSION_MOVED_METHOD, {
            "sessionId": session_id,
            "reason": "the session was resumed on another connection; resume it here to take it back",
        })
        log.info("%s: a session moved to another socket", self.id)

    def _close_session(self, request: Request) -> JsonObject | Later:
        parsed = parse_params(CloseParams, request.params)
        session = self.sessions.get(parsed.session_id)
        if session is None or parsed.session_id not in self._sessions:
            return {}  # already closed, or never ours to close: closing is idempotent
        self._owned_session(parsed.session_id)  # refuses a session another socket resumed since
        turn = self.turns.get(session.id)
        if turn is not None:
            turn.cancel()
        self._sessions.discard(session.id)
        return Later(self._close(session))

    async def _close(self, session: Session) -> JsonObject:
        await self._parts.evict(session.id, "closed by the client")
        return {}

    # -- tunnels -----------------------------------------------------------------------------------------------

    def _open_tunnels(self, session: Session, servers: list[AcpServerDeclaration]) -> None:
        """Start establishing each declared server; runs after the response above is queued."""
        for server in servers:
            installed = self.tunnels.find_server(self.id, server.server_id)
            if installed is not None and installed.session_id == session.id and not installed.closed:
                continue
            if self._establishing >= self.settings.max_inflight_establishes:
                log.warning("%s: too many tunnels being established; %r not opened", self.id, server.name)
                continue
            self._establishing += 1
            generation = self.tunnels.next_generation()
            self.rpc.spawn(self._establish(session, server, generation), name=f"establish {server.name}")

    async def _establish(self, session: Session, server: AcpServerDeclaration, generation: int) -> None:
        settings = self.settings
        try:
            owner = TunnelOwner(self.id, self.generation, self.person)
            address = TunnelAddress(session.id, server.server_id, server.name, owner, generation)
            tunnel = await establish(
                self.rpc,
                address,
                timeout=settings.tunnel_connect_timeout,
                request_timeout=settings.tunnel_timeout,
            )
        except TunnelError as exc:
            log.warning("browser tunnel not established: %s", exc)
            return
        except RpcError as exc:
            log.warning("browser tunnel %r not established: %s", server.name, exc.message)
            return
        finally:
            self._establishing -= 1
        if self.sessions.get(session.id) is not session:
            self._disconnect([tunnel])  # evicted while we were connecting
            return
        self._disconnect(self.tunnels.install(tunnel))

    # -- prompts -----------------------------------------------------------------------------------------------

    def _owned_session(self, session_id: str | None) -> Session:
        if not session_id:
            raise LocalRpcError(INVALID_PARAMS, "Missing sessionId")
        session = self.sessions.get(session_id)
        if session is None or session_id not in self._sessions:
            raise LocalRpcError(INVALID_PARAMS, f"Unknown session: {session_id}")
        if session.owner != self.id:
            raise LocalRpcError(
                INVALID_PARAMS, f"Session {session_id} was resumed on another connection; resume it here first"
            )
        return session

    def _prompt(self, request: Request) -> Later:
        params = request.params
        if isinstance(params, dict) and not params.get("sessionId"):
            raise LocalRpcError(INVALID_PARAMS, "Missing sessionId")
        parsed = parse_params(PromptParams, params)
        session = self._owned_session(parsed.session_id)
        if self.connections.draining:
            raise LocalRpcError(SERVER_OVERLOADED, "The gateway is shutting down for a restart: send the prompt again "
                                              "once the connection is back")
        if session.prompting:
            raise LocalRpcError(SESSION_BUSY, "Session busy: a prompt is already in progress")
        self.turns.check_room()
        return self.turns.start(session, checked_prompt(parsed.prompt), request.id)

    @property
    def turns_in_flight(self) -> int:
        return len(self.turns)

    def cancel_turns(self, *, shutdown: bool = False) -> None:
        """Cancel every turn running on this socket, as the client's ``session/cancel`` would; ``shutdown``: for
        the gateway's stop, which each turn's answer then names."""
        self.turns.cancel_all(shutdown=shutdown)

    def _cancel(self, params: Any) -> None:
        try:
            parsed = parse_params(CancelParams, params)
        except RpcError:
            return  # a notification gets no error answer
        self.turns.cancel(parsed.session_id)

    def _person(self, params: Any) -> None:
        """The panel says a card waits for the person (or none does now): every timer of this socket's turns
        and tool calls stops meanwhile, each pause bounded by the person's wait (``permission_timeout``)."""
        asking = params.get("asking") if isinstance(params, dict) else None
        if not isinstance(asking, bool):
            return  # a notification gets no error answer
        self.person.asked(asking, up_to=self.settings.permission_timeout)

    def _step(self, params: Any) -> None:
        """The browser's guard decided on a step of a session this socket holds (a notification: a bad one is
        dropped, never answered); the journal checks that the action is a step of that session."""
        if self._parts.step_decided is None or not isinstance(params, dict):
            return
        session_id, action, guard, rule = (params.get(k) for k in ("sessionId", "action", "guard", "rule"))
        if not (isinstance(session_id, str) and isinstance(action, str) and isinstance(guard, str)
                and isinstance(rule, str)):
            return
        session = self.sessions.get(session_id)
        if session is None or session_id not in self._sessions or session.owner != self.id:
            return  # another socket's session, or none: nothing of it is this socket's to say
        self._parts.step_decided(session_id, action, guard, rule)

    # -- life --------------------------------------------------------------------------------------------------

    async def keepalive(self) -> None:
        """Send a notification whenever the socket has been quiet for the keepalive interval.

        Protocol-level pings do not keep an MV3 service worker alive; application messages do.
        """
        interval = self.settings.keepalive_interval
        while not self.rpc.closed:
            quiet_for = time.monotonic() - self.rpc.last_sent
            if quiet_for >= interval:
                self.rpc.notify(KEEPALIVE_METHOD, {})
                quiet_for = 0.0
            await asyncio.sleep(interval - quiet_for)

    def _disconnect(self, tunnels: list[Tunnel]) -> None:
        """Retired tunnels say ``mcp/disconnect`` in the background: the browser may be slow to answer."""
        for tunnel in tunnels:
            self.spawn(tunnel.disconnect(), name=f"disconnect {tunnel.name}")

    def connection_lost(self, reason: str) -> None:
        """The socket is gone: fail in-flight calls now, drop this socket's tunnels, free its sessions."""
        self.connections.discard(self)
        self.rpc.close(reason)
        self.tunnels.remove_owner(self.id, f"socket closed: {reason}")
        released = self.sessions.release_owner(self.id)
        log.info("%s closed (%s); %d session(s) left resumable", self.id, reason, len(released))
