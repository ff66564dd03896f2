"""Issue 36, item 4: a team's load on one JupyterHub on this machine, measured.

``--people`` people (100 by default, ``team001``...) on one hub (tests/hub_harness.py: the one-machine recipe, its
configurable-http-proxy in front; each person's pod an ``openab run --jupyterhub`` process with the built-in
agent). In order:

1. **starts**: every pod started at once, all stopped again, then every pod started ``--stagger`` seconds apart.
   For each: the time until all are up, each pod's own start, the hub's spawn-limit refusals (429) and failed
   spawns, and the hub's own REST API timed every 0.2 s meanwhile: its worst answer is how long the hub's event
   loop stalled. Then each person's URL is asked through the proxy which pod answers it.
2. **idle memory**: each pod's process tree (PSS and RSS from /proc), no socket open.
3. **load**: each person opens two sockets to their pod, one through the hub's proxy and one at the pod's own
   address (as the proxy routes it), a session on each with a scripted browser (tests/fake_extension.py, the real
   ACP and MCP-over-ACP handshake), and prompts the built-in agent, the two paths in alternating order (proxy then
   direct, direct then proxy, ...): one phase of ``--duration`` seconds per ``--think`` value, a person's mean
   pause between turns (0: each turn as soon as the last ended, the machine's capacity). A turn, ``open URL; read;
   click Sign in``, is four browser tool calls. Per phase and path: each tool call (from the agent's
   ``tool_call`` to its completion, as the panel sees them) and each turn; calls/s; each busy pod's memory; the
   CPU the hub, the proxy, the pods' gateways, their agents and this process (the team's browsers) took, and how
   long runnable tasks waited for a CPU; errors by kind (a refused socket, a turn's error, a step that ran in or
   answered to another session).
4. **the culler**: one pass of jupyterhub-idle-culler with the hub's culler token over every user with nothing to
   cull, then, once the sockets have been closed a while, one that stops every pod, and the time until all are.

Run: ``python bench/bench_hub_team.py [--quick] [--people N] [--stagger S] [--duration S] [--think S ...]``; the
figures are read in docs/scaling.md.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx
import process_tree
import websockets
from fake_extension import FakeExtension, RemoteError, connect_extension
from hub_harness import Hub, available, running_hub
from test_runtime_pod import BROWSER_SERVER, FakeBrowser

from bench.common import arguments, plot_latencies, summary, write_result

NAME = "hub_team"
PATHS = ("proxy", "direct")
# Four browser tool calls: navigate, snapshot, and the snapshot and click of the click.
STEPS = "open {url}; read; click Sign in"
CALLS_PER_TURN = 4
TURN_TIMEOUT = 120.0
REQUEST_TIMEOUT = 60.0
PROBE_EVERY = 0.2
# How often the hub's list of servers is read while pods start or stop: each read costs the hub a page of users.
WATCH_EVERY = 1.0
# Bounds of a start phase and of the stops: far past any start the recipe's own timeouts let through.
START_BOUND = 900.0
STOP_BOUND = 300.0
# Seconds with every socket closed before the culler's second pass, which culls what was idle for half of it.
IDLE_BEFORE_CULL = 12
# No person joins while the machine has less memory than this left: their two agents could bring the OOM killer.
MEMORY_FLOOR_MIB = 1536


@dataclass(frozen=True)
class Plan:
    people: int = 100
    stagger: float = 0.5
    duration: float = 120.0
    thinks: tuple[float, ...] = (3.0, 0.0)  # one load phase per value: a person's mean pause between turns
    all_at_once: bool = True  # also start every pod at once first, to compare with the staggered starts
    connecting: int = 8  # sockets opened (and first turns run) at once


def team(count: int) -> list[str]:
    return [f"team{n:03d}" for n in range(1, count + 1)]


# -- the hub's own latency ----------------------------------------------------------------------------------------


class HubProbe:
    """The hub's REST API root asked every :data:`PROBE_EVERY` seconds from a thread, each answer timed: the hub
    answers it at once unless its event loop is busy, so a slow answer is a stall every person's request shares."""

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

    def between(self, start: float, end: float) -> dict[str, Any]:
        taken = [took for asked, took in self.samples if start <= asked <= end]
        if len(taken) < 2:
            return {"n": len(taken)}
        return {**summary(taken), "max_ms": round(max(taken) * 1000, 1)}


# -- starting and stopping every pod ------------------------------------------------------------------------------


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


def retry_after(response: httpx.Response) -> float:
    with contextlib.suppress(ValueError):
        return min(30.0, max(0.5, float(response.headers.get("Retry-After", ""))))
    return 5.0


def start_pods(hub: Hub, people: Sequence[str], stagger: float, probe: HubProbe) -> dict[str, Any]:
    """Each person's pod asked for ``stagger`` seconds after the last, as a person's panel asks (again after the
    hub's Retry-After when it answers 429, and again when a start failed), until every one is up."""
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
            time.sleep(retry_after(answer))

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
    starts = [ready[n] - asked[n] for n in people if n in ready]
    return {
        "stagger_s": stagger, "pods": len(people), "up": len(ready),
        "all_up_s": round(max(ready.values(), default=ended) - began, 1),
        "pod_start_s": {"p50": round(sorted(starts)[len(starts) // 2], 2), "max": round(max(starts), 2)} if starts
        else {},
        "refused": dict(refusals),
        "hub_api_during": probe.between(began, ended),
    }


def stop_pods(hub: Hub, people: Sequence[str]) -> dict[str, Any]:
    """Every pod stopped through the hub at once (16 requests in flight), and the time until none is left."""
    began = time.perf_counter()
    with ThreadPoolExecutor(max_workers=16) as pool:
        answers = list(pool.map(lambda name: hub.request("DELETE", f"/users/{name}/server").status_code, people))
    while servers(hub) and time.perf_counter() - began < STOP_BOUND:
        time.sleep(WATCH_EVERY)
    return {"all_stopped_s": round(time.perf_counter() - began, 1), "left": len(servers(hub)),
            "answers": dict(collections.Counter(str(a) for a in answers))}


@dataclass
class Pod:
    name: str
    pid: int
    address: str  # the pod's own http://127.0.0.1:port, where the hub's proxy sends the person's requests


def find_pods(hub: Hub, people: Sequence[str], errors: collections.Counter[str]) -> dict[str, Pod]:
    """Each person's pod (its process and address, from the hub's state and its proxy's routes), and whether the
    proxy sends the person's URL to that pod: each pod answers its prefix's root with its own socket's path."""
    pods: dict[str, Pod] = {}
    with httpx.Client(timeout=REQUEST_TIMEOUT, trust_env=False) as client:
        for name in people:
            model = hub.request("GET", f"/users/{name}").json()
            pod = pods[name] = Pod(name, int(model["servers"][""]["state"]["pid"]), hub.pod_address(name))
            hub.pids[name] = pod.pid
            answer = client.get(f"{hub.public}/user/{name}/")
            if answer.status_code != 200 or answer.json().get("acp") != f"/user/{name}/acp":
                errors["the proxy sent a person's URL to another pod"] += 1
    if len({pod.address for pod in pods.values()}) < len(pods):
        errors["two pods at one address"] += 1
    return pods


# -- memory and CPU -----------------------------------------------------------------------------------------------


def pod_memory(pods: dict[str, Pod]) -> dict[str, Any]:
    """Each pod's process tree: the whole (what the pod costs), its gateway alone, and each agent the gateway runs
    (the agent with its confinement launchers): the distribution over the pods."""
    kids = process_tree.children()
    trees, gateways, agents = [], [], []
    for pod in pods.values():
        tree = process_tree.descendants(pod.pid, kids)
        trees.append(process_tree.tree_memory(pod.pid, kids))
        gateway = process_tree.tree_memory(next((p for p in tree if "--jupyterhub" in process_tree.cmdline(p)),
                                                pod.pid), kids)
        gateways.append(gateway.root_pss)
        if gateway.children:
            agents.append((gateway.pss - gateway.root_pss) / gateway.children)

    def spread(values: list[float]) -> dict[str, float]:
        ordered = sorted(values)
        return {"median": round(ordered[len(ordered) // 2], 1), "min": round(ordered[0], 1),
                "max": round(ordered[-1], 1)} if ordered else {}

    return {"pods": len(trees), "processes_per_pod": spread([float(t.processes) for t in trees]),
            "pss_mib": spread([t.pss for t in trees]), "rss_mib": spread([t.rss for t in trees]),
            "gateway_pss_mib": spread(gateways), "per_agent_pss_mib": spread(agents)}


def parts(pods: dict[str, Pod]) -> dict[str, list[int]]:
    """Every process this run started, by part: the pods' gateways, their agents, the hub, its proxy, the culler,
    and this process (the team's scripted browsers)."""
    kids = process_tree.children()
    pod_trees = {pid for pod in pods.values() for pid in process_tree.descendants(pod.pid, kids)}
    found: dict[str, list[int]] = collections.defaultdict(list)
    for pid in process_tree.descendants(os.getpid(), kids):
        command = process_tree.cmdline(pid)
        if pid == os.getpid():
            part = "browsers (this process)"
        elif pid in pod_trees:
            part = "gateways" if "--jupyterhub" in command else "agents"
        elif "configurable-http-proxy" in command:
            part = "proxy"
        elif "idle_culler" in command:
            part = "culler"
        elif "jupyterhub" in command:
            part = "hub"
        else:
            part = "other"
        found[part].append(pid)
    return found


def cpu_by_part(pods: dict[str, Pod]) -> dict[str, float]:
    """CPU seconds so far, by part."""
    return {part: sum(process_tree.cpu_seconds(pid) for pid in pids) for part, pids in parts(pods).items()}


def hub_memory(pods: dict[str, Pod]) -> dict[str, float]:
    """What the hub and its proxy hold (RSS, MiB): they grow with the people, the pods do not share it."""
    found = parts(pods)
    return {part: round(sum(process_tree.rss_kib(pid) for pid in found[part]) / 1024, 1) for part in ("hub", "proxy")}


# -- the team's load ----------------------------------------------------------------------------------------------


class StampedInbox(asyncio.Queue[dict[str, Any]]):
    """A scripted extension's inbox that keeps when each message came off the socket, so a tool call is timed
    by its arrival, not by when a busy loop got round to reading it (``stamp``: the last message taken's)."""

    def __init__(self) -> None:
        super().__init__()
        self._stamps: collections.deque[float] = collections.deque()
        self.stamp = 0.0

    def put_nowait(self, item: dict[str, Any]) -> None:
        self._stamps.append(time.perf_counter())
        super().put_nowait(item)

    def get_nowait(self) -> dict[str, Any]:
        item = super().get_nowait()
        self.stamp = self._stamps.popleft()
        return item


@dataclass
class Lane:
    """One of a person's two ways to their pod, with its own socket, session and scripted browser."""

    person: str
    path: str
    ext: FakeExtension
    browser: FakeBrowser
    session_id: str
    inbox: StampedInbox


@dataclass
class Tally:
    calls: dict[str, list[float]] = field(default_factory=lambda: {p: [] for p in PATHS})
    turns: dict[str, list[float]] = field(default_factory=lambda: {p: [] for p in PATHS})
    first_turns: list[float] = field(default_factory=list)
    errors: collections.Counter[str] = field(default_factory=collections.Counter)
    slowest: tuple[float, str] = (0.0, "")


async def turn(lane: Lane, number: int, tally: Tally, *, first: bool = False) -> bool:
    """One prompt on ``lane``, its tool calls timed; False when the lane's socket is gone. Counts as an error
    anything a person would notice: a refused or failed turn, a call missing, and a step that ran in or answered
    to another session (the URL asked is in this session's browser and in the page its agent read back)."""
    url = f"https://{lane.person}.example/{lane.path}/{number}"
    while not lane.inbox.empty():  # what came between turns (keepalives) belongs to no turn
        lane.inbox.get_nowait()
    started = time.perf_counter()
    request = asyncio.ensure_future(lane.ext.request(
        "session/prompt", {"sessionId": lane.session_id, "prompt": [{"type": "text", "text": STEPS.format(url=url)}]},
        timeout=TURN_TIMEOUT))
    opened: dict[str, float] = {}
    took: list[float] = []
    echoed = False

    def take(message: dict[str, Any]) -> None:
        nonlocal echoed
        params = message.get("params") or {}
        if message.get("method") != "session/update" or params.get("sessionId") != lane.session_id:
            return
        update = params["update"]
        if update.get("sessionUpdate") == "tool_call":
            opened[update["toolCallId"]] = lane.inbox.stamp
        elif update.get("sessionUpdate") == "tool_call_update" and update.get("toolCallId") in opened:
            took.append(lane.inbox.stamp - opened.pop(update["toolCallId"]))
            if update.get("status") != "completed":
                tally.errors[f"tool call {update.get('status')}"] += 1
            echoed |= any(f"page {url}\n" in str(c.get("content", {}).get("text", ""))
                          for c in update.get("content") or [])

    try:
        while not request.done():
            reader = asyncio.ensure_future(lane.inbox.get())
            await asyncio.wait({request, reader}, return_when=asyncio.FIRST_COMPLETED)
            if reader.done():
                take(reader.result())
            else:
                reader.cancel()
        while not lane.inbox.empty():
            take(lane.inbox.get_nowait())
        result = request.result()
    except RemoteError as exc:
        tally.errors[f"turn refused: {exc.code} {exc.message}"[:160]] += 1
        return True
    except TimeoutError:
        tally.errors["turn timed out"] += 1
        return True
    except ConnectionError:
        tally.errors["socket closed"] += 1
        return False
    finally:
        lane.ext.notifications.clear()  # the fake's records of every frame: not needed, and they would grow
        lane.ext.server_requests.clear()
        lane.browser.calls.clear()
    seconds = time.perf_counter() - started
    if result != {"stopReason": "end_turn"}:
        tally.errors[f"turn ended {result}"] += 1
    elif lane.browser.url != url or not echoed:
        tally.errors["a step ran in or answered to another session"] += 1
    elif len(took) != CALLS_PER_TURN:
        tally.errors[f"a turn of {len(took)} tool calls"] += 1
    if first:
        tally.first_turns.append(seconds)
    else:
        tally.turns[lane.path] += [seconds]
        tally.calls[lane.path] += took
    if seconds > tally.slowest[0]:
        tally.slowest = (seconds, f"{lane.person} {lane.path}")
    return True


async def open_lane(stack: contextlib.AsyncExitStack, person: str, path: str, url: str, token: str) -> Lane:
    ext = await stack.enter_async_context(connect_extension(url, token))
    inbox = ext.inbox = StampedInbox()
    await ext.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}}, timeout=REQUEST_TIMEOUT)
    browser = FakeBrowser(ext)
    session = await ext.request("session/new", {"cwd": "/home/agent", "mcpServers": [BROWSER_SERVER]},
                                timeout=REQUEST_TIMEOUT)
    return Lane(person, path, ext, browser, str(session["sessionId"]), inbox)


def error_kind(exc: BaseException) -> str:
    if isinstance(exc, websockets.InvalidStatus):
        return f"socket refused: {exc.response.status_code}"
    return f"socket failed: {type(exc).__name__}"


async def load_phase(people: dict[str, dict[str, Lane]], pods: dict[str, Pod], think: float, duration: float,
                     probe: HubProbe) -> dict[str, Any]:
    """Every person's turns for ``duration`` seconds, ``think`` seconds apart on average (exponentially spread, so
    the people do not keep step), each round of a person one turn on each path in alternating order."""
    tally = Tally()

    async def person(index: int, lanes: dict[str, Lane], deadline: float) -> None:
        number = 1
        while time.perf_counter() < deadline:
            for path in PATHS if (number + index) % 2 else PATHS[::-1]:
                if not await turn(lanes[path], number, tally):
                    return
            number += 1
            if think > 0:
                await asyncio.sleep(random.expovariate(1 / think))

    cpu_before, machine_before = cpu_by_part(pods), process_tree.MachineCpu.now()
    started = time.perf_counter()
    deadline = started + duration
    running = [asyncio.ensure_future(person(i, lanes, deadline)) for i, lanes in enumerate(people.values())]
    await asyncio.sleep(duration / 2)
    busy = await asyncio.to_thread(pod_memory, pods)
    available, hub_rss = process_tree.available_mib(), hub_memory(pods)
    await asyncio.gather(*running)
    elapsed = time.perf_counter() - started
    cpu_after, machine_after = cpu_by_part(pods), process_tree.MachineCpu.now()
    calls = sum(len(c) for c in tally.calls.values())
    cpu = {part: round(cpu_after[part] - cpu_before.get(part, 0.0), 1) for part in cpu_after}
    return {
        "think_s": think, "seconds": round(elapsed, 1), "tool_calls": calls, "calls_per_s": round(calls / elapsed, 1),
        "turns": sum(len(t) for t in tally.turns.values()),
        "tool_call": paths_compared(tally.calls), "turn": paths_compared(tally.turns),
        "slowest_turn": {"s": round(tally.slowest[0], 2), "who": tally.slowest[1]},
        "busy_memory": busy, "machine_memory_available_mib": round(available),
        "hub_and_proxy_rss_mib": hub_rss,
        "cpu_s": cpu, "cpu_ms_per_call": {part: round(s * 1000 / max(calls, 1), 2) for part, s in cpu.items()},
        "machine_cpu": machine_after.since(machine_before, elapsed), "hub_api_during": probe.between(started, deadline),
        "errors": dict(tally.errors),
        "_samples": {f"tool call, {p}, think {think:g} s": tally.calls[p] for p in PATHS},
    }


async def team_load(hub: Hub, pods: dict[str, Pod], tokens: dict[str, str], plan: Plan, probe: HubProbe,
                    errors: collections.Counter[str]) -> dict[str, Any]:
    """Each person joins (two sockets, a session and its agent's first turn on each), then one load phase per
    ``plan.thinks``."""
    first = Tally(errors=errors)
    people: dict[str, dict[str, Lane]] = {}
    gate = asyncio.Semaphore(plan.connecting)

    async def join(stack: contextlib.AsyncExitStack, pod: Pod) -> None:
        urls = {"proxy": hub.acp_url(pod.name), "direct": pod.address.replace("http", "ws", 1)
                + urlsplit(hub.acp_url(pod.name)).path}
        async with gate:
            if process_tree.available_mib() < MEMORY_FLOOR_MIB:  # two more agents would push the machine to OOM
                errors["not joined: the machine's memory ran low"] += 1
                return
            try:
                lanes = {path: await open_lane(stack, pod.name, path, urls[path], tokens[pod.name]) for path in PATHS}
                for lane in lanes.values():  # starts the session's agent: timed apart from the load
                    await turn(lane, 0, first, first=True)
            except (OSError, TimeoutError, websockets.WebSocketException, RemoteError) as exc:
                errors[error_kind(exc)] += 1
                return
        people[pod.name] = lanes

    async with contextlib.AsyncExitStack() as stack:
        began = time.perf_counter()
        await asyncio.gather(*(join(stack, pod) for pod in pods.values()))
        joined = time.perf_counter() - began
        phases = [await load_phase(people, pods, think, plan.duration, probe) for think in plan.thinks]
    for phase in phases:
        errors.update(phase["errors"])
    return {
        "people_connected": len(people), "join_s": round(joined, 1),
        "first_turn": summary(first.first_turns) if len(first.first_turns) > 1 else {}, "phases": phases,
    }


def paths_compared(samples: dict[str, list[float]]) -> dict[str, Any]:
    """Each path's distribution and the proxy's p50 and p99 over the direct path's."""
    if any(len(samples[p]) < 2 for p in PATHS):
        return {p: {"n": len(samples[p])} for p in PATHS}
    stats = {p: summary(samples[p]) for p in PATHS}
    return stats | {"proxy_over_direct": {k: round(stats["proxy"][f"{k}_ms"] / stats["direct"][f"{k}_ms"], 3)
                                          for k in ("p50", "p99")}}


# -- the culler ---------------------------------------------------------------------------------------------------

# One pass of the culler, as its service runs each --cull-every, timed in its own process.
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
    env = {**os.environ, "JUPYTERHUB_API_TOKEN": hub.culler_token}
    done = subprocess.run([sys.executable, "-c", _ONE_PASS, hub.api, str(inactive_limit)], env=env,
                          capture_output=True, text=True, timeout=STOP_BOUND, check=True)
    timed: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return timed | {"culled": done.stderr.count("Culling server")}


def culler(hub: Hub, people: Sequence[str], closed: float) -> dict[str, Any]:
    """One pass with nothing to cull (every pod active within the day), then one over pods idle since the sockets
    closed, and the time until the hub has stopped every pod it culled."""
    nothing = cull_pass(hub, 24 * 3600)
    time.sleep(max(0.0, closed + IDLE_BEFORE_CULL - time.perf_counter()))
    began = time.perf_counter()
    every = cull_pass(hub, IDLE_BEFORE_CULL // 2)
    while servers(hub) and time.perf_counter() - began < STOP_BOUND:
        time.sleep(WATCH_EVERY)
    return {"users": len(people), "nothing_to_cull": nothing, "cull_all": every,
            "all_stopped_s": round(time.perf_counter() - began, 1), "left_running": len(servers(hub))}


# -- the run ------------------------------------------------------------------------------------------------------


def hub_log(hub: Hub) -> dict[str, Any]:
    """Error and warning lines of the hub, its proxy and the pods, and the commonest of each."""
    levels: dict[str, collections.Counter[str]] = {"errors": collections.Counter(), "warnings": collections.Counter()}
    for line in hub.logs().splitlines():
        kind = "errors" if line.startswith(("[E ", "[C ")) or " ERROR " in line else \
            "warnings" if line.startswith("[W ") or " WARNING " in line else None
        if kind is not None:
            levels[kind][line.split("] ", 1)[-1][:100]] += 1
    return {kind: {"lines": sum(c.values()), "commonest": c.most_common(3)} for kind, c in levels.items()}


def measure(plan: Plan, folder: Path) -> dict[str, Any]:
    people = team(plan.people)
    errors: collections.Counter[str] = collections.Counter()
    result: dict[str, Any] = {"plan": asdict(plan)}
    with running_hub(folder, people=people) as hub, HubProbe(hub.api) as probe:
        rest = time.perf_counter()
        time.sleep(2)
        result["hub_api_at_rest"] = probe.between(rest, time.perf_counter())
        starts: dict[str, Any] = {}
        if plan.all_at_once:
            starts["all_at_once"] = start_pods(hub, people, 0.0, probe)
            starts["all_at_once"]["stopping"] = stop_pods(hub, people)
        starts["staggered"] = start_pods(hub, people, plan.stagger, probe)
        result["starts"] = starts
        pods = find_pods(hub, people, errors)
        result["pod_start_cpu_s"] = round(sorted(process_tree.cpu_seconds(p.pid) for p in pods.values())[
            len(pods) // 2], 2)
        time.sleep(2)  # what the start left running settles
        result["idle_memory"] = pod_memory(pods)
        tokens = {name: hub.token(name)[1] for name in people}
        result["load"] = asyncio.run(team_load(hub, pods, tokens, plan, probe, errors))
        closed = time.perf_counter()
        result["culler"] = culler(hub, people, closed)
        result["log"] = hub_log(hub)
    result["errors"] = dict(errors)
    return result


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    def more(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--people", type=int, help="people on the hub (default 100; 3 with --quick)")
        parser.add_argument("--stagger", type=float, default=Plan.stagger, help="seconds between two pods' starts")
        parser.add_argument("--duration", type=float, help="seconds of each load phase (default 120; 15 with --quick)")
        parser.add_argument("--think", type=float, nargs="+",
                            help="a person's mean pause between turns, in seconds (0: back to back); one load phase "
                            "of --duration per value (default 3 0; 0.5 with --quick)")
        parser.add_argument("--no-all-at-once", action="store_true", help="skip starting every pod at once first")

    args = arguments(__doc__.splitlines()[0], argv, more)
    why = available()
    if why is not None:
        raise SystemExit(f"the hub cannot run here: {why}")
    plan = Plan(people=args.people or (3 if args.quick else Plan.people),
                duration=args.duration or (15.0 if args.quick else Plan.duration), stagger=args.stagger,
                thinks=tuple(args.think or ((0.5,) if args.quick else Plan.thinks)),
                all_at_once=not args.no_all_at_once)
    with tempfile.TemporaryDirectory(prefix="openab-hub-team-") as folder:
        result = measure(plan, Path(folder) / "hub")
    samples = {name: values for phase in result["load"]["phases"] for name, values in phase.pop("_samples").items()}
    write_result(NAME, result, args.out)
    plot_latencies(NAME, samples, args.out, title=f"{plan.people} people on one hub: the hub's proxy vs direct")
    return result


if __name__ == "__main__":
    main()
