"""The one-machine recipe's idle culler (the hub's own service, with its four scopes): with alice's socket open it
stops only bob's idle pod, alice's stays a whole timeout later, bob's URL then answers as the hub does for a stopped
pod, and bob's own token starts it again, as his panel does. A hub of its own: the culler's timeout is short.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from hub_harness import Hub, available, running_hub
from test_hub import acp_request, connect
from waits import eventually

pytestmark = pytest.mark.skipif(available() is not None, reason=available() or "")

# The culler's bound in the test: a pod with no activity reported for this long is stopped. alice's pod must be
# spawned and her socket admitted within it (the pod reports nothing before): with the suite's files side by side on
# the two cores, the hub's loop stalled for 1.3-5.3 s at a time and that took 6.7 s once, so 6 s culled her pod.
CULL_TIMEOUT = 10
NEVER = datetime.min.replace(tzinfo=UTC)


@pytest.mark.anyio
async def test_the_culler_stops_only_the_idle_pod_and_the_hub_starts_it_again(tmp_path: Path) -> None:
    # The recipe's own culler, the hub's service with its four scopes, at a timeout the test can wait for.
    with running_hub(tmp_path / "hub", cull_timeout=CULL_TIMEOUT) as hub:
        # The tokens first: from alice's start on, the culler's clock runs on her idle pod until her socket opens.
        _, alice = hub.token("alice")
        _, bob = hub.token("bob")
        hub.start("alice")
        opened = datetime.now(UTC).replace(microsecond=0)
        async with connect(hub, "alice", alice) as ws:
            await acp_request(ws, 1, "initialize", {"protocolVersion": 1, "clientCapabilities": {}})
            # The pod tells the hub of the socket at once, so the culler's next look already sees it in use.
            await eventually(lambda: (hub.last_activity("alice") or NEVER) >= opened, timeout=5, interval=0.1,
                             what=lambda: f"alice's socket told to the hub: {hub.user('alice')}")
            hub.start("bob")
            await _culled_bob_while_alice_is_connected(hub, ws)
        await _bob_starts_his_pod_again(hub, bob)


async def _culled_bob_while_alice_is_connected(hub: Hub, ws: Any) -> None:
    # bob's pod has no socket and reports nothing: the culler stops it.
    await eventually(lambda: hub.stopped("bob"), timeout=CULL_TIMEOUT + 20,
                     what=lambda: f"bob's idle pod culled: {hub.log_tail()}", interval=0.25)
    culled = datetime.now(UTC)
    # alice's socket is activity: her pod tells the hub, and it is still running a whole culler timeout
    # (four of its rounds) after bob's was stopped.
    await eventually(lambda: (hub.last_activity("alice") or culled) > culled + timedelta(seconds=CULL_TIMEOUT),
                     timeout=CULL_TIMEOUT + 20, interval=0.25,
                     what=lambda: f"alice's pod reporting activity: {hub.user('alice')}")
    assert hub.running("alice")
    answer = await acp_request(ws, 2, "session/new", {"cwd": "/", "mcpServers": []})
    assert "result" in answer


async def _bob_starts_his_pod_again(hub: Hub, bob: str) -> None:
    # bob's panel asks for his pod: the hub answers for the stopped pod with 424, and a JSON message.
    # The hub sends /user/bob/... on to /hub/user/bob/..., which a browser's fetch follows.
    async with httpx.AsyncClient(timeout=15, trust_env=False, follow_redirects=True) as client:
        http_url = hub.acp_url("bob").replace("ws", "http", 1)
        stopped = await client.get(http_url, headers={"Authorization": f"Bearer {bob}"})
        assert stopped.status_code == 424, stopped.text
        asked_json = await client.get(http_url, headers={"Authorization": f"Bearer {bob}",
                                                         "Accept": "application/json"})
        assert asked_json.status_code == 424 and "no longer running" in asked_json.json()["message"]
        # His own token may start it again, as the panel does.
        started = await client.post(f"{hub.api}/users/bob/server", headers={"Authorization": f"token {bob}"})
        assert started.status_code in (201, 202), started.text
    await eventually(lambda: hub.running("bob"), timeout=30, interval=0.25, what="bob's pod started again")
    async with connect(hub, "bob", bob) as ws:
        init = await acp_request(ws, 1, "initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        assert init["result"]["protocolVersion"] == 1
