"""Reading the audit log back (docs/journal.md): its records for `openab audit`, and after a restart the journal's
steps an earlier run left unended or unknown.

Nothing read here is trusted for being in the file: a line is bounded (:data:`MAX_LINE`), a link or anything but a
plain file is skipped, and a journal record counts only if every field is what this pod writes (a session tag, an
action id, a state, a tool of the catalogue that changes state, a digest); anything else is skipped and counted.
"""

from __future__ import annotations

import logging
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Final

import orjson

from ..catalogue import catalogue
from ..journal import ACTION_PREFIX, State
from .audit import ARGS_DIGEST, AUDIT_FILE

__all__ = ["MAX_LINE", "StepsOnDisk", "audit_files", "read_records", "steps_on_disk", "unended_steps",
           "unended_steps_keyed"]

log = logging.getLogger(__name__)

# The longest line read whole (a record is far shorter); a longer one is passed over a bounded piece at a time.
MAX_LINE: Final = 64 << 10
_MAX_UNENDED: Final = 4096  # steps without an end kept while reading (the oldest go first)
_ACTION: Final = re.compile(re.escape(ACTION_PREFIX) + r"[A-Za-z0-9_-]{8,60}")  # new_action's, at most 64 chars
_TAG: Final = re.compile(r"s-[0-9a-f]{10}")  # SessionNaming.tag


def audit_files(state_dir: Path) -> list[Path]:
    """The audit files in ``state_dir`` that exist, oldest first (the rotated ones, then ``audit.jsonl``)."""
    current = state_dir / AUDIT_FILE
    rotated = sorted(
        (p for p in state_dir.glob(AUDIT_FILE + ".*") if p.suffix[1:].isdigit()),
        key=lambda p: -int(p.suffix[1:]),
    )
    return [p for p in (*rotated, current) if os.path.lexists(p)]


def read_records(state_dir: Path) -> Iterator[dict[str, Any]]:
    """Every record in the audit files, oldest first; a line that is not a whole JSON object is skipped.

    Links are not followed: a link in place of a file is skipped, as is anything but a plain file.
    """
    for line in _audit_lines(state_dir):
        if line is None:
            continue
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError:  # a torn write, or a line cut where two records met
            continue
        if isinstance(record, dict):
            yield record


def _audit_lines(state_dir: Path) -> Iterator[bytes | None]:
    """The lines of every audit file, oldest first, as :func:`_lines` gives them; links and anything but a plain
    file are skipped, with a warning."""
    for path in audit_files(state_dir):
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError as exc:
            log.warning("audit file %s skipped: %s", path, exc.strerror or exc)
            continue
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                log.warning("audit file %s skipped: not a plain file", path)
                continue
            yield from _lines(f)


def _lines(f: Any, limit: int = MAX_LINE) -> Iterator[bytes | None]:
    """``f``'s lines, each read with at most ``limit`` bytes held; a longer one is passed over and given as
    ``None`` (a planted file's one huge line costs a bounded read at a time, never its size in memory)."""
    while True:
        line = f.readline(limit + 1)
        if not line:
            return
        if len(line) <= limit:
            yield line
            continue
        while not line.endswith(b"\n"):  # the rest of the long line, a bounded piece at a time
            line = f.readline(limit)
            if not line:
                break
        yield None


def unended_steps(state_dir: Path) -> tuple[dict[str, list[tuple[str, str, float]]], int]:
    """:func:`unended_steps_keyed` without the digests: ``(action, tool, at)``."""
    found, skipped = unended_steps_keyed(state_dir)
    return {tag: [(action, tool, at) for action, tool, at, _ in steps] for tag, steps in found.items()}, skipped


def unended_steps_keyed(state_dir: Path) -> tuple[dict[str, list[tuple[str, str, float, str]]], int]:
    """The journalled steps of the audit files that have a ``running`` record and no end: by session tag, as
    ``(action, tool, at, digest)`` (``at`` in epoch seconds, ``digest`` the running record's ``args``: 16 hex
    digits), oldest first; and how many lines were skipped (not a whole record, too long, or a record whose fields
    are not what this pod writes, a digest that is not 16 lowercase hex digits included: never trusted). A record
    with no digest at all (an older pod's) gives ``""``: the step is listed, and holds no call back.

    Bounded: lines of at most :data:`MAX_LINE` bytes, at most 4096 steps without an end kept (the oldest go).
    Run it in a thread: it reads files.
    """
    steps = steps_on_disk(state_dir)
    return steps.unended, steps.skipped


@dataclass
class StepsOnDisk:
    """What the audit files say of the journal's steps after a restart (:func:`steps_on_disk`)."""

    # Started and never ended (the pod died mid-call): by session tag, ``(action, tool, at, digest)``, oldest first.
    unended: dict[str, list[tuple[str, str, float, str]]]
    # Ended effect_unknown (their answer was lost, or an earlier restart found them unended), with their key, and
    # not settled since by a later step of the same call: by session tag, as above. They were told already.
    unknown: dict[str, list[tuple[str, str, float, str]]]
    skipped: int


def steps_on_disk(state_dir: Path) -> StepsOnDisk:
    """The steps an earlier run of the pod left unended or unknown (see :class:`StepsOnDisk` and
    :func:`unended_steps_keyed` for what is trusted and the bounds). A step whose answer was lost before a graceful
    restart holds the same call back after it, as one the pod died in does: a later ``running`` record of the same
    call (a ``repeat``) settles it, unless that one failed (the person chose to check the page first)."""
    running: dict[tuple[str, str], tuple[str, float, str]] = {}
    # (tag, tool, digest) -> {action: at}: ended effect_unknown and not settled since.
    unknown: dict[tuple[str, str, str], dict[str, float]] = {}
    settling: dict[tuple[str, str], dict[str, float]] = {}  # (tag, action) of a repeat -> the steps it settles
    skipped = 0
    for line in _audit_lines(state_dir):
        step = _journal_fields(line)
        if step is None:
            skipped += 1
            continue
        if step is _NOT_A_STEP:
            continue
        tag, action, state, tool, at, digest = step
        if state == State.RUNNING.value:
            running[(tag, action)] = (tool, at, digest)
            if digest and (settled := unknown.pop((tag, tool, digest), None)):
                settling[(tag, action)] = settled
            if len(running) > _MAX_UNENDED:
                del running[next(iter(running))]
            continue
        started = running.pop((tag, action), None)
        settled = settling.pop((tag, action), None)
        if started is None:
            continue  # a call answered from the journal, or an end whose start is no longer kept
        tool, at, digest = started
        if state == State.FAILED.value and settled:
            unknown.setdefault((tag, tool, digest), {}).update(settled)  # not done: still unsettled
        if state == State.EFFECT_UNKNOWN.value and digest:
            unknown.setdefault((tag, tool, digest), {})[action] = at
            if len(unknown) > _MAX_UNENDED:
                del unknown[next(iter(unknown))]
    found: dict[str, list[tuple[str, str, float, str]]] = {}
    for (tag, action), (tool, at, digest) in running.items():
        found.setdefault(tag, []).append((action, tool, at, digest))
    lost: dict[str, list[tuple[str, str, float, str]]] = {}
    for (tag, tool, digest), actions in unknown.items():
        for action, at in actions.items():
            lost.setdefault(tag, []).append((action, tool, at, digest))
    for steps in lost.values():
        steps.sort(key=lambda s: s[2])
    return StepsOnDisk(found, lost, skipped)


_NOT_A_STEP: Final = ("", "", "", "", 0.0, "")  # a whole record of a call that is no step (a read)


def _journal_fields(line: bytes | None) -> tuple[str, str, str, str, float, str] | None:
    """A journal record's ``(session tag, action, state, tool, at, digest)``; :data:`_NOT_A_STEP` for a read's
    record; ``None`` for a line that is not a record this pod writes (torn, too long, planted)."""
    if line is None:
        return None
    if not line.strip():
        return _NOT_A_STEP  # the newline a writer adds after a torn record leaves nothing to count
    try:
        record = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(record, dict):
        return None
    tag, action, state, tool = (record.get(k) for k in ("session", "action", "state", "tool"))
    if "action" not in record and "state" not in record and isinstance(tag, str):
        return _NOT_A_STEP
    # A journalled tool is one of the catalogue's that changes state: any other name (free text a process of the
    # agent planted, to be read back to the agent after a restart) is not a record of ours.
    if not (isinstance(tag, str) and _TAG.fullmatch(tag) and isinstance(action, str) and _ACTION.fullmatch(action)
            and state in _STATE_VALUES and isinstance(tool, str) and catalogue().changes_state(tool)):
        return None
    # The step's key, the digest step_started and call_record write. A record without one (an older pod's) is a
    # step that is listed and never recognised; anything else in its place (not a string, another length, upper
    # case, free text) is not ours.
    digest = record.get("args", "")
    if "args" in record and not (isinstance(digest, str) and ARGS_DIGEST.fullmatch(digest)):
        return None
    try:
        at = datetime.fromisoformat(str(record.get("time")).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
    return tag, action, state, tool, at, digest


_STATE_VALUES: Final = frozenset(s.value for s in State)
