"""The action journal's core (issue 25, docs/journal.md), sans-I/O, with an injected clock; and the journal on disk
read back after a restart: torn, planted, another session's, and huge lines are skipped and counted, never trusted.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import orjson
import pytest

from openab_browser.core.journal import Answer, Join, Journal, JournalLimits, Run, State, new_action, site_of
from openab_browser.core.mcp.audit import AUDIT_FILE, AuditLog, args_digest
from openab_browser.core.mcp.audit_read import MAX_LINE, unended_steps, unended_steps_keyed
from openab_browser.core.session_naming import SessionNaming


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def journal(window: float = 15.0, settle: float = 600.0, **limits: int) -> tuple[Journal, Clock]:
    clock = Clock()
    return Journal(JournalLimits(window=window, settle=settle, **limits), clock=clock,
                   wall=lambda: 1_800_000_000.0), clock


def test_an_action_id_is_act_and_16_random_bytes() -> None:
    ids = {new_action() for _ in range(1000)}
    assert len(ids) == 1000
    assert all(re.fullmatch(r"act-[A-Za-z0-9_-]{22}", action) for action in ids)


def test_a_step_moves_prepared_running_committed() -> None:
    j, _ = journal()
    decision = j.begin("s1", "browser_click", "d1")
    assert isinstance(decision, Run) and decision.step.state.value == "prepared"
    j.start(decision.step)
    assert decision.step.state.value == "running"
    j.end("s1", decision.step, State.COMMITTED, site="shop.example", outcome={"content": []})
    assert decision.step.state is State.COMMITTED
    view = decision.step.view()
    assert view == {"action": decision.step.action, "tool": "browser_click", "state": "committed",
                    "site": "shop.example", "at": "2027-01-15T08:00:00.000Z"}


def test_a_reissue_joins_a_running_step_and_is_answered_from_an_ended_one_within_the_window() -> None:
    j, clock = journal()
    run = j.begin("s1", "browser_click", "d1")
    assert isinstance(run, Run)
    j.start(run.step)
    joined = j.begin("s1", "browser_click", "d1")
    assert isinstance(joined, Join) and joined.step is run.step
    assert joined.call.deduplicated == run.step.action and joined.call.action != run.step.action
    j.end("s1", run.step, State.COMMITTED, outcome={"content": [{"type": "text", "text": "clicked"}]})
    clock.now += 14.9
    answered = j.begin("s1", "browser_click", "d1")
    assert isinstance(answered, Answer) and answered.step is run.step
    assert answered.step.outcome == {"content": [{"type": "text", "text": "clicked"}]}
    assert j.age(run.step) == pytest.approx(14.9)
    clock.now += 0.2  # past the window: the same call is a new step, and the outcome kept is let go
    again = j.begin("s1", "browser_click", "d1")
    assert isinstance(again, Run)
    assert run.step.outcome is None


def test_only_a_call_straight_after_its_step_is_answered_and_a_run_of_reissues_all_are() -> None:
    j, _ = journal()
    clicked = {"content": [{"type": "text", "text": "accepted the dialog"}]}
    first = j.begin("s1", "browser_handle_dialog", "accept")
    assert isinstance(first, Run)
    j.end("s1", first.step, State.COMMITTED, outcome=clicked)
    # Re-issues, one after another, straight after the step: each is answered from it.
    assert isinstance(j.begin("s1", "browser_handle_dialog", "accept"), Answer)
    assert isinstance(j.begin("s1", "browser_handle_dialog", "accept"), Answer)
    # Another step in between (a click that opened a new dialog): the same call acts on what is there now.
    other = j.begin("s1", "browser_click", "open-dialog")
    assert isinstance(other, Run)
    j.end("s1", other.step, State.COMMITTED, outcome=clicked)
    assert isinstance(j.begin("s1", "browser_handle_dialog", "accept"), Run)
    # A read in between (the agent looked at the page first): the same click is meant, and runs.
    again = j.begin("s1", "browser_click", "next-page")
    assert isinstance(again, Run)
    j.end("s1", again.step, State.COMMITTED, outcome=clicked)
    j.read("s1")
    assert isinstance(j.begin("s1", "browser_click", "next-page"), Run)
    # Not after a step that may or may not have happened (issue 34: a read before the re-issue made it a new step,
    # and a second order): that one is held until it is settled.
    lost = j.begin("s1", "browser_click", "buy")
    assert isinstance(lost, Run)
    j.end("s1", lost.step, State.EFFECT_UNKNOWN, outcome=clicked)
    j.read("s1")
    assert isinstance(j.begin("s1", "browser_click", "buy"), Answer)
    # A read in another session is not in between.
    step = j.begin("s1", "browser_type", "t")
    assert isinstance(step, Run)
    j.end("s1", step.step, State.COMMITTED, outcome=clicked)
    j.read("s2")
    assert isinstance(j.begin("s1", "browser_type", "t"), Answer)


def test_effect_unknown_holds_a_reissue_and_failed_never_does() -> None:
    j, _ = journal()
    unknown = j.begin("s1", "browser_click", "d1")
    assert isinstance(unknown, Run)
    j.end("s1", unknown.step, State.EFFECT_UNKNOWN, outcome={"content": []})
    assert isinstance(j.begin("s1", "browser_click", "d1"), Answer)
    failed = j.begin("s1", "browser_type", "d2")
    assert isinstance(failed, Run)
    j.end("s1", failed.step, State.FAILED, outcome={"content": []})
    assert isinstance(j.begin("s1", "browser_type", "d2"), Run)


def test_repeat_runs_a_second_step_and_others_are_not_held() -> None:
    j, _ = journal()
    first = j.begin("s1", "browser_click", "d1")
    assert isinstance(first, Run)
    second = j.begin("s1", "browser_click", "d1", repeat=True)
    assert isinstance(second, Run) and second.step is not first.step
    # Other arguments, another tool, another session: each its own step.
    assert isinstance(j.begin("s1", "browser_click", "d2"), Run)
    assert isinstance(j.begin("s1", "browser_type", "d1"), Run)
    assert isinstance(j.begin("s2", "browser_click", "d1"), Run)


def test_the_journal_is_bounded_in_steps_and_sessions() -> None:
    j, clock = journal(max_steps=8, max_sessions=4)
    for n in range(100):
        decision = j.begin("s1", "browser_click", f"d{n}")
        assert isinstance(decision, Run)
        j.end("s1", decision.step, State.COMMITTED if n % 2 else State.EFFECT_UNKNOWN, outcome={"content": []})
    assert len(j.steps("s1")) == 8
    # Past the window only the effect_unknown steps stay (the resume lists them); a failed one goes at its end.
    clock.now += 16
    j.begin("s1", "browser_type", "x")
    kept = j.steps("s1")
    assert [s.state for s in kept[:-1]] == [State.EFFECT_UNKNOWN] * 4 and all(s.outcome is None for s in kept)
    failed = j.begin("s1", "browser_type", "y")
    assert isinstance(failed, Run)
    j.end("s1", failed.step, State.FAILED)
    assert failed.step not in j.steps("s1")
    assert isinstance(j.begin("s1", "browser_click", "d0"), Run)  # forgotten: nothing holds it
    for n in range(10):
        j.begin(f"other{n}", "browser_click", "d")
    assert j.sessions == 4
    assert j.forgotten_steps > 0


def test_recovered_steps_are_effect_unknown_told_once_and_never_answer_a_call() -> None:
    j, _ = journal()
    found = [("act-AAAAAAAAAAAAAAAAAAAAAA", "browser_click", 1_800_000_000.0)]
    (step,) = j.recover("s1", found)
    assert step.state is State.EFFECT_UNKNOWN and step.recovered
    assert [s.action for s in j.unknown("s1")] == ["act-AAAAAAAAAAAAAAAAAAAAAA"]
    assert j.take_untold("s1") == [step]
    assert j.take_untold("s1") == []
    assert j.recover("s1", found) == []  # the same step found twice is one step
    assert isinstance(j.begin("s1", "browser_click", ""), Run)


def test_the_site_is_the_host_the_receipt_ends_on() -> None:
    assert site_of({"url_before": "https://a.example/x", "url_after": "https://b.example/y"}) == "b.example"
    assert site_of({"url_before": "https://a.example/x"}) == "a.example"
    assert site_of({"url_after": "not a url"}) is None
    assert site_of({"url_after": "http://[bad"}) is None
    assert site_of({"url_after": "https://" + "a" * 300 + "/"}) is None
    assert site_of("https://a.example/") is None


# -- the journal on disk, after a restart -----------------------------------------------------------------------


def _log(state_dir: Path) -> AuditLog:
    return AuditLog(state_dir, tag=SessionNaming(b"k" * 32).tag)


def test_a_step_with_a_running_record_and_no_end_is_found_and_one_that_ended_is_not(tmp_path: Path) -> None:
    log = _log(tmp_path)
    tag = SessionNaming(b"k" * 32).tag("sess_a")
    log.step_started("sess_a", "browser_click", {"ref": "e1"}, "act-ended-000000000000000")
    log.tool_call("sess_a", {"name": "browser_click", "arguments": {"ref": "e1"}}, {"content": []}, 0.01,
                  action="act-ended-000000000000000")
    log.step_started("sess_a", "browser_type", {"ref": "e2"}, "act-lost-0000000000000000")
    log.tool_call("sess_a", {"name": "browser_snapshot"}, {"content": []}, 0.01)  # a read: no step
    found, skipped = unended_steps(tmp_path)
    assert skipped == 0
    assert [(a, t) for a, t, _ in found[tag]] == [("act-lost-0000000000000000", "browser_type")]
    assert os.stat(tmp_path / AUDIT_FILE).st_mode & 0o777 == 0o600


def test_a_truncated_or_planted_journal_file_is_read_safely(tmp_path: Path) -> None:
    log = _log(tmp_path)
    naming = SessionNaming(b"k" * 32)
    log.step_started("sess_a", "browser_click", {}, "act-mine-0000000000000000")
    with open(tmp_path / AUDIT_FILE, "ab") as f:
        other = {"time": "2026-12-01T00:00:00.000Z", "session": naming.tag("sess_b"), "tool": "browser_click",
                 "state": "running", "action": "act-theirs-00000000000000"}
        f.write(orjson.dumps(other) + b"\n")  # another session's: found under its own tag, never ours
        f.write(b"garbage that is no JSON\n")
        f.write(b"[1, 2, 3]\n")
        f.write(orjson.dumps({**other, "session": "sess_a_raw_id"}) + b"\n")  # not a tag: never trusted
        f.write(orjson.dumps({**other, "action": "no-prefix"}) + b"\n")
        f.write(orjson.dumps({**other, "state": "paid"}) + b"\n")
        f.write(orjson.dumps({**other, "time": "yesterday"}) + b"\n")
        f.write(b"x" * (MAX_LINE * 20) + b"\n")  # a huge line: passed over a bounded piece at a time
        f.write(b'{"time": "2026-12-01T00:00:0')  # torn at the end
    found, skipped = unended_steps(tmp_path)
    assert [a for a, _, _ in found[naming.tag("sess_a")]] == ["act-mine-0000000000000000"]
    assert [a for a, _, _ in found[naming.tag("sess_b")]] == ["act-theirs-00000000000000"]
    assert set(found) == {naming.tag("sess_a"), naming.tag("sess_b")}
    assert skipped == 8
    # The writer ends the torn line before its next record: that record is read whole.
    log.step_started("sess_a", "browser_type", {}, "act-next-0000000000000000")
    found, _ = unended_steps(tmp_path)
    assert [a for a, _, _ in found[naming.tag("sess_a")]] == ["act-mine-0000000000000000",
                                                              "act-next-0000000000000000"]


def test_reading_back_is_bounded_in_steps(tmp_path: Path) -> None:
    log = AuditLog(tmp_path, tag=SessionNaming(b"k" * 32).tag, max_bytes=64 << 20)
    for n in range(5000):
        log.step_started("sess_a", "browser_click", {"n": n}, f"act-{n:022d}")
    found, _ = unended_steps(tmp_path)
    (steps,) = found.values()
    assert len(steps) == 4096 and steps[-1][0] == f"act-{4999:022d}"


# -- unsettled steps (issue 34, items 1 and 2) --------------------------------------------------------------------


def test_an_unknown_step_holds_the_same_call_past_the_window_and_reads_until_repeat_settles_it() -> None:
    j, clock = journal()
    lost = j.begin("s1", "browser_click", "buy")
    assert isinstance(lost, Run)
    j.start(lost.step)
    j.end("s1", lost.step, State.EFFECT_UNKNOWN, outcome={"content": []})
    clock.now += 20  # the person read, reconnected and retyped: past the 15 s window
    j.read("s1")  # the agent looked at the page first, as openab's instructions ask
    other = j.begin("s1", "browser_click", "elsewhere")  # and did something else
    assert isinstance(other, Run)
    j.end("s1", other.step, State.COMMITTED, outcome={"content": []})
    held = j.begin("s1", "browser_click", "buy")
    assert isinstance(held, Answer) and held.step is lost.step and j.unsettled(lost.step)
    assert held.call.deduplicated == lost.step.action and held.call.state is State.EFFECT_UNKNOWN
    assert j.since_start(lost.step) == pytest.approx(20)
    # The agent saw it had not happened: "repeat" runs it, and the new step takes the old one's place.
    again = j.begin("s1", "browser_click", "buy", repeat=True)
    assert isinstance(again, Run)
    j.end("s1", again.step, State.COMMITTED, outcome={"content": []})
    j.read("s1")
    assert isinstance(j.begin("s1", "browser_click", "buy"), Run)  # settled: a committed step after a read
    assert lost.step in j.steps("s1") and j.unknown("s1") == [lost.step]  # still listed on resume


def test_an_unknown_step_is_settled_by_the_settle_time_and_by_the_sessions_end() -> None:
    j, clock = journal(window=15, settle=600)
    for session in ("s1", "s2"):
        lost = j.begin(session, "browser_click", "buy")
        assert isinstance(lost, Run)
        j.end(session, lost.step, State.EFFECT_UNKNOWN)
    clock.now += 599
    assert isinstance(j.begin("s1", "browser_click", "buy"), Answer)
    j.forget("s2")  # the session ended (closed or evicted): nothing of it holds a call
    assert isinstance(j.begin("s2", "browser_click", "buy"), Run)
    clock.now += 2  # 601 s after it ended
    assert isinstance(j.begin("s1", "browser_click", "buy"), Run)
    # settle=0 is the window alone, as before issue 34.
    j0, _ = journal(window=15, settle=0)
    lost0 = j0.begin("s1", "browser_click", "buy")
    assert isinstance(lost0, Run)
    j0.end("s1", lost0.step, State.EFFECT_UNKNOWN)
    j0.read("s1")
    assert isinstance(j0.begin("s1", "browser_click", "buy"), Run)
    with pytest.raises(ValueError, match="settle"):
        JournalLimits(settle=-1)


def test_a_recovered_step_with_its_digest_holds_the_same_call_for_the_settle_time_from_its_start() -> None:
    j, _ = journal()  # wall: 1_800_000_000
    wall = 1_800_000_000.0
    found = [("act-recent-AAAAAAAAAAAAAAAAA", "browser_click", wall - 30, "00112233445566aa"),
             ("act-old-AAAAAAAAAAAAAAAAAAAA", "browser_click", wall - 3600, "ffeeddccbbaa9988"),
             ("act-nokey-AAAAAAAAAAAAAAAAAA", "browser_type", wall - 5, "")]
    recent, old, nokey = j.recover("s1", found)
    assert all(s.recovered and s.state is State.EFFECT_UNKNOWN for s in (recent, old, nokey))
    held = j.begin("s1", "browser_click", "00112233445566aa")
    assert isinstance(held, Answer) and held.step is recent and j.since_start(recent) == pytest.approx(30)
    assert isinstance(j.begin("s1", "browser_click", "ffeeddccbbaa9988"), Run)  # started an hour ago: settled
    assert isinstance(j.begin("s1", "browser_type", ""), Run)  # no key: listed, never matched
    assert isinstance(j.begin("s1", "browser_click", "00112233445566aa", repeat=True), Run)
    assert j.take_untold("s1") == [recent, old, nokey]


def test_unsettled_steps_stay_bounded() -> None:
    j, clock = journal(max_steps=8, max_sessions=2)
    for n in range(100):
        decision = j.begin("s1", "browser_click", f"d{n}")
        assert isinstance(decision, Run)
        j.end("s1", decision.step, State.EFFECT_UNKNOWN)
        clock.now += 20
    assert len(j.steps("s1")) == 8
    assert isinstance(j.begin("s1", "browser_click", "d0"), Run)  # forgotten by the bound: nothing holds it
    assert isinstance(j.begin("s1", "browser_click", "d99"), Answer)


def test_the_running_record_holds_the_steps_key_and_only_its_digest(tmp_path: Path) -> None:
    log = _log(tmp_path)
    tag = SessionNaming(b"k" * 32).tag("sess_a")
    log.step_started("sess_a", "browser_type", {"ref": "e2", "text": "hunter2-secret"}, "act-lost-0000000000000000")
    text = (tmp_path / AUDIT_FILE).read_text()
    assert "hunter2" not in text and "e2" not in text
    found, skipped = unended_steps_keyed(tmp_path)
    assert skipped == 0
    ((action, tool, _at, digest),) = found[tag]
    assert (action, tool) == ("act-lost-0000000000000000", "browser_type")
    assert digest == args_digest({"ref": "e2", "text": "hunter2-secret"}) and re.fullmatch(r"[0-9a-f]{16}", digest)


@pytest.mark.parametrize("odd", ["", "0011223344556677aa", "00112233445566", "00112233445566AA", "0011223344556g77",
                                 "../../etc/passwd", "0011223344556677\n", "٠١٢٣٤٥٦٧٨٩٠١٢٣٤٥", 17, None,
                                 ["0011223344556677"], {"a": 1}])
def test_a_record_with_an_odd_digest_is_refused_and_counted(tmp_path: Path, odd: object) -> None:
    log = _log(tmp_path)
    naming = SessionNaming(b"k" * 32)
    log.step_started("sess_a", "browser_click", {"ref": "e1"}, "act-real-0000000000000000")
    planted = {"time": "2026-12-01T00:00:00.000Z", "session": naming.tag("sess_a"), "tool": "browser_click",
               "state": "running", "action": "act-planted-0000000000000", "args": odd}
    # An end with an odd digest does not end the real step either.
    ending = {**planted, "action": "act-real-0000000000000000", "state": "committed", "outcome": "ok"}
    with open(tmp_path / AUDIT_FILE, "ab") as f:
        f.write(orjson.dumps(planted) + b"\n" + orjson.dumps(ending) + b"\n")
    found, skipped = unended_steps_keyed(tmp_path)
    assert skipped == 2
    assert [(a, d) for a, _, _, d in found[naming.tag("sess_a")]] == [
        ("act-real-0000000000000000", args_digest({"ref": "e1"}))]


# -- a repeat over a step that may already have happened (issue 34, item 1: the person's card) --------------------


def test_a_repeat_over_an_unsettled_step_names_it_and_holds_again_if_the_person_checks_the_page() -> None:
    j, clock = journal()
    lost = j.begin("s1", "browser_click", "buy")
    assert isinstance(lost, Run) and lost.earlier is None
    j.start(lost.step)
    j.end("s1", lost.step, State.EFFECT_UNKNOWN, outcome={"content": []})
    clock.now += 20
    # The agent repeats it on purpose: the step runs, naming the one it may repeat (the person's card says so).
    again = j.begin("s1", "browser_click", "buy", repeat=True)
    assert isinstance(again, Run) and again.earlier is lost.step
    j.start(again.step)
    # The person chose "Check the page": not done, and the earlier step holds the same call back as before.
    j.end("s1", again.step, State.FAILED)
    clock.now += 20
    held = j.begin("s1", "browser_click", "buy")
    assert isinstance(held, Answer) and held.step is lost.step
    # "Do it again": the new step takes the earlier one's place, and a repeat after it names none.
    done = j.begin("s1", "browser_click", "buy", repeat=True)
    assert isinstance(done, Run) and done.earlier is lost.step
    j.end("s1", done.step, State.COMMITTED, outcome={"content": []})
    assert done.step.replaces is None
    clock.now += 20
    j.read("s1")
    plain = j.begin("s1", "browser_click", "buy")
    assert isinstance(plain, Run) and plain.earlier is None
    # A repeat over a committed step (a second order on purpose) names none: nothing is unknown about it.
    j.end("s1", plain.step, State.COMMITTED, outcome={"content": []})
    second = j.begin("s1", "browser_click", "buy", repeat=True)
    assert isinstance(second, Run) and second.earlier is None


def test_a_step_whose_answer_was_lost_before_a_graceful_restart_holds_the_same_call_after_it(tmp_path: Path) -> None:
    from openab_browser.core.mcp.audit_read import steps_on_disk

    log = _log(tmp_path)
    tag = SessionNaming(b"k" * 32).tag("sess_a")
    lost, repeat, again = ("act-lost-0000000000000000", "act-repeat-00000000000000", "act-again-0000000000000000")
    log.step_started("sess_a", "browser_click", {"ref": "e1"}, lost)
    log.step_unknown("sess_a", "browser_click", lost)  # its answer never came back, then the pod stopped
    on_disk = steps_on_disk(tmp_path)
    assert on_disk.unended == {} and [s[0] for s in on_disk.unknown[tag]] == [lost]
    assert on_disk.unknown[tag][0][3] == args_digest({"ref": "e1"})
    # A repeat the person stopped ("Check the page": failed) leaves it unsettled ...
    log.step_started("sess_a", "browser_click", {"ref": "e1"}, repeat)
    log.tool_call("sess_a", {"name": "browser_click", "arguments": {"ref": "e1"}},
                  {"content": [], "isError": True}, 0.01, action=repeat, state=State.FAILED)
    assert [s[0] for s in steps_on_disk(tmp_path).unknown[tag]] == [lost]
    # ... one that ran settles it.
    log.step_started("sess_a", "browser_click", {"ref": "e1"}, again)
    log.tool_call("sess_a", {"name": "browser_click", "arguments": {"ref": "e1"}}, {"content": []}, 0.01,
                  action=again, state=State.COMMITTED)
    assert steps_on_disk(tmp_path).unknown == {}
    # Read back into a restarted pod's journal: held, not listed to the agent again; one past its settle time not.
    j, _ = journal()
    digest = args_digest({"ref": "e1"})
    at = 1_800_000_000.0 - 30
    j.recover("s1", [(lost, "browser_click", at, digest), ("act-old-00000000000000000", "browser_type",
                                                             at - 3600, digest)], told=True)
    assert j.take_untold("s1") == [] and [s.action for s in j.unknown("s1")] == [lost]
    held = j.begin("s1", "browser_click", digest)
    assert isinstance(held, Answer) and held.step.action == lost
