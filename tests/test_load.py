"""Load: many sessions, each with its own extension socket, proxy endpoint and official `mcp` client, calling
their browsers at once. Every answer must come back to the call that asked for it (each call's nonce is echoed
with the session that ran it), none may be lost, memory must stop growing once warm, and one session whose
browser never answers must not slow the others down.

The CI-sized variants always run; the issue's sizes (200 sessions x 500 calls) are ``@pytest.mark.long``
(OPENAB_LONG=1). Both print their figures.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import gc
import logging
import os
import statistics
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from fake_extension import FakeExtension, connect_extension, text_result
from gateway_harness import RunningGateway, run_gateway
from mcp import Client
from test_proxy import endpoint, first_text, mcp_client
from waits import eventually

from openab_browser.core.mcp.proxy import BrowserProxy

pytestmark = pytest.mark.anyio

BROWSER = {"type": "acp", "name": "browser", "serverId": "browser-1"}
LONG = bool(os.environ.get("OPENAB_LONG"))


def settled() -> tuple[int, int]:
    """Python's live heap blocks and this process's resident set (the gateway runs in it), after a full
    collection and with freed heap pages handed back to the kernel. The blocks are what a leak grows; the
    resident set also holds the allocator's free space, which 200 sessions' peaks fragment, so it is reported,
    not judged alone."""
    gc.collect()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)  # glibc; elsewhere the resident set is read as it is
    return sys.getallocatedblocks(), rss_bytes()


def rss_bytes() -> int:
    """This process's resident set, as the kernel counts it."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS in /proc/self/status")


def percentile(samples: list[float], pct: int) -> float:
    return statistics.quantiles(samples, n=100, method="inclusive")[pct - 1]


@dataclass
class Tab:
    """One session's browser: echoes each call's nonce with the session it serves, and counts what it ran.
    A stuck tab runs nothing: its calls wait until ``unstick`` (never, while it is stuck)."""

    session_id: str = ""
    # Runs per call, indexed by the call's number: a byte a call, so the test's own record does not pass for
    # the gateway's memory growth (a Counter of nonces cost ~110 bytes a call).
    ran: bytearray = field(default_factory=bytearray)
    stuck: bool = False
    unstick: asyncio.Event = field(default_factory=asyncio.Event)
    waiting: int = 0

    def attach(self, ext: FakeExtension) -> None:
        ext.add_tool("browser_echo", self._echo, {"type": "object", "properties": {"nonce": {"type": "string"}}})

    async def _echo(self, arguments: dict[str, Any]) -> dict[str, Any]:
        if self.stuck:
            self.waiting += 1
            try:
                await self.unstick.wait()
            finally:
                self.waiting -= 1
        nonce = str(arguments["nonce"])
        number = int(nonce.split("-", 1)[0])
        if number >= len(self.ran):
            self.ran.extend(bytes(number + 1 - len(self.ran)))
        self.ran[number] = min(255, self.ran[number] + 1)
        return text_result(f"{self.session_id} {nonce}")


@dataclass
class Lane:
    """A session end to end: its tab, its extension socket and the agent's MCP client on its proxy endpoint."""

    tab: Tab
    ext: FakeExtension
    client: Client
    sent: int = 0


@contextlib.asynccontextmanager
async def lanes(gateway: RunningGateway, count: int, stack: contextlib.AsyncExitStack) -> AsyncIterator[list[Lane]]:
    proxy = gateway.pod.browser
    assert isinstance(proxy, BrowserProxy)
    made: list[Lane] = []
    for _ in range(count):
        tab = Tab()
        ext = await stack.enter_async_context(connect_extension(gateway.ws_url, gateway.token))
        tab.attach(ext)
        await ext.initialize()
        tab.session_id = await ext.new_session([BROWSER])
        await gateway.pod.tunnels.wait_attached(tab.session_id, timeout=10)
        url, token = await endpoint(gateway, proxy, tab.session_id)
        made.append(Lane(tab, ext, await stack.enter_async_context(mcp_client(url, token))))
    yield made


async def echo(lane: Lane) -> float:
    """One call; returns its duration. Fails on a misrouted or malformed answer."""
    nonce = f"{lane.sent}-{uuid.uuid4().hex[:12]}"
    lane.sent += 1
    started = time.perf_counter()
    async with asyncio.timeout(60):
        result = await lane.client.call_tool("browser_echo", {"nonce": nonce})
    took = time.perf_counter() - started
    lane.ext.server_requests.clear()  # the fake's own record of every frame: not the gateway's memory
    assert not result.is_error, first_text(result)
    assert first_text(result) == f"{lane.tab.session_id} {nonce}", "an answer reached the wrong call"
    return took


class ErrorsLogged(logging.Handler):
    """Counts ERROR records of the gateway, uvicorn and asyncio: a load that ends with a traceback in the log,
    even one that lost no call, is a failure an operator would see."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.count = 0
        # uvicorn's loggers do not propagate to the root, and each uvicorn.Config re-applies its logging
        # configuration, dropping handlers found there: ``watch`` (again) once the servers are configured.
        self.loggers = [logging.getLogger(), logging.getLogger("uvicorn")]

    def emit(self, record: logging.LogRecord) -> None:
        self.count += 1

    def watch(self) -> None:
        for logger in self.loggers:
            logger.addHandler(self)  # a no-op where it is already there

    def close(self) -> None:
        for logger in self.loggers:
            logger.removeHandler(self)
        super().close()


async def interleaved(sessions: int, calls: int, *, in_flight: int = 2) -> dict[str, Any]:
    """``calls`` per session, ``in_flight`` at a time per session, all sessions at once, through to the
    gateway's shutdown."""
    errors = ErrorsLogged()
    try:
        with quiet_clients():
            figures = await _interleaved(sessions, calls, in_flight, errors)
    finally:
        errors.close()
    return {**figures, "errors_logged": errors.count}


# The test's own clients log a line or more per call (httpx at INFO), which pytest keeps: they would pass for
# the gateway's memory growth.
CLIENT_LOGGERS = ("httpx", "httpx2", "httpcore", "httpcore2", "mcp.client", "websockets.client")


@contextlib.contextmanager
def quiet_clients() -> Iterator[None]:
    loggers = [logging.getLogger(name) for name in CLIENT_LOGGERS]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


def forget_notifications(all_lanes: list[Lane]) -> None:
    """The test's extensions keep every notification the pod sent (the journal tells the panel of each step): in
    this process they would pass for the gateway's memory growth."""
    for lane in all_lanes:
        lane.ext.notifications.clear()
        while not lane.ext.inbox.empty():
            lane.ext.inbox.get_nowait()


def sessions_left(gateway: RunningGateway) -> int:
    """Sessions the pod still held once the gateway stopped: a shutdown cut short by its deadline leaves some
    (their agents and endpoints) behind."""
    return len(gateway.pod.sessions.all())


async def _interleaved(sessions: int, calls: int, in_flight: int, errors: ErrorsLogged) -> dict[str, Any]:
    # The action journal keeps each state-changing step and its outcome for its window (15 s, by design, at most
    # 256 steps a session: tests/test_journal.py); at 0 it keeps none past its end, so what grows here is a leak.
    async with run_gateway(journal_window=0) as gateway, contextlib.AsyncExitStack() as stack, \
            lanes(gateway, sessions, stack) as all_lanes:
        errors.watch()
        warm = max(1, calls // 10)

        async def run(lane: Lane, count: int) -> None:
            async def worker(share: int) -> None:
                for _ in range(share):
                    await echo(lane)

            shares = [count // in_flight + (1 if n < count % in_flight else 0) for n in range(in_flight)]
            await asyncio.gather(*(worker(share) for share in shares))

        await asyncio.gather(*(run(lane, warm) for lane in all_lanes))
        forget_notifications(all_lanes)
        warm_blocks, warm_rss = settled()
        started = time.perf_counter()
        await asyncio.gather(*(run(lane, calls - warm) for lane in all_lanes))
        elapsed = time.perf_counter() - started
        forget_notifications(all_lanes)
        end_blocks, end_rss = settled()
        ran = sum(sum(lane.tab.ran) for lane in all_lanes)
        twice = sum(n > 1 for lane in all_lanes for n in lane.tab.ran)
        running = gateway.pod.tunnels.calls_in_flight
    return {
        "sessions": sessions, "calls": sessions * calls, "ran": ran, "ran_twice": twice, "left_in_flight": running,
        "calls_per_s": round(sessions * (calls - warm) / elapsed), "rss_warm_mib": round(warm_rss / 2**20, 1),
        "rss_growth_kib_per_session": round((end_rss - warm_rss) / 1024 / sessions, 1),
        "heap_blocks_growth_per_session": round((end_blocks - warm_blocks) / sessions, 1),
        "sessions_left_after_shutdown": sessions_left(gateway),
    }


def check_interleaved(figures: dict[str, Any], growth_kib_per_session: float) -> None:
    print("load:", figures)
    # Every answer was checked against its call in echo(); here: none lost, none run twice, none left behind.
    assert figures["ran"] == figures["calls"] and figures["ran_twice"] == 0 and figures["left_in_flight"] == 0
    assert figures["errors_logged"] == 0 and figures["sessions_left_after_shutdown"] == 0, figures
    # What a leak grows is live objects; a few blocks a session is the warm caches of the clients in this process.
    assert figures["heap_blocks_growth_per_session"] < 100, figures
    assert figures["rss_growth_kib_per_session"] < growth_kib_per_session, figures


async def test_20_sessions_x_50_interleaved_calls_none_misrouted_none_lost_memory_flat() -> None:
    # The warm-up already made every listener, client and tunnel: what grows after it is per call, i.e. a leak.
    check_interleaved(await interleaved(20, 50), growth_kib_per_session=512)


async def test_a_gateway_stopping_with_200_sessions_ends_every_one() -> None:
    # One session's endpoint takes a tenth of a second to stop; one after another, 200 overran the deadline
    # and left 104 sessions' agents and endpoints behind.
    figures = await interleaved(200, 2, in_flight=1)
    print("stop with 200 sessions:", figures)
    assert figures["ran"] == figures["calls"] and figures["errors_logged"] == 0, figures
    assert figures["sessions_left_after_shutdown"] == 0, figures


@pytest.mark.parametrize("sessions, calls", [(200, 500)])
@pytest.mark.long
@pytest.mark.skipif(not LONG, reason="the full-size run: OPENAB_LONG=1")
async def test_200_sessions_x_500_interleaved_calls(sessions: int, calls: int) -> None:
    check_interleaved(await interleaved(sessions, calls), growth_kib_per_session=64)


# -- a stuck extension ---------------------------------------------------------------------------------------


async def stuck_neighbour(sessions: int, rounds: int, calls_per_round: int, stuck_calls: int) -> dict[str, Any]:
    """The other sessions' latencies, in alternating rounds with and without one session's browser stuck on
    ``stuck_calls`` unanswered calls (released between rounds), so both see the same machine at the same time."""
    async with run_gateway() as gateway, contextlib.AsyncExitStack() as stack, \
            lanes(gateway, sessions + 1, stack) as all_lanes:
        stuck, others = all_lanes[0], all_lanes[1:]
        stuck.tab.stuck = True
        samples: dict[bool, list[float]] = {False: [], True: []}
        cpu: dict[bool, float] = {False: 0.0, True: 0.0}

        async def round_of(with_stuck: bool) -> None:
            pending: list[asyncio.Future[float]] = []
            if with_stuck:
                stuck.tab.unstick = asyncio.Event()
                pending = [asyncio.ensure_future(echo(stuck)) for _ in range(stuck_calls)]
                await eventually(lambda: stuck.tab.waiting >= stuck_calls, 30, interval=0.01,
                                 what="the calls to land in the stuck tab's tasks")

            async def session_calls(lane: Lane) -> None:
                for _ in range(calls_per_round):
                    samples[with_stuck].append(await echo(lane))

            # Each side starts from an empty collector: else the stuck side's setup (32 calls' objects) tips the
            # full collection (80 ms in this process of a test runner, a client library and the gateway) into the
            # next round without the stuck tab, every time, and the comparison measures the collector.
            gc.collect()
            # The gateway runs in this process: its CPU time per call is what the stuck calls would add to the
            # others' work, and unlike their wall time, a busy neighbour on the machine barely moves it.
            cpu_before = time.process_time()
            # Blocked behind the stuck browser, the others' calls would wait for its calls, which never end.
            async with asyncio.timeout(60):
                await asyncio.gather(*(session_calls(lane) for lane in others))
            cpu[with_stuck] += time.process_time() - cpu_before
            if with_stuck:
                assert all(not call.done() for call in pending), "the stuck browser answered nothing"
                stuck.tab.unstick.set()
                await asyncio.gather(*pending)

        await round_of(False)  # warm-up, not counted
        samples[False].clear()
        cpu[False] = 0.0
        for n in range(rounds):
            await round_of(with_stuck=n % 2 == 1)
    figures: dict[str, Any] = {"sessions": sessions, "samples_each": len(samples[False]), "stuck_calls": stuck_calls}
    figures |= {"cpu_us_a_call_without": round(cpu[False] / len(samples[False]) * 1e6),
                "cpu_us_a_call_with_stuck": round(cpu[True] / len(samples[True]) * 1e6),
                "cpu_ratio": round(cpu[True] / len(samples[True]) / (cpu[False] / len(samples[False])), 3)}
    for pct in (50, 90, 99):
        without, with_stuck = percentile(samples[False], pct), percentile(samples[True], pct)
        figures |= {f"p{pct}_without_ms": round(without * 1000, 2),
                    f"p{pct}_with_stuck_ms": round(with_stuck * 1000, 2),
                    f"p{pct}_ratio": round(with_stuck / without, 3)}
    return figures


async def test_a_stuck_extension_barely_moves_the_other_sessions_p99() -> None:
    figures = await stuck_neighbour(sessions=20, rounds=12, calls_per_round=5, stuck_calls=32)
    print("stuck neighbour:", figures)
    # 600 samples a side make a p99 of the 6 slowest, which one pause of the machine decides; beside two workers
    # of the browser suite and three bursty busy loops, six rounds a side put the median's ratio anywhere from 0.54
    # to 2.26 and the p90's to 3.2 (a CI run failed at 1.53). The bounded run judges what a busy machine barely
    # moves: that no other call waited on the stuck ones (they would have hung with them), and the work the pod
    # does per call, its CPU time, 0.92-1.17 of the other side's under that load; wall time only for a gross wait
    # no CPU shows. The long run, with 10,000 samples a side, judges the p99.
    assert figures["cpu_ratio"] < 1.3, figures
    assert figures["p50_ratio"] < 3, figures


@pytest.mark.long
@pytest.mark.skipif(not LONG, reason="the full-size run: OPENAB_LONG=1")
async def test_a_stuck_extension_moves_the_p99_of_199_others_by_less_than_20_percent() -> None:
    figures = await stuck_neighbour(sessions=199, rounds=10, calls_per_round=10, stuck_calls=64)
    print("stuck neighbour:", figures)
    assert figures["p99_ratio"] < 1.2, figures
