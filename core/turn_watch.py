"""The clock of one prompt turn (and of each browser tool call in it), sans-I/O: fed events and the time, it says
when a limit has passed. It reads only the clock it is given, sleeps on nothing and knows no socket.

A turn has several *quiet clocks*, each armed by the side that acts on it with its own limit: ``idle`` (nothing
streamed to the client, the `/acp` side's prompt idle timeout), ``silence`` (the agent said nothing on its stdio,
the agent runtime's watchdog), ``call`` (a browser tool call not answered, the tunnel's timeout). Activity on a
clock restarts it. While a person is asked (a permission card, the guard's confirmation card in the browser),
*every* clock stops: the person's own wait has its own bound, and a turn must not fail because they took their
time. Each ask is bounded (``up_to``): an ask never answered stops pausing at its bound, as if answered then, so a
lost "answered" cannot hold a turn forever. When the last ask ends, every clock starts again from that moment:
the answer is the turn's latest activity. A cancelled turn has a grace that nothing pauses.

A waiter may sleep until :meth:`TurnWatch.deadline` and look again: no event but :meth:`TurnWatch.cancel` makes a
clock run out before the deadline last read (activity, an ask and an answer only ever push it later), so only a
cancel needs to wake it.

:class:`TurnClock` is what the sides hold: one turn's (or one tool call's) watch read with the clock it is given,
joined to its socket's :class:`Person`, which owns "a card is open now" and pauses every clock of that socket.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Final, Literal

__all__ = ["CALL", "IDLE", "PERSON", "SILENCE", "Clock", "Now", "Person", "TurnClock", "TurnWatch"]

Clock = Literal["idle", "silence", "call"]
IDLE: Final[Clock] = "idle"
SILENCE: Final[Clock] = "silence"
CALL: Final[Clock] = "call"
# The key of an ask the browser announces (a card open in the side panel), as opposed to one of our own requests.
PERSON: Final = "person"
# A clock to read: time.monotonic in the pod, a test's own numbers in tests.
Now = Callable[[], float]


@dataclass(slots=True)
class _Quiet:
    limit: float
    since: float


class TurnWatch:
    """The quiet clocks of one turn, the pause while a person decides, and the cancel grace.

    It owns only arithmetic on the times it is given; the caller reads its clock (``time.monotonic``), feeds
    events, and waits until :meth:`deadline`. Limits: any number of clocks and asks; an ask's pause ends at its
    bound (``up_to`` seconds after it began) whether or not it is answered.
    """

    def __init__(self) -> None:
        self._clocks: dict[Clock, _Quiet] = {}
        self._asks: dict[Hashable, float] = {}  # ask -> when it stops pausing (its bound)
        self._resumed = -math.inf  # when the last pause ended: every clock counts from there at the earliest
        self._cancelled_at: float | None = None
        self._grace = 0.0

    # -- events -----------------------------------------------------------------------------------------------

    def arm(self, clock: Clock, limit: float, now: float) -> None:
        """Start ``clock`` (or restart it with a new limit) at ``now``."""
        self._clocks[clock] = _Quiet(limit, now)

    def disarm(self, clock: Clock) -> None:
        self._clocks.pop(clock, None)

    def active(self, clock: Clock, now: float) -> None:
        """Something happened on ``clock`` (an update streamed, a message heard): it starts again."""
        quiet = self._clocks.get(clock)
        if quiet is not None:
            quiet.since = max(quiet.since, now)

    def asking(self, key: Hashable, now: float, *, up_to: float) -> None:
        """A person is asked (``key`` names the ask): every clock stops, for at most ``up_to`` seconds."""
        self._settle(now)
        self._asks[key] = max(self._asks.get(key, -math.inf), now + up_to)

    def answered(self, key: Hashable, now: float) -> None:
        """The ask ``key`` is over (answered, withdrawn, timed out); the clocks run again once no ask is left."""
        self._settle(now)
        if self._asks.pop(key, None) is not None and not self._asks:
            self._resumed = max(self._resumed, now)

    def cancel(self, now: float, *, grace: float) -> None:
        """The turn is cancelled: it must end within ``grace`` seconds, person or not (the first cancel counts)."""
        if self._cancelled_at is None:
            self._cancelled_at, self._grace = now, grace

    # -- questions --------------------------------------------------------------------------------------------

    @property
    def cancelled(self) -> bool:
        return self._cancelled_at is not None

    def cancel_deadline(self) -> float:
        """When a cancelled turn's grace runs out (infinity for a turn not cancelled)."""
        return math.inf if self._cancelled_at is None else self._cancelled_at + self._grace

    def waiting_for_person(self, now: float) -> bool:
        """Whether an ask still pauses the clocks at ``now``."""
        self._settle(now)
        return bool(self._asks)

    def expired(self, clock: Clock, now: float) -> bool:
        """Whether ``clock`` has passed its limit at ``now`` (never while a person is asked; never if unarmed)."""
        return now >= self.deadline(clock, now)

    def deadline(self, clock: Clock, now: float) -> float:
        """The moment ``clock`` runs out, as known at ``now``. While a person is asked, when to look again: the
        pause's bound, or one whole limit from now (the soonest it could run out were the answer to come now),
        whichever is first. Infinity for a clock that is not armed."""
        quiet = self._clocks.get(clock)
        if quiet is None:
            return math.inf
        self._settle(now)
        if self._asks:
            return min(min(self._asks.values()), now + quiet.limit)
        return max(quiet.since, self._resumed) + quiet.limit

    def runs_out(self, clock: Clock, now: float) -> float:
        """When ``clock`` runs out if no event comes after ``now``: every ask left ends at its bound, and the
        clock then has its whole limit. Unlike :meth:`deadline` it is a final answer until the next event, for
        a deadline someone else enforces (the tunnel's JSON-RPC request); an answer can bring it sooner."""
        quiet = self._clocks.get(clock)
        if quiet is None:
            return math.inf
        self._settle(now)
        resumed = max(self._resumed, *self._asks.values()) if self._asks else self._resumed
        return max(quiet.since, resumed) + quiet.limit

    def _settle(self, now: float) -> None:
        """Asks past their bound stop pausing, as if answered at their bound."""
        ended = [key for key, bound in self._asks.items() if bound <= now]
        if not ended:
            return
        last = max(self._asks.pop(key) for key in ended)
        if not self._asks:
            self._resumed = max(self._resumed, last)


class Person:
    """The person at one socket's side panel: whether a card waits for them there, and every clock running on that
    socket (its turns', its tool calls'), which all stop while one does.

    It owns "a card is open now" for the socket (the panel's ``_openab/person``), so that a clock started meanwhile
    starts stopped, and the socket's clock (``now``), which every :class:`TurnClock` joined to it reads. Each ask
    pauses for at most ``up_to`` seconds. Limits: any number of clocks; a clock leaves when its owner closes it.
    """

    def __init__(self, now: Now = time.monotonic) -> None:
        self.now = now
        self._asked_until = -math.inf  # when the card open now stops pausing (its bound); -inf: none is open
        self._clocks: set[TurnClock] = set()

    def asked(self, asking: bool, *, up_to: float) -> None:
        """The panel says a card waits for the person (``asking``), for at most ``up_to`` s, or that none does."""
        now = self.now()
        self._asked_until = now + up_to if asking else -math.inf
        for clock in list(self._clocks):
            clock._person_asked(asking, now, up_to)

    def clock(self, changed: Callable[[], None] | None = None) -> TurnClock:
        """A new clock on this socket: stopped from its start if a card is open now."""
        return TurnClock(self, changed)

    def _join(self, clock: TurnClock, watch: TurnWatch) -> None:
        now = self.now()
        if self._asked_until > now:
            watch.asking(PERSON, now, up_to=self._asked_until - now)
        self._clocks.add(clock)

    def _leave(self, clock: TurnClock) -> None:
        self._clocks.discard(clock)


class TurnClock:
    """The clock of one prompt turn, or of one browser tool call: its :class:`TurnWatch`, read at its socket's
    ``now``, stopped with every other clock of that socket while the person is asked there (:class:`Person`).

    The `/acp` side makes one per turn (the ``idle`` clock, the cancel grace) and hands it to the agent backend,
    which arms its ``silence`` clock on the same one; the tunnel makes one per call (``call``). Whatever can bring
    a deadline sooner or later (an ask, an answer, a cancel) tells every subscriber (:meth:`subscribe`), so each
    waiter looks again; nothing here waits or sleeps. Seconds it returns are from now: at or below 0, that limit
    has passed.
    """

    __slots__ = ("_listeners", "_person", "_watch")

    def __init__(self, person: Person, changed: Callable[[], None] | None = None) -> None:
        self._person = person
        self._watch = TurnWatch()
        self._listeners: list[Callable[[], None]] = []
        if changed is not None:
            self.subscribe(changed)
        person._join(self, self._watch)

    def subscribe(self, listener: Callable[[], None]) -> Callable[[], None]:
        """``listener`` is told whenever a deadline may have moved, beside any other; returns what unsubscribes
        it."""
        self._listeners.append(listener)

        def unsubscribe() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return unsubscribe

    def now(self) -> float:
        return self._person.now()

    # -- events -----------------------------------------------------------------------------------------------

    def arm(self, clock: Clock, limit: float) -> None:
        self._watch.arm(clock, limit, self.now())

    def disarm(self, clock: Clock) -> None:
        self._watch.disarm(clock)

    def active(self, clock: Clock) -> None:
        self._watch.active(clock, self.now())

    def asking(self, key: Hashable, *, up_to: float) -> None:
        """A person is asked on this turn's behalf (a permission card): its clocks stop, for at most ``up_to`` s."""
        self._watch.asking(key, self.now(), up_to=up_to)
        self._tell()

    def answered(self, key: Hashable) -> None:
        self._watch.answered(key, self.now())
        self._tell()

    def cancel(self, *, grace: float) -> None:
        """The turn is cancelled: it ends within ``grace`` s, person or not; the first cancel counts for both sides."""
        self._watch.cancel(self.now(), grace=grace)
        self._tell()

    def close(self) -> None:
        """The turn or call is over: its socket's person no longer moves it."""
        self._person._leave(self)

    # -- questions --------------------------------------------------------------------------------------------

    @property
    def cancelled(self) -> bool:
        return self._watch.cancelled

    def left(self, clock: Clock) -> float:
        """Seconds until ``clock`` runs out, or, while a person is asked, until it is worth looking again."""
        now = self.now()
        return self._watch.deadline(clock, now) - now

    def runs_out_in(self, clock: Clock) -> float:
        """Seconds until ``clock`` runs out if nothing else happens (:meth:`TurnWatch.runs_out`): a deadline that
        someone else enforces, moved at each change told to the subscribers."""
        now = self.now()
        return self._watch.runs_out(clock, now) - now

    def grace_left(self) -> float:
        """Seconds left of a cancelled turn's grace (infinity for a turn not cancelled)."""
        return self._watch.cancel_deadline() - self.now()

    def waiting_for_person(self) -> bool:
        return self._watch.waiting_for_person(self.now())

    def _person_asked(self, asking: bool, now: float, up_to: float) -> None:
        if asking:
            self._watch.asking(PERSON, now, up_to=up_to)
        else:
            self._watch.answered(PERSON, now)
        self._tell()

    def _tell(self) -> None:
        for listener in list(self._listeners):
            listener()
