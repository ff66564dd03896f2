"""Background work that outlives its caller (a socket, a turn), and the pod's one set of it; and the part of a
task's work that another may stop without stopping the task (:class:`StopScope`).

A leaf below every layer: the `/acp` connection, the agent runtime and the pod all start such work, and each
gets only the :class:`Spawn` callable, not what owns the tasks.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Coroutine
from types import TracebackType
from typing import Any, Protocol

__all__ = ["BackgroundTasks", "Spawn", "StopScope"]

log = logging.getLogger(__name__)


class Spawn(Protocol):
    """Start background work that outlives its caller (a socket, a turn); the pod cancels it on close."""

    def __call__(self, work: Coroutine[Any, Any, Any], *, name: str | None = None) -> asyncio.Task[Any]: ...


class BackgroundTasks:
    """The pod's background work: each task is kept until it ends, its failure is logged, and
    :meth:`aclose` cancels what is left. Bounded by what spawns into it (per session and per socket)."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()

    def __len__(self) -> int:
        return len(self._tasks)

    def spawn(self, work: Coroutine[Any, Any, Any], *, name: str | None = None) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(work, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._finished)
        return task

    def _finished(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("pod task %s failed", task.get_name(), exc_info=task.exception())

    async def aclose(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


class StopScope:
    """A stretch of the current task's work that someone else may stop, the task going on after it.

    ``async with StopScope() as scope:`` ... and, from elsewhere, ``scope.stop(message)``: the task is cancelled
    with ``message`` (what it was waiting for sees why), and the cancel ends at the scope's edge, where
    :attr:`stopped` says it came. A cancel of the task from anywhere else still goes through, as with
    :func:`asyncio.timeout`, whose counting (``uncancel``) this shares. It spares a call a task of its own (and the
    shield around it) only for being stoppable by id: one task less a call on the hot path.

    ``stop`` from inside the scope's own task takes effect at the scope's next wait.
    """

    __slots__ = ("_open", "_task", "stopped")

    def __init__(self) -> None:
        self._task: asyncio.Task[Any] | None = None
        self._open = False
        self.stopped = False

    async def __aenter__(self) -> StopScope:
        task = asyncio.current_task()
        if task is None:
            raise RuntimeError("StopScope must be used inside a task")
        self._task = task
        self._open = True
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool:
        self._open = False
        assert self._task is not None
        # Our cancel ends here unless the task was cancelled for another reason too (that one goes on).
        return self.stopped and exc_type is asyncio.CancelledError and self._task.uncancel() == 0

    def stop(self, message: str | None = None) -> None:
        """Cancel the scope's work (once; nothing once the scope has ended)."""
        if not self._open or self.stopped:
            return
        assert self._task is not None
        self.stopped = True
        self._task.cancel(message)
