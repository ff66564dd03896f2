"""Many people's pods on one hub (tests/hub_harness.py): started all at once or some seconds apart, as people's
panels ask for them, stopped, culled by one timed pass of jupyterhub-idle-culler, and the hub's own REST API timed
all along, so a run can say how long starts take, what the spawn limit refuses and how long the hub stalls.

Everything goes through the hub's REST API with the harness's admin or culler credential, as a team's operator or
the hub's own culler service would; every wait is bounded.
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
from hub_harness import Hub

# How often the hub's API root is timed, and how often its list of servers is read while pods start or stop (each
# read costs the hub a page of users, so not more often than the figures need).
PROBE_EVERY = 0.2
WATCH_EVERY = 1.0
# Bounds of a start of every pod and of their stops: far past any start the recipe's own timeouts let through.
START_BOUND = 900.0
STOP_BOUND = 300.0
# The longest a 429 is waited out: the hub suggests 30 to 60 s (spawn_throttle_retry_range), the panel redials
# within 30 s.
RETRY_AFTER_MAX = 30.0


class HubProbe:
    """The hub's REST API root asked every :data:`PROBE_EVERY` seconds from a thread, each answer timed. The hub
    answers it at once unless its one event loop is busy (or gets no CPU), so a slow answer is a stall every
    person's request shares: a sign-in, a start, a token checked at a handshake, an activity report."""

    def __init__(self, api: str) -> None:
        self.api = api
        self.samples: list[tuple[float, float]] = []  # (when asked, seconds to the answer)
        self.failures = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with httpx.Client(timeout=START_BOUND, trust_env=False) as client:
            while not self._stop.wait(PROBE_EVERY):
                asked = time.perf_counter()
                try:
                    client.get(f"{self.api}/").raise_for_status()
                except httpx.HTTPError:
                    self.failures += 1
                self.samples.append((asked, time.perf_counter() - asked))

    def __enter__(self) -> HubProbe:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(START_BOUND)

    def between(self, start: float, end: float) -> list[float]:
        """The seconds each answer asked for between ``start`` and ``end`` took."""
        return [took for asked, took in self.samples if start <= asked <= end]


def servers(hub: Hub) -> dict[str, dict[str, Any]]:
    """Every user's default server the hub counts as active (ready or pending), by user, page by page."""
    found: dict[str, dict[str, Any]] = {}
    offset = 0
    while True:
        page = hub.request("GET", "/users", params={"state": "active", "limit": 200, "offset": offset})
        page.raise_for_status()
        users = page.json()
        found |= {u["name"]: u["servers"][""] for u in users if "" in (u.get("servers") or {})}
        if len(users) < 200:
            return found
        offset += 200


def _retry_after(response: httpx.Response) -> float:
    with contextlib.suppress(ValueError):
        return min(RETRY_AFTER_MAX, max(0.5, float(response.headers.get("Retry-After", ""))))
    return 5.0


def start_pods(hub: Hub, people: Sequence[str], stagger: float) -> dict[str, Any]:
    """Each person's pod asked for ``stagger`` seconds after the last (0: all at once), as a person's panel asks:
    again after the hub's Retry-After (at most :data:`RETRY_AFTER_MAX`) when it answers 429, and again when a start
    failed; until every one is up. Returns when all were up, each pod's own start and what the hub refused."""
    refusals: collections.Counter[str] = collections.Counter()
    asked: dict[str, float] = {}
    accepted: set[str] = set()
    ready: dict[str, float] = {}
    began = time.perf_counter()
    deadline = began + START_BOUND

    def ask(name: str) -> None:
        asked.setdefault(name, time.perf_counter())
        while time.perf_counter() < deadline:
            try:
                answer = hub.request("POST", f"/users/{name}/server")
            except httpx.HTTPError as exc:
                refusals[f"start request: {type(exc).__name__}"] += 1
                continue
            if answer.status_code in (201, 202, 400):  # started, starting, already starting
                accepted.add(name)
                return
            refusals[f"start answered {answer.status_code}"] += 1
            if answer.status_code != 429:
                return
            time.sleep(_retry_after(answer))

    with ThreadPoolExecutor(max_workers=len(people) + 1) as pool:
        def watch() -> None:
            while len(ready) < len(people) and time.perf_counter() < deadline:
                active = servers(hub)
                now = time.perf_counter()
                for name, server in active.items():
                    if server.get("ready"):
                        ready.setdefault(name, now)
                for name in accepted - set(active) - set(ready):  # its start failed: the panel asks again
                    accepted.discard(name)
                    refusals["spawn failed"] += 1
                    pool.submit(ask, name)
                time.sleep(WATCH_EVERY)

        watching = pool.submit(watch)
        for number, name in enumerate(people):
            time.sleep(max(0.0, began + number * stagger - time.perf_counter()))
            pool.submit(ask, name)
        watching.result(START_BOUND)
    ended = time.perf_counter()
    starts = sorted(ready[n] - asked[n] for n in people if n in ready)
    return {
        "stagger_s": stagger, "pods": len(people), "up": len(ready),
        "all_up_s": round(max(ready.values(), default=ended) - began, 1),
        "pod_start_s": {"p50": round(starts[len(starts) // 2], 1), "max": round(starts[-1], 1)} if starts else {},
        "refused": dict(refusals),
    }


def wait_stopped(hub: Hub, began: float) -> dict[str, Any]:
    """Until the hub counts no server active (bounded by :data:`STOP_BOUND` from ``began``): how long from
    ``began``, and how many were left."""
    while servers(hub) and time.perf_counter() - began < STOP_BOUND:
        time.sleep(WATCH_EVERY)
    return {"all_stopped_s": round(time.perf_counter() - began, 1), "left_running": len(servers(hub))}


def stop_pods(hub: Hub, people: Sequence[str]) -> dict[str, Any]:
    """Every pod stopped through the hub at once (16 requests in flight), as an admin's script would."""
    began = time.perf_counter()
    with ThreadPoolExecutor(max_workers=16) as pool:
        answers = list(pool.map(lambda name: hub.request("DELETE", f"/users/{name}/server").status_code, people))
    return wait_stopped(hub, began) | {"answers": dict(collections.Counter(str(a) for a in answers))}


# One pass of the culler, as its service runs one every --cull-every, timed in a process of its own.
_ONE_PASS = """
import asyncio, json, logging, os, sys, time
from jupyterhub_idle_culler import cull_idle
logging.basicConfig(level=logging.INFO)
began = time.perf_counter()
asyncio.run(cull_idle(url=sys.argv[1], api_token=os.environ["JUPYTERHUB_API_TOKEN"], inactive_limit=int(sys.argv[2]),
                      logger=logging.getLogger("culler")))
print(json.dumps({"pass_s": round(time.perf_counter() - began, 2)}))
"""


def cull_pass(hub: Hub, inactive_limit: int) -> dict[str, Any]:
    """One pass of jupyterhub-idle-culler over every user with the hub's culler credential, stopping what has been
    idle ``inactive_limit`` seconds: how long the pass took and how many it culled."""
    env = {**os.environ, "JUPYTERHUB_API_TOKEN": hub.culler_token}
    done = subprocess.run([sys.executable, "-c", _ONE_PASS, hub.api, str(inactive_limit)], env=env,
                          capture_output=True, text=True, timeout=STOP_BOUND, check=True)
    timed: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return timed | {"culled": done.stderr.count("Culling server")}


def log_levels(hub: Hub) -> dict[str, Any]:
    """Error and warning lines of the hub, its proxy and the pods, and the commonest of each."""
    levels: dict[str, collections.Counter[str]] = {"errors": collections.Counter(), "warnings": collections.Counter()}
    for line in hub.logs().splitlines():
        kind = "errors" if line.startswith(("[E ", "[C ")) or " ERROR " in line else \
            "warnings" if line.startswith("[W ") or " WARNING " in line else None
        if kind is not None:
            levels[kind][line.split("] ", 1)[-1][:100]] += 1
    return {kind: {"lines": sum(c.values()), "commonest": c.most_common(3)} for kind, c in levels.items()}
