"""What the panel is still to be told of each session's steps (sans-I/O): gathered for a moment, told as one message.

A click used to put three frames on ``/acp``: the journal's ``running`` notification, the call, and the
``committed`` notification, the last of them sent before the agent had its answer. Now

- a panel that says it marks a step running when the step's call reaches it (``dev.openab/marksRunning`` in
  ``session/new``; lib/acp.js) is not told ``running`` at all: the call it is about to run says as much;
- a view the panel ties to the agent's call while that call's row still runs (:func:`ties_a_row`) goes at once,
  before the call's answer, with whatever was gathered before it;
- every other view waits :attr:`Telling.delay` seconds (after the call's answer has gone to the agent), and the
  views a session gathered meanwhile go as one ``_openab/journal`` notification, in the order they came.

The panel learns a step's end a few milliseconds later than before; what it learns is the same, every state of
every step in order. A session holds at most :attr:`Telling.limit` views: the one that reaches it sends them all.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

__all__ = ["DELAY", "LIMIT", "Telling", "running_from_call", "ties_a_row"]

DELAY: Final = 0.02
"""Seconds a view waits for others of its session: well under what a person can see, longer than a call's answer
takes to leave the pod."""
LIMIT: Final = 200
"""The most views told in one message: what the panel reads of one (``MAX_JOURNAL_STEPS`` in lib/chat.js)."""


def running_from_call(view: Mapping[str, Any]) -> bool:
    """Whether a panel that marks steps running from their calls already knows ``view``: a step just started, which
    reaches the browser as a call with its action id. A re-issued call's own row (``deduplicated``) never does."""
    return view.get("state") == "running" and "deduplicated" not in view


def ties_a_row(view: Mapping[str, Any], *, marks_running: bool) -> bool:
    """Whether the panel ties ``view`` to the agent's call while the call's row still runs (lib/chat.js ``_rowFor``),
    so that it must arrive before the call's answer: a re-issued call's own row (``deduplicated``: it never reaches
    the browser), and a step just started for a panel that does not mark it from the call."""
    return "deduplicated" in view or (not marks_running and running_from_call(view))


@dataclass
class Telling:
    """The views gathered per addressee: the pod's is a session as one socket holds it, so what was gathered for a
    socket is never told to the one that takes the session up after it. :meth:`add` says whether a flush is to be
    scheduled (the addressee's first view) or due now (its views reached :attr:`limit`); :meth:`take` hands over
    what is gathered."""

    delay: float = DELAY
    limit: int = LIMIT
    _pending: dict[Hashable, list[dict[str, Any]]] = field(default_factory=dict)

    def add(self, to: Hashable, views: list[dict[str, Any]]) -> str | None:
        """Gather ``views`` for ``to``; returns ``"schedule"`` for an addressee that had none, ``"now"`` when it
        holds :attr:`limit`, else ``None`` (a flush is already due)."""
        gathered = self._pending.get(to)
        first = gathered is None
        if gathered is None:
            gathered = self._pending[to] = []
        gathered.extend(views)
        if len(gathered) >= self.limit:
            return "now"
        return "schedule" if first else None

    def take(self, to: Hashable) -> list[dict[str, Any]]:
        """What is gathered for ``to``, oldest first; nothing of it is gathered after."""
        return self._pending.pop(to, None) or []
