"""The ACP agent side of one client connection (the extension's `/acp` socket), transport-agnostic.

It answers ``initialize`` and the ``session/*`` methods with the words of the `/acp` contract, relays prompts
to the pod's agent backend, and opens an MCP-over-ACP tunnel for each ``type:"acp"`` server the client
declares. Fast methods are answered inline so that ordering holds (``initialize`` then ``session/new`` on the
next frame); prompts run as tasks so that the read loop never waits behind one: an unknown method is
answered at once even mid-prompt, which extensions use as a heartbeat.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final

from .. import METHOD_PREFIX, package_version
from ..errors import FileRefused, OpenabError
from ..files import CHUNK
from ..jsonrpc import (
    INTERNAL_ERROR,
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
    RequestTimeout,
    RpcConnection,
    RpcError,
)
from ..sessions import Session, SessionStore, TooManySessions
from ..tunnel.tunnel import TunnelAddress, TunnelError, TunnelOwner, establish
from ..turn_watch import IDLE, Person, TurnClock
from .backend import AgentBackend, PermissionUnavailable
from .logcontext import SESSION_TAG, log_context
from .schema import (
    AGENT_META,
    FRESH_META,
    PERMISSION_RELAY_META,
    STOPPED_META,
    STOPPED_SHUTDOWN,
    AcpServerDeclaration,
    AgentOffer,
    CancelParams,
    CloseParams,
    FileReadParams,
    FileWriteParams,
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
# The extension reads an upload's file and writes a download's, chunk by chunk (docs/files.md).
FILE_READ_METHOD: Final = METHOD_PREFIX + "file/read"
FILE_WRITE_METHOD: Final = METHOD_PREFIX + "file/write"
_SESSION_METHODS: Final = frozenset({"session/new", "session/resume", "session/prompt", "session/close",
                                     FILE_READ_METHOD, FILE_WRITE_METHOD})
# The longest base64 a chunk of CHUNK bytes can be: anything longer is refused before it is decoded.
_MAX_CHUNK_BASE64: Final = 4 * -(-CHUNK // 3)


def _wants_permission_relay(meta: dict[str, Any] | None) -> bool:
    if not meta:
        return False
    return meta.get(PERMISSION_RELAY_META) is True


class _Turn:
    """One running ``session/prompt``: what the backend sees as :class:`PromptTurn`, with its clock (``clock``,
    on which the backend arms its own watchdog: a person asked, here or in the browser, stops both)."""

    def __init__(self, server: AcpServerConnection, session: Session) -> None:
        self._server = server
        self._session = session
        self.changed = asyncio.Event()  # the turn looks at its clock again
        self.clock: TurnClock = server.person.clock(changed=self.changed.set)
        self.clock.arm(IDLE, server.settings.prompt_idle_timeout)
        self.shutdown = False  # cancelled by the gateway's stop, not by the client

    @property
    def session(self) -> Session:
        return self._session

    @property
    def can_ask_permission(self) -> bool:
        return self._session.permission_relay and not self._server.rpc.closed

    def send_update(self, update: JsonObject) -> None:
        self.clock.active(IDLE)
        self._server.rpc.notify("session/update", {"sessionId": self._session.id, "update": update})

    async def request_permission(self, params: JsonObject, *, timeout: float) -> JsonObject:
        if not self.can_ask_permission:
            raise PermissionUnavailable("the extension does not answer permission requests")
        ask = object()
        self.clock.asking(ask, up_to=timeout)
        try:
            result = await self._server.rpc.request(
                "session/request_permission", {**params, "sessionId": self._session.id}, timeout=timeout
            )
        except RequestTimeout:
            raise TimeoutError(f"the person did not answer the permission request in {timeout:g} s") from None
        except OpenabError as exc:  # the socket went, or the extension answered with an error
            raise PermissionUnavailable(f"the extension could not answer: {exc}") from None
        finally:
            self.clock.answered(ask)
        if not isinstance(result, dict) or not isinstance(result.get("outcome"), dict):
            raise PermissionUnavailable("the extension answered the permission request without an outcome")
        return result

    def cancel(self, *, shutdown: bool = False) -> None:
        # A turn the client cancelled first stays the client's cancel, whatever cancels it again.
        self.shutdown = self.shutdown or (shutdown and not self.clock.cancelled)
        self.clock.cancel(grace=self._server.settings.cancel_grace)

    def cancelled_answer(self) -> JsonObject:
        """The session/prompt answer of a cancelled turn: one the gateway's stop cancelled says so."""
        if self.shutdown:
            return {"stopReason": "cancelled", "_meta": {STOPPED_META: STOPPED_SHUTDOWN}}
        return {"stopReason": "cancelled"}


class AcpConnections:
    """The pod's live `/acp` connections by id, so a socket that loses a session to another can be told, and
    the turns running on them, so a stop can let them finish."""

    def __init__(self) -> None:
        self._by_id: dict[str, AcpServerConnection] = {}
        self._turn_ended = asyncio.Event()
        self.draining = False

    def __len__(self) -> int:
        return len(self._by_id)

    def add(self, connection: AcpServerConnection) -> None:
        self._by_id[connection.id] = connection

    def discard(self, connection: AcpServerConnection) -> None:
        if self._by_id.get(connection.id) is connection:
            del self._by_id[connection.id]
            self._turn_ended.set()

    def get(self, connection_id: str) -> AcpServerConnection | None:
        return self._by_id.get(connection_id)

    @property
    def turns_in_flight(self) -> int:
        """Prompts running on the pod's live sockets."""
        return sum(c.turns_in_flight for c in self._by_id.values())

    def turn_ended(self) -> None:
        self._turn_ended.set()

    async def drain(self, timeout: float, grace: float) -> int:
        """Refuse new prompts and let running turns end within ``timeout`` s; then cancel the rest, which answer
        ``cancelled`` within ``grace`` s (before their sockets close, so the person sees the turn end). Returns
        how many turns had to be cancelled."""
        self.draining = True
        await self._until_no_turns(timeout)
        left = self.turns_in_flight
        if left:
            for connection in list(self._by_id.values()):
                connection.cancel_turns(shutdown=True)
            await self._until_no_turns(grace)
        return left

    async def _until_no_turns(self, timeout: float) -> None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                while self.turns_in_flight:
                    self._turn_ended.clear()
                    await self._turn_ended.wait()


class AcpServerConnection:
    """One client connection. The transport feeds ``rpc`` and runs :meth:`run`, then :meth:`connection_lost`."""

    def __init__(
        self,
        settings: Settings,
        *,
        sessions: SessionStore,
        tunnels: TunnelRegistry,
        backend: AgentBackend,
        agents: AgentOffer,
        spawn: Spawn,
        session_opened: Callable[[Session], None],
        evict: Callable[[str, str], Awaitable[None]],
        connections: AcpConnections | None = None,
        connection_id: str | None = None,
        make_room: Callable[[], bool] | None = None,
        files: Transfers | None = None,
        step_decided: Callable[[str, str, str, str], None] | None = None,
    ) -> None:
        self.settings = settings
        self.sessions = sessions
        self.tunnels = tunnels
        self.backend = backend
        self.agents = agents
        self.spawn = spawn
        self._session_opened = session_opened
        self._evict = evict
        self._make_room = make_room  # the pod full: evict a session nobody holds or talked in (True: one went)
        self.files = files  # the pod's file transfers (None: the file methods are not offered)
        # The guard's decision on a journalled step, told by the browser as it is made: (session, action, guard,
        # rule) to the pod's journal (None: not kept).
        self._step_decided = step_decided
        self.connections = connections if connections is not None else AcpConnections()
        self.id = connection_id or f"acp_conn_{uuid.uuid4()}"
        self.generation = sessions.next_owner_generation()
        self.rpc = RpcConnection(
            self,
            name=self.id,
            # A screenshot's base64 is relayed to the agent as it came, not parsed and written out again.
            peer=Peer(max_method_bytes=settings.max_method_frame_bytes, max_open_requests=512,
                      pass_through=PassThrough()),
        )
        self._initialized = False
        self._sessions: set[str] = set()
        self._turns: dict[str, _Turn] = {}
        self._establishing = 0
        # Whether a card waits for the person in this socket's panel: it stops the clocks of its turns and calls.
        self.person = Person()
        self.connections.add(self)

    # -- the dispatcher ----------------------------------------------------------------------------------------

    def handle_request(self, request: Request) -> Any:
        session_id = request.params.get("sessionId") if isinstance(request.params, dict) else None
        tag = self.sessions.naming.tag(session_id) if isinstance(session_id, str) and session_id else None
        with log_context(session_tag=tag, request_id=request.id):
            return self._dispatch(request)

    def _dispatch(self, request: Request) -> Any:
        method, params = request.method, request.params
        if method == "initialize":
            return self._initialize(params)
        if method in _SESSION_METHODS and not self._initialized:
            raise LocalRpcError(NOT_INITIALIZED, "Not initialized")
        if method == "session/new":
            return self._new_session(params)
        if method == "session/resume":
            return self._resume_session(params)
        if method == "session/prompt":
            return self._prompt(params, request.id)
        if method == "session/close":
            return self._close_session(params)
        if method == FILE_READ_METHOD and self.files is not None:
            return self._file_read(params)
        if method == FILE_WRITE_METHOD and self.files is not None:
            return self._file_write(params)
        if method == "session/cancel":
            raise LocalRpcError(INVALID_REQUEST, "session/cancel is a notification and must not carry an id")
        raise LocalRpcError.method_not_found(method)

    def handle_notification(self, notification: Notification) -> None:
        if notification.method == "session/cancel":
            self._cancel(notification.params)
        elif notification.method == PERSON_METHOD:
            self._person(notification.params)
        elif notification.method == STEP_METHOD:
            self._step(notification.params)
        elif notification.method == "mcp/message":
            self.rpc.spawn(self.tunnels.deliver(self.id, notification.params))
        # Anything else (including request-only methods sent without an id) is ignored, as the contract says.

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
        if not known and self.sessions.full and self._make_room is not None:
            self._make_room()
        try:
            session, created = self.sessions.open(
                session_id, owner=self.id, owner_generation=self.generation
            )
        except TooManySessions as exc:
            raise LocalRpcError(SERVER_OVERLOADED, str(exc)) from None
        self._sessions.add(session.id)
        if session.agent is None:
            session.agent = agent
        session.permission_relay = _wants_permission_relay(meta)
        # Inside handle_request's log_context, which puts it back: what session/new goes on to log names it.
        SESSION_TAG.set(self.sessions.naming.tag(session.id))
        log.info("session %s %s on %s", session.id, "created" if created else "resumed", self.id)
        self._session_opened(session)
        return session

    def _new_session(self, params: Any) -> JsonObject:
        parsed = parse_params(NewSessionParams, params)
        servers = self._check_declarations(parsed.mcp_servers)
        self._hold(None)
        agent = self.agents.choose(parsed.meta)  # before anything is made: an unknown choice makes nothing
        # `cwd` is the browser's idea of a directory, never the agent's: each session gets its own.
        session = self._open(None, parsed.meta, agent)
        self._open_tunnels(session, servers)
        return {"sessionId": session.id, "_meta": {AGENT_META: session.agent}}

    def _resume_session(self, params: Any) -> JsonObject:
        parsed = parse_params(ResumeSessionParams, params)
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

    def _close_session(self, params: Any) -> JsonObject | Later:
        parsed = parse_params(CloseParams, params)
        session = self.sessions.get(parsed.session_id)
        if session is None or parsed.session_id not in self._sessions:
            return {}  # already closed, or never ours to close: closing is idempotent
        self._owned_session(parsed.session_id)  # refuses a session another socket resumed since
        turn = self._turns.get(session.id)
        if turn is not None:
            turn.cancel()
        self._sessions.discard(session.id)
        return Later(self._close(session))

    async def _close(self, session: Session) -> JsonObject:
        await self._evict(session.id, "closed by the client")
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

    def _prompt(self, params: Any, request_id: object) -> Later:
        if isinstance(params, dict) and not params.get("sessionId"):
            raise LocalRpcError(INVALID_PARAMS, "Missing sessionId")
        parsed = parse_params(PromptParams, params)
        session = self._owned_session(parsed.session_id)
        if self.connections.draining:
            raise LocalRpcError(SERVER_OVERLOADED, "The gateway is shutting down for a restart: send the prompt again "
                                              "once the connection is back")
        if session.prompting:
            raise LocalRpcError(SESSION_BUSY, "Session busy: a prompt is already in progress")
        limit = self.settings.max_inflight_prompts
        if len(self._turns) >= limit:
            raise LocalRpcError(SERVER_OVERLOADED, f"Too many in-flight prompts (max {limit})")
        blocks = checked_prompt(parsed.prompt)
        session.prompting = session.prompted = True
        turn = _Turn(self, session)
        self._turns[session.id] = turn
        return Later(self._run_turn(turn, blocks, request_id))

    async def _run_turn(self, turn: _Turn, blocks: list[JsonObject], request_id: object) -> JsonObject:
        """Run the backend's turn under the idle timeout and the cancel grace period; what it logs (the agent's
        work included) names its session and request."""
        with log_context(session_tag=self.sessions.naming.tag(turn.session.id), request_id=request_id):
            return await self._turn(turn, blocks)

    async def _turn(self, turn: _Turn, blocks: list[JsonObject]) -> JsonObject:
        session = turn.session
        clock = turn.clock
        work = asyncio.get_running_loop().create_task(self.backend.prompt(turn, blocks))
        try:
            while not work.done():
                turn.changed.clear()
                if clock.cancelled:
                    left = clock.grace_left()
                    if left <= 0:
                        # The backend did not stop in time; the client was promised an answer.
                        work.cancel()
                        return turn.cancelled_answer()
                else:
                    # Stopped while a person is asked: their wait has its own bound (docs/architecture.md).
                    left = clock.left(IDLE)
                    if left <= 0:
                        work.cancel()
                        self.spawn(self.backend.cancel(session.id))
                        raise LocalRpcError(INTERNAL_ERROR, "Timed out waiting for agent backend")
                changed = asyncio.ensure_future(turn.changed.wait())
                try:
                    await asyncio.wait({work, changed}, timeout=left, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    changed.cancel()
            stop_reason = work.result()
            if clock.cancelled:
                return turn.cancelled_answer()
            return {"stopReason": stop_reason}
        except asyncio.CancelledError:
            # The socket went away mid-turn: the agent must not keep working for nobody.
            work.cancel()
            self.spawn(self.backend.cancel(session.id))
            raise
        finally:
            clock.close()
            if not work.done():
                work.cancel()
            with contextlib.suppress(BaseException):
                if work.done() and not work.cancelled():
                    work.exception()
            session.prompting = False
            self.sessions.touch(session)
            self._turns.pop(session.id, None)
            self.connections.turn_ended()

    @property
    def turns_in_flight(self) -> int:
        return len(self._turns)

    def cancel_turns(self, *, shutdown: bool = False) -> None:
        """Cancel every turn running on this socket, as the client's ``session/cancel`` would; ``shutdown``: for
        the gateway's stop, which each turn's answer then names."""
        for session_id, turn in list(self._turns.items()):
            self._cancel_turn(session_id, turn, shutdown=shutdown)

    def _cancel(self, params: Any) -> None:
        try:
            parsed = parse_params(CancelParams, params)
        except RpcError:
            return  # a notification gets no error answer
        turn = self._turns.get(parsed.session_id)
        if turn is not None:
            self._cancel_turn(parsed.session_id, turn)

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
        if self._step_decided is None or not isinstance(params, dict):
            return
        session_id, action, guard, rule = (params.get(k) for k in ("sessionId", "action", "guard", "rule"))
        if not (isinstance(session_id, str) and isinstance(action, str) and isinstance(guard, str)
                and isinstance(rule, str)):
            return
        session = self.sessions.get(session_id)
        if session is None or session_id not in self._sessions or session.owner != self.id:
            return  # another socket's session, or none: nothing of it is this socket's to say
        self._step_decided(session_id, action, guard, rule)

    def _cancel_turn(self, session_id: str, turn: _Turn, *, shutdown: bool = False) -> None:
        turn.cancel(shutdown=shutdown)
        self.spawn(self.backend.cancel(session_id), name=f"cancel {session_id}")

    # -- files -------------------------------------------------------------------------------------------------

    def _file_read(self, params: Any) -> JsonObject:
        """A chunk of an upload: only of a transfer of a session this socket holds. One ``pread`` of at most
        512 KiB, inline: short enough for the loop, and chunks keep their order."""
        assert self.files is not None
        parsed = parse_params(FileReadParams, params)
        self._owned_session(parsed.session_id)
        try:
            data, eof = self.files.read(parsed.session_id, parsed.transfer, parsed.offset)
        except FileRefused as exc:
            raise LocalRpcError(INVALID_PARAMS, str(exc)) from None
        return {"data": base64.b64encode(data).decode("ascii"), "eof": eof}

    def _file_write(self, params: Any) -> JsonObject:
        """The next chunk of a download, written inline (at most 512 KiB): writes are sequential by contract."""
        assert self.files is not None
        parsed = parse_params(FileWriteParams, params)
        self._owned_session(parsed.session_id)
        if len(parsed.data) > _MAX_CHUNK_BASE64:
            raise LocalRpcError(INVALID_PARAMS, f"a chunk is at most {CHUNK} bytes ({_MAX_CHUNK_BASE64} characters "
                                                "of base64): send smaller chunks")
        try:
            data = base64.b64decode(parsed.data, validate=True)
        except (binascii.Error, ValueError):
            raise LocalRpcError(INVALID_PARAMS, "`data` is not valid base64") from None
        try:
            written = self.files.write(parsed.session_id, parsed.transfer, parsed.offset, data)
        except FileRefused as exc:
            raise LocalRpcError(INVALID_PARAMS, str(exc)) from None
        return {"written": written}

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
