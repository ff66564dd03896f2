"""The clock of one prompt turn (and of each browser tool call in it), sans-I/O: fed events and the time, it says
when a limit has passed. It reads no clock, sleeps on nothing and knows no socket.

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
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Final, Literal

__all__ = ["CALL", "IDLE", "PERSON", "SILENCE", "Clock", "TurnWatch"]

Clock = Literal["idle", "silence", "call"]
IDLE: Final[Clock] = "idle"
SILENCE: Final[Clock] = "silence"
CALL: Final[Clock] = "call"
# The key of an ask the browser announces (a card open in the side panel), as opposed to one of our own requests.
PERSON: Final = "person"


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
