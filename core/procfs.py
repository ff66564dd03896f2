"""What ``/proc/<pid>/stat`` says of a process: read once here for the agents' process trees and the bridge's
ancestry walk. Kept import-light: the bridge relay, which every agent start spawns, reads it too."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ProcStat", "read_stat"]


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
