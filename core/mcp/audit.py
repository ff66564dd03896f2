"""The audit log: one JSONL record per browser tool call, kept 0600 in the state dir and rotated by size.

A record says when a call started, in which session, which tool (a name of the catalogue, else ``other:``
and a digest of the name), how it ended, how long it took, what the
extension's guard decided, and a digest of its arguments::

    {"time": "2026-11-30T23:40:01.123Z", "session": "s-3f9a0c12be", "tool": "browser_type",
     "outcome": "ok", "ms": 41.7, "guard": "asked-allowed", "args": "9c0d5e1f2a3b4c5d"}

The session is its tag (:class:`~openab_browser.core.session_naming.SessionNaming`), never its id: the id is the
capability to resume the session, and with it the person's browser. The arguments are a digest only (what
the agent typed may be a password): it tells two calls apart and matches a call the agent's own log shows,
and reveals nothing else. A file call (``browser_upload``, ``browser_download``) adds ``"file": {"name", "size",
"sha256"}``: the file's name in the working folder, never its content nor a path outside. A JSON-RPC error keeps
its code and the code's meaning, not its message, which may quote the arguments.

``outcome`` is ``ok``; ``tool-error`` (an ``isError`` result: the tool ran, or was refused, and said why);
``error`` (a JSON-RPC error); ``outcome-unknown`` (the answer was lost: the socket dropped, the call timed
out; the browser may have acted); ``cancelled`` (the agent cancelled it, or its transport went away).
``guard`` is ``allowed`` (the guard let it run), ``asked-allowed`` (the person was asked and said yes),
``denied`` (a site rule or the person refused) or ``none`` (a tool the guard does not look at, or no answer);
``guard_rule``, when the browser named it, the rule that made the decision (``routine``, ``site-rule-never``,
``risky-word:payment``, ...): a word of at most 64 characters of ``a-z0-9:_-``, anything else is left out (the
browser wrote it).

The log is also the action journal on disk (docs/journal.md): a state-changing step writes a record when it goes
down the tunnel (``"state": "running"`` and its ``"action"``, no outcome yet) and its end record adds ``"state"``
(``committed``, ``failed``, ``effect_unknown``), ``"action"``, ``"site"`` (the host its receipt names) and
``"receipt"`` (a digest of the receipt, never its text); a call answered from the journal adds ``"deduplicated"``
(the action it was answered from). :mod:`.audit_read` reads the records back, and after a restart the steps
that never ended.

The same place counts each call for ``/metrics`` (:class:`CallStats`: by tool and outcome, and how long calls
took), whether or not the records are kept (``keep=False``: the operator turned the audit file off).

Writing never fails a tool call and never blocks the event loop for long: each record is one short ``write`` on
the file, which stays open between records; before each record the name is checked to still be that file (one
``lstat``), so a log an operator moved or removed, or a link planted in its place, is started afresh the next
record. A failure is logged, at most once a minute, with how many records were lost.

Durability: a record is in the kernel when the call's answer leaves the pod (``write`` returned), so it survives
the pod's process being killed at any point, an OOM kill included; it is not ``fsync``ed, so a crash of the machine
itself may lose the last seconds' records (as it would before the file was kept open).
"""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import re
import stat
import time
from bisect import bisect_left
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import orjson

from ..errors import TunnelError, TunnelFailure
from ..journal import State, site_of
from ..jsonrpc import RpcError
from ..mcp_vocabulary import META_GUARD, META_GUARD_RULE, META_OUTCOME, META_RECEIPT
from ..statedir import make_private_dir
from ..timestamps import iso_utc
from .tools import STATIC_NAMES

__all__ = [
    "ARGS_DIGEST",
    "AUDIT_FILE",
    "CALL_SECONDS_BUCKETS",
    "GUARD_DECISIONS",
    "GUARD_RULE",
    "OTHER_TOOL",
    "PAGE_LEFT",
    "AuditLog",
    "CallStats",
    "args_digest",
    "call_record",
    "reason_of",
    "recorded_tool",
    "step_state",
]

log = logging.getLogger(__name__)

AUDIT_FILE: Final = "audit.jsonl"
GUARD_DECISIONS: Final = frozenset({"allowed", "asked-allowed", "denied"})
# The reason of a step the browser began as its page went to another one (its result's _meta says effect_unknown).
PAGE_LEFT: Final = "page left mid-step"
_NO_GUARD: Final = "none"
_DIGEST_HEX: Final = 16
_TOOL_DIGEST_HEX: Final = 12
_WARN_INTERVAL: Final = 60.0
# A record is a few hundred bytes: a longer line is not one of ours, and is skipped without being held whole.
# What this pod writes, and nothing else is read back: the file is the agent's to append to as well (docs/journal.md).
# args_digest's: the step's key, never its arguments (what the journal's reader accepts back, audit_read.py).
ARGS_DIGEST: Final = re.compile(f"[0-9a-f]{{{_DIGEST_HEX}}}")
# The guard's rule as the browser names it: a word of its fixed vocabulary, never free text.
GUARD_RULE: Final = re.compile(r"[a-z0-9:_-]{1,64}")
# How each outcome leaves a state-changing step: a refusal and a tool error did not do it; a lost answer or a
# cancel may have (the browser may have clicked before the answer or the cancel arrived).
_STATES: Final[Mapping[str, State]] = {
    "ok": State.COMMITTED, "tool-error": State.FAILED, "error": State.FAILED,
    "outcome-unknown": State.EFFECT_UNKNOWN, "cancelled": State.EFFECT_UNKNOWN,
}
# The meaning of each JSON-RPC code, said in the record instead of the message (which may quote arguments).
_ERROR_MEANINGS: Final[Mapping[int, str]] = {
    -32700: "parse error",
    -32600: "invalid request",
    -32601: "method not found",
    -32602: "invalid params",
    -32603: "internal error",
    -32000: "server error",
}

Ended = Mapping[str, Any] | BaseException | None
"""How a call ended: its result, the exception it ended with, or ``None`` when it never got that far."""


def args_digest(arguments: Any) -> str:
    """sha256 of the arguments' canonical JSON (keys sorted), 16 hex digits: equal arguments, equal digests."""
    value = {} if arguments is None else arguments
    try:
        canonical = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # what orjson will not write (an integer past 64 bits) still gets a stable digest
        canonical = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    return hashlib.sha256(canonical).hexdigest()[:_DIGEST_HEX]


def _outcome(ended: Ended) -> tuple[str, str | None]:
    if isinstance(ended, TunnelError):
        # Refused before it was sent, or no browser: it did not run. Otherwise the browser may have acted.
        if ended.reason in (TunnelFailure.NOT_CONNECTED, TunnelFailure.OVERLOADED, TunnelFailure.SHUTTING_DOWN):
            return "tool-error", ended.reason.value
        return "outcome-unknown", ended.reason.value
    if isinstance(ended, RpcError):
        return "error", f"{ended.code} {_ERROR_MEANINGS.get(ended.code, 'error')}"
    if isinstance(ended, BaseException):
        # CancelledError is a BaseException: the agent's notifications/cancelled, or its transport closing.
        if not isinstance(ended, Exception):
            return "cancelled", None
        return "error", "internal error"
    if ended is None:
        return "cancelled", None
    if ended.get("isError") is not True:
        return "ok", None
    meta = ended.get("_meta")
    if isinstance(meta, Mapping) and meta.get(META_OUTCOME) == State.EFFECT_UNKNOWN.value:
        return "outcome-unknown", PAGE_LEFT  # the browser began it as the page went: it may have acted
    return "tool-error", None


def step_state(ended: Ended) -> State:
    """The state a state-changing step that ended as ``ended`` is in."""
    return _STATES[_outcome(ended)[0]]


def reason_of(ended: Ended) -> str | None:
    """Why a call that ended as ``ended`` did not simply end ok or with the tool's error, as its record says it."""
    return _outcome(ended)[1]


def _receipt(ended: Ended) -> Any:
    meta = ended.get("_meta") if isinstance(ended, Mapping) else None
    return meta.get(META_RECEIPT) if isinstance(meta, Mapping) else None


def _guard(ended: Ended) -> tuple[str, str | None]:
    """The guard's decision and the rule that made it (``None`` when the browser named none we keep)."""
    meta = ended.get("_meta") if isinstance(ended, Mapping) else None
    if not isinstance(meta, Mapping):
        return _NO_GUARD, None
    decision, rule = meta.get(META_GUARD), meta.get(META_GUARD_RULE)
    return (decision if isinstance(decision, str) and decision in GUARD_DECISIONS else _NO_GUARD,
            rule if isinstance(rule, str) and GUARD_RULE.fullmatch(rule) else None)


def recorded_tool(tool: object, names: frozenset[str] = STATIC_NAMES) -> str:
    """How a record names the tool a call asked for: its own name if it is one of ``names`` (the catalogue's),
    else ``other:`` and 12 hex digits of the sha256 of the name's JSON.

    The name is the agent's or a hostile extension's choice: raw, a newline in it would forge a row of
    `openab audit`'s table and an escape sequence would reach the operator's terminal. The digest still tells
    two unknown names apart and matches the name in the agent's own log.
    """
    if isinstance(tool, str) and tool in names:
        return tool
    return f"{OTHER_TOOL}:{args_digest(tool)[:_TOOL_DIGEST_HEX]}"


def call_record(
    *, started: float, session: str, tool: Any, arguments: Any, ended: Ended, seconds: float,
    file: Mapping[str, Any] | None = None, action: str | None = None, state: State | None = None,
    deduplicated: str | None = None,
) -> dict[str, Any]:
    """The audit record of one call that started at ``started`` (epoch seconds) and took ``seconds``; with
    ``action``, the end record of a journalled step (its ``state``: by default what ``ended`` makes it)."""
    outcome, reason = _outcome(ended)
    guard, rule = _guard(ended)
    record: dict[str, Any] = {
        "time": iso_utc(started),
        "session": session,
        "tool": recorded_tool(tool),
        "outcome": outcome,
        "ms": round(seconds * 1000, 1),
        "guard": guard,
        "args": args_digest(arguments),
    }
    if rule is not None:
        record["guard_rule"] = rule
    if reason is not None:
        record["reason"] = reason
    if file:
        record["file"] = {"name": str(file.get("name")), "size": file.get("size"), "sha256": file.get("sha256")}
    if action is not None:
        record["action"] = action
        record["state"] = (state or step_state(ended)).value
        receipt = _receipt(ended)
        if (site := site_of(receipt)) is not None:
            record["site"] = site
        if receipt is not None:
            record["receipt"] = args_digest(receipt)
        if deduplicated is not None:
            record["deduplicated"] = deduplicated
    return record


CALL_SECONDS_BUCKETS: Final = (0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 180.0)
"""Upper bounds (seconds) of the latency buckets: a snapshot takes tens of ms, a wait for a page up to minutes."""
OTHER_TOOL: Final = "other"


class CallStats:
    """Tool calls by tool and outcome, and their latency by tool, for ``/metrics``: plain counts, read at scrape.

    A tool is counted under its own name only if it is one of ``names`` (the catalogue's), else as
    :data:`OTHER_TOOL`: the name is the agent's or a hostile extension's choice, and every distinct name would
    be a new series for the operator's Prometheus to keep.
    """

    def __init__(self, names: frozenset[str] = STATIC_NAMES) -> None:
        self.names = names
        self.calls: Counter[tuple[str, str]] = Counter()  # (tool, outcome) -> calls
        # tool -> calls per bucket (not cumulative; the last counts those past every bound), and their sum.
        self.buckets: dict[str, list[int]] = {}
        self.seconds: dict[str, float] = {}

    def observe(self, tool: object, outcome: str, seconds: float) -> None:
        name = tool if isinstance(tool, str) and tool in self.names else OTHER_TOOL
        self.calls[(name, outcome)] += 1
        counts = self.buckets.get(name)
        if counts is None:
            counts = self.buckets[name] = [0] * (len(CALL_SECONDS_BUCKETS) + 1)
        counts[bisect_left(CALL_SECONDS_BUCKETS, seconds)] += 1
        self.seconds[name] = self.seconds.get(name, 0.0) + seconds


class AuditLog:
    """The pod's audit log: ``audit.jsonl`` in ``state_dir`` and up to ``backups`` rotated files beside it.

    ``tag`` names a session in the records (``SessionNaming.tag``). When the file would grow past
    ``max_bytes`` it becomes ``audit.jsonl.1`` (``.1`` becomes ``.2`` ... the oldest past ``backups`` is
    dropped) and a new one starts. Every file is opened without following a link, created 0600, and used only
    if it is a plain file of ours that no other user can read. One instance per pod: two writers to the same
    files would rotate each other's records away.

    ``stats`` counts every call (:class:`CallStats`); with ``keep=False`` that is all: no file is written.
    """

    def __init__(
        self,
        state_dir: Path,
        *,
        tag: Callable[[str], str],
        max_bytes: int = 10 << 20,
        backups: int = 3,
        clock: Callable[[], float] = time.time,
        keep: bool = True,
    ) -> None:
        if max_bytes < 1024 or backups < 0:
            raise ValueError("the audit log needs max_bytes of at least 1024 and backups of 0 or more")
        self.keep = keep
        self.stats = CallStats()
        self.path = (make_private_dir(state_dir) if keep else state_dir) / AUDIT_FILE
        self.max_bytes = max_bytes
        self.backups = backups
        self._tag = tag
        self._clock = clock
        self._lost = 0
        self._warned_at: float | None = None
        self._file: _OpenFile | None = None

    def tool_call(
        self, session_id: str, params: Mapping[str, Any], ended: Ended, seconds: float, *,
        file: Mapping[str, Any] | None = None, action: str | None = None, state: State | None = None,
        deduplicated: str | None = None,
    ) -> None:
        """Record one ``tools/call`` (its ``params``) of session ``session_id`` that ended as ``ended``; ``file``:
        a file call's ``{"name", "size", "sha256"}``; ``action`` (and ``state``, ``deduplicated``): a journalled
        step's end."""
        try:
            self.stats.observe(params.get("name"), _outcome(ended)[0], seconds)
        except Exception:  # as below: a count lost, never the call
            log.exception("audit log: could not count a call")
        if not self.keep:
            return
        try:
            record = call_record(
                started=self._clock() - seconds, session=self._tag(session_id), tool=params.get("name"),
                arguments=params.get("arguments"), ended=ended, seconds=seconds, file=file, action=action,
                state=state, deduplicated=deduplicated,
            )
        except Exception:  # a bug here must cost a record, never the call
            log.exception("audit log: could not make the record of a call")
            return
        self.write(record)

    def step_started(self, session_id: str, tool: str, arguments: Any, action: str) -> None:
        """The journal's record of a state-changing step about to go down the tunnel, written before the browser
        is asked: if no end follows it (the pod died), the step is effect_unknown after the restart, and its
        ``args`` (the digest of its arguments, ``repeat`` left out: the step's key, never the arguments) lets the
        restarted pod recognise a re-issue of it (:func:`.audit_read.unended_steps_keyed`)."""
        self._step_record(session_id, tool, action, {"state": State.RUNNING.value, "args": args_digest(arguments)})

    def step_decided(self, session_id: str, tool: str, action: str, digest: str, guard: str, rule: str) -> None:
        """The guard's decision on a running step, as the browser told it before the step acted: a second
        ``running`` record of the step with ``guard`` and ``guard_rule``, so `openab audit` shows what the person
        decided even when the step's answer is lost. ``guard`` is one of :data:`GUARD_DECISIONS` and ``rule``
        matches :data:`GUARD_RULE` (the caller checked)."""
        self._step_record(session_id, tool, action, {"state": State.RUNNING.value, "args": digest, "guard": guard,
                                                      "guard_rule": rule})

    def step_unknown(self, session_id: str, tool: str, action: str) -> None:
        """The end of a step an earlier run of the pod left running, once its agent was told it is effect_unknown:
        the next restart finds it ended, and does not list it again."""
        self._step_record(session_id, tool, action, {"state": State.EFFECT_UNKNOWN.value,
                                                      "outcome": "outcome-unknown", "reason": "pod-restarted"})

    def _step_record(self, session_id: str, tool: str, action: str, fields: Mapping[str, Any]) -> None:
        if not self.keep:
            return
        try:
            record = {
                "time": iso_utc(self._clock()),
                "session": self._tag(session_id), "tool": recorded_tool(tool), "action": action, **fields,
            }
        except Exception:  # as in tool_call: a record lost, never the call
            log.exception("audit log: could not make the record of a step")
            return
        self.write(record)

    def write(self, record: Mapping[str, Any]) -> None:
        """Append one record; a failure is logged (rate-limited) and the record is lost, nothing is raised."""
        line = orjson.dumps(record) + b"\n"
        try:
            file = self._file_for(len(line))
        except OSError as exc:
            self._lose(exc)
            return
        try:
            # A writer killed mid-record (a pod that was, or a disk that filled) left a line with no end: end it,
            # so only that record is lost and not this one too.
            if not file.ended:
                line = b"\n" + line
            file.ended = False
            written = os.write(file.fd, line)
            file.size += written
            if written < len(line):
                raise OSError(errno.ENOSPC, f"only {written} of {len(line)} bytes written")
            file.ended = True
        except OSError as exc:
            self._lose(exc)

    def close(self) -> None:
        """Closes the file; the next record opens it again."""
        if self._file is not None:
            os.close(self._file.fd)
            self._file = None

    def _file_for(self, size: int) -> _OpenFile:
        """The open file, still at its name (else opened afresh), rotated first when ``size`` more bytes would
        take it past the bound."""
        file = self._file
        if file is not None and not file.still_at(self.path):
            self.close()
            file = None
        if file is None:
            file = self._file = _OpenFile.open(self.path)
        if file.size and file.size + size > self.max_bytes:
            self.close()
            self._rotate()
            file = self._file = _OpenFile.open(self.path)
        return file

    def _rotate(self) -> None:
        # os.replace moves a name, never writes through it: a link planted at a rotated name is replaced too.
        if self.backups == 0:
            os.unlink(self.path)
            return
        for n in range(self.backups - 1, 0, -1):
            older = self.path.with_name(f"{AUDIT_FILE}.{n}")
            if os.path.lexists(older):
                os.replace(older, self.path.with_name(f"{AUDIT_FILE}.{n + 1}"))
        os.replace(self.path, self.path.with_name(f"{AUDIT_FILE}.1"))

    def _lose(self, exc: OSError) -> None:
        self._lost += 1
        now = time.monotonic()
        if self._warned_at is not None and now - self._warned_at < _WARN_INTERVAL:
            return
        self._warned_at = now
        log.error(
            "audit log %s cannot be written (%s): %d tool call record(s) lost so far. Fix or remove the file; "
            "the next call tries again",
            self.path, exc.strerror or exc, self._lost,
        )


@dataclass(slots=True)
class _OpenFile:
    """The audit file held open: its descriptor, which file it is, how much it holds, and whether its last line
    ended."""

    fd: int
    device: int
    inode: int
    size: int
    ended: bool

    @classmethod
    def open(cls, path: Path) -> _OpenFile:
        fd, size = _open_private(path)
        try:
            st = os.fstat(fd)
            ended = size == 0 or os.pread(fd, 1, size - 1) == b"\n"
        except BaseException:
            os.close(fd)
            raise
        return cls(fd, st.st_dev, st.st_ino, size, ended)

    def still_at(self, path: Path) -> bool:
        """``path`` still names this file (not moved, removed, or replaced by another file or a link). A file that
        grew behind our back (a second writer, against the rule, or a test's) has its size and last line read
        again."""
        try:
            st = os.lstat(path)
        except OSError:
            return False
        if (st.st_dev, st.st_ino) != (self.device, self.inode):
            return False
        if st.st_size != self.size:
            self.size = st.st_size
            self.ended = st.st_size == 0 or os.pread(self.fd, 1, st.st_size - 1) == b"\n"
        return True


def _open_private(path: Path) -> tuple[int, int]:
    """``path`` opened to append, and its size: created 0600, never through a link, only if it is a private plain
    file of ours."""
    try:
        # Read too: a line left without its end is found by reading the file's last byte.
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise OSError(errno.ELOOP, "it is a symbolic link, which is never followed; remove it") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
            raise OSError(errno.EPERM, "it is not a plain file of ours; remove it")
        if stat.S_IMODE(st.st_mode) & 0o077:
            raise OSError(errno.EPERM, f"other users can read it: `chmod 600 {path}`")
    except BaseException:
        os.close(fd)
        raise
    return fd, st.st_size
