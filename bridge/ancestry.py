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
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Final

from openab.core.errors import AncestryError

__all__ = ["AncestryError", "Found", "environ_value", "find_in_ancestry", "parent_pid", "resolve_channel"]

MAX_DEPTH: Final = 32
# /proc/<pid>/environ is bounded by the kernel's exec limits; this keeps a pathological one from costing us.
MAX_ENVIRON_BYTES: Final = 4 << 20



@dataclass(frozen=True, slots=True)
class Found:
    """A variable found in the environment of the process ``depth`` generations up (0: the relay itself)."""

    value: str
    pid: int
    depth: int


def parent_pid(pid: int, proc: str = "/proc") -> int | None:
    try:
        with open(f"{proc}/{pid}/stat", "rb") as f:
            stat = f.read(4096)
    except OSError:
        return None
    _, paren, rest = stat.rpartition(b")")
    fields = rest.split()
    if not paren or len(fields) < 2:
        return None
    try:
        return int(fields[1])
    except ValueError:
        return None


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


def _walk(pid: int, name: str, *, stop_at: int | None, max_depth: int, proc: str) -> list[Found]:
    found: list[Found] = []
    current: int | None = pid
    for depth in range(max_depth):
        if current is None or current <= 1 or current == stop_at:
            break
        value = environ_value(current, name, proc)
        if value is not None:
            found.append(Found(value, current, depth))
        current = parent_pid(current, proc)
    return found


def find_in_ancestry(
    name: str, *, pid: int | None = None, max_depth: int = MAX_DEPTH, proc: str = "/proc"
) -> str | None:
    """The nearest non-empty value of ``name`` in the environment of ``pid`` (default: us) or its ancestors."""
    found = _walk(os.getpid() if pid is None else pid, name, stop_at=None, max_depth=max_depth, proc=proc)
    return found[0].value if found else None


def resolve_channel(
    pid: int, name: str, *, stop_at: int | None = None, max_depth: int = MAX_DEPTH, proc: str = "/proc"
) -> Found:
    """The channel process ``pid`` belongs to; raises :class:`AncestryError` when there is none or two."""
    found = _walk(pid, name, stop_at=stop_at, max_depth=max_depth, proc=proc)
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
    return nearest
