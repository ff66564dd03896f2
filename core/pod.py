"""The pod: the one object that ties sessions, browser tunnels and the agent backend together.

Everything per-connection lives in :class:`openab.core.acp_server.AcpServerConnection`; everything that
outlives a socket lives here. Components that must follow a session's life (the agent runtime, a proxy
endpoint per session) register as :class:`SessionObserver`.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import Coroutine
from typing import Any, Protocol

from .acp.backend import AgentBackend, NoAgentBackend
from .acp.sessions import Session, SessionStore
from .settings import Settings
from .tunnel.registry import TunnelRegistry
from .tunnel.tunnel import Tunnel

__all__ = ["Pod", "SessionObserver"]

log = logging.getLogger(__name__)


class SessionObserver(Protocol):
    async def session_opened(self, session: Session) -> None: ...

    async def session_closed(self, session: Session) -> None: ...


class Pod:
    def __init__(self, settings: Settings | None = None, *, backend: AgentBackend | None = None) -> None:
        self.settings = settings or Settings()
        self.sessions = SessionStore()
        self.tunnels = TunnelRegistry(call_timeout=self.settings.tunnel_timeout)
        self.backend: AgentBackend = backend or NoAgentBackend()
        self._observers: list[SessionObserver] = []
        self._connection_generations = itertools.count(1)
        self._tasks: set[asyncio.Task[Any]] = set()

    def add_observer(self, observer: SessionObserver) -> None:
        self._observers.append(observer)

    def next_connection_generation(self) -> int:
        return next(self._connection_generations)

    def spawn(self, work: Coroutine[Any, Any, Any], *, name: str | None = None) -> asyncio.Task[Any]:
        """Background work owned by the pod (it outlives the socket that started it)."""
        task = asyncio.get_running_loop().create_task(work, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._finished)
        return task

    def _finished(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("pod task %s failed", task.get_name(), exc_info=task.exception())

    # -- session life ---------------------------------------------------------------------------------------

    def session_opened(self, session: Session) -> None:
        for observer in [self.backend, *self._observers]:
            self.spawn(observer.session_opened(session), name=f"open {session.id}")

    def disconnect_tunnels(self, tunnels: list[Tunnel]) -> None:
        for tunnel in tunnels:
            self.spawn(tunnel.disconnect(), name=f"disconnect {tunnel.name}")

    async def evict(self, session_id: str, reason: str) -> None:
        session = self.sessions.remove(session_id)
        if session is None:
            return
        log.info("session %s evicted: %s", session_id, reason)
        self.disconnect_tunnels(self.tunnels.drop_session(session_id, reason))
        for observer in [self.backend, *self._observers]:
            try:
                await observer.session_closed(session)
            except Exception:
                log.exception("closing session %s in %s failed", session_id, type(observer).__name__)

    async def sweep_idle(self) -> None:
        for session in self.sessions.idle(self.settings.session_idle_ttl):
            await self.evict(session.id, f"idle for {self.settings.session_idle_ttl:g} s with no socket")

    async def run(self) -> None:
        """Evict idle sessions until cancelled; the gateway runs this for the pod's lifetime."""
        interval = min(30.0, max(0.5, self.settings.session_idle_ttl / 4))
        while True:
            await asyncio.sleep(interval)
            await self.sweep_idle()

    async def aclose(self) -> None:
        """Evict every session (stopping agents and endpoints), then stop background work."""
        for session in self.sessions.all():
            await self.evict(session.id, "pod shutting down")
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
