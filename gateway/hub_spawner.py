"""The hub's side of the one-machine recipe: JupyterHub's ``LocalProcessSpawner``, knowing its pod from a later
process that got the pod's pid.

JupyterHub keeps each pod's pid in its database. After the hub restarts (the recipe's pods outlive it) it asks
that pid whether the pod is alive (signal 0), and at the pod's stop it sends the pid SIGINT, SIGTERM and SIGKILL,
as root. A pod that ended while the hub was down frees its pid, which the kernel gives to a later process (pids
wrap at ``pid_max``, 32768 on many machines), and a rebooted machine gives the old pids to whatever starts first.
``LocalProcessSpawner`` takes that process for the pod: the person's server "running" where no pod answers,
until the hub gives up on it and stops it, by killing another program: another person's, or the machine's own.

:class:`PodSpawner` keeps, beside the pid, what names the process: the machine's boot and the process's start
(``/proc/<pid>/stat``), read as it starts the pod and stored in the hub's database with the pid. It signals the pid
only while it still is that process (:func:`~openab_browser.core.procfs.signal_if_same`); anything else is a pod
that is gone. A start is counted in clock ticks (10 ms): a pid that came round within the tick its pod started in
would pass, which takes a pod that ends within 10 ms of its start and thousands of processes started meanwhile (or
the kernel told which pid to give next). A state stored by the plain spawner (an upgrade with pods running) has the
pid alone: then the process must at least run as the person, as every pod the recipe starts does.

Named in the recipe's ``jupyterhub_config.py`` (``c.JupyterHub.spawner_class``); the ``jupyterhub`` package is
imported only here and by :mod:`openab_browser.gateway.hub` (``pip install openab-browser[hub]``).
"""

from __future__ import annotations

import pwd
from typing import Any

from jupyterhub.spawner import LocalProcessSpawner

from openab_browser.core.procfs import PID_LIMIT, boot_id, read_stat, signal_if_same

__all__ = ["PodSpawner"]

# The keys of the hub's stored state this spawner adds beside LocalProcessSpawner's "pid".
STARTED_KEY = "openab_started"
BOOT_KEY = "openab_boot"
# A start time is clock ticks after boot: a 64-bit counter. Anything else in the database names no process.
_MAX_START = (1 << 64) - 1
_MAX_BOOT_CHARS = 64
# The identity a state no spawner of ours wrote is read as: no process starts at -1 in no boot.
_NO_PROCESS: tuple[int, str] = (-1, "")


class PodSpawner(LocalProcessSpawner):  # type: ignore[misc]  # jupyterhub ships no type hints
    """``LocalProcessSpawner`` whose pod is its pid *and* that process's start on this boot of the machine (see the
    module's docstring). Owns the two added keys of the spawner's stored state; starting, stopping and the pid are
    ``LocalProcessSpawner``'s."""

    # What names the pod beside its pid: (its start, the boot it started in); None: the pid alone is known.
    _identity: tuple[int, str] | None = None

    async def start(self) -> Any:
        address = await super().start()
        # The pod is this hub's child and not yet reaped: its pid is its own here, whatever has happened to it.
        stat, boot = read_stat(self.pid), boot_id()
        self._identity = None if stat is None or boot is None else (stat.start, boot)
        return address

    def get_state(self) -> dict[str, Any]:
        state: dict[str, Any] = super().get_state()
        if self.pid and self._identity is not None and self._identity != _NO_PROCESS:
            state[STARTED_KEY], state[BOOT_KEY] = self._identity
        return state

    def load_state(self, state: dict[str, Any]) -> None:
        super().load_state(state)
        self._identity = None
        started, boot = state.get(STARTED_KEY), state.get(BOOT_KEY)
        if (isinstance(started, int) and not isinstance(started, bool) and 0 <= started <= _MAX_START
                and isinstance(boot, str) and 0 < len(boot) <= _MAX_BOOT_CHARS):
            self._identity = (started, boot)
        elif STARTED_KEY in state or BOOT_KEY in state:
            # Written by no spawner of ours: it names no process, so the pod it speaks of is taken as gone.
            self._identity = _NO_PROCESS

    def clear_state(self) -> None:
        super().clear_state()
        self._identity = None

    async def _signal(self, sig: int) -> bool:
        """Send ``sig`` to the pod if its pid still names it; whether it did (``poll`` asks with 0, ``stop`` sends
        SIGINT, SIGTERM and SIGKILL through here)."""
        pid = self.pid
        if not isinstance(pid, int) or isinstance(pid, bool) or not 0 < pid <= PID_LIMIT:
            return False  # what the database held names no one process
        if self._identity is None:
            return self._signal_by_owner(pid, sig)
        started, boot = self._identity
        if boot != boot_id():
            return False  # the machine started again since (or no boot at all): every process of that boot is gone
        return signal_if_same(pid, started, sig)

    def _signal_by_owner(self, pid: int, sig: int) -> bool:
        """A pid stored without its start (by the plain spawner): signalled only if it runs as the person."""
        stat = read_stat(pid)
        if stat is None:
            return False
        try:
            person = pwd.getpwnam(self.user.name).pw_uid
        except KeyError:
            return False
        if _real_uid(pid) != person:
            self.log.warning("%s: pid %i stored for its pod now runs as another user; taking the pod as gone",
                             self._log_name, pid)
            return False
        return signal_if_same(pid, stat.start, sig)


def _real_uid(pid: int) -> int | None:
    """Whom ``pid`` runs as (its real uid, from ``/proc/<pid>/status``; the owner of ``/proc/<pid>`` is root's for a
    process that made itself non-dumpable), or ``None`` when it cannot be read."""
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f.read(16384).splitlines():
                if line.startswith(b"Uid:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None
