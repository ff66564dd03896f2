"""Each agent's whole process tree, and the pod as the reaper of what agents orphan.

A process that calls ``setsid`` leaves its agent's process group, so each agent also gets a tree that nothing
leaves (:class:`Tree`): a cgroup v2 of its own when the pod may make one (``cgroup.kill`` reaches everything
in it), else ``/proc``: the agent's descendants plus every process carrying the agent's mark in its
environment. The pod adopts what its agents orphan (``PR_SET_CHILD_SUBREAPER``) and reaps it
(:class:`ChildReaper`), so nothing escapes to the real init and no zombie piles up, PID 1 or not.

Marks and cgroups name the pod's run (:func:`this_run`: its pid and a random word), so what the agents of a pod
killed by SIGKILL left is found by the next pod on its state dir (:func:`reap_run`), and nothing of another run
that happened to get the same pid is ever taken for it.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import ctypes
import functools
import itertools
import logging
import os
import re
import secrets
import signal
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Final

from ..procfs import ProcStat, read_stat, signal_if_same

__all__ = [
    "HOLDING_SHELL", "REAPER", "RELEASE_LINE", "RUN_PATTERN", "TREE_LOOK_INTERVAL", "TREE_MARK_ENV",
    "ChildReaper", "Tree", "own_cgroup", "reap_run", "this_run",
]

log = logging.getLogger(__name__)

# -- the agent's whole process tree ---------------------------------------------------------------------------

# Set in every agent's environment, unique per agent process: what finds a double-forked daemon of the agent
# after the pod adopted it (its parent link to the agent is gone) when there is no cgroup to find it by.
TREE_MARK_ENV: Final = "OPENAB_AGENT_MARK"
_KILL_TIMEOUT: Final = 5.0
TREE_LOOK_INTERVAL: Final = 10.0
_MAX_ENVIRON_BYTES: Final = 1 << 20
_PR_SET_CHILD_SUBREAPER: Final = 36
_PR_GET_CHILD_SUBREAPER: Final = 37
# What holds an agent until it is in its cgroup (:meth:`Tree.held`): any POSIX shell; without one, no cgroup.
HOLDING_SHELL: Final = "/bin/sh"
RELEASE_LINE: Final = b"\n"
# A run's name as this_run() makes it; what a state dir's record must match before anything is looked up by it.
RUN_PATTERN: Final = re.compile(r"[1-9][0-9]{0,9}-[0-9a-f]{12}")


@functools.cache
def _run_of(pid: int) -> str:
    return f"{pid}-{secrets.token_hex(6)}"


def this_run() -> str:
    """This process's run of openab: its pid and a random word (a forked child gets a run of its own)."""
    return _run_of(os.getpid())


def _processes() -> dict[int, ProcStat]:
    found = {}
    with contextlib.suppress(OSError):
        for name in os.listdir("/proc"):
            if name.isdigit() and (st := read_stat(int(name))) is not None:
                found[st.pid] = st
    return found


def _has_mark(pid: int, mark: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return mark in f.read(_MAX_ENVIRON_BYTES).split(b"\0")
    except OSError:
        return False


@functools.cache
def own_cgroup() -> Path | None:
    """This process's cgroup v2 directory, when it is mounted here and writable (agents get a cgroup each in it)."""
    try:
        ours = Path("/proc/self/cgroup").read_text().splitlines()
        mounts = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return None
    path = next((line[3:] for line in ours if line.startswith("0::")), None)
    if path is None:
        return None  # cgroup v1 only
    for mount in mounts:
        fields, _, fs = mount.partition(" - ")
        parts = fields.split()
        if not fs.startswith("cgroup2 ") or len(parts) < 5:
            continue
        root, point = parts[3], parts[4].replace("\\040", " ")
        if path != root and not path.startswith(root.rstrip("/") + "/"):
            continue  # a mount of another part of the hierarchy
        candidate = Path(point, path[len(root.rstrip("/")) :].lstrip("/"))
        if (candidate / "cgroup.procs").is_file() and os.access(candidate, os.W_OK):
            _remove_stale(candidate)
            return candidate
    return None


def _remove_stale(parent: Path) -> None:
    """Empty agent cgroups of an openab that is gone (killed before it could remove them)."""
    for stale in parent.glob("openab-agent-*-*"):
        owner = stale.name.split("-")[2]
        if owner.isdigit() and int(owner) != os.getpid() and not Path(f"/proc/{owner}").exists():
            with contextlib.suppress(OSError):
                stale.rmdir()  # fails, as it should, while anything still runs in it


class Tree:
    """One agent's processes, wherever they go: ``setsid`` leaves the agent's group, not its tree.

    With ``cgroups`` (the pod's own cgroup v2 directory), the agent starts in a child cgroup made for it
    (moved there by the child itself between fork and exec, so nothing it spawns is ever outside) and
    ``cgroup.kill`` ends it whole. Without, the tree is read from ``/proc``: the agent, everything descending
    from it or from what it was last seen to hold, and every process carrying its mark (:data:`TREE_MARK_ENV`),
    which is what finds a double-forked daemon re-parented to the pod. A process that both daemonizes and
    scrubs its environment is out of reach of that fallback; the cgroup has no such gap.
    """

    _count = itertools.count(1)

    def __init__(self, name: str, cgroups: Path | None, *, mark: str | None = None) -> None:
        self.name = name
        self.mark = mark or f"{this_run()}-{secrets.token_hex(8)}"
        self._mark = f"{TREE_MARK_ENV}={self.mark}".encode()
        self._parent = cgroups
        self.cgroup: Path | None = None
        self._procs_fd = -1
        self.leader: ProcStat | None = None
        self._known: dict[int, ProcStat] = {}

    def prepare(self) -> bool:
        """Make the agent's cgroup (``False``: none, the tree is tracked through ``/proc``)."""
        if self._parent is None:
            return False
        if not os.access(HOLDING_SHELL, os.X_OK):
            log.warning("%s: no %s to hold it until it is in a cgroup; its processes are tracked through /proc",
                        self.name, HOLDING_SHELL)
            return False
        cgroup = self._parent / f"openab-agent-{this_run()}-{next(self._count)}"
        try:
            cgroup.mkdir()
            if not (cgroup / "cgroup.kill").exists():  # Linux < 5.14
                raise OSError("no cgroup.kill")
            self._procs_fd = os.open(cgroup / "cgroup.procs", os.O_WRONLY | os.O_CLOEXEC)
        except OSError as exc:
            log.warning("%s: no cgroup of its own in %s (%s); its processes are tracked through /proc",
                        self.name, self._parent, exc)
            with contextlib.suppress(OSError):
                cgroup.rmdir()
            return False
        self.cgroup = cgroup
        return True

    def held(self, argv: Sequence[str]) -> list[str]:
        """The command that starts ``argv`` held until :meth:`enter` has moved it into the cgroup.

        The child is a shell that reads one line on its stdin (:data:`RELEASE_LINE`, the first thing the
        gateway writes there) and then execs the agent in its place, same pid and same stdin: the agent runs
        no code of its own outside the cgroup, and the gateway needs no ``preexec_fn``, which would make
        Python ``fork()`` the whole gateway (its page tables: tens of milliseconds) where ``vfork()`` takes a
        fraction of one. A shell's ``read`` takes no byte past the line's end; at end of input it execs
        nothing.
        """
        return [HOLDING_SHELL, "-c", 'read -r _ && exec "$@"', "openab-agent", *argv]

    def enter(self, pid: int) -> None:
        """Moves the held child ``pid`` into the cgroup; where that is refused, the tree is tracked through /proc."""
        if self.cgroup is not None:
            try:
                os.write(self._procs_fd, str(pid).encode())
            except OSError as exc:
                log.warning("%s: could not enter its cgroup (%s); its processes are tracked through /proc",
                            self.name, exc)
                self._close_procs()
                self.remove()
        self.spawned(pid)

    def _close_procs(self) -> None:
        if self._procs_fd >= 0:
            os.close(self._procs_fd)
            self._procs_fd = -1

    def spawned(self, pid: int | None) -> None:
        """The child exists (``pid``) or could not be started (``None``: the cgroup goes)."""
        self._close_procs()
        if pid is None:
            self.remove()
            return
        self.leader = read_stat(pid)

    def members(self, *, marked: bool = True) -> dict[int, ProcStat]:
        """The tree's live processes (not zombies: they are dead, only their parent's to reap). ``marked``: also
        every process carrying the tree's mark, which takes reading every process's environment; without it
        (the runtime's look every :data:`TREE_LOOK_INTERVAL`, the wait after a kill) the tree is walked down
        the kernel's lists of children from what it was last seen to hold: the cost of the tree, not of every
        process on the machine."""
        if self.cgroup is not None:
            try:
                pids = [int(p) for p in (self.cgroup / "cgroup.procs").read_text().split()]
            except (OSError, ValueError):
                return {}
            return {pid: st for pid in pids if (st := read_stat(pid)) is not None and st.state != "Z"}
        roots = dict(self._known)
        if self.leader is not None:
            roots[self.leader.pid] = self.leader
        found = None if marked else _descendants(roots)
        if found is None:
            found = self._scanned(roots, marked=marked)
        self._known = {pid: st for pid, st in found.items() if st.state != "Z"}
        return dict(self._known)

    def _scanned(self, roots: dict[int, ProcStat], *, marked: bool) -> dict[int, ProcStat]:
        """:meth:`members` the long way: every process in /proc, and the marked ones among them."""
        everything = _processes()
        alive = {pid for pid, st in roots.items() if (now := everything.get(pid)) and now.start == st.start}
        me = os.getpid()
        if marked:
            alive |= {pid for pid, st in everything.items() if pid != me and st.state != "Z" and st.ppid != 2
                      and _has_mark(pid, self._mark)}
        children: dict[int, list[int]] = collections.defaultdict(list)
        for st in everything.values():
            children[st.ppid].append(st.pid)
        found, todo = set(), list(alive)
        while todo:
            pid = todo.pop()
            if pid not in found and pid != me:
                found.add(pid)
                todo.extend(children.get(pid, ()))
        return {pid: everything[pid] for pid in found}

    def signal(self, sig: int, *, except_group: int | None = None) -> None:
        for st in self.members().values():
            if st.pgid != except_group:
                signal_if_same(st.pid, st.start, sig)

    async def kill(self) -> bool:
        """SIGKILL the whole tree and wait (bounded) until nothing of it lives; ``False``: something still does."""
        if self.cgroup is not None:
            with contextlib.suppress(OSError):
                (self.cgroup / "cgroup.kill").write_text("1")
        else:
            # Stopped first, then killed: a stopped process forks no more, so the last scan sees everything.
            stopped: dict[int, ProcStat] = {}
            for _ in range(16):
                fresh = {pid: st for pid, st in self.members().items() if pid not in stopped}
                if not fresh:
                    break
                for st in fresh.values():
                    signal_if_same(st.pid, st.start, signal.SIGSTOP)
                stopped.update(fresh)
            for st in stopped.values():
                signal_if_same(st.pid, st.start, signal.SIGKILL)
        deadline = time.monotonic() + _KILL_TIMEOUT
        while self._populated():
            if time.monotonic() >= deadline:
                log.warning("%s: processes of the agent outlived SIGKILL for %g s: %s", self.name, _KILL_TIMEOUT,
                            sorted(self.members()))
                return False
            await asyncio.sleep(0.05)
        return True

    def _populated(self) -> bool:
        if self.cgroup is not None:
            # The kernel's own word: "populated 0" is what lets the cgroup be removed.
            try:
                return "populated 0" not in (self.cgroup / "cgroup.events").read_text()
            except OSError:
                return False
        return bool(self.members(marked=False))

    def remove(self) -> None:
        if self.cgroup is not None:
            try:
                self.cgroup.rmdir()
                self.cgroup = None
            except FileNotFoundError:
                self.cgroup = None
            except OSError as exc:
                log.warning("%s: its cgroup %s stays: %s", self.name, self.cgroup, exc)


def _marks_of_run(run: str) -> set[str]:
    """The marks of ``run``'s agents that live processes still carry (the processes of this uid that /proc shows)."""
    prefix, me = f"{TREE_MARK_ENV}={run}-".encode(), os.getpid()
    marks: set[str] = set()
    for pid, st in _processes().items():
        if pid == me or st.state == "Z":
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                environ = f.read(_MAX_ENVIRON_BYTES).split(b"\0")
        except OSError:
            continue
        marks.update(item.decode(errors="replace").partition("=")[2] for item in environ if item.startswith(prefix))
    return marks


def _trees_of_run(run: str, cgroups: Path | None) -> list[Tree]:
    trees: list[Tree] = []
    if cgroups is not None:
        for path in sorted(cgroups.glob(f"openab-agent-{run}-*")):
            tree = Tree(f"an agent of run {run}", None)
            tree.cgroup = path
            trees.append(tree)
    return trees + [Tree(f"an agent of run {run}", None, mark=mark) for mark in sorted(_marks_of_run(run))]


async def reap_run(run: str, cgroups: Path | None) -> int:
    """Kill what the agents of an earlier ``run`` of openab left behind (a pod killed by SIGKILL leaves its agents'
    ``setsid`` children, and its agents if they ignore the end of their input): every process in that run's
    agent cgroups under ``cgroups``, and every process carrying a mark of that run, with its descendants. Only
    what is provably that run's: the run's random word is in the cgroup's name or in the process's own
    environment, and each process is signalled only if its start time still matches. Returns how many
    processes there were; ``run`` must match :data:`RUN_PATTERN` and not be this process's own.
    """
    if not RUN_PATTERN.fullmatch(run) or run == this_run():
        return 0
    trees = await asyncio.to_thread(_trees_of_run, run, cgroups)
    found = 0
    for tree in trees:
        found += len(tree.members())
        if not await tree.kill():
            log.warning("%s: processes outlived SIGKILL: %s", tree.name, sorted(tree.members()))
        tree.remove()
    return found


class ChildReaper:
    """Adopts what the agents orphan and reaps it: no zombie piles up, in a pod whose PID 1 is openab too.

    While it serves, the pod is a child subreaper (``PR_SET_CHILD_SUBREAPER``; PID 1 is one anyway): a process
    whose parent dies is re-parented to the pod, not to the real init, so an agent's tree can still be found
    and killed. Those orphans are the pod's to reap once dead, and so are any other zombie children, except
    the ones someone waits for: asyncio's child watcher waits for each agent by pid (:meth:`track`), and a
    child in the pod's own session was started by code of the pod (only agents get sessions of their own).
    Woken by SIGCHLD when it can have the handler (the main thread's loop), else every second.
    """

    def __init__(self) -> None:
        self._ours: set[int] = set()
        self._spawning = 0
        self._wakers: set[asyncio.Event] = set()
        self._handler: asyncio.AbstractEventLoop | None = None
        self._was_subreaper: bool | None = None
        self.reaped = 0

    def track(self, pid: int) -> None:
        self._ours.add(pid)

    def untrack(self, pid: int) -> None:
        self._ours.discard(pid)

    @contextlib.contextmanager
    def spawning(self) -> Iterator[None]:
        """Around a spawn: the child exists before its pid is tracked, and must not be reaped meanwhile."""
        self._spawning += 1
        try:
            yield
        finally:
            self._spawning -= 1
            self._wake()

    def _wake(self) -> None:
        for event in self._wakers:
            event.set()

    async def serve(self) -> None:
        """Reap until cancelled; the runtime runs this while it may have agents."""
        wake = asyncio.Event()
        self._acquire(wake)
        try:
            while True:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(5.0 if self._handler is not None else 1.0):
                        await wake.wait()
                wake.clear()
                self.reap()
        finally:
            self._release(wake)

    def _acquire(self, wake: asyncio.Event) -> None:
        self._wakers.add(wake)
        if len(self._wakers) > 1:
            return
        self._was_subreaper = _subreaper(True)
        if signal.getsignal(signal.SIGCHLD) == signal.SIG_DFL:
            loop = asyncio.get_running_loop()
            with contextlib.suppress(ValueError, RuntimeError, NotImplementedError):
                loop.add_signal_handler(signal.SIGCHLD, self._wake)
                self._handler = loop

    def _release(self, wake: asyncio.Event) -> None:
        self._wakers.discard(wake)
        if self._wakers:
            return
        if self._handler is not None:
            with contextlib.suppress(Exception):
                self._handler.remove_signal_handler(signal.SIGCHLD)
            self._handler = None
        if self._was_subreaper is False:
            _subreaper(False)
        self.reap()

    def reap(self) -> int:
        """Reap the zombie children nobody else waits for; returns how many."""
        if self._spawning:
            return 0  # a child just forked is not tracked yet; the next wake-up gets the rest
        me, our_session, reaped = os.getpid(), os.getsid(0), 0
        for pid in _children(me):
            st = read_stat(pid)
            if st is None or st.state != "Z" or pid in self._ours or st.sid == our_session:
                continue
            with contextlib.suppress(ChildProcessError):
                if os.waitpid(pid, os.WNOHANG)[0] == pid:
                    reaped += 1
        self.reaped += reaped
        return reaped


def _listed_children(pid: int) -> set[int] | None:
    """``pid``'s children as the kernel lists them (none once it is gone); ``None`` where it keeps no such list
    (a kernel without CONFIG_PROC_CHILDREN)."""
    children: set[int] = set()
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return children if os.path.isdir("/proc/self/task") else None
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children") as f:
                children.update(int(c) for c in f.read().split())
        except FileNotFoundError:
            if not os.path.isdir(f"/proc/{pid}/task/{task}"):
                continue  # the thread ended meanwhile
            return None
        except (OSError, ValueError):
            continue
    return children


def _descendants(roots: dict[int, ProcStat]) -> dict[int, ProcStat] | None:
    """The processes of ``roots`` that are still the same (same start), and everything under them, walked down
    the kernel's children lists; ``None`` where the kernel keeps none. This process is never among them."""
    me = os.getpid()
    found: dict[int, ProcStat] = {}
    todo = [pid for pid in roots if pid != me]
    while todo:
        pid = todo.pop()
        if pid in found or pid == me:
            continue
        st = read_stat(pid)
        if st is None or (pid in roots and roots[pid].start != st.start):
            continue  # gone, or its pid is another process's now
        found[pid] = st
        children = _listed_children(pid)
        if children is None:
            return None
        todo.extend(children)
    return found


def _children(pid: int) -> set[int]:
    children = _listed_children(pid)
    if children is None:  # no CONFIG_PROC_CHILDREN: the long way
        return {st.pid for st in _processes().values() if st.ppid == pid}
    return children


def _subreaper(on: bool) -> bool | None:
    """Make this process a child subreaper (or not); returns what it was, ``None`` where there are none."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        was = ctypes.c_int(0)
        if libc.prctl(_PR_GET_CHILD_SUBREAPER, ctypes.byref(was), 0, 0, 0) != 0:
            return None
        if libc.prctl(_PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0) != 0:
            return None
    except (OSError, AttributeError):
        return None
    return bool(was.value)


# One per process: the subreaper flag and SIGCHLD are process-wide.
REAPER: Final = ChildReaper()
