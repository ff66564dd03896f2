"""The pod: what outlives a socket, put together once, and the life of its sessions.

Everything per-connection lives in :class:`openab_browser.core.acp.server.AcpServerConnection`. A :class:`Pod` is
built whole by ``openab_browser.gateway.assemble.assemble`` (settings in, every part wired, nothing set later); each
part gets only what it uses (the session store, the tunnel registry, ``spawn``), not the pod.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from .acp.backend import AgentBackend
from .acp.schema import AgentOffer
from .acp.server import AcpConnections, AcpServerConnection, PodParts
from .files import Transfers
from .journal import JOURNAL_METHOD
from .journal.telling import Telling, running_from_call, ties_a_row
from .leftovers import StateDirLock
from .mcp.access import BrowserAccess
from .mcp.journal import ActionJournal
from .sessions import Session, SessionStore
from .settings import Settings
from .tasks import BackgroundTasks
from .tunnel.registry import TunnelRegistry

__all__ = ["Pod"]

log = logging.getLogger(__name__)


class Pod:
    """The pod's long-lived parts and the life of its sessions.

    Owns: the ``sessions`` (:class:`SessionStore`), the browser ``tunnels`` (:class:`TunnelRegistry`), the agent
    ``backend``, the ``browser`` access and the ``files`` in transfer, and the ``tasks`` they run in the background.
    A session's life: :meth:`session_opened` when a socket creates or resumes it; :meth:`evict` when it has been
    idle with no socket for ``session_idle_ttl`` (swept by :meth:`run`) or the pod stops, which fails its file
    transfers, stops its agent, withdraws its tunnels and closes its browser endpoint.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        sessions: SessionStore,
        tunnels: TunnelRegistry,
        tasks: BackgroundTasks,
        backend: AgentBackend,
        agents: AgentOffer,
        browser: BrowserAccess | None = None,
        files: Transfers | None = None,
        journal: ActionJournal | None = None,
    ) -> None:
        self.settings = settings
        self.sessions = sessions
        self.tunnels = tunnels
        self.tasks = tasks
        self.backend = backend
        self.agents = agents
        self.browser = browser
        self.files = files
        self.journal = journal
        self.connections = AcpConnections()
        self.telling = Telling()  # the journal's views on their way to the panels (core/journal/telling.py)
        self._tell_timers: dict[tuple[str, str], asyncio.TimerHandle] = {}
        if journal is not None:
            journal.add_listener(self._tell_journal)
        self._releasing: set[asyncio.Task[Any]] = set()  # evictions made for room, still closing their parts
        self._state_dir_lock = StateDirLock(settings.state_dir)
        self._read_previous = False  # the journal read what an earlier run left (once: start() is called twice)
        self._parts = PodParts(
            settings, sessions=sessions, tunnels=tunnels, backend=backend, agents=agents, spawn=tasks.spawn,
            session_opened=self.session_opened, evict=self.evict, connections=self.connections,
            make_room=self.make_room, files=files, step_decided=journal.decided if journal is not None else None,
        )

    def accept(self, connection_id: str | None = None) -> AcpServerConnection:
        """The ACP side of one new `/acp` socket, wired to this pod's parts."""
        return AcpServerConnection(self._parts, connection_id=connection_id)

    def session_opened(self, session: Session) -> None:
        self.tasks.spawn(self.backend.session_opened(session), name=f"open {session.id}")
        if self.journal is not None and (unknown := self.journal.unknown(session.id)):
            # After the answer to session/new or session/resume (a task runs after the answer is queued): the
            # panel shows the steps that may or may not have happened (docs/journal.md).
            self.tasks.spawn(self._resumed(session.id, unknown), name=f"journal {session.id}")

    async def _resumed(self, session_id: str, steps: list[dict[str, Any]]) -> None:
        self._tell_journal(session_id, steps)

    def _tell_journal(self, session_id: str, steps: list[dict[str, Any]]) -> None:
        """The panel's view of steps that changed state, for the socket that holds the session now, gathered for
        :attr:`Telling.delay` (core/journal/telling.py): off the path of the call's answer, one message a burst."""
        session = self.sessions.get(session_id)
        if session is None or session.owner is None:
            return  # no panel to tell: the one that takes the session up is told its unsettled steps then
        if session.marks_running:
            steps = [step for step in steps if not running_from_call(step)]
        if not steps:
            return
        to = (session_id, session.owner)
        due = self.telling.add(to, steps)
        if due == "now" or any(ties_a_row(step, marks_running=session.marks_running) for step in steps):
            self._flush_journal(to)
        elif due == "schedule":
            self._tell_timers[to] = asyncio.get_running_loop().call_later(self.telling.delay, self._flush_journal, to)

    def _flush_journal(self, to: tuple[str, str]) -> None:
        """``_openab/journal`` with what was gathered for a session's socket, if that socket still holds it."""
        timer = self._tell_timers.pop(to, None)
        if timer is not None:
            timer.cancel()
        steps = self.telling.take(to)
        session_id, owner = to
        session = self.sessions.get(session_id)
        connection = self.connections.get(owner) if session is not None and session.owner == owner else None
        if steps and connection is not None:
            connection.rpc.notify(JOURNAL_METHOD, {"sessionId": session_id, "steps": steps})

    async def evict(self, session_id: str, reason: str) -> None:
        session = self.sessions.remove(session_id)
        if session is not None:
            await self._evicted(session, reason)

    def make_room(self) -> bool:
        """The store is full: evict its spare session (:meth:`SessionStore.spare`) now, so a new one fits at
        once; its agent and endpoint are closed in the background. ``False``: there is none to spare."""
        session = self.sessions.spare()
        if session is None:
            return False
        self.sessions.remove(session.id)
        task = self.tasks.spawn(
            self._evicted(session, "the pod was full, and it was the longest idle session with no socket and "
                                   "no prompt"),
            name=f"evict {session.id}",
        )
        self._releasing.add(task)
        task.add_done_callback(self._releasing.discard)
        return True

    async def _evicted(self, session: Session, reason: str) -> None:
        session_id = session.id
        log.info("session %s evicted: %s", session_id, reason)
        if self.files is not None:
            self.files.session_closed(session_id)  # its transfers fail, their partial files go
        if self.journal is not None:
            self.journal.forget(session_id)
        for to in [to for to in self._tell_timers if to[0] == session_id]:
            self._flush_journal(to)  # the session is out of the store: what was gathered for it goes, its timer too
        for tunnel in self.tunnels.drop_session(session_id, reason):
            self.tasks.spawn(tunnel.disconnect(), name=f"disconnect {tunnel.name}")
        # The agent first (it may still be reading its config file), then the endpoint it used.
        try:
            await self.backend.session_closed(session)
        except Exception:
            log.exception("closing session %s in the agent backend failed", session_id)
        if self.browser is not None:
            try:
                await self.browser.close(session)
            except Exception:
                log.exception("closing the browser endpoint of session %s failed", session_id)

    async def sweep_idle(self) -> None:
        for session in self.sessions.idle(self.settings.session_idle_ttl):
            await self.evict(session.id, f"idle for {self.settings.session_idle_ttl:g} s with no socket")

    async def start(self) -> None:
        """Before serving: the pod takes its state dir, sweeping what an earlier run that did not stop cleanly
        left there (:mod:`.leftovers`), and the browser access starts (the bridge listens on its socket).
        Idempotent."""
        await self._state_dir_lock.take()
        if self.journal is not None and not self._read_previous:
            # Before any call of this run: what has a running record and no end now was left by an earlier run.
            # Once: `openab run` starts the pod before uvicorn and the app's lifespan starts it again.
            self._read_previous = True
            await self.journal.load_previous()
        if self.browser is not None:
            await self.browser.start()

    async def run(self) -> None:
        """Evict idle sessions until cancelled; the gateway runs this for the pod's lifetime."""
        interval = min(30.0, max(0.5, self.settings.session_idle_ttl / 4))
        while True:
            await asyncio.sleep(interval)
            await self.sweep_idle()

    async def drain(self) -> None:
        """Before the sockets close on a stop: new prompts and tool calls are refused; turns and tool calls already
        running get ``drain_timeout`` seconds to end (an interrupted click would leave the agent unsure what
        happened), and turns still running then are cancelled, so each answers before its socket closes."""
        settings = self.settings
        turns, calls = self.connections.turns_in_flight, self.tunnels.calls_in_flight
        if turns or calls:
            log.info("draining: waiting up to %g s for %d turn(s) and %d tool call(s) in flight",
                     settings.drain_timeout, turns, calls)
        async with asyncio.TaskGroup() as group:
            turns_drained = group.create_task(self.connections.drain(settings.drain_timeout, settings.cancel_grace))
            calls_drained = group.create_task(self.tunnels.drain(settings.drain_timeout))
        cancelled, unanswered = turns_drained.result(), calls_drained.result()
        for to in list(self._tell_timers):  # the steps' ends reach the panels before their sockets close
            self._flush_journal(to)
        if cancelled:
            log.warning("drain timed out: %d turn(s) still running were cancelled", cancelled)
        if unanswered:
            log.warning("drain timed out: %d tool call(s) still in flight end with an unknown outcome", unanswered)
        if (turns or calls) and not (cancelled or unanswered):
            log.info("drained: every turn ended and every tool call in flight was answered")

    async def aclose(self) -> None:
        """Evict every session (stopping agents and endpoints), stop the browser access, then background work."""
        # All at once: each endpoint's listener takes a tenth of a second or more to shut down, which 200
        # sessions one after another would stretch past a pod's termination grace period.
        async with asyncio.TaskGroup() as group:
            for session in self.sessions.all():
                group.create_task(self.evict(session.id, "pod shutting down"))
        # Sessions evicted for room close their agents too before the background work is cancelled.
        if self._releasing:
            await asyncio.wait(list(self._releasing))
        if self.browser is not None:
            await self.browser.aclose()
        await self.tasks.aclose()
        if self.files is not None:
            self.files.close()
        if self.journal is not None and self.journal.audit is not None:
            self.journal.audit.close()  # every call has ended: no record is written after this
        self._state_dir_lock.release()  # last: a clean stop, nothing left for the next run to sweep
