"""What ``/proc/<pid>/stat`` says of a process, read once here for the agents' process trees, the bridge's ancestry
walk and the hub's spawner; and the one way we signal a process we know by pid: only while it still is that process,
never a later one the kernel gave its pid. Kept import-light: the bridge relay, which every agent start spawns,
reads it too."""

from __future__ import annotations

import contextlib
import os
import signal
from dataclasses import dataclass

__all__ = ["PID_LIMIT", "ProcStat", "boot_id", "read_stat", "signal_if_same"]

_BOOT_ID = "/proc/sys/kernel/random/boot_id"
# The kernel's largest pid_max (PID_MAX_LIMIT on 64-bit): a pid past it, or not above 0, names no one process (a
# negative one would name a whole process group to kill(2)).
PID_LIMIT = 1 << 22


@dataclass(frozen=True, slots=True)
class ProcStat:
    """One process; ``start`` (clock ticks after boot, field 22) tells it apart from a later one with its pid."""

    pid: int
    state: str
    ppid: int
    pgid: int
    sid: int
    start: int


def read_stat(pid: int, proc: str = "/proc") -> ProcStat | None:
    """``pid``'s stat line, or ``None`` when the process is gone or the line cannot be read."""
    try:
        with open(f"{proc}/{pid}/stat", "rb") as f:
            raw = f.read(4096)
    except OSError:
        return None
    # The command name may hold spaces and ") S 1 (": the fields start after the *last* parenthesis,
    # with field 3 (the state) first.
    _, paren, rest = raw.rpartition(b")")
    fields = rest.split()
    if not paren or len(fields) <= 22 - 3:
        return None
    try:
        return ProcStat(pid, fields[0].decode(), int(fields[1]), int(fields[2]), int(fields[3]), int(fields[22 - 3]))
    except (UnicodeDecodeError, ValueError):
        return None


def boot_id() -> str | None:
    """This boot of the machine's id (a start time counts clock ticks from the boot, so it names a process only
    within one), or ``None`` where the kernel does not say."""
    try:
        with open(_BOOT_ID, "rb") as f:
            raw = f.read(64).strip()
    except OSError:
        return None
    return raw.decode("ascii", "replace") or None


def signal_if_same(pid: int, start: int, sig: int) -> bool:
    """Send ``sig`` (0: none, only the look) to ``pid`` if it still is the process that started at ``start``; whether
    it was. The process is pinned by a pidfd before its start is read, so it cannot end and its pid go to another
    between the look and the signal (where the kernel has no pidfd, a window of a few microseconds remains)."""
    if not 0 < pid <= PID_LIMIT:
        return False
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return False
    except (OSError, AttributeError):
        fd = -1
    try:
        now = read_stat(pid)
        if now is None or now.start != start:
            return False
        try:
            if fd >= 0:
                signal.pidfd_send_signal(fd, sig)
            else:
                os.kill(pid, sig)
        except ProcessLookupError:
            return False
        except PermissionError:  # there, and not ours to signal
            return True
        return True
    finally:
        if fd >= 0:
            with contextlib.suppress(OSError):
                os.close(fd)
