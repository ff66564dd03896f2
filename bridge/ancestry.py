"""Which session a local process belongs to, read from its process ancestry in ``/proc``.

The pod starts each session's agent with ``OPENAB_BROWSER_CHANNEL=acp_<uuid>`` in its environment. MCP
clients scrub the environment of the servers they spawn (Cursor passes only HOME, PATH and USER), but the
agent is always an ancestor of the relay it spawned, so the channel is found by walking parent links: from
``/proc/<pid>/stat`` (the parent pid is the second field after the *last* ``)``, since a command name may
itself contain spaces and parentheses) and reading each ``/proc/<pid>/environ``.

The nearest value is the claim, and every other value further up must agree with it: a descendant of session
A's agent that sets ``OPENAB_BROWSER_CHANNEL`` to B's channel is a forgery, and is refused rather than believed.
The walk stops below ``stop_at`` (the pod's own process: what is above it is not any session's) and after a
bounded number of steps.

A variable is only a claim: any process can set it, including one that double-forked out of another session's
tree. What the claim is checked against is the *lineage* the walk records, each process by pid and start time
(:class:`ProcessIdentity`): :func:`descends_from` requires the agent the pod spawned for the claimed channel to
be in it, with the same start time, so a process that left the agent's tree, or one that inherited a dead
agent's pid, does not count.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Final

from openab_browser.core.errors import AncestryError
from openab_browser.core.procfs import read_stat

__all__ = [
    "AncestryError",
    "Found",
    "ProcessIdentity",
    "descends_from",
    "environ_value",
    "find_in_ancestry",
    "parent_pid",
    "process_identity",
    "resolve_channel",
]

MAX_DEPTH: Final = 32
# /proc/<pid>/environ is bounded by the kernel's exec limits; this keeps a pathological one from costing us.
MAX_ENVIRON_BYTES: Final = 4 << 20


@dataclass(frozen=True, slots=True)
class ProcessIdentity:
    """One process, told apart from any later one that gets the same pid by when it started."""

    pid: int
    start_time: int  # clock ticks after boot, field 22 of /proc/<pid>/stat


@dataclass(frozen=True, slots=True)
class Found:
    """A variable found in the environment of the process ``depth`` generations up (0: the relay itself).

    ``lineage`` (set on what :func:`resolve_channel` returns) is every process the walk went through, nearest
    first: the relay, its parent, and so on up to, not including, where the walk stopped.
    """

    value: str
    pid: int
    depth: int
    lineage: tuple[ProcessIdentity, ...] = ()


def parent_pid(pid: int, proc: str = "/proc") -> int | None:
    stat = read_stat(pid, proc)
    return None if stat is None else stat.ppid


def process_identity(pid: int, proc: str = "/proc") -> ProcessIdentity | None:
    """``pid`` and its start time, or ``None`` when no such process is running."""
    stat = read_stat(pid, proc)
    return None if stat is None else ProcessIdentity(pid, stat.start)


def environ_value(pid: int, name: str, proc: str = "/proc") -> str | None:
    """``name`` in the process's environment as it was at exec, or ``None`` (unset, empty, unreadable)."""
    try:
        with open(f"{proc}/{pid}/environ", "rb") as f:
            environ = f.read(MAX_ENVIRON_BYTES)
    except OSError:
        return None
    prefix = name.encode() + b"="
    for item in environ.split(b"\0"):
        if item.startswith(prefix):
            value = item[len(prefix) :].decode("utf-8", "replace")
            return value or None
    return None


def _walk(
    pid: int, name: str, *, stop_at: int | None, max_depth: int, proc: str
) -> tuple[list[Found], tuple[ProcessIdentity, ...]]:
    found: list[Found] = []
    lineage: list[ProcessIdentity] = []
    current: int | None = pid
    for depth in range(max_depth):
        if current is None or current <= 1 or current == stop_at:
            break
        stat = read_stat(current, proc)
        if stat is None:  # gone: its place in the lineage cannot be vouched for, so the walk ends here
            break
        value = environ_value(current, name, proc)
        if value is not None:
            found.append(Found(value, current, depth))
        lineage.append(ProcessIdentity(current, stat.start))
        current = stat.ppid
    return found, tuple(lineage)


def find_in_ancestry(
    name: str, *, pid: int | None = None, max_depth: int = MAX_DEPTH, proc: str = "/proc"
) -> str | None:
    """The nearest non-empty value of ``name`` in the environment of ``pid`` (default: us) or its ancestors."""
    found, _ = _walk(os.getpid() if pid is None else pid, name, stop_at=None, max_depth=max_depth, proc=proc)
    return found[0].value if found else None


def resolve_channel(
    pid: int, name: str, *, stop_at: int | None = None, max_depth: int = MAX_DEPTH, proc: str = "/proc"
) -> Found:
    """The channel process ``pid`` claims, with the lineage the walk went through; raises :class:`AncestryError`
    when there is none or two. The claim is only what the environment says: check it with :func:`descends_from`.
    """
    found, lineage = _walk(pid, name, stop_at=stop_at, max_depth=max_depth, proc=proc)
    if not found:
        raise AncestryError(
            f"no {name} in the environment of process {pid} or its ancestors: `openab browser-bridge` works "
            f"only when started (at any depth) by an agent that openab runs for a session"
        )
    nearest = found[0]
    for other in found[1:]:
        if other.value != nearest.value:
            raise AncestryError(
                f"process {nearest.pid} claims {name}={nearest.value} but its ancestor {other.pid} belongs to "
                f"{other.value}: a process may not name another session's channel"
            )
    return Found(nearest.value, nearest.pid, nearest.depth, lineage)


def descends_from(found: Found, agent: ProcessIdentity | None, *, connecting: int) -> None:
    """Raise :class:`AncestryError` unless ``agent``, the process the pod started for ``found.value``, is in
    ``found.lineage`` (the process ``connecting`` itself or one of its ancestors) under the same start time."""
    if agent is None:
        raise AncestryError(
            f"{found.value} has no agent running: `openab browser-bridge` is admitted only under the agent openab "
            f"started for that session, and that session's agent has not started yet or has stopped"
        )
    for process in found.lineage:
        if process == agent:
            return
        if process.pid == agent.pid:
            raise AncestryError(
                f"process {connecting} descends from pid {agent.pid}, but that pid is not the agent openab started "
                f"for {found.value} any more: the agent started at tick {agent.start_time}, this process at tick "
                f"{process.start_time} (a recycled pid)"
            )
    raise AncestryError(
        f"process {connecting} is not a descendant of pid {agent.pid}, the agent openab started for "
        f"{found.value}: only that agent and what it spawns may use its session's browser (a process that "
        f"left the agent's process tree, by a double fork or as a daemon, is refused)"
    )
