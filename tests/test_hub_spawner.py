"""The one-machine recipe's spawner (gateway/hub_spawner.py) as a restarted hub uses it: the pod's pid loaded from the
hub's database, then asked whether the pod runs (``poll``) and told to stop it (``stop``). Its pod is a real process;
the process that took the pod's pid after the pod ended is a real one too, made to get that very pid (the kernel's
``ns_last_pid``), as a machine whose pids wrapped or that started again gives it. The whole hub, restarted over a pod
that ended while it was down: tests/test_hub_restart.py."""

from __future__ import annotations

import asyncio
import contextlib
import os
import pwd
import signal
import subprocess
import uuid
from collections.abc import AsyncIterator, Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from proc_table import can_choose_pids, process_on_pid

from openab_browser.core.procfs import boot_id, read_stat

jupyterhub = pytest.importorskip("jupyterhub", reason="jupyterhub is not installed (pip install -e '.[dev,hub]')")

from openab_browser.gateway.hub_spawner import BOOT_KEY, STARTED_KEY, PodSpawner  # noqa: E402

PERSON = "nobody"  # the pod's person: a user every Debian machine has, not the test's own


def _why_not() -> str | None:
    if os.geteuid() != 0:
        return "the hub's spawner runs as root (it starts each person's pod as that person)"
    if not os.access("/usr/bin/python3", os.X_OK):
        return "no /usr/bin/python3 for the person's non-dumpable program (Debian: apt-get install python3)"
    try:
        pwd.getpwnam(PERSON)
    except KeyError:
        return f"no user {PERSON!r} on this machine"
    return None


pytestmark = [pytest.mark.anyio, pytest.mark.skipif(_why_not() is not None, reason=_why_not() or "")]


def spawner(state: dict[str, Any], person: str = PERSON) -> PodSpawner:
    """A spawner as the hub makes one at its start, from what its database holds for the person's server."""
    made = PodSpawner(user=SimpleNamespace(name=person, url=f"/user/{person}/"))
    made.load_state(state)
    return made


def identity(pid: int) -> dict[str, Any]:
    """What the spawner stores of a pod it started (PodSpawner.get_state after start)."""
    stat = read_stat(pid)
    assert stat is not None
    return {"pid": pid, STARTED_KEY: stat.start, BOOT_KEY: boot_id()}


def alive(process: subprocess.Popen[bytes]) -> bool:
    stat = read_stat(process.pid)
    return process.poll() is None and stat is not None and stat.state != "Z"


@contextlib.asynccontextmanager
async def sleeper(user: str | None = PERSON, *, dumpable: bool = True) -> AsyncIterator[subprocess.Popen[bytes]]:
    """A process standing for a pod (``user``'s, as the recipe's pods run), reaped by a thread as it ends, as the
    hub's reaper does: a dead pod must not linger as a zombie, which a signal 0 still reaches. Not ``dumpable``:
    it makes itself so, as a process guarding its memory does; its /proc entries then belong to the namespace's
    root, or to the overflow uid (65534, nobody) where that root is not mapped, as in a container."""
    argv = ["sleep", "300"] if dumpable else [
        "/usr/bin/python3", "-c", "import ctypes, time; ctypes.CDLL(None).prctl(4, 0, 0, 0, 0); print(flush=True); "
                              "time.sleep(300)"]  # PR_SET_DUMPABLE
    process = subprocess.Popen(argv, user=user, stdout=subprocess.PIPE)  # noqa: ASYNC220 (a fork and exec)
    if not dumpable:
        assert process.stdout is not None
        await asyncio.to_thread(process.stdout.readline)  # not dumpable from here on
    waiter = asyncio.ensure_future(asyncio.to_thread(process.wait))
    try:
        yield process
    finally:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        await waiter


@contextlib.contextmanager
def on_pid(pid: int, user: str | None) -> Iterator[subprocess.Popen[bytes]]:
    """Another program the kernel gave ``pid`` (``sleep``, as ``user``), killed and reaped after the test."""
    process = process_on_pid(pid, ["sleep", "300"], user=user)
    try:
        yield process
    finally:
        process.kill()
        process.wait()


async def ended(process: subprocess.Popen[bytes]) -> int:
    process.kill()
    return await asyncio.to_thread(process.wait)


async def test_a_pod_found_as_it_was_left_is_running_and_stops() -> None:
    async with sleeper() as pod:
        found = spawner(identity(pod.pid))
        assert await found.poll() is None
        assert found.get_state() == identity(pod.pid)  # stored again as it was loaded
        await found.stop()
        assert await asyncio.to_thread(pod.wait, 5) == -signal.SIGINT  # the hub's first, gentle signal reached it
        assert await found.poll() == 0
        assert found.get_state() == {}


@pytest.mark.skipif(can_choose_pids() is not None, reason=can_choose_pids() or "")
@pytest.mark.parametrize("owner", [PERSON, None], ids=["the person's own program", "root's program"])
async def test_a_pid_given_to_another_program_is_a_pod_that_is_gone_and_that_program_is_never_signalled(
        owner: str | None) -> None:
    async with sleeper() as pod:
        stored = identity(pod.pid)  # the hub's database, as the pod's start left it
        # A start is counted in clock ticks (10 ms): a pod lives longer than one, and its pid comes round only after
        # thousands of other processes (or a reboot). Here it comes round at once, so the pod lives past its tick.
        await asyncio.sleep(0.05)
        await ended(pod)  # while the hub was down
    with on_pid(stored["pid"], owner) as other:
        restarted = spawner(stored)
        assert await restarted.poll() == 0  # gone: the person's next visit starts a pod
        assert restarted.get_state() == {}
        await restarted.stop()  # as the hub stops a server it found stopped: nothing is sent
        assert alive(other)
        # The stock spawner, on the same database: the program is "the pod", and its stop goes to that program.
        stock = jupyterhub.spawner.LocalProcessSpawner(user=SimpleNamespace(name=PERSON, url="/"))
        stock.load_state(stored)
        assert await stock.poll() is None


@pytest.mark.skipif(can_choose_pids() is not None, reason=can_choose_pids() or "")
async def test_a_pod_of_an_earlier_boot_is_gone_even_where_its_pid_and_start_match() -> None:
    # After a reboot the boot's first processes start in the same order at much the same tick: a start alone would
    # take one of them for the pod.
    async with sleeper() as pod:
        stored = {**identity(pod.pid), BOOT_KEY: str(uuid.uuid4())}
        before = spawner(stored)
        assert await before.poll() == 0
        await spawner(stored).stop()
        assert alive(pod)


async def test_a_pid_stored_by_the_plain_spawner_is_the_pod_only_while_it_runs_as_the_person() -> None:
    # The hub upgraded to this spawner with pods running: their state has the pid alone. Whom a process runs as is
    # its real uid, not the owner of its /proc entry (for a program that is not dumpable that can be nobody's).
    for dumpable in (True, False):
        async with sleeper(user=None, dumpable=dumpable) as root_program:
            found = spawner({"pid": root_program.pid})
            assert await found.poll() == 0
            await spawner({"pid": root_program.pid}).stop()
            assert alive(root_program)
    for dumpable in (True, False):
        async with sleeper(dumpable=dumpable) as pod:
            found = spawner({"pid": pod.pid})
            assert await found.poll() is None
            await found.stop()
            assert await asyncio.to_thread(pod.wait, 5) == -signal.SIGINT


@pytest.mark.parametrize("started, boot", [
    ("1234", "b"), (True, "b"), (-5, "b"), (1 << 70, "b"), (None, "b"), (1, 7), (1, ""), (1, "x" * 10_000),
    (1.5, "b"), ({"start": 1}, "b"),
], ids=["text", "bool", "negative", "past 64 bits", "null", "boot a number", "boot empty", "boot huge", "float",
        "object"])
async def test_a_stored_identity_of_no_spawner_of_ours_names_no_process(started: object, boot: object) -> None:
    async with sleeper() as pod:
        state = {"pid": pod.pid, STARTED_KEY: started, BOOT_KEY: boot}
        found = spawner(state)
        assert await found.poll() == 0
        await spawner(state).stop()
        assert alive(pod)


@pytest.mark.parametrize("pid", [0, -1, -os.getpgid(0), 1 << 40, True],
                         ids=["zero", "minus one", "this process group, negated", "past pid_max", "true"])
async def test_a_stored_pid_that_names_no_single_process_is_never_signalled(pid: object) -> None:
    # A negative pid would signal a whole process group (-1: every process the hub may signal), the tests' own here.
    found = spawner({"pid": pid})
    assert await found.poll() == 0
    await spawner({"pid": pid}).stop()

