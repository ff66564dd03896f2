"""What /proc says of the processes a test or benchmark started: who descends from whom, each one's memory (PSS and
RSS) and CPU time, and the machine's CPU use and pressure, so a run can say what a pod and its agents cost and
where the CPU went. Linux only; a process that ends while it is read counts as nothing."""

from __future__ import annotations

import collections
import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

from openab_browser.core.procfs import read_stat

_TICK = os.sysconf("SC_CLK_TCK")
_MIB = 1024.0


def children() -> dict[int, list[int]]:
    """Every live process's children, by parent pid (zombies left out: they hold no memory and run nothing)."""
    kids: dict[int, list[int]] = collections.defaultdict(list)
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            stat = read_stat(int(entry.name))
            if stat is not None and stat.state != "Z":
                kids[stat.ppid].append(stat.pid)
    return kids


def descendants(root: int, kids: dict[int, list[int]]) -> list[int]:
    """``root`` and everything under it, parents before their children."""
    found, queue = [], collections.deque([root])
    while queue:
        pid = queue.popleft()
        found.append(pid)
        queue.extend(kids.get(pid, ()))
    return found


def cmdline(pid: int) -> str:
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    return ""


def _field_kib(path: str, field: str) -> int:
    with contextlib.suppress(OSError), open(path, encoding="ascii", errors="replace") as lines:
        for line in lines:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def pss_kib(pid: int) -> int:
    """The process's proportional share of the memory it maps (a page shared by k processes counts 1/k)."""
    return _field_kib(f"/proc/{pid}/smaps_rollup", "Pss")


def rss_kib(pid: int) -> int:
    return _field_kib(f"/proc/{pid}/status", "VmRSS")


def cpu_seconds(pid: int) -> float:
    """User and system time the process has run so far (``/proc/<pid>/stat`` fields 14 and 15)."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        raw = Path(f"/proc/{pid}/stat").read_bytes()
        fields = raw[raw.rindex(b")") + 2:].split()  # the name may hold spaces: the fields start after it
        return (int(fields[11]) + int(fields[12])) / _TICK
    return 0.0


def available_mib() -> float:
    """What the kernel says could be given to new processes without swapping (``MemAvailable``)."""
    return _field_kib("/proc/meminfo", "MemAvailable") / _MIB


@dataclass(frozen=True)
class TreeMemory:
    """One process tree's memory in MiB, whole and its root alone, proportional and resident; ``children``: the
    root's direct children (each with its own subtree, as a pod's agents are)."""

    processes: int
    children: int
    root_pss: float
    pss: float
    rss: float


def tree_memory(root: int, kids: dict[int, list[int]]) -> TreeMemory:
    listed = descendants(root, kids)
    pss = {pid: pss_kib(pid) for pid in listed}
    return TreeMemory(len(listed), len(kids.get(root, ())), pss[root] / _MIB, sum(pss.values()) / _MIB,
                      sum(rss_kib(pid) for pid in listed) / _MIB)


@dataclass(frozen=True)
class MachineCpu:
    """The machine's CPU counters at one moment: jiffies busy and in all (``/proc/stat``), and the microseconds some
    runnable task waited for a CPU (``/proc/pressure/cpu``; 0 where the kernel keeps no pressure figures)."""

    busy: int
    total: int
    waited_us: int

    @classmethod
    def now(cls) -> MachineCpu:
        with open("/proc/stat", encoding="ascii") as stat:
            values = [int(v) for v in stat.readline().split()[1:]]
        idle = values[3] + (values[4] if len(values) > 4 else 0)  # idle and iowait
        waited = 0
        with contextlib.suppress(OSError), open("/proc/pressure/cpu", encoding="ascii") as pressure:
            some = pressure.readline().split()
            waited = int(dict(part.split("=") for part in some[1:])["total"])
        return cls(sum(values) - idle, sum(values), waited)

    def since(self, earlier: MachineCpu, seconds: float) -> dict[str, float]:
        """The share of the CPUs busy and the share of the time some task waited for one, between the two."""
        total = max(1, self.total - earlier.total)
        return {"busy": round((self.busy - earlier.busy) / total, 3),
                "some_task_waiting": round((self.waited_us - earlier.waited_us) / 1e6 / max(seconds, 1e-9), 3)}
