"""The process table as the hub tests read it (/proc): who runs as whom, whose child, in what state, and reaping
this process's own ended children, which a subreaper (the tests, once a hub that started pods is gone) must do; and a
new process on a pid of the test's choosing, as a machine whose pids wrapped gives an old one."""

from __future__ import annotations

import contextlib
import ctypes
import os
import subprocess
from collections.abc import Sequence
from pathlib import Path


def subreaper(on: bool) -> None:
    """While on, a process whose parent goes (a pod, once the hub that started it is stopped) becomes this one's
    child, so it is reaped here when it stops, as systemd reaps it: a zombie pod looks alive to the hub, which
    would wait its whole kill timeout for it."""
    set_child_subreaper = 36  # PR_SET_CHILD_SUBREAPER
    ctypes.CDLL(None, use_errno=True).prctl(set_child_subreaper, int(on), 0, 0, 0)


def gone(pid: int) -> bool:
    """``pid`` ended: reaped, or a zombie its parent (the hub) has not reaped yet."""
    with contextlib.suppress(ChildProcessError):  # not this process's child: its parent (the hub) reaps it
        os.waitpid(pid, os.WNOHANG)
    try:
        stat_line = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat_line.rpartition(")")[2].split()[0] == "Z"


def all_gone(pids: Sequence[int]) -> bool:
    return all([gone(pid) for pid in pids])  # each one reaped, not only the first alive


def processes_of(uid: int) -> list[int]:
    """The live processes running as ``uid``, once this process's own ended ones of ``uid`` are reaped.

    A pod whose hub was restarted is this process's child (the subreaper's), and an ended child stays a zombie until
    it is reaped here: the hub, no longer its parent, takes it for alive (a signal 0 reaches a zombie) and waits its
    whole stop timeout for it. So every look reaps them, not only those seen alive before."""
    found, me = [], os.getpid()
    for status in Path("/proc").glob("[0-9]*/status"):
        with contextlib.suppress(OSError, KeyError, ValueError):
            fields = status_of(status)
            if int(fields["Uid"].split()[0]) != uid:
                continue
            pid = int(status.parent.name)
            if fields["State"].split()[0] != "Z":
                found.append(pid)
            elif int(fields["PPid"]) == me:
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(pid, os.WNOHANG)
    return found


def status_of(status: Path) -> dict[str, str]:
    """The fields of a /proc/<pid>/status file, by name, their values stripped."""
    return {name: value.strip() for name, _, value in
            (line.partition(":") for line in status.read_text().splitlines()) if value}


def runs_as(pid: int, uid: int) -> bool:
    try:
        return status_of(Path(f"/proc/{pid}/status"))["Uid"].split()[0] == str(uid)
    except (OSError, KeyError):
        return False


def children_of(pid: int) -> list[int]:
    children = []
    for status in Path("/proc").glob("[0-9]*/status"):
        with contextlib.suppress(OSError, KeyError):
            if status_of(status)["PPid"] == str(pid):
                children.append(int(status.parent.name))
    return children


def described(pids: Sequence[int]) -> str:
    """Each process's state, what it waits in, its signals ignored, blocked and caught, and its command line."""
    lines = []
    for pid in pids:
        with contextlib.suppress(OSError):
            fields = status_of(Path(f"/proc/{pid}/status"))
            wchan = Path(f"/proc/{pid}/wchan").read_text()
            command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            lines.append(f"{pid} {fields['State']} in {wchan or '-'}; ignores {fields['SigIgn']}, "
                         f"blocks {fields['SigBlk']}, catches {fields['SigCgt']}: {command[:200]}")
    return "\n".join(lines)


def none_left(uid: int) -> bool:
    return not processes_of(uid)


NS_LAST_PID = Path("/proc/sys/kernel/ns_last_pid")


def can_choose_pids() -> str | None:
    """Why :func:`process_on_pid` cannot run here, or None."""
    if os.geteuid() != 0 or not os.access(NS_LAST_PID, os.W_OK):
        return "choosing the next pid (/proc/sys/kernel/ns_last_pid) needs root in this pid namespace"
    return None


def process_on_pid(pid: int, argv: Sequence[str], *, user: str | None = None,
                   attempts: int = 500) -> subprocess.Popen[bytes]:
    """A new process (``argv``, as ``user``) that the kernel gives ``pid``, free again once its last holder was
    reaped: as a machine whose pids wrapped, or that started again, gives an old pid to whatever starts next. The
    next pid is set through ``ns_last_pid``; another process forking in between takes it, so it is tried again."""
    for _ in range(attempts):
        NS_LAST_PID.write_text(str(pid - 1))
        process = subprocess.Popen(list(argv), user=user, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)
        if process.pid == pid:
            return process
        process.kill()
        process.wait()
    raise AssertionError(f"no new process got pid {pid} in {attempts} tries (is it still taken?)")
