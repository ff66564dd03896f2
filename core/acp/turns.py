"""The turn runner of one `/acp` socket: each ``session/prompt`` relayed to the agent backend as a task, on the
turn's own clock (:mod:`..turn_watch`), under the idle timeout and the cancel grace period, and answered once
whatever ends it (the agent, a cancel, the socket going, the pod's stop)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

from ..errors import OpenabError
from ..jsonrpc import INTERNAL_ERROR, SERVER_OVERLOADED, JsonObject, Later, LocalRpcError, RequestTimeout
from ..turn_watch import IDLE, Person, TurnClock
from .backend import AgentBackend, PermissionUnavailable
from .logcontext import log_context
from .schema import STOPPED_META, STOPPED_SHUTDOWN

if TYPE_CHECKING:
    from ..jsonrpc import RpcConnection
    from ..sessions import Session, SessionStore
    from ..settings import Settings
    from ..tasks import Spawn
    from .connections import AcpConnections

__all__ = ["Turn", "TurnRunner"]


class Turn:
    """One running ``session/prompt``: what the backend sees as :class:`PromptTurn`, with its clock (``clock``,
    on which the backend arms its own watchdog: a person asked, here or in the browser, stops both)."""

    def __init__(self, rpc: RpcConnection, person: Person, settings: Settings, session: Session) -> None:
        self._rpc = rpc
        self._settings = settings
        self._session = session
        self.changed = asyncio.Event()  # the turn looks at its clock again
        self.clock: TurnClock = person.clock(changed=self.changed.set)
        self.clock.arm(IDLE, settings.prompt_idle_timeout)
        self.shutdown = False  # cancelled by the gateway's stop, not by the client

    @property
    def session(self) -> Session:
        return self._session

    @property
    def can_ask_permission(self) -> bool:
        return self._session.permission_relay and not self._rpc.closed

    def send_update(self, update: JsonObject) -> None:
        self.clock.active(IDLE)
        self._rpc.notify("session/update", {"sessionId": self._session.id, "update": update})

    async def request_permission(self, params: JsonObject, *, timeout: float) -> JsonObject:
        if not self.can_ask_permission:
            raise PermissionUnavailable("the extension does not answer permission requests")
        ask = object()
        self.clock.asking(ask, up_to=timeout)
        try:
            result = await self._rpc.request(
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
        self.clock.cancel(grace=self._settings.cancel_grace)

    def cancelled_answer(self) -> JsonObject:
        """The session/prompt answer of a cancelled turn: one the gateway's stop cancelled says so."""
        if self.shutdown:
            return {"stopReason": "cancelled", "_meta": {STOPPED_META: STOPPED_SHUTDOWN}}
        return {"stopReason": "cancelled"}


class TurnRunner:
    """The turns running on one socket, at most one a session and ``max_inflight_prompts`` in all."""

    def __init__(self, *, rpc: RpcConnection, person: Person, settings: Settings, backend: AgentBackend,
                 sessions: SessionStore, connections: AcpConnections, spawn: Spawn) -> None:
        self._rpc = rpc
        self._person = person
        self._settings = settings
        self._backend = backend
        self._sessions = sessions
        self._connections = connections
        self._spawn = spawn
        self._turns: dict[str, Turn] = {}

    def __len__(self) -> int:
        return len(self._turns)

    def get(self, session_id: str) -> Turn | None:
        return self._turns.get(session_id)

    def check_room(self) -> None:
        limit = self._settings.max_inflight_prompts
        if len(self._turns) >= limit:
            raise LocalRpcError(SERVER_OVERLOADED, f"Too many in-flight prompts (max {limit})")

    def start(self, session: Session, blocks: list[JsonObject], request_id: object) -> Later:
        """The session's turn, answered when it ends (the caller checked the session may prompt)."""
        session.prompting = session.prompted = True
        turn = Turn(self._rpc, self._person, self._settings, session)
        self._turns[session.id] = turn
        return Later(self._run(turn, blocks, request_id))

    def cancel(self, session_id: str, *, shutdown: bool = False) -> None:
        """Cancel the session's turn, if one runs, as the client's ``session/cancel`` does; ``shutdown``: for the
        gateway's stop, which the turn's answer then names."""
        turn = self._turns.get(session_id)
        if turn is not None:
            turn.cancel(shutdown=shutdown)
            self._spawn(self._backend.cancel(session_id), name=f"cancel {session_id}")

    def cancel_all(self, *, shutdown: bool = False) -> None:
        for session_id in list(self._turns):
            self.cancel(session_id, shutdown=shutdown)

    async def _run(self, turn: Turn, blocks: list[JsonObject], request_id: object) -> JsonObject:
        """Run the backend's turn under the idle timeout and the cancel grace period; what it logs (the agent's
        work included) names its session and request."""
        with log_context(session_tag=self._sessions.naming.tag(turn.session.id), request_id=request_id):
            return await self._turn(turn, blocks)

    async def _turn(self, turn: Turn, blocks: list[JsonObject]) -> JsonObject:
        session = turn.session
        clock = turn.clock
        work = asyncio.get_running_loop().create_task(self._backend.prompt(turn, blocks))
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
                        self._spawn(self._backend.cancel(session.id))
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
            self._spawn(self._backend.cancel(session.id))
            raise
        finally:
            clock.close()
            if not work.done():
                work.cancel()
            with contextlib.suppress(BaseException):
                if work.done() and not work.cancelled():
                    work.exception()
            session.prompting = False
            self._sessions.touch(session)
            self._turns.pop(session.id, None)
            self._connections.turn_ended()
