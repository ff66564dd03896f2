"""openab as a JupyterHub single-user server, on one machine: a real hub (the `jupyterhub` package) with its real
proxy (configurable-http-proxy from npm) spawns alice's and bob's `openab run --jupyterhub`; each person reaches
their own pod through the hub's proxy with a token made on the hub, and nobody else's; the hub's idle culler stops
only the pod nobody uses, and the hub starts it again. tests/browser/test_hub_panel.py does the same with each
person's real side panel in Chromium.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import pwd
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import websockets
from hub_harness import AUTH_CACHE_SECS, Hub, available, two_people, ws_handshake
from waits import eventually, eventually_sync

pytestmark = pytest.mark.skipif(available() is not None, reason=available() or "")



@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hub]:
    with two_people(tmp_path_factory.mktemp("hub") / "hub") as running:
        yield running


async def acp_request(ws: Any, request_id: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """One ACP request on an open socket and its answer (keepalives and other notifications passed over)."""
    await ws.send(json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}))
    async with asyncio.timeout(15):
        while True:
            message = json.loads(await ws.recv())
            if message.get("id") == request_id and "method" not in message:
                answer: dict[str, Any] = message
                return answer


def connect(hub: Hub, person: str, token: str) -> Any:
    return websockets.connect(hub.acp_url(person), subprotocols=[f"openab.bearer.{token}", "acp.v1"],  # type: ignore[list-item]
                              open_timeout=15, close_timeout=5)


@pytest.mark.anyio
async def test_each_person_opens_their_own_pod_through_the_hub(hub: Hub) -> None:
    for person in ("alice", "bob"):
        _, token = hub.token(person)
        async with connect(hub, person, token) as ws:
            assert ws.subprotocol == "acp.v1"
            init = await acp_request(ws, 1, "initialize", {"protocolVersion": 1, "clientCapabilities": {}})
            assert init["result"]["protocolVersion"] == 1
            new = await acp_request(ws, 2, "session/new", {"cwd": "/", "mcpServers": []})
            assert new["result"]["sessionId"].startswith("sess_")


def _uid_of(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line for line in status.splitlines() if line.startswith("Uid:")).split()[1])


def _as(person: str, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, user=person, capture_output=True, text=True, timeout=30, cwd="/")


def test_each_pod_runs_as_its_person_and_no_one_reads_anothers_state(hub: Hub) -> None:
    """The recipe's spawner: each pod is its person's own Unix user, so what one person's agent runs (as that
    user) cannot read the other's pod state, keys or home, by the kernel's word."""
    for person in ("alice", "bob"):
        uid = pwd.getpwnam(person).pw_uid
        assert _uid_of(hub.pids[person]) == uid
        # On a port of the person's own (the recipe's 20000 + uid), never a random one two starts could share.
        assert hub.pod_address(person) == f"http://127.0.0.1:{20000 + uid}"
    state = hub.home("bob") / ".local" / "state" / "openab"
    files = [f for f in state.rglob("*") if f.is_file()]
    assert files, f"bob's pod keeps its state in {state}"
    for f in files:
        refused = _as("alice", "cat", str(f))
        assert refused.returncode != 0 and "Permission denied" in refused.stderr, (f, refused)
    for folder in (hub.home("bob"), state):
        listed = _as("alice", "ls", str(folder))
        assert listed.returncode != 0 and "Permission denied" in listed.stderr, (folder, listed)
    # The same commands work for the owner: the refusals above are the kernel's, not a wrong path.
    own = next(f for f in (hub.home("alice") / ".local" / "state" / "openab").rglob("*") if f.is_file())
    assert _as("alice", "cat", str(own)).returncode == 0


def test_each_pod_tells_the_hub_its_jupyterhub_version(hub: Hub) -> None:
    import jupyterhub

    answer = httpx.get(f"{hub.public}/user/alice/", trust_env=False, timeout=15, follow_redirects=False)
    assert answer.headers.get("X-JupyterHub-Version") == jupyterhub.__version__
    assert "Single-user server has no version header" not in hub.logs()


def test_each_pod_names_where_to_pair_its_panel(hub: Hub) -> None:
    logs = hub.logs()
    for person in ("alice", "bob"):
        assert (f"pair the side panel: Gateway URL: {hub.acp_url(person)}; Key: an API token {person} makes on the "
                f"hub ({hub.public}/hub/token)") in logs


def test_a_token_opens_no_one_elses_pod(hub: Hub) -> None:
    _, alice = hub.token("alice")
    _, bob = hub.token("bob")
    for token, other in ((alice, "bob"), (bob, "alice")):
        status, answer = ws_handshake(hub.acp_url(other), token)
        assert status == 403, answer
        assert b"may not access this server" in answer
    # The same token at its owner's pod is welcome: the refusal was the other person's pod's.
    assert ws_handshake(hub.acp_url("alice"), alice)[0] == 101


def test_no_token_a_wrong_one_and_odd_ones_are_refused(hub: Hub) -> None:
    url = hub.acp_url("alice")
    status, answer = ws_handshake(url, None)
    assert status == 401 and b"Missing hub token" in answer
    assert ws_handshake(url, "0" * 32)[0] == 401  # the shape of a hub token, not one
    assert ws_handshake(url, "a" * 300)[0] == 401  # longer than any hub token: refused without asking the hub
    status, answer = ws_handshake(url, "caf\u00e9-token".encode().decode("latin-1"))
    assert status in (400, 401), answer
    # A header far over any token, in the Authorization header the hub's own clients use.
    status, _ = ws_handshake(url, None, extra={"Authorization": "Bearer " + "x" * 60_000})
    assert status not in (0, 101)
    # A token in the URL is never taken (it would sit in the proxy's and the browser's history).
    _, token = hub.token("alice")
    status, _ = ws_handshake(url + f"?token={token}", None)
    assert status == 401


def test_a_token_without_the_servers_access_scope_is_refused(hub: Hub) -> None:
    _, narrow = hub.token("alice", scopes=["read:users:name!user=alice"])
    status, answer = ws_handshake(hub.acp_url("alice"), narrow)
    assert status == 403, answer


@pytest.mark.anyio
async def test_a_revoked_token_opens_nothing_once_its_cached_answer_expires(hub: Hub) -> None:
    token_id, token = hub.token("alice")
    async with connect(hub, "alice", token) as held:
        await acp_request(held, 1, "initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        hub.revoke("alice", token_id)
        eventually_sync(lambda: ws_handshake(hub.acp_url("alice"), token)[0] == 401,
                        timeout=AUTH_CACHE_SECS + 10, interval=0.25, what="the revoked token refused")
        # The socket opened before the revocation is not cut: a rotation does not drop the person's work.
        answer = await acp_request(held, 2, "session/new", {"cwd": "/", "mcpServers": []})
        assert "result" in answer


def test_the_hubs_prometheus_credential_scrapes_each_pod_and_a_persons_token_does_not(hub: Hub) -> None:
    _, alice = hub.token("alice")
    with httpx.Client(timeout=15, trust_env=False) as client:
        for person in ("alice", "bob"):
            scraped = client.get(f"{hub.public}/user/{person}/metrics",
                                 headers={"Authorization": f"Bearer {hub.metrics_token}"})
            assert scraped.status_code == 200, scraped.text
            assert "openab_acp_connections" in scraped.text
        assert client.get(f"{hub.public}/user/alice/metrics",
                          headers={"Authorization": f"Bearer {alice}"}).status_code == 403
        assert client.get(f"{hub.public}/user/alice/metrics").status_code == 401
        assert client.get(f"{hub.public}/user/alice/healthz").status_code == 200
        # At the pod's own address (as a kubelet probes it, as Prometheus scrapes pods) the probes and /metrics
        # answer at the root too, /metrics with the same credential; nothing else is served outside the prefix.
        pod = hub.pod_address("alice")
        assert client.get(f"{pod}/readyz").json() == {"ready": True, "state": "ready"}
        assert client.get(f"{pod}/metrics", headers={"Authorization": f"Bearer {hub.metrics_token}"}).status_code == 200
        assert client.get(f"{pod}/metrics", headers={"Authorization": f"Bearer {alice}"}).status_code == 403
        assert client.get(f"{pod}/acp").status_code == 404
        assert ws_handshake(f"{pod.replace('http', 'ws', 1)}/acp", alice)[0] == 404
        assert client.get(f"{pod}/user/bob/acp").status_code == 404


def test_a_pod_without_the_hubs_environment_refuses_to_start(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTERHUB_", "OPENAB_"))}
    done = subprocess.run([str(Path(sys.executable).parent / "openab"), "run", "--jupyterhub", "--state-dir",
                           str(tmp_path / "state")], env=env, capture_output=True, text=True, timeout=30)
    assert done.returncode == 2
    assert "JUPYTERHUB_API_URL" in done.stderr and "not set" in done.stderr


def test_the_z2jh_values_example_runs_the_pod_as_the_test_does() -> None:
    """docker/jupyterhub/values.yaml: openab started in hub mode, settings the real Settings accepts, a drain that
    fits the grace period, activity reported well inside the culler's timeout, Prometheus's scope the pod's."""
    import yaml  # type: ignore[import-untyped]

    from openab_browser.core.settings import ENV_VARS, Settings
    from openab_browser.gateway.hub import METRICS_SCOPE

    values = yaml.safe_load((Path(__file__).parent.parent / "docker" / "jupyterhub" / "values.yaml").read_text())
    single = values["singleuser"]
    assert single["cmd"] == ["--jupyterhub"]  # after the image's `tini -- openab run`
    env = {k: v for k, v in single["extraEnv"].items() if k.startswith("OPENAB_") and k != "OPENAB_LOG_FORMAT"}
    assert set(env) <= set(ENV_VARS)  # the log format is read by `openab run` itself
    settings = Settings.from_env({**env, "OPENAB_JUPYTERHUB": "true", "OPENAB_HOST": "0.0.0.0"})
    assert settings.jupyterhub and settings.behind_proxy
    grace = values["hub"]["config"]["KubeSpawner"]["delete_grace_period"]
    assert grace >= settings.drain_timeout + settings.cancel_grace + 10
    assert single["extraPodConfig"]["terminationGracePeriodSeconds"] == grace
    assert values["cull"]["enabled"] and values["cull"]["timeout"] >= 10 * settings.hub_activity_interval
    assert values["hub"]["loadRoles"]["prometheus"]["scopes"] == [METRICS_SCOPE]
    assert single["uid"] == 10001 and single["storage"]["homeMountPath"] == "/home/agent"


@pytest.mark.anyio
async def test_a_hub_that_does_not_answer_admits_nobody() -> None:
    """The pod's door with the hub gone (its address refuses connections): 503 and the kind `hub`, never an
    admission; the token is never taken on trust."""
    import socket

    from openab_browser.gateway.auth import Refused
    from openab_browser.gateway.hub import HubDoor, HubEnvironment

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again below: nothing listens there
    environment = HubEnvironment.from_env({
        "JUPYTERHUB_API_URL": f"http://127.0.0.1:{port}/hub/api", "JUPYTERHUB_API_TOKEN": "pod-token",
        "JUPYTERHUB_USER": "alice", "JUPYTERHUB_SERVICE_PREFIX": "/user/alice/",
    })
    assert environment.access_scopes == {"access:servers!server=alice/"}
    verdict = await HubDoor(environment, cache_secs=1).check("0123456789abcdef0123456789abcdef")
    assert isinstance(verdict, Refused) and (verdict.status, verdict.kind) == (503, "hub")


@pytest.mark.anyio
async def test_a_socket_just_opened_is_told_to_the_hub_at_once_and_a_flood_of_them_is_spaced() -> None:
    """With the pod's hourly tick, a person who opens the panel must not wait an hour to count as activity: a
    culler looking in between would stop the pod they have just opened. The admission is told at once; a hundred
    admissions at once make one post a second, not a hundred."""
    from openab_browser.gateway.hub import NUDGE_SPACING, ActivityReporter, HubEnvironment

    environment = HubEnvironment.from_env({
        "JUPYTERHUB_API_URL": "http://127.0.0.1:9/hub/api", "JUPYTERHUB_API_TOKEN": "pod-token",
        "JUPYTERHUB_USER": "alice", "JUPYTERHUB_SERVICE_PREFIX": "/user/alice/",
    })
    posts: list[tuple[float, str]] = []

    async def hub_activity(url: str, body: dict[str, Any]) -> int:  # the hub's activity endpoint, answering 200
        posts.append((asyncio.get_running_loop().time(), body["last_activity"]))
        return 200

    reporter = ActivityReporter(environment, lambda: False, interval=3600, post=hub_activity)
    task = asyncio.create_task(reporter.run())
    try:
        await asyncio.sleep(0.3)
        assert posts == []  # idle: nothing to tell
        opened = asyncio.get_running_loop().time()
        reporter.nudge()
        await eventually(lambda: len(posts) == 1, timeout=NUDGE_SPACING + 1, interval=0.02)
        assert posts[0][0] - opened < 0.5
        for _ in range(100):
            reporter.nudge()
        await asyncio.sleep(NUDGE_SPACING * 2.5)
        assert 2 <= len(posts) <= 4, posts
        assert all(later[0] - earlier[0] >= NUDGE_SPACING * 0.9 for earlier, later in itertools.pairwise(posts))
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
