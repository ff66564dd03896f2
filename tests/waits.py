"""The suite's one bounded poll, for effects that land in another task, thread or process with no event to wait on
(a file another process writes, a pid that goes, a count a server task moves).

A wait that runs out fails as an assertion that names what never came. It is also a ``TimeoutError``, as every
timeout of the project is, so a test that only bounds a wait (and counts what came in time) can let it pass.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import TypeAlias

# Generous: a bound, not a speed target, on a loaded two-core machine; a test that expects sooner says so.
TIMEOUT = 30.0
INTERVAL = 0.02


class NeverCame(AssertionError, TimeoutError):
    """What a test waited for did not come within its bound."""


# What a test waits for, said in its failure; a callable, to say it with what is known by then (a log's tail).
Said: TypeAlias = str | Callable[[], str] | None


def _described(check: Callable[[], object], what: Said) -> str:
    if callable(what):
        return what()
    if what is not None:
        return what
    try:
        return f"`{inspect.getsource(check).strip()}`"  # a lambda: the line that waits, as the test wrote it
    except (OSError, TypeError):
        return repr(check)


def _never_came(check: Callable[[], object], what: Said, timeout: float) -> NeverCame:
    return NeverCame(f"waited {timeout:g} s for {_described(check, what)}")


async def eventually(check: Callable[[], object | Awaitable[object]], timeout: float = TIMEOUT, *,
                     what: Said = None, interval: float = INTERVAL) -> None:
    """Returns once ``check()`` (awaited, when it gives an awaitable) is true; raises :class:`NeverCame` saying
    ``what`` (else the check's own source) when it is still false after ``timeout`` seconds."""
    bound = asyncio.timeout(timeout)  # an awaited check that hangs is cut off too
    try:
        async with bound:
            while True:
                done = check()
                if inspect.isawaitable(done):
                    done = await done
                if done:
                    return
                await asyncio.sleep(interval)
    except TimeoutError:
        if bound.expired():
            raise _never_came(check, what, timeout) from None
        raise


def eventually_sync(check: Callable[[], object], timeout: float = TIMEOUT, *, what: Said = None,
                    interval: float = INTERVAL) -> None:
    """:func:`eventually` for a thread or a test that is not async: it blocks while it polls."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() >= deadline:
            raise _never_came(check, what, timeout)
        time.sleep(interval)
