"""What a pod that did not stop cleanly left in its state dir, found and removed by the next pod on it.

A pod stopped by SIGTERM (or SIGINT) evicts its sessions: their folders go and their agents' whole trees are
killed. SIGKILL, an OOM kill or a crash leave both behind: the session folders under ``sessions/`` (with what the
agents wrote there) and the agents' processes (a ``setsid`` child outlives its agent, and an agent that ignores
the end of its input outlives the pod).

So the pod holds ``pod.lock`` in its state dir for as long as it runs: an ``flock``, which the kernel drops with
the process however it ends, holding the name of the pod's run (:func:`~openab_browser.core.agents.tree.this_run`). The
next pod that takes the lock reads the run it finds there: when that is set, the earlier pod did not stop
cleanly, and this one kills what its agents left (:func:`~openab_browser.core.agents.tree.reap_run`: only processes that
carry that run's mark or sit in its cgroups) and removes every session folder (no session of the new pod exists
yet, and a clean stop removes them all). A pod that cannot take the lock (another live pod uses the state dir)
sweeps nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import logging
import os
import shutil
from pathlib import Path
from typing import Final

from .agents.tree import RUN_PATTERN, own_cgroup, reap_run, this_run

__all__ = ["LOCK_FILE", "StateDirLock"]

log = logging.getLogger(__name__)

LOCK_FILE: Final = "pod.lock"
_MAX_RECORD: Final = 256


class StateDirLock:
    """The running pod's hold on its state dir (see the module docstring): :meth:`take` at start, :meth:`release`
    at a clean stop. Owns ``pod.lock`` only; what it removes at :meth:`take` is what an earlier run left."""

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = state_dir
        self._fd = -1

    async def take(self) -> None:
        """Take the lock; if the earlier run holding this state dir died without stopping, sweep what it left."""
        if self._fd >= 0:
            return
        path = self.state_dir / LOCK_FILE
        # O_NOFOLLOW: a link planted in the state dir is never written through. O_CLOEXEC: an agent never holds it.
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise OSError(exc.errno, f"{path} is a symbolic link, not the pod's lock file: remove it") from None
            raise
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            log.warning("%s is held by another running pod: nothing of an earlier run is swept; give each pod a "
                        "state dir of its own", path)
            return
        os.fchmod(fd, 0o600)
        self._fd = fd
        earlier = os.pread(fd, _MAX_RECORD, 0).decode(errors="replace").strip()
        if earlier and earlier != this_run():
            await self._sweep(earlier)
        self._write(this_run())

    async def _sweep(self, run: str) -> None:
        killed = await reap_run(run, own_cgroup()) if RUN_PATTERN.fullmatch(run) else 0
        folders = await asyncio.to_thread(_remove_session_folders, self.state_dir / "sessions")
        log.warning("the pod's earlier run (pid %s) did not stop cleanly: %d process(es) its agents left were "
                    "killed and %d session folder(s) removed", run.partition("-")[0], killed, folders)

    def _write(self, record: str) -> None:
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, record.encode() + (b"\n" if record else b""), 0)

    def release(self) -> None:
        """A clean stop: the record is cleared (nothing to sweep next time) and the lock let go. Idempotent."""
        if self._fd < 0:
            return
        with contextlib.suppress(OSError):
            self._write("")
        os.close(self._fd)  # the flock goes with the last descriptor
        self._fd = -1


def _remove_session_folders(sessions: Path) -> int:
    """Every session folder under ``sessions`` (a link is removed, never followed); returns how many went."""
    removed = 0
    try:
        entries = list(os.scandir(sessions))
    except OSError:
        return 0
    for entry in entries:
        try:
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)
            removed += 1
        except OSError as exc:
            log.warning("could not remove %s, left by an earlier run: %s", entry.path, exc)
    return removed
