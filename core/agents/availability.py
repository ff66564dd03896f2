"""Which of the pod's agents can start: its readiness (``/readyz``) and the words the panel shows at connect.

A pod whose named agents are all missing (the image built with no agent CLI inside) must not say it is ready: a
rollout would go green and every prompt fail. :func:`assess` is the sans-I/O judgement over the agents' commands
and a lookup that says whether a program can be started; :class:`AgentAvailability` holds the pod's agents and
looks again (a PATH lookup per agent, never a process started) at most once per ``ttl`` seconds, so a probe every
second costs nothing and a CLI the operator installs later is seen within ``ttl``. The built-in agent runs on the
pod's own Python: it always can start.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field

from .recipes import installed

__all__ = ["AgentAvailability", "Availability", "assess", "why_not_startable"]

# How long an answer is reused: a readiness probe comes every few seconds, a panel connects at will.
DEFAULT_TTL = 10.0


def why_not_startable(argv: Sequence[str], found: Callable[[Sequence[str]], bool]) -> str | None:
    """Why ``argv`` cannot be started, in a few words (``None``: it can), given ``found``, the lookup."""
    program = argv[0] if argv else ""
    if not program:
        return "no command"
    if found(argv):
        return None
    if os.sep in program:
        return f"no executable file at {program}"
    return f"{program} not found on PATH"


@dataclass(frozen=True, slots=True)
class Availability:
    """One look at the pod's agents: each that cannot start with why (in the order they are offered), and
    whether any can."""

    agents: tuple[str, ...]
    cannot_start: Mapping[str, str] = field(default_factory=dict)

    @property
    def any_startable(self) -> bool:
        return len(self.cannot_start) < len(self.agents)

    def _list(self) -> str:
        return "; ".join(f"{name}: {why}" for name, why in self.cannot_start.items())

    @property
    def reason(self) -> str | None:
        """For the operator (``/readyz``, the log): what is wrong, ``None`` when every agent can start."""
        if not self.cannot_start:
            return None
        if not self.any_startable:
            return (f"none of the pod's agents can start ({self._list()}): install one in the image, or give its "
                    "path with --agent-cmd")
        return f"some of the pod's agents cannot start and are not offered ({self._list()})"

    @property
    def for_person(self) -> str | None:
        """For the person in the panel, only when no agent can start (else the picker offers the ones that can)."""
        if self.any_startable:
            return None
        return f"This pod cannot start any of its agents ({self._list()}): ask its admin."


def assess(agents: Mapping[str, Sequence[str]], found: Callable[[Sequence[str]], bool],
           always: Collection[str] = ()) -> Availability:
    """Which of ``agents`` (offered name -> command) can start; those in ``always`` can, whatever ``found`` says."""
    cannot: dict[str, str] = {}
    for name, argv in agents.items():
        why = None if name in always else why_not_startable(argv, found)
        if why is not None:
            cannot[name] = why
    return Availability(tuple(agents), cannot)


class AgentAvailability:
    """The pod's agents and the ``PATH`` they are started with: :meth:`now` says which can start, looked up again
    at most once per ``ttl`` seconds (the clock is injected: ``time.monotonic`` by default)."""

    def __init__(
        self,
        agents: Mapping[str, Sequence[str]],
        path: str | None,
        *,
        always: Collection[str] = (),
        ttl: float = DEFAULT_TTL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._agents = {name: tuple(argv) for name, argv in agents.items()}
        self._always = frozenset(always)
        self._path = path
        self._ttl = ttl
        self._clock = clock
        self._looked_at = clock()
        self._last = self._look()

    def _look(self) -> Availability:
        return assess(self._agents, lambda argv: installed(list(argv), self._path), self._always)

    def now(self) -> Availability:
        at = self._clock()
        if at - self._looked_at >= self._ttl:
            self._looked_at, self._last = at, self._look()
        return self._last

    def for_person(self) -> str | None:
        """What the panel shows at connect when no agent can start (``None``: one can)."""
        return self.now().for_person
