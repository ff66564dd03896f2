"""The journal's bookkeeping, sans-I/O: steps, their states, and which call may run, join or be answered.

A *step* is one state-changing tool call of a session (docs/journal.md): it is ``prepared`` when the journal lets
it run, ``running`` once it goes down the tunnel, and ends ``committed`` (the browser did it), ``failed`` (it
said it did not, or it was refused before it was sent) or ``effect_unknown`` (the answer was lost: it may have
happened). :meth:`Journal.begin` decides what a new call does:

* the same tool with the same arguments (their digest) in the same session while such a step runs: it **joins**
  that step and gets its outcome;
* within the window after such a step ended committed, with no other call of the session in between: it is
  **answered** with that outcome. A re-issue comes straight after the call it repeats; a call after others (a
  snapshot that showed the page, a step elsewhere) acts on a page that moved on, and means it;
* while such a step is **unsettled** (it ended effect_unknown, or a restart found it without an end, less than
  ``settle`` seconds ago), whatever came in between: it is **answered** with the words that the step may already
  have happened. Nobody knows whether the browser did it, so doing it again is the agent's decision, made after a
  look at the page: ``repeat`` settles the step (the new step takes its place), and so do the settle time and the
  session's end (:meth:`Journal.forget`);
* otherwise (a failed step is never held against a retry, ``repeat`` says "a second time on purpose") it **runs**
  as a new step. One that ``repeat`` runs over an unsettled step names it (:attr:`Run.earlier`): the person is asked
  on a card that names the earlier step before the browser does it again, and if the new step fails (the person
  chose to check the page), the earlier one holds the same call back again.

Nothing here reads a clock of its own or does I/O: the clocks are injected, outcomes are opaque objects the
caller keeps here for the window, and every collection is bounded (steps per session, sessions, the untold
recovered steps).
"""

from __future__ import annotations

import base64
import os
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Final
from urllib.parse import urlsplit

from ..timestamps import iso_utc

__all__ = ["ACTION_PREFIX", "Answer", "Join", "Journal", "JournalLimits", "Run", "State", "Step", "new_action",
           "site_of"]

ACTION_PREFIX: Final = "act-"
_MAX_SITE: Final = 253  # the longest DNS name: anything longer in a receipt is not a host
_MAX_UNTOLD: Final = 64  # recovered steps listed to one session's agent at most (the rest are counted)


class State(StrEnum):
    PREPARED = "prepared"
    RUNNING = "running"
    COMMITTED = "committed"
    FAILED = "failed"
    EFFECT_UNKNOWN = "effect_unknown"


ENDED: Final = frozenset({State.COMMITTED, State.FAILED, State.EFFECT_UNKNOWN})
# What a re-issue is held against: the browser did it, or may have. A failed step never holds a retry back.
_HOLDS: Final = frozenset({State.RUNNING, State.COMMITTED, State.EFFECT_UNKNOWN})


def new_action() -> str:
    """A step's action id: ``act-`` and 16 random bytes in URL-safe base64 (unguessable, unique per step), as
    ``secrets.token_urlsafe(16)`` makes them. Not a secret: the agent, the panel and the audit log all see it, so
    it is not minted as one (the suite's log scan hunts every ``secrets`` token in the logs, and would keep one
    per tool call)."""
    return ACTION_PREFIX + base64.urlsafe_b64encode(os.urandom(16)).rstrip(b"=").decode("ascii")


def site_of(receipt: object) -> str | None:
    """The host a receipt's step ended on: of ``url_after``, else ``url_before``; ``None`` if neither is a URL."""
    if not isinstance(receipt, Mapping):
        return None
    for key in ("url_after", "url_before"):
        url = receipt.get(key)
        if not isinstance(url, str) or len(url) > 8192:
            continue
        try:
            host = urlsplit(url).hostname
        except ValueError:
            continue
        if host and len(host) <= _MAX_SITE:
            return host
    return None


@dataclass(eq=False)
class Step:
    """One state-changing call. ``outcome`` is the answer it gave, kept for the window so a re-issue gets it.

    A call answered from another step (joined or after its end) is a step too, never sent to the browser:
    ``deduplicated`` names the step it was answered from.
    """

    action: str
    tool: str
    digest: str
    at: float  # wall clock, when it was prepared: what the panel and the audit log show
    started: float  # the journal's clock
    state: State = State.PREPARED
    ended: float | None = None
    site: str | None = None
    outcome: Any = None
    deduplicated: str | None = None
    recovered: bool = False  # an effect_unknown step found on disk after a pod restart
    # The unsettled step this one was run over with ``repeat``: it holds the same call back again if this one fails.
    replaces: Step | None = None
    seen: int = 0  # the session's call count at this step's call, or at the latest re-issue answered from it

    def view(self) -> dict[str, Any]:
        """The step as the panel's ``_openab/journal`` notification carries it (docs/journal.md)."""
        out: dict[str, Any] = {"action": self.action, "tool": self.tool, "state": self.state.value,
                               "site": self.site, "at": iso_utc(self.at)}
        if self.deduplicated is not None:
            out["deduplicated"] = self.deduplicated
        return out


@dataclass(frozen=True)
class Run:
    """Run ``step`` (a new one, ``prepared``); ``earlier``, the unsettled step a ``repeat`` runs it over, which the
    person is asked about before the browser does it again."""

    step: Step
    earlier: Step | None = None


@dataclass(frozen=True)
class Join:
    """Wait for the running ``step`` and answer with its outcome; ``call`` is this call's own (deduplicated) row."""

    step: Step
    call: Step


@dataclass(frozen=True)
class Answer:
    """Answer with ended ``step``'s outcome, marked as not done again; ``call`` is this call's own row."""

    step: Step
    call: Step


@dataclass(frozen=True)
class JournalLimits:
    window: float = 15.0  # seconds after a step ended during which the same call is answered from it
    # Seconds an effect_unknown step holds the same call back, whatever came in between (0: only the window does).
    settle: float = 600.0
    max_steps: int = 256  # per session: the oldest step is forgotten first
    max_sessions: int = 1024  # the least recently used session's steps are forgotten first

    def __post_init__(self) -> None:
        if self.window < 0 or self.settle < 0 or self.max_steps < 1 or self.max_sessions < 1:
            raise ValueError("journal limits: window and settle >= 0, max_steps and max_sessions >= 1")


@dataclass(eq=False)
class _Session:
    steps: OrderedDict[str, Step] = field(default_factory=OrderedDict)
    # (tool, digest) -> the latest step a re-issue of that call is held against.
    index: dict[tuple[str, str], Step] = field(default_factory=dict)
    # Steps ended, in the order they ended: their kept outcomes are dropped once the window is past.
    ended: deque[Step] = field(default_factory=deque)
    untold: list[Step] = field(default_factory=list)  # recovered steps not yet listed to the agent
    calls: int = 0  # every call of the session, reads too: what "nothing in between" counts


class Journal:
    """Every session's steps, bounded (:class:`JournalLimits`), read with the injected ``clock`` (monotonic
    seconds, for the window) and ``wall`` (epoch seconds, for what people read)."""

    def __init__(
        self,
        limits: JournalLimits | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        make_action: Callable[[], str] = new_action,
    ) -> None:
        self.limits = limits or JournalLimits()
        self._clock = clock
        self._wall = wall
        self._make_action = make_action
        self._sessions: OrderedDict[str, _Session] = OrderedDict()
        self.forgotten_steps = 0  # dropped by a bound: the panel and the audit log still had them

    # -- a call ------------------------------------------------------------------------------------------

    def begin(self, session_id: str, tool: str, digest: str, *, repeat: bool = False) -> Run | Join | Answer:
        """What a new state-changing call of ``tool`` with arguments of ``digest`` does (see the module)."""
        session = self._session(session_id)
        now = self._clock()
        self._expire(session, now)
        session.calls += 1
        key = (tool, digest)
        indexed = session.index.get(key)
        held = None if repeat else indexed
        if held is not None and held.state in _HOLDS and (
                held.state is State.RUNNING or self._unsettled(held, now) or (
                    held.seen == session.calls - 1 and now - (held.ended or now) <= self.limits.window)):
            held.seen = session.calls
            call = self._add(session, Step(self._make_action(), tool, digest, self._wall(), now,
                                           state=held.state, site=held.site, deduplicated=held.action))
            if held.state is State.RUNNING:
                return Join(held, call)
            call.ended = now
            return Answer(held, call)
        step = self._add(session, Step(self._make_action(), tool, digest, self._wall(), now, seen=session.calls))
        if indexed is not None and self._unsettled(indexed, now):
            step.replaces = indexed  # a repeat over a step that may already have happened
        session.index[key] = step
        return Run(step, step.replaces)

    def read(self, session_id: str) -> None:
        """A call of the session that reads: a re-issue after it is not straight after its step any more."""
        session = self._sessions.get(session_id)
        if session is not None:
            session.calls += 1

    def start(self, step: Step) -> None:
        """``step`` goes down the tunnel now."""
        if step.state is State.PREPARED:
            step.state = State.RUNNING

    def end(self, session_id: str, step: Step, state: State, *, site: str | None = None,
            outcome: Any = None) -> None:
        """``step`` ended in ``state``; ``outcome`` is kept for the window, for re-issues to be answered with."""
        if state not in ENDED:
            raise ValueError(f"a step ends committed, failed or effect_unknown, not {state}")
        step.state = state
        step.ended = self._clock()
        step.site = site or step.site
        session = self._sessions.get(session_id)
        if session is None:
            return  # forgotten meanwhile (evicted, or past the bound): nothing holds a re-issue now
        key = (step.tool, step.digest)
        if state is State.FAILED:
            if session.index.get(key) is step:
                earlier = step.replaces
                # Not done (the person chose to check the page first): the step it was to repeat still may have
                # happened, and holds the same call back as before.
                if earlier is not None and earlier.action in session.steps and self._unsettled(earlier, step.ended):
                    session.index[key] = earlier
                else:
                    del session.index[key]
            step.replaces = None
            session.steps.pop(step.action, None)  # the panel was told; nothing will ask for it again
            return
        step.outcome = outcome
        step.replaces = None  # it took the earlier step's place: nothing goes back to it
        session.ended.append(step)

    def ended_like(self, session_id: str, call: Step, step: Step) -> None:
        """A deduplicated ``call`` was answered from ``step``: it shows the state that answer had, and is let go
        with the window (a row of the panel's only)."""
        call.state = step.state if step.state in ENDED else State.EFFECT_UNKNOWN
        call.site = step.site
        call.ended = self._clock()
        session = self._sessions.get(session_id)
        if session is not None:
            session.ended.append(call)

    def unsettled(self, step: Step) -> bool:
        """Whether ``step`` still holds the same call back as a step that may already have happened."""
        return self._unsettled(step, self._clock())

    def _unsettled(self, step: Step, now: float) -> bool:
        return (step.state is State.EFFECT_UNKNOWN and step.deduplicated is None and self.limits.settle > 0
                and now - (step.ended if step.ended is not None else now) <= self.limits.settle)

    def age(self, step: Step) -> float:
        """Seconds since ``step`` ended (or started, while it runs)."""
        return max(0.0, self._clock() - (step.ended if step.ended is not None else step.started))

    def since_start(self, step: Step) -> float:
        """Seconds since ``step`` started (a recovered step: since it started before the restart)."""
        return max(0.0, self._clock() - step.started)

    # -- after a pod restart -----------------------------------------------------------------------------

    def recover(self, session_id: str, found: Iterable[tuple[str, str, float] | tuple[str, str, float, str]],
                *, told: bool = False) -> list[Step]:
        """Steps of an earlier run of the pod that started and never ended (``(action, tool, at)`` or ``(action,
        tool, at, digest)``, ``at`` in epoch seconds): effect_unknown, listed once to the session's agent, never
        run again. One with the digest of its arguments holds the same call back until it is settled, the settle
        time counted from when it started (the pod was down meanwhile, and the page may have moved on); one
        without (an older pod's record) is listed only. Its outcome is never taken from the file: a call it holds
        is told the step may have happened, never what it did.

        ``told``: steps that ended effect_unknown before the restart (their agent was told then): they hold the
        same call back as above while unsettled, and are not listed again; one past its settle time is let go."""
        session = self._session(session_id)
        now = self._clock()
        wall = self._wall()
        added: list[Step] = []
        for action, tool, at, *rest in found:
            if action in session.steps:
                continue
            digest = rest[0] if rest else ""
            # The journal's clock at the step's start: the settle time runs from then, never past now.
            ended = now - max(0.0, wall - at)
            step = Step(action, tool, digest, at, ended, state=State.EFFECT_UNKNOWN, ended=ended, recovered=True)
            unsettled = bool(digest) and self._unsettled(step, now)
            if told and not unsettled:
                continue
            self._add(session, step)
            key = (tool, digest)
            if unsettled:
                held = session.index.get(key)
                if held is None or (held.ended is not None and held.ended <= ended):
                    session.index[key] = step
            if not told and len(session.untold) < _MAX_UNTOLD:
                session.untold.append(step)
            added.append(step)
        return added

    def take_untold(self, session_id: str) -> list[Step]:
        """The recovered steps the session's agent has not been told of yet; told now."""
        session = self._sessions.get(session_id)
        if session is None or not session.untold:
            return []
        untold, session.untold = session.untold, []
        return untold

    # -- reading -----------------------------------------------------------------------------------------

    def step(self, session_id: str, action: str) -> Step | None:
        """The session's step of ``action``, if the journal still has it."""
        session = self._sessions.get(session_id)
        return session.steps.get(action) if session is not None else None

    def steps(self, session_id: str) -> list[Step]:
        session = self._sessions.get(session_id)
        return list(session.steps.values()) if session is not None else []

    def unknown(self, session_id: str) -> list[Step]:
        """The session's steps still ``effect_unknown`` (deduplicated answers left out: they are not steps the
        browser may have done)."""
        return [s for s in self.steps(session_id) if s.state is State.EFFECT_UNKNOWN and s.deduplicated is None]

    def forget(self, session_id: str) -> None:
        self._sessions.pop(session_id, None)

    @property
    def sessions(self) -> int:
        return len(self._sessions)

    # -- bounds ------------------------------------------------------------------------------------------

    def _session(self, session_id: str) -> _Session:
        session = self._sessions.get(session_id)
        if session is None:
            while len(self._sessions) >= self.limits.max_sessions:
                _, oldest = self._sessions.popitem(last=False)
                self.forgotten_steps += len(oldest.steps)
            session = self._sessions[session_id] = _Session()
        else:
            self._sessions.move_to_end(session_id)
        return session

    def _add(self, session: _Session, step: Step) -> Step:
        while len(session.steps) >= self.limits.max_steps:
            _, oldest = session.steps.popitem(last=False)
            self.forgotten_steps += 1
            key = (oldest.tool, oldest.digest)
            if session.index.get(key) is oldest:
                del session.index[key]
            oldest.outcome = None
        session.steps[step.action] = step
        return step

    def _expire(self, session: _Session, now: float) -> None:
        """Drop what the window no longer holds: the outcome kept, the step's place in the index, and a committed
        step itself (only effect_unknown steps are asked for later: on resume). An unsettled step keeps its place
        in the index until the settle time has passed (the words it is answered with then are its own, not the
        lost call's); then it is let go at the next call of the same tool and arguments, or by the bound."""
        window = self.limits.window
        while session.ended and now - (session.ended[0].ended or now) > window:
            step = session.ended.popleft()
            step.outcome = None
            if self._unsettled(step, now):
                continue
            key = (step.tool, step.digest)
            if session.index.get(key) is step:
                del session.index[key]
            if step.state is not State.EFFECT_UNKNOWN or step.deduplicated is not None:
                session.steps.pop(step.action, None)
