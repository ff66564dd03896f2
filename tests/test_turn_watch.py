"""The turn watch on a fake clock: the numbers are the clock's, fed by the test; nothing sleeps."""

from __future__ import annotations

import copy
import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from openab_browser.core.settings import PANEL_PROMPT_WAIT, Settings
from openab_browser.core.turn_watch import CALL, IDLE, PERSON, SILENCE, Clock, Person, TurnClock, TurnWatch


def watch_at(now: float = 0.0, *, idle: float = 180.0, silence: float | None = None) -> TurnWatch:
    watch = TurnWatch()
    watch.arm(IDLE, idle, now)
    if silence is not None:
        watch.arm(SILENCE, silence, now)
    return watch


def test_a_quiet_clock_runs_out_at_its_limit_and_activity_restarts_it() -> None:
    watch = watch_at()
    assert not watch.expired(IDLE, 179.9)
    watch.active(IDLE, 100.0)
    assert watch.deadline(IDLE, 100.0) == 280.0
    assert not watch.expired(IDLE, 279.0) and watch.expired(IDLE, 280.0)


def test_a_card_open_past_the_idle_limit_does_not_fail_the_turn() -> None:
    # The field defect: a 300 s permission wait under a 180 s idle timer.
    watch = watch_at(idle=180.0, silence=600.0)
    watch.asking("permission 1", 10.0, up_to=300.0)
    for now in (179.0, 181.0, 250.0, 299.0):
        assert watch.waiting_for_person(now)
        assert not watch.expired(IDLE, now) and not watch.expired(SILENCE, now)
    watch.answered("permission 1", 290.0)
    # The answer is the turn's latest activity: each clock has its whole limit again.
    assert watch.deadline(IDLE, 290.0) == 470.0
    assert watch.deadline(SILENCE, 290.0) == 890.0
    assert watch.expired(IDLE, 470.0)


def test_an_ask_never_answered_stops_pausing_at_its_bound() -> None:
    watch = watch_at(idle=180.0)
    watch.asking(PERSON, 0.0, up_to=300.0)
    assert watch.deadline(IDLE, 10.0) == 190.0  # look again when it could run out, were the answer to come now
    assert watch.deadline(IDLE, 200.0) == 300.0  # or when the pause ends, if that is sooner
    assert not watch.waiting_for_person(300.0)
    assert watch.deadline(IDLE, 300.0) == 480.0
    assert not watch.expired(IDLE, 479.0) and watch.expired(IDLE, 480.0)


def test_overlapping_asks_pause_until_the_last_one_ends() -> None:
    watch = watch_at(idle=10.0)
    watch.asking("card", 1.0, up_to=300.0)
    watch.asking("permission", 2.0, up_to=300.0)
    watch.answered("card", 50.0)
    assert watch.waiting_for_person(60.0) and not watch.expired(IDLE, 60.0)
    watch.answered("permission", 70.0)
    assert watch.deadline(IDLE, 70.0) == 80.0
    # An answer to an ask never made (or said twice) changes nothing.
    watch.answered("permission", 75.0)
    watch.answered("nobody asked", 76.0)
    assert watch.deadline(IDLE, 76.0) == 80.0


def test_the_same_ask_said_twice_keeps_the_later_bound() -> None:
    watch = watch_at(idle=10.0)
    watch.asking(PERSON, 0.0, up_to=100.0)
    watch.asking(PERSON, 50.0, up_to=100.0)
    assert watch.waiting_for_person(120.0)
    watch.answered(PERSON, 130.0)
    assert watch.deadline(IDLE, 130.0) == 140.0


def test_cancel_has_a_grace_that_no_person_pauses() -> None:
    watch = watch_at(idle=180.0)
    watch.asking(PERSON, 0.0, up_to=300.0)
    watch.cancel(5.0, grace=10.0)
    watch.cancel(8.0, grace=10.0)  # the first cancel counts
    assert watch.cancelled and watch.cancel_deadline() == 15.0
    assert not watch_at().cancelled and watch_at().cancel_deadline() == math.inf


def test_a_clock_not_armed_never_runs_out() -> None:
    watch = watch_at()
    assert watch.deadline(CALL, 1e9) == math.inf and not watch.expired(CALL, 1e9)
    watch.arm(CALL, 170.0, 0.0)
    watch.asking(PERSON, 100.0, up_to=300.0)
    assert not watch.expired(CALL, 250.0)
    watch.answered(PERSON, 260.0)
    assert watch.deadline(CALL, 260.0) == 430.0
    watch.disarm(CALL)
    assert not watch.expired(CALL, 1e9)


def runs_out_at(watch: TurnWatch, clock: Clock, now: float) -> float:
    """When ``clock`` runs out if nothing else happens: its deadline, looked at again until it is the real one."""
    probe = copy.deepcopy(watch)  # looking ahead settles asks: the watch under test must not see the future
    moment = probe.deadline(clock, now)
    for _ in range(100):
        if probe.expired(clock, moment):
            return moment
        moment = probe.deadline(clock, moment)
    raise AssertionError("the clock never ran out")


events = st.lists(st.tuples(st.sampled_from(["idle", "silence", "ask", "answer"]), st.floats(0, 50),
                            st.sampled_from("ab"), st.floats(0.5, 100)), max_size=30)


def feed(watch: TurnWatch, kind: str, now: float, key: str, up_to: float) -> None:
    """One drawn event, at ``now``."""
    if kind == "idle":
        watch.active(IDLE, now)
    elif kind == "silence":
        watch.active(SILENCE, now)
    elif kind == "ask":
        watch.asking(key, now, up_to=up_to)
    else:
        watch.answered(key, now)


@given(events)
def test_runs_out_is_when_the_clock_runs_out_if_nothing_else_happens(
    script: list[tuple[str, float, str, float]],
) -> None:
    # What the tunnel hands the JSON-RPC request as its deadline, moved at each ask and answer.
    watch = watch_at(idle=20.0)
    now = 0.0
    for kind, step, key, up_to in script:
        now += step
        feed(watch, kind, now, key, up_to)
        assert watch.runs_out(IDLE, now) == pytest.approx(runs_out_at(watch, IDLE, now))
    assert watch.runs_out(SILENCE, now) == math.inf  # not armed


@given(events)
def test_no_event_but_a_cancel_runs_a_clock_out_before_the_deadline_last_read(
    script: list[tuple[str, float, str, float]],
) -> None:
    # What lets a waiter sleep until the deadline it read and look again, woken only by a cancel.
    watch = watch_at(idle=20.0, silence=40.0)
    now = 0.0
    read = {clock: watch.deadline(clock, now) for clock in (IDLE, SILENCE)}
    for kind, step, key, up_to in script:
        now += step
        feed(watch, kind, now, key, up_to)
        for clock in (IDLE, SILENCE):
            if now < read[clock]:  # a waiter still asleep until what it read
                assert runs_out_at(watch, clock, now) >= read[clock]
            else:  # it woke, and reads again
                read[clock] = watch.deadline(clock, now)


def test_settings_take_a_person_wait_longer_than_the_idle_timeout_but_not_than_the_panels_prompt_wait() -> None:
    # Longer than the prompt idle and the tool-call timeouts: fine, the person's wait stops them.
    assert Settings(permission_timeout=900, prompt_idle_timeout=180, tunnel_timeout=170).permission_timeout == 900
    with pytest.raises(ValidationError, match="longer than the side panel waits for a prompt's answer"):
        Settings(permission_timeout=PANEL_PROMPT_WAIT + 1)
    # The panel waits what the pod's bound says: both read lib/protocol.js (tests/test_protocol_file.py).
    acp_client = (Path(__file__).parent.parent / "extension" / "lib" / "acp.js").read_text()
    assert "const PROMPT_TIMEOUT_MS = PROMPT_WAIT_MS;" in acp_client


# -- the turn's clock as both sides hold it: one socket's person, a turn's clock, a call's clock ------------------


class FakeClock:
    """The time the test says it is."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def socket_at(start: float = 0.0) -> tuple[FakeClock, Person]:
    clock = FakeClock()
    clock.now = start
    return clock, Person(clock)


def turn_on(person: Person, *, idle: float = 0.5, silence: float | None = None) -> tuple[TurnClock, list[str]]:
    """A turn as the `/acp` side starts it (its idle clock), with the agent runtime's silence clock on it when
    ``silence`` is given; the list records each time its waiter is told to look again."""
    told: list[str] = []
    turn = person.clock(changed=lambda: told.append("look"))
    turn.arm(IDLE, idle)
    if silence is not None:
        turn.arm(SILENCE, silence)
    return turn, told


def test_a_turn_idles_out_at_its_limit_and_each_update_streamed_restarts_it() -> None:
    now, person = socket_at()
    turn, _told = turn_on(person, idle=0.5)
    now.now = 0.4
    assert turn.left(IDLE) == pytest.approx(0.1)
    turn.active(IDLE)  # an update streamed to the panel
    now.now = 0.8
    assert turn.left(IDLE) == pytest.approx(0.1)
    now.now = 0.9
    assert turn.left(IDLE) <= 0


def test_the_agents_silence_runs_on_the_turns_own_clock() -> None:
    now, person = socket_at()
    turn, _told = turn_on(person, idle=180.0, silence=0.5)
    now.now = 0.3
    turn.active(SILENCE)  # the agent said something on its stdio; nothing reached the panel
    now.now = 0.7
    assert turn.left(SILENCE) == pytest.approx(0.1) and turn.left(IDLE) == pytest.approx(179.3)
    now.now = 0.8
    assert turn.left(SILENCE) <= 0
    turn.disarm(SILENCE)  # the turn is over at the agent: its watchdog goes, the gateway's clock stays
    assert turn.left(SILENCE) == math.inf and turn.left(IDLE) > 0


def test_a_permission_card_answered_after_the_idle_and_silence_limits_lets_the_turn_go_on() -> None:
    # What tests/test_person_wait.py plays with 0.5 s limits and a person who takes 1.5 s, on numbers.
    now, person = socket_at()
    turn, told = turn_on(person, idle=0.5, silence=0.5)
    now.now = 0.1
    turn.asking("permission", up_to=30.0)
    for moment in (0.7, 1.2, 1.6):
        now.now = moment
        assert turn.waiting_for_person() and turn.left(IDLE) > 0 and turn.left(SILENCE) > 0
    turn.answered("permission")
    assert turn.left(IDLE) == pytest.approx(0.5) and turn.left(SILENCE) == pytest.approx(0.5)
    assert told == ["look", "look"]  # the waiter looked again at the ask and at the answer


def test_a_permission_nobody_answers_stops_pausing_at_the_persons_wait() -> None:
    now, person = socket_at()
    turn, _told = turn_on(person, idle=0.5)
    turn.asking("permission", up_to=1.5)
    now.now = 1.4
    assert turn.left(IDLE) == pytest.approx(0.1)  # look again at the pause's bound
    now.now = 1.5
    assert not turn.waiting_for_person() and turn.left(IDLE) == pytest.approx(0.5)
    now.now = 2.0
    assert turn.left(IDLE) <= 0


def test_a_card_in_the_panel_stops_the_sockets_turns_and_calls_and_its_answer_starts_them_again() -> None:
    now, person = socket_at()
    turn, told = turn_on(person, idle=0.5, silence=0.5)
    call = person.clock()
    call.arm(CALL, 0.3)
    now.now = 0.1
    person.asked(True, up_to=30.0)  # _openab/person {"asking": true}
    assert told == ["look"]
    now.now = 1.6
    assert turn.left(IDLE) > 0 and turn.left(SILENCE) > 0 and call.left(CALL) > 0
    person.asked(False, up_to=30.0)
    assert told == ["look", "look"]
    assert call.runs_out_in(CALL) == pytest.approx(0.3)  # the whole timeout again: the card may have been about it
    assert turn.left(IDLE) == pytest.approx(0.5)


def test_a_call_made_while_a_card_is_open_starts_stopped_and_its_deadline_moves_with_the_card() -> None:
    now, person = socket_at()
    person.asked(True, up_to=30.0)
    now.now = 1.0
    moved: list[float] = []
    call = person.clock()
    call.arm(CALL, 0.3)
    call.subscribe(lambda: moved.append(call.runs_out_in(CALL)))
    # The JSON-RPC request's deadline: if nothing else happens, the card ends at its bound, then one whole limit.
    assert call.runs_out_in(CALL) == pytest.approx(29.0 + 0.3)
    now.now = 2.5
    person.asked(False, up_to=30.0)
    assert moved == [pytest.approx(0.3)]
    now.now = 2.8
    assert call.left(CALL) <= 0  # answered, then nothing came back: one limit later it times out


def test_every_subscriber_of_a_clock_is_told_and_one_leaves_without_the_others() -> None:
    """A second listener on a clock (the tunnel's timeout beside a waiter) is told too, never in the first one's
    place; one that unsubscribes is no longer told, and the others still are."""
    _now, person = socket_at()
    turn, told = turn_on(person)
    second: list[str] = []
    leave = turn.subscribe(lambda: second.append("look"))
    person.asked(True, up_to=30.0)
    assert told == ["look"] and second == ["look"]
    leave()
    person.asked(False, up_to=30.0)
    assert told == ["look", "look"] and second == ["look"]
    leave()  # twice: nothing to undo


def test_a_card_announced_and_never_closed_pauses_only_up_to_the_persons_wait() -> None:
    now, person = socket_at()
    person.asked(True, up_to=1.0)  # and never {"asking": false}
    turn, _told = turn_on(person, idle=0.5)  # a turn started while the card is open starts stopped
    now.now = 0.9
    assert turn.waiting_for_person() and turn.left(IDLE) > 0
    now.now = 1.5
    assert turn.left(IDLE) <= 0


def test_another_sockets_card_does_not_pause_this_sockets_turn() -> None:
    now, person = socket_at()
    _now, other = socket_at()
    turn, told = turn_on(person, idle=0.5)
    other.asked(True, up_to=1200.0)
    now.now = 0.5
    assert turn.left(IDLE) <= 0 and told == []


def test_a_cancelled_turn_has_one_grace_for_both_sides_that_no_person_pauses() -> None:
    now, person = socket_at()
    turn, told = turn_on(person, idle=0.5)
    assert not turn.cancelled and turn.grace_left() == math.inf
    person.asked(True, up_to=300.0)
    now.now = 1.0
    turn.cancel(grace=1.0)  # session/cancel: the gateway's grace
    now.now = 1.5
    turn.cancel(grace=1.0)  # the agent runtime settling the same turn: the first cancel counts
    assert turn.cancelled and turn.grace_left() == pytest.approx(0.5)
    assert told == ["look", "look", "look"]
    now.now = 2.0
    assert turn.grace_left() <= 0 and turn.waiting_for_person()


def test_a_closed_clock_is_no_longer_moved_by_the_person() -> None:
    now, person = socket_at()
    turn, told = turn_on(person, idle=0.5)
    turn.close()  # the turn ended
    person.asked(True, up_to=300.0)
    now.now = 0.5
    assert told == [] and not turn.waiting_for_person() and turn.left(IDLE) <= 0
