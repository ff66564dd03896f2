"""The hub restarted under open sockets, as `helm upgrade` replaces the hub pod of Zero to JupyterHub: the proxy runs
apart from the hub (the test's own configurable-http-proxy, the hub told ``should_start = False`` and
``cleanup_servers = False``), alice's pod runs and her panel's ``/acp`` socket is open through the proxy. The hub is
stopped and started again on the same database and config: the open socket answers throughout, a new handshake
while the hub is down gets the pod's 503 (never an admission, never a crash), and once the hub is back the same
handshake reaches the same pod, which the hub picked up from its database (docs/deploy.md, "Rotation without
cutting sessions"). A pod that ended while the hub was down, its pid given to another program meanwhile, is taken
for gone, and that program is left alone (the recipe's spawner, gateway/hub_spawner.py).
"""

from __future__ import annotations

import functools
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hub_harness import Hub, available, running_hub, ws_handshake
from proc_table import all_gone, can_choose_pids, children_of, described, process_on_pid
from test_hub import acp_request, connect
from waits import eventually_sync

from openab_browser.core.procfs import boot_id, read_stat
from openab_browser.gateway.hub_spawner import BOOT_KEY, STARTED_KEY

pytestmark = pytest.mark.skipif(available() is not None, reason=available() or "")


@pytest.fixture
def hub(tmp_path: Path) -> Iterator[Hub]:
    with running_hub(tmp_path / "hub") as running:
        running.start("alice")
        yield running


@pytest.mark.anyio
async def test_a_hub_restart_cuts_no_socket_and_a_handshake_meanwhile_waits_for_it(hub: Hub) -> None:
    pod, route = hub.pids["alice"], hub.pod_address("alice")
    _, held_token = hub.token("alice")
    _, later = hub.token("alice")  # never shown to the pod before the hub goes: no cached answer for it
    async with connect(hub, "alice", held_token) as held:
        await acp_request(held, 1, "initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        first = (await acp_request(held, 2, "session/new", {"cwd": "/", "mcpServers": []}))["result"]["sessionId"]

        hub.stop_hub()
        assert hub.proxy.poll() is None
        # (a) The socket goes through the proxy to the pod: the hub's absence is not felt on it.
        while_down = await acp_request(held, 3, "session/new", {"cwd": "/", "mcpServers": []})
        assert while_down["result"]["sessionId"].startswith("sess_")
        # (b) A new handshake reaches the pod (the proxy keeps its route), which cannot ask the hub about the token:
        # 503 in the pod's words (the proxy's own 503 for a hub it cannot reach would say otherwise), no admission.
        status, answer = ws_handshake(hub.acp_url("alice"), later)
        assert status == 503, answer
        assert b"The hub could not check the token now; try again in a moment" in answer
        os.kill(pod, 0)  # the pod is still there

        hub.start_hub()
        # The hub found alice's pod running in its database and kept it: the same process, the same route.
        assert hub.running("alice") and hub.pod_pid("alice") == pod
        assert hub.pod_address("alice") == route
        after = await acp_request(held, 4, "session/new", {"cwd": "/", "mcpServers": []})
        assert "result" in after, after

        # (c) The redial now succeeds and lands on the same pod: it resumes the session made before the restart,
        # which only that pod's memory holds.
        async with connect(hub, "alice", later) as redialled:
            await acp_request(redialled, 1, "initialize", {"protocolVersion": 1, "clientCapabilities": {}})
            resumed = await acp_request(redialled, 2, "session/resume", {"sessionId": first, "cwd": "/"})
            assert resumed.get("result") == {}, resumed


def test_a_hub_that_dies_takes_its_culler_with_it_and_leaves_the_pods(hub: Hub) -> None:
    # A crash or the kernel's OOM killer: the hub has no chance to stop its services, and the unit's KillMode=process
    # leaves everything else it started running. Its pods go on as a stop means them to; its culler would go on too,
    # asking a hub that is gone and failing every round beside the culler the restarted hub starts.
    pod = hub.pids["alice"]
    cullers = _cullers_of(hub.process.pid)
    assert len(cullers) == 1, described(children_of(hub.process.pid))
    hub.process.kill()
    hub.process.wait(10)
    eventually_sync(functools.partial(all_gone, cullers), timeout=10, interval=0.1, what="its culler ending with it")
    os.kill(pod, 0)  # the pod is still there

    hub.start_hub()
    assert hub.running("alice") and hub.pod_pid("alice") == pod
    assert len(_cullers_of(hub.process.pid)) == 1  # the new hub's own
    assert all_gone(cullers)


@pytest.mark.skipif(can_choose_pids() is not None, reason=can_choose_pids() or "")
def test_a_pod_that_ended_while_the_hub_was_down_is_gone_and_the_program_given_its_pid_is_left_alone(
        hub: Hub) -> None:
    pod = hub.pids["alice"]
    started = read_stat(pod)
    assert started is not None
    # What the hub keeps of the pod in its database: the pid, and what tells it from a later process with that pid.
    state = hub.user("alice")["servers"][""]["state"]
    assert state == {"pid": pod, STARTED_KEY: started.start, BOOT_KEY: boot_id()}, state

    hub.stop_hub()
    os.kill(pod, signal.SIGKILL)  # the pod ends while the hub is down (an OOM kill, a crash)
    # Reaped, its pid free: by this process, the pods' subreaper once their hub is gone (a zombie keeps its pid).
    eventually_sync(lambda: all_gone([pod]) and not Path(f"/proc/{pod}").exists(), timeout=10, interval=0.05,
                    what="alice's pod reaped")
    # Its pid goes to another of alice's programs, as a machine whose pids wrapped, or that started again, gives it.
    other = process_on_pid(pod, ["sleep", "300"], user="alice")
    try:
        begun = time.monotonic()
        hub.start_hub()
        # The hub found alice's server stopped while it was down, at once: it did not wait for a pod at the pid's
        # port (the plain spawner takes the program for the pod, waits http_timeout for it to answer, then stops it
        # with SIGINT, SIGTERM and SIGKILL).
        eventually_sync(lambda: hub.stopped("alice"), timeout=20, interval=0.1,
                        what=lambda: f"alice's server taken as stopped: {hub.log_tail()}")
        assert time.monotonic() - begun < 20
        assert other.poll() is None, "the hub signalled the program that got the pod's pid"
        assert "appears to have stopped while the Hub was down" in hub.log_tail(200)
        # Her next visit starts a pod of her own again.
        hub.start("alice")
        assert hub.pids["alice"] != pod and other.poll() is None
    finally:
        other.kill()
        other.wait()


def _cullers_of(hub: int) -> list[int]:
    return [pid for pid in children_of(hub) if b"jupyterhub_idle_culler" in _command_line(pid)]


def _command_line(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""
