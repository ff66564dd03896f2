"""What a pod that died without stopping left in its state dir, as the next pod sweeps it, and what it must never
touch: a link's target, another run's processes (a pid that came round again included), a state dir another live
pod holds. Real processes and real files; the whole `openab run` with SIGKILL is in test_runtime_run_command.py."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from openab_browser.core.agents.tree import TREE_MARK_ENV, this_run
from openab_browser.core.leftovers import LOCK_FILE, StateDirLock
from openab_browser.core.procfs import read_stat

pytestmark = pytest.mark.anyio

EARLIER_RUN = "4242-0123456789ab"  # a run that died without stopping: its name is all the record holds


def alive(pid: int) -> bool:
    st = read_stat(pid)
    return st is not None and st.state != "Z"


@contextlib.asynccontextmanager
async def marked(mark: str) -> AsyncIterator[asyncio.subprocess.Process]:
    """A process that carries ``mark`` as an agent's does, left running as a pod's orphan would be."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", "import time; time.sleep(120)", env={"PATH": os.defpath, TREE_MARK_ENV: mark},
        start_new_session=True,
    )
    try:
        yield process
    finally:
        if process.returncode is None:
            process.kill()
        await process.wait()


def state_dir(tmp_path: Path, record: str) -> Path:
    state = tmp_path / "state"
    (state / "sessions" / "s-0001" / "work").mkdir(parents=True, mode=0o700)
    lock = state / LOCK_FILE
    lock.write_text(record + "\n")
    lock.chmod(0o600)
    return state


async def test_only_the_earlier_runs_marked_processes_go_never_another_runs_with_the_same_pid(tmp_path: Path) -> None:
    state = state_dir(tmp_path, EARLIER_RUN)
    # The earlier run's agent; a process of another run whose pid came round to the same number; and this run's own.
    async with marked(f"{EARLIER_RUN}-aaaa") as left, marked("4242-ba9876543210-bbbb") as other, \
            marked(f"{this_run()}-cccc") as ours:
        lock = StateDirLock(state)
        await lock.take()
        try:
            async with asyncio.timeout(10):
                assert await left.wait() == -9
            assert alive(other.pid) and alive(ours.pid)
            assert not (state / "sessions" / "s-0001").exists()
            assert (state / LOCK_FILE).read_text() == this_run() + "\n"
        finally:
            lock.release()
    assert (state / LOCK_FILE).read_text() == "", "a clean stop leaves nothing to sweep"


async def test_a_link_in_the_sessions_folder_goes_and_its_target_stays(tmp_path: Path) -> None:
    state = state_dir(tmp_path, EARLIER_RUN)
    outside = tmp_path / "someone-elses"
    outside.mkdir()
    (outside / "precious").write_text("kept")
    (state / "sessions" / "s-0002").symlink_to(outside)
    lock = StateDirLock(state)
    await lock.take()
    lock.release()
    assert list((state / "sessions").iterdir()) == []
    assert (outside / "precious").read_text() == "kept"


async def test_a_planted_link_as_the_lock_file_is_refused_and_never_written_through(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    target = tmp_path / "target"
    target.write_text("not the pod's")
    (state / LOCK_FILE).symlink_to(target)
    with pytest.raises(OSError, match="is a symbolic link, not the pod's lock file: remove it"):
        await StateDirLock(state).take()
    assert target.read_text() == "not the pod's"


async def test_a_state_dir_another_live_pod_holds_is_not_swept(
    tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    state = state_dir(tmp_path, "")
    running = StateDirLock(state)
    await running.take()
    try:
        (state / "sessions" / "s-0003").mkdir()  # a session of the running pod
        with caplog.at_level(logging.WARNING, logger="openab_browser.core.leftovers"):
            await StateDirLock(state).take()
        assert "held by another running pod" in caplog.text
        assert (state / "sessions" / "s-0003").is_dir()
    finally:
        running.release()


async def test_a_record_that_is_no_run_name_kills_nothing(tmp_path: Path) -> None:
    state = state_dir(tmp_path, "1-*")  # a glob would reach every agent cgroup
    async with marked("1-0123456789ab-dddd") as bystander:
        lock = StateDirLock(state)
        await lock.take()
        lock.release()
        assert alive(bystander.pid)
