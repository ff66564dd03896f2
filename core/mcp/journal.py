"""The action journal's asyncio side (docs/journal.md): one per pod, shared by every MCP session of a session.

:class:`ActionJournal` runs each state-changing ``tools/call`` as a step of
:class:`openab_browser.core.journal.Journal`:
the step runs in a task of its own, so a caller whose HTTP stream broke (or whose relay died) leaves it running
for up to the window, and the client's re-issue of the same call (MCP 2026-07-28: a new id) joins it and gets its
real outcome; a step nobody waits for any more is cancelled when the window passes. An explicit
``notifications/cancelled`` still cancels at once. A re-issue after the step ended committed or effect_unknown is
answered with the recorded outcome, marked; a re-issue while a step is unsettled (effect_unknown: its outcome
never came back, in this run of the pod or before a restart) is not run, and told the step may already have
happened and how to check; a failed step never holds a retry back; ``"repeat": true`` is taken out of the arguments
and runs the step again.

It writes the ``running`` record (the end record is the call's audit record, written by BrowserMcp), tells the
panel of every step that changes state (listeners, :meth:`add_listener`), and after a restart lists the steps an
earlier run of the pod left without an end (:meth:`load_previous`, :meth:`untold_text`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from ..catalogue import catalogue
from ..journal import Answer, Join, Journal, JournalLimits, Run, State, Step, site_of, untrusted
from ..jsonrpc import JsonObject
from ..mcp_vocabulary import META_ACTION, META_RECEIPT
from .audit import (
    GUARD_DECISIONS,
    GUARD_RULE,
    PAGE_LEFT,
    AuditLog,
    Ended,
    args_digest,
    reason_of,
    step_state,
)
from .audit_read import StepsOnDisk, steps_on_disk

__all__ = ["EXPLICIT_CANCEL", "REPEAT", "ActionJournal", "Listener", "StepRunner"]

log = logging.getLogger(__name__)

EXPLICIT_CANCEL: Final = "openab: notifications/cancelled"
"""The message BrowserMcp stops a call with (its StopScope's cancel) when the agent asked: the step is cancelled at
once."""
REPEAT: Final = "repeat"

StepRunner = Callable[[JsonObject, str, JsonObject | None], Coroutine[Any, Any, tuple[JsonObject, Ended]]]
"""Runs one call's ``params`` as the step with this action id (and, for a ``repeat`` over a step that may already
have happened, that step's :data:`~openab_browser.core.mcp_vocabulary.META_EARLIER`); returns its result and how it
ended."""
Listener = Callable[[str, list[dict[str, Any]]], None]
"""Takes a session id and the steps (their panel views) that changed state; must not block."""


@dataclass(eq=False)
class _Running:
    session_id: str
    task: asyncio.Task[tuple[JsonObject, Ended]]
    orphaned: asyncio.TimerHandle | None = None
    # One future per caller still waiting, each its own (a caller cancelled cancels its future, not the step), woken
    # once the step's end is in the journal: the one done callback of the step's task does both. None left: orphaned.
    woken: list[asyncio.Future[None]] = field(default_factory=list)


class ActionJournal:
    """The pod's journal of state-changing steps. ``audit`` gets the ``running`` records (and the deduplicated
    calls' records); ``tag`` names a session as the audit log does; ``state_dir`` is where :meth:`load_previous`
    reads an earlier run's records."""

    def __init__(
        self,
        *,
        window: float = 15.0,
        settle: float = 600.0,
        audit: AuditLog | None = None,
        tag: Callable[[str], str] | None = None,
        state_dir: Path | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        limits: JournalLimits | None = None,
    ) -> None:
        self.core = Journal(limits or JournalLimits(window=window, settle=settle), clock=clock, wall=wall)
        self.window = self.core.limits.window
        self.audit = audit
        self._tag = tag
        self._state_dir = state_dir
        self._running: dict[Step, _Running] = {}
        self._listeners: list[Listener] = []
        self._previous = StepsOnDisk({}, {}, 0)
        self.skipped_lines = 0  # lines of the audit files that were not a record this pod writes

    @staticmethod
    def journals(tool: object, arguments: object = None) -> bool:
        """Whether a call of ``tool`` with ``arguments`` is a step: one of the catalogue's tools that is not
        read-only, less the actions of such a tool that only read (listing the tabs). A tool only the attached
        browser names (a build of its own, a test's) is not held back: nothing says what repeating it does, and
        answering a read from the journal would hand back a stale page."""
        # The calls of such a tool that only read (its facts.journal.reads) are never held back, as no read is.
        return isinstance(tool, str) and catalogue().changes_state(tool) and not catalogue().only_reads(tool, arguments)

    def add_listener(self, listener: Listener) -> Callable[[], None]:
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    # -- a call ------------------------------------------------------------------------------------------

    async def call(self, session_id: str, params: JsonObject, run: StepRunner) -> JsonObject:
        """Answer one state-changing ``tools/call`` (``params``) through the journal; ``run`` does it."""
        self.adopt(session_id)
        tool = str(params.get("name"))
        arguments = params.get("arguments")
        repeat = False
        if isinstance(arguments, dict) and isinstance(arguments.get(REPEAT), bool):
            repeat = arguments[REPEAT]
            arguments = {k: v for k, v in arguments.items() if k != REPEAT}
            params = {**params, "arguments": arguments}
        decision = self.core.begin(session_id, tool, args_digest(arguments), repeat=repeat)
        if isinstance(decision, Run):
            return await self._run(session_id, params, decision.step, run, decision.earlier)
        if isinstance(decision, Join):
            entry = self._running.get(decision.step)
            if entry is None:  # ended a moment ago, its task's end not yet seen: as good as answered
                return self._answered(session_id, params, decision.step, decision.call)
            if entry.orphaned is not None:
                entry.orphaned.cancel()
                entry.orphaned = None
            result = await self._wait(entry, tool)
            return self._joined(session_id, params, decision.step, decision.call, result)
        assert isinstance(decision, Answer)
        return self._answered(session_id, params, decision.step, decision.call)

    async def _run(self, session_id: str, params: JsonObject, step: Step, run: StepRunner,
                   earlier: Step | None = None) -> JsonObject:
        if self.audit is not None:
            self.audit.step_started(session_id, step.tool, params.get("arguments"), step.action)
        self.core.start(step)
        # The person is asked before the browser does again what may already have happened: the card names it.
        told = None if earlier is None else {"action": earlier.action, "tool": earlier.tool,
                                             "at": earlier.view()["at"],
                                             "why": "restart" if earlier.recovered else "lost"}
        task = asyncio.get_running_loop().create_task(run(params, step.action, told), name=f"step {step.action}")
        entry = self._running[step] = _Running(session_id, task)
        self._tell(session_id, step)
        task.add_done_callback(lambda done: self._ended(session_id, step, done))
        return await self._wait(entry, step.tool)

    async def _wait(self, entry: _Running, tool: str) -> JsonObject:
        woken = asyncio.get_running_loop().create_future()
        entry.woken.append(woken)
        try:
            await woken
            result, _ = entry.task.result()  # the step's own failure, or its cancel, as the step ended
            return result
        except asyncio.CancelledError as exc:
            current = asyncio.current_task()
            if entry.task.done() and not entry.task.cancelled() and entry.task.exception() is None:
                # The step ended in the very turn our caller was cancelled (a New chat answers a handoff's card,
                # then closes the session): its outcome is known, and an answer beats a cancel.
                if current is not None:
                    current.uncancel()
                return entry.task.result()[0]
            if entry.task.cancelled() and (current is None or not current.cancelling()):
                return _unknown(tool)  # the step was cancelled under a joiner that was not: its outcome is unknown
            entry.woken.remove(woken)
            if not entry.woken and not entry.task.done():
                if exc.args and exc.args[0] == EXPLICIT_CANCEL:
                    entry.task.cancel()
                else:
                    # The caller went away (its stream broke): the step runs on, and a re-issue within the window
                    # joins it; if none comes, it is cancelled then.
                    entry.orphaned = asyncio.get_running_loop().call_later(self.window, _cancel_orphan, entry)
            raise
        finally:
            if woken in entry.woken:  # answered, or gone by the paths above that return
                entry.woken.remove(woken)

    def _ended(self, session_id: str, step: Step, task: asyncio.Task[tuple[JsonObject, Ended]]) -> None:
        entry = self._running.pop(step, None)
        if entry is not None and entry.orphaned is not None:
            entry.orphaned.cancel()
        try:
            self._record_end(session_id, step, task)
        finally:  # the callers go on once the journal holds the end (and even if recording it failed)
            for woken in entry.woken if entry is not None else ():
                if not woken.done():
                    woken.set_result(None)

    def _record_end(self, session_id: str, step: Step, task: asyncio.Task[tuple[JsonObject, Ended]]) -> None:
        outcome: JsonObject | None = None
        if task.cancelled():
            state = State.EFFECT_UNKNOWN  # it may have reached the browser before the cancel did
            outcome = _unknown(step.tool)
        elif (error := task.exception()) is not None:
            state = step_state(error)
        else:
            outcome, ended = task.result()
            state = step_state(ended)
        site = _site(outcome)
        self.core.end(session_id, step, state, site=site, outcome=outcome)
        self._tell(session_id, step)

    def _joined(self, session_id: str, params: JsonObject, step: Step, call: Step, result: JsonObject) -> JsonObject:
        self.core.ended_like(session_id, call, step)
        # The agent must be able to tell that this outcome is the earlier call's, not a second action of its own.
        marker = (f"Not done again: this call joined the same {step.tool} already running since "
                  f"{self.core.age(step):.0f} s ago ({step.action}); this is that step's outcome. To do it a second "
                  'time on purpose, call it again with "repeat": true.')
        marked = _marked(result, marker, step.action)
        self._record(session_id, params, call, step, marked)
        return marked

    def _answered(self, session_id: str, params: JsonObject, step: Step, call: Step) -> JsonObject:
        if step.state is State.EFFECT_UNKNOWN:
            return self._unsettled(session_id, params, step, call)
        self.core.ended_like(session_id, call, step)
        outcome = step.outcome if isinstance(step.outcome, dict) else _unknown(step.tool)
        ago = self.core.age(step)
        marker = (f"Not done again: this is the outcome of the same {step.tool} {ago:.0f} s ago ({step.action}), "
                  "answered from the journal. To do it a second time on purpose, call it again with "
                  '"repeat": true.')
        result = _marked(outcome, marker, step.action)
        self._record(session_id, params, call, step, result)
        return result

    def _unsettled(self, session_id: str, params: JsonObject, step: Step, call: Step) -> JsonObject:
        """A call that would do again a step that may already have happened: not run, and told how to decide.

        An ``isError`` result: what was asked was not done by this call, and the agent must look before it acts.
        The step's tool is one of the catalogue's and its action id of its fixed shape (a recovered step's were
        checked as it was read back, :func:`~openab_browser.core.mcp.audit_read.unended_steps_keyed`), so they may
        be named in our own words; its time is the pod's own formatting of a number."""
        self.core.ended_like(session_id, call, step)
        ago = self.core.since_start(step)
        why = ("the pod restarted while it was running" if step.recovered else
               "the page went to another page while the browser was doing it"
               if reason_of(step.outcome) == PAGE_LEFT else
               "its outcome never came back (the connection to the browser dropped, the call timed out, or it was "
               "cancelled after it reached the browser)")
        marker = (f"Not done again: the same {step.tool} ({step.action}), started at {step.view()['at']} "
                  f"({ago:.0f} s ago), may already have happened: {why}. Take a browser_snapshot to check the page. "
                  f'If it did not happen, call {step.tool} again with "repeat": true; if it did, do not call it '
                  "again.")
        kept = step.outcome.get("content") if isinstance(step.outcome, dict) else None
        result: JsonObject = {"content": [{"type": "text", "text": marker},
                                          *(kept if isinstance(kept, list) else [])],
                              "isError": True, "_meta": {META_ACTION: step.action}}
        self._record(session_id, params, call, step, result)
        return result

    def _record(self, session_id: str, params: JsonObject, call: Step, step: Step, result: JsonObject) -> None:
        if self.audit is not None:
            self.audit.tool_call(session_id, params, result, 0.0, action=call.action, state=call.state,
                                 deduplicated=step.action)
        self._tell(session_id, call)

    def _tell(self, session_id: str, step: Step) -> None:
        view = [step.view()]
        for listener in list(self._listeners):
            try:
                listener(session_id, view)
            except Exception:  # a panel that cannot be told costs its notification, never the call
                log.exception("journal: a listener failed")

    # -- the session's steps -----------------------------------------------------------------------------

    def read(self, session_id: str) -> None:
        """A read of the session's went to the browser: a re-issue after it is not straight after its step."""
        self.core.read(session_id)

    def decided(self, session_id: str, action: str, guard: str, rule: str) -> None:
        """The browser's guard decided ``guard`` by ``rule`` on the running step ``action`` of the session (the
        browser tells it before the step acts): recorded, so the audit keeps it if the step's answer is lost. A
        decision or rule outside the audit's vocabulary, or an action that is no running step of this session, is
        dropped."""
        if self.audit is None or guard not in GUARD_DECISIONS or not GUARD_RULE.fullmatch(rule):
            return
        step = self.core.step(session_id, action)
        if step is not None and step.state is State.RUNNING and step.deduplicated is None:
            self.audit.step_decided(session_id, step.tool, action, step.digest, guard, rule)

    def unknown(self, session_id: str) -> list[dict[str, Any]]:
        """The panel views of the session's steps still effect_unknown (what ``session/resume`` is told)."""
        self.adopt(session_id)
        return [step.view() for step in self.core.unknown(session_id)]

    def forget(self, session_id: str) -> None:
        """The session is gone: its steps are forgotten, and those still running are cancelled."""
        self.core.forget(session_id)
        for entry in list(self._running.values()):
            if entry.session_id == session_id and not entry.woken:
                entry.task.cancel()

    # -- after a restart ---------------------------------------------------------------------------------

    async def load_previous(self) -> int:
        """Read the audit files once, in a thread, for the steps an earlier run left without an end (bounded;
        lines that are not our records are skipped and counted). Returns how many were found."""
        if self._state_dir is None or self.audit is None or not self.audit.keep:
            return 0
        try:
            previous = await asyncio.to_thread(steps_on_disk, self._state_dir)
        except OSError as exc:
            log.warning("journal: the audit files could not be read for unfinished steps: %s", exc)
            return 0
        self._previous, self.skipped_lines = previous, previous.skipped
        count = sum(len(steps) for steps in previous.unended.values())
        lost = sum(len(steps) for steps in previous.unknown.values())
        if count or lost or previous.skipped:
            log.info("journal: %d step(s) of an earlier run never ended and %d ended with their outcome unknown "
                     "(each holds the same call back until settled); %d line(s) skipped", count, lost,
                     previous.skipped)
        return count

    def adopt(self, session_id: str) -> None:
        """Bring the session's steps found on disk into the journal (once), as effect_unknown."""
        previous = self._previous
        if (not previous.unended and not previous.unknown) or self._tag is None:
            return
        tag = self._tag(session_id)
        if lost := previous.unknown.pop(tag, None):
            self.core.recover(session_id, lost, told=True)
        if found := previous.unended.pop(tag, None):
            self.core.recover(session_id, found)

    def untold_text(self, session_id: str) -> str | None:
        """What the session's agent has not been told yet: the steps an earlier run left unfinished.

        Everything about a step came from the audit file, which any process of the agent can append to: our words
        name only the catalogue's tools and a count; the steps themselves are quoted in the untrusted block. Once
        told, each gets its end record, so the next restart does not list it again."""
        self.adopt(session_id)
        untold = self.core.take_untold(session_id)
        if not untold:
            return None
        if self.audit is not None:
            for step in untold:
                self.audit.step_unknown(session_id, step.tool, step.action)
        names = sorted({step.tool for step in untold if catalogue().changes_state(step.tool)})
        of = f" ({', '.join(names)})" if names else ""
        quoted = untrusted(f"{step.tool} {step.action} started {step.view()['at']}" for step in untold)
        return ("openab: the pod restarted while these browser actions were running; each may or may not have "
                f"happened, and none will be run again: {len(untold)} action(s){of}, each as the audit file "
                "recorded it (tool, action id, start time) in the block below. Look at the page (browser_snapshot) "
                f"before doing any of them again.\n{quoted}")


def _marked(outcome: JsonObject, marker: str, action: str) -> JsonObject:
    """``outcome`` told as another call's: ``marker`` first, and the action id of the step it came from."""
    content = outcome.get("content")
    result: JsonObject = {**outcome, "content": [{"type": "text", "text": marker},
                                                  *(content if isinstance(content, list) else [])]}
    meta = dict(outcome.get("_meta") or {})
    meta[META_ACTION] = action
    result["_meta"] = meta
    return result


def _cancel_orphan(entry: _Running) -> None:
    if not entry.woken and not entry.task.done():
        entry.task.cancel()


def _unknown(tool: str) -> JsonObject:
    return {"content": [{"type": "text", "text": (
        f"{tool} did not finish: it was cancelled. Its outcome is unknown: the browser may already have done it. "
        f"Do not call {tool} again blindly: call browser_snapshot to see the page as it is now, then decide.")}],
        "isError": True}


def _site(outcome: Mapping[str, Any] | None) -> str | None:
    meta = outcome.get("_meta") if isinstance(outcome, Mapping) else None
    return site_of(meta.get(META_RECEIPT)) if isinstance(meta, Mapping) else None
