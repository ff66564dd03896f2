"""The turn watch on a fake clock: the numbers are the clock's, fed by the test; nothing sleeps."""

from __future__ import annotations

import copy
import math
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from openab.core.settings import PANEL_PROMPT_WAIT, Settings
from openab.core.turn_watch import CALL, IDLE, PERSON, SILENCE, Clock, TurnWatch


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
    background = (Path(__file__).parent.parent / "extension" / "background.js").read_text()
    panel_wait = re.search(r"const PROMPT_TIMEOUT_MS = (\d+) \* 60_000;", background)
    assert panel_wait is not None and int(panel_wait[1]) * 60 == PANEL_PROMPT_WAIT
