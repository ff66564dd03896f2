"""The event loop a pod runs on (``event_loop``, ``OPENAB_EVENT_LOOP``): uvloop when it is installed, else
asyncio's own.

uvloop (libuv, in C) takes the socket reads and writes, the selector and the timers out of Python, a part of a
proxied tool call's cost that is not the pod's own code (bench_throughput, docs/benchmarks.md). Nothing in the pod
depends on which loop runs it. The one difference that showed is the stdio uvloop gives a child (socket pairs whose
second descriptors stay open in the child, so an agent that closes its stdin would not close it): that is why
:mod:`openab_browser.core.agents.process` makes an agent's pipes itself. ``asyncio`` runs asyncio's own loop with
uvloop installed, to compare the two or to rule the loop out when something misbehaves.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, Literal, TypeVar

from .errors import ConfigurationError

__all__ = ["EventLoopChoice", "loop_factory", "run"]

EventLoopChoice = Literal["auto", "uvloop", "asyncio"]

_T = TypeVar("_T")


def loop_factory(choice: EventLoopChoice = "auto") -> tuple[str, Callable[[], asyncio.AbstractEventLoop]]:
    """The loop ``choice`` names (``auto``: uvloop when installed) and what makes one; a ``uvloop`` that is not
    installed is a :class:`ConfigurationError`."""
    if choice != "asyncio":
        try:
            import uvloop
        except ImportError:
            if choice == "uvloop":
                raise ConfigurationError(
                    "event loop 'uvloop' is not installed: pip install uvloop, or run on asyncio's own loop "
                    "(--event-loop asyncio)"
                ) from None
        else:
            return "uvloop", uvloop.new_event_loop
    return "asyncio", asyncio.new_event_loop


def run(main: Coroutine[Any, Any, _T], choice: EventLoopChoice = "auto") -> _T:
    """``asyncio.run(main)`` on the loop ``choice`` names (:func:`loop_factory`)."""
    try:
        _, factory = loop_factory(choice)
    except ConfigurationError:
        main.close()
        raise
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(main)
