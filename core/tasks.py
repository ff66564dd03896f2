"""Background work that outlives its caller (a socket, a turn), and the pod's one set of it.

A leaf below every layer: the `/acp` connection, the agent runtime and the pod all start such work, and each
gets only the :class:`Spawn` callable, not what owns the tasks.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Coroutine
from typing import Any, Protocol

__all__ = ["BackgroundTasks", "Spawn"]

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
