"""Issue 36, item 4: a team's load on one JupyterHub on this machine, measured.

``--people`` people (100 by default, ``team001``...) on one hub (tests/hub_harness.py: the one-machine recipe, its
configurable-http-proxy in front; each person's pod an ``openab run --jupyterhub`` process with the built-in
agent, reporting activity and caching tokens as shipped unless ``--activity-interval`` says otherwise). In order:

1. **starts** (tests/hub_fleet.py): every pod started at once, all stopped again, then every pod started
   ``--stagger`` seconds apart. For each: the time until all are up, each pod's own start, the hub's spawn-limit
   refusals (429) and failed spawns, and the hub's own REST API timed every 0.2 s meanwhile: its worst answer is
   how long the hub stalled. Then each person's URL is asked through the proxy which pod answers it.
2. **idle**: each pod's memory (PSS and RSS of its process tree, from /proc), no socket open; one pass of
   jupyterhub-idle-culler over every user with nothing to cull.
3. **load**: each person opens two sockets to their pod, one through the hub's proxy and one at the pod's own
   address (as the proxy routes it), a session on each with a scripted browser (tests/fake_extension.py, the real
   ACP and MCP-over-ACP handshake), and a first turn on each (it starts the session's agent). Then ``--quiet``
   seconds with everyone connected and no turn (what open sockets and live agents cost), then one phase of
   ``--duration`` seconds per ``--think`` value, a person's mean pause between turns (0: each turn as soon as the
   last ended, the machine's capacity), each person's turns on the two paths in alternating order (proxy then
   direct, direct then proxy, ...). A turn, ``open URL; read; click Sign in``, is four browser tool calls. Per
   phase and path: each tool call (from the agent's ``tool_call`` to its completion, as the panel sees them) and
   each turn; calls/s; each busy pod's memory; the CPU the hub, the proxy, the pods' gateways, their agents and
   this process (the team's browsers) took, and how long runnable tasks waited for a CPU; errors by kind (a
   refused socket, a turn's error, a step that ran in or answered to another session).
4. **the culler**: a pass with nothing to cull right after the load, then, once the sockets have been closed a
   while, one that stops every pod, and the time until all are stopped.

Run: ``python bench/bench_hub_team.py [--quick] [--people N] [--stagger S] [--duration S] [--think S ...]
[--quiet S] [--activity-interval S] [--no-all-at-once]``; the figures are read in docs/scaling.md.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import os
import random
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx
import hub_harness
import process_tree
import websockets
from fake_extension import FakeExtension, RemoteError, connect_extension
from hub_fleet import HubProbe, cull_pass, log_levels, start_pods, stop_pods, wait_stopped
from hub_harness import Hub, available, running_hub
from test_runtime_pod import BROWSER_SERVER, FakeBrowser

from bench.common import arguments, plot_latencies, summary, write_result
from openab_browser.core.settings import Settings

NAME = "hub_team"
PATHS = ("proxy", "direct")
# Four browser tool calls: navigate, snapshot, and the snapshot and click of the click.
STEPS = "open {url}; read; click Sign in"
CALLS_PER_TURN = 4
TURN_TIMEOUT = 120.0
REQUEST_TIMEOUT = 60.0
# Seconds with every socket closed before the culler's second pass, which culls what was idle for half of it.
IDLE_BEFORE_CULL = 12
# A culler's limit no pod of the run reaches: its pass reads every user and stops nobody.
NEVER_IDLE = 24 * 3600
# No person joins while the machine has less memory than this left: their two agents could bring the OOM killer.
MEMORY_FLOOR_MIB = 1536


# How often a shipped pod tells the hub it is in use while a socket is open, and how long it trusts the hub's
# answer about a token (Settings' defaults, which docker/jupyterhub/values.yaml keeps).
SHIPPED_ACTIVITY_INTERVAL = float(Settings.model_fields["hub_activity_interval"].default)
SHIPPED_AUTH_CACHE_SECS = int(Settings.model_fields["hub_auth_cache_secs"].default)


@dataclass(frozen=True)
class Plan:
    people: int = 100
    stagger: float = 1.0
    duration: float = 120.0
    thinks: tuple[float, ...] = (10.0, 0.0)  # one load phase per value: a person's mean pause between turns
    quiet: float = 30.0  # seconds everyone stays connected with no turn before the load phases
    all_at_once: bool = True  # also start every pod at once first, to compare with the staggered starts
    connecting: int = 8  # sockets opened (and first turns run) at once
    activity_interval: float = SHIPPED_ACTIVITY_INTERVAL


@contextlib.contextmanager
def pods_as_shipped(activity_interval: float) -> Iterator[None]:
    """The harness's pods report activity every second and re-ask the hub about a token every two, so its tests see
    a cull or a revocation within their bounds; a hundred such pods would send the hub a hundred reports a second,
    which no shipped pod does. For the run, its pods report as ``activity_interval`` says and cache a token's answer
    as a shipped pod does (the harness writes both into the hub's config when it starts)."""
    with mock.patch.object(hub_harness, "ACTIVITY_INTERVAL", activity_interval), \
            mock.patch.object(hub_harness, "AUTH_CACHE_SECS", SHIPPED_AUTH_CACHE_SECS):
        yield


def team(count: int) -> list[str]:
    return [f"team{n:03d}" for n in range(1, count + 1)]


def latency(samples: list[float]) -> dict[str, Any]:
    """The hub's answers in a window: their distribution and the slowest (with one answer or none, that one's
    wait is the stall)."""
    slowest = {"max_ms": round(max(samples, default=0.0) * 1000, 1)}
    return summary(samples) | slowest if len(samples) > 1 else {"n": len(samples)} | slowest


def timed_start(hub: Hub, people: Sequence[str], stagger: float, probe: HubProbe) -> dict[str, Any]:
    began = time.perf_counter()
    started = start_pods(hub, people, stagger)
    return started | {"hub_api_during": latency(probe.between(began, time.perf_counter()))}


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


class CpuWindow:
    """The CPU each part and the machine used from this window's start to :meth:`end`, and the hub's latency."""

    def __init__(self, pods: dict[str, Pod], probe: HubProbe) -> None:
        self.pods, self.probe = pods, probe
        self.started = time.perf_counter()
        self.cpu, self.machine = cpu_by_part(pods), process_tree.MachineCpu.now()
        self.used: dict[str, float] = {}

    def end(self) -> dict[str, Any]:
        """The window's figures; ``self.used``: each part's CPU seconds, unrounded, for what is derived from them."""
        ended = time.perf_counter()
        cpu = cpu_by_part(self.pods)
        self.used = {part: cpu[part] - self.cpu.get(part, 0.0) for part in cpu}
        return {"seconds": round(ended - self.started, 1), "cpu_s": {p: round(s, 2) for p, s in self.used.items()},
                "machine_cpu": process_tree.MachineCpu.now().since(self.machine, ended - self.started),
                "hub_api_during": latency(self.probe.between(self.started, ended))}


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


async def open_lane(ext: FakeExtension, person: str, path: str) -> Lane:
    inbox = ext.inbox = StampedInbox()
    await ext.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}}, timeout=REQUEST_TIMEOUT)
    browser = FakeBrowser(ext)
    session = await ext.request("session/new", {"cwd": "/home/agent", "mcpServers": [BROWSER_SERVER]},
                                timeout=REQUEST_TIMEOUT)
    return Lane(person, path, ext, browser, str(session["sessionId"]), inbox)


def error_kind(exc: BaseException) -> str:
    if isinstance(exc, websockets.InvalidStatus):
        return f"refused {exc.response.status_code}"
    return type(exc).__name__


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
            if think > 0:  # never past the phase's end: a long pause would stretch the phase and thin its rate
                await asyncio.sleep(min(random.expovariate(1 / think), max(0.0, deadline - time.perf_counter())))

    window = CpuWindow(pods, probe)
    deadline = window.started + duration
    running = [asyncio.ensure_future(person(i, lanes, deadline)) for i, lanes in enumerate(people.values())]
    await asyncio.sleep(duration / 2)
    busy = await asyncio.to_thread(pod_memory, pods)
    available, hub_rss = process_tree.available_mib(), hub_memory(pods)
    await asyncio.gather(*running)
    used = window.end()
    calls = sum(len(c) for c in tally.calls.values())
    return {
        "think_s": think, "tool_calls": calls, "calls_per_s": round(calls / used["seconds"], 1),
        "turns": sum(len(t) for t in tally.turns.values()),
        "tool_call": paths_compared(tally.calls), "turn": paths_compared(tally.turns),
        "slowest_turn": {"s": round(tally.slowest[0], 2), "who": tally.slowest[1]},
        "busy_memory": busy, "machine_memory_available_mib": round(available), "hub_and_proxy_rss_mib": hub_rss,
        **used, "cpu_ms_per_call": {part: round(s * 1000 / max(calls, 1), 2) for part, s in window.used.items()},
        "errors": dict(tally.errors),
        "_samples": {f"tool call, {p}, think {think:g} s": tally.calls[p] for p in PATHS},
    }


async def quiet_phase(pods: dict[str, Pod], connected: int, seconds: float, probe: HubProbe) -> dict[str, Any]:
    """Everyone connected and nobody prompting: what open sockets and live agents cost each second (pings,
    activity reports to the hub, timers), apart from any turn."""
    window = CpuWindow(pods, probe)
    await asyncio.sleep(seconds)
    used = window.end()
    per_pod = {part: round(s * 1000 / used["seconds"] / max(connected, 1), 3) for part, s in window.used.items()}
    return {**used, "cpu_ms_per_s_per_connected_pod": per_pod}


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
            stage, lanes = "", {}
            try:
                for path in PATHS:
                    stage = f"the {path} socket's handshake"
                    ext = await stack.enter_async_context(connect_extension(urls[path], tokens[pod.name]))
                    stage = f"the {path} socket's initialize and session/new"
                    lanes[path] = await open_lane(ext, pod.name, path)
                for lane in lanes.values():  # starts the session's agent: timed apart from the load
                    await turn(lane, 0, first, first=True)
            except (OSError, TimeoutError, websockets.WebSocketException, RemoteError) as exc:
                errors[f"not joined: {stage}: {error_kind(exc)}"] += 1
                return
        people[pod.name] = lanes

    async with contextlib.AsyncExitStack() as stack:
        began = time.perf_counter()
        await asyncio.gather(*(join(stack, pod) for pod in pods.values()))
        joined = time.perf_counter() - began
        quiet = await quiet_phase(pods, len(people), plan.quiet, probe)
        phases = [await load_phase(people, pods, think, plan.duration, probe) for think in plan.thinks]
    for phase in phases:
        errors.update(phase["errors"])
    return {
        "people_connected": len(people), "join_s": round(joined, 1),
        "first_turn": summary(first.first_turns) if len(first.first_turns) > 1 else {}, "connected_quiet": quiet,
        "phases": phases,
    }


def paths_compared(samples: dict[str, list[float]]) -> dict[str, Any]:
    """Each path's distribution and the proxy's p50 and p99 over the direct path's."""
    if any(len(samples[p]) < 2 for p in PATHS):
        return {p: {"n": len(samples[p])} for p in PATHS}
    stats = {p: summary(samples[p]) for p in PATHS}
    return stats | {"proxy_over_direct": {k: round(stats["proxy"][f"{k}_ms"] / stats["direct"][f"{k}_ms"], 3)
                                          for k in ("p50", "p99")}}


# -- the culler ---------------------------------------------------------------------------------------------------


def culler(hub: Hub, people: Sequence[str], closed: float) -> dict[str, Any]:
    """One pass with nothing to cull right after the load (the hub still busy with what it left), then one over
    pods idle since the sockets closed, and the time until the hub has stopped every pod it culled."""
    nothing = cull_pass(hub, NEVER_IDLE)
    time.sleep(max(0.0, closed + IDLE_BEFORE_CULL - time.perf_counter()))
    began = time.perf_counter()
    every = cull_pass(hub, IDLE_BEFORE_CULL // 2)
    return {"users": len(people), "nothing_to_cull": nothing, "cull_all": every} | wait_stopped(hub, began)


# -- the run ------------------------------------------------------------------------------------------------------


def measure(plan: Plan, folder: Path) -> dict[str, Any]:
    people = team(plan.people)
    errors: collections.Counter[str] = collections.Counter()
    result: dict[str, Any] = {"plan": asdict(plan)}
    with pods_as_shipped(plan.activity_interval), running_hub(folder, people=people) as hub, \
            HubProbe(hub.api) as probe:
        rest = time.perf_counter()
        time.sleep(2)
        result["hub_api_at_rest"] = latency(probe.between(rest, time.perf_counter()))
        starts: dict[str, Any] = {}
        if plan.all_at_once:
            starts["all_at_once"] = timed_start(hub, people, 0.0, probe)
            starts["all_at_once"]["stopping"] = stop_pods(hub, people)
        starts["staggered"] = timed_start(hub, people, plan.stagger, probe)
        result["starts"] = starts
        pods = find_pods(hub, people, errors)
        result["pod_start_cpu_s"] = round(sorted(process_tree.cpu_seconds(p.pid) for p in pods.values())[
            len(pods) // 2], 2)
        time.sleep(2)  # what the start left running settles
        result["idle_memory"] = pod_memory(pods)
        result["culler_pass_quiet"] = cull_pass(hub, NEVER_IDLE)
        tokens = {name: hub.token(name)[1] for name in people}
        result["load"] = asyncio.run(team_load(hub, pods, tokens, plan, probe, errors))
        closed = time.perf_counter()
        result["culler"] = culler(hub, people, closed)
        result["log"] = log_levels(hub)
    result["errors"] = dict(errors)
    return result


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    def more(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--people", type=int, help="people on the hub (default 100; 3 with --quick)")
        parser.add_argument("--stagger", type=float, default=Plan.stagger, help="seconds between two pods' starts")
        parser.add_argument("--duration", type=float, help="seconds of each load phase (default 120; 15 with --quick)")
        parser.add_argument("--think", type=float, nargs="+",
                            help="a person's mean pause between turns, in seconds (0: back to back); one load phase "
                            "of --duration per value (default 10 0; 0.5 with --quick)")
        parser.add_argument("--no-all-at-once", action="store_true", help="skip starting every pod at once first")
        parser.add_argument("--quiet", type=float, help="seconds connected with no turn (default 30; 5 with --quick)")
        parser.add_argument("--activity-interval", type=float, default=SHIPPED_ACTIVITY_INTERVAL,
                            help="seconds between a busy pod's activity reports to the hub (default: as shipped)")

    args = arguments(__doc__.splitlines()[0], argv, more)
    why = available()
    if why is not None:
        raise SystemExit(f"the hub cannot run here: {why}")
    plan = Plan(people=args.people or (3 if args.quick else Plan.people),
                duration=args.duration or (15.0 if args.quick else Plan.duration), stagger=args.stagger,
                thinks=tuple(args.think or ((0.5,) if args.quick else Plan.thinks)),
                quiet=args.quiet or (5.0 if args.quick else Plan.quiet), all_at_once=not args.no_all_at_once,
                activity_interval=args.activity_interval)
    with tempfile.TemporaryDirectory(prefix="openab-hub-team-") as folder:
        result = measure(plan, Path(folder) / "hub")
    samples = {name: values for phase in result["load"]["phases"] for name, values in phase.pop("_samples").items()}
    write_result(NAME, result, args.out)
    plot_latencies(NAME, samples, args.out, title=f"{plan.people} people on one hub: the hub's proxy vs direct")
    return result


if __name__ == "__main__":
    main()
