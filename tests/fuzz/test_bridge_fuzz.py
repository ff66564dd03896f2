"""Hostile lines by the thousand on the pod's real bridge socket, on a connection that passed the ancestry check.

The connection is dialled by a child the pod registered as a session's agent (as the runtime does), which hands
the connected socket back to the test over ``SCM_RIGHTS``: the kernel recorded the child as the peer, so the
bridge admits it, and the test writes at full speed without a relay in between. Behind the socket is the
scripted extension's browser. A frame naming another channel is the one input the bridge closes on (by
contract, after refusing it); only then is the socket dialled again.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import tempfile
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from fake_extension import connect_extension
from gateway_harness import RunningGateway, run_gateway
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_proxy import BROWSER

from openab_browser.bridge.framing import BRIDGE_REFUSED, CHANNEL_CLAIM, READY_METHOD
from openab_browser.bridge.server import BridgeServer

from .browser import ECHO, serve_echo
from .dialler import Dialler
from .generators import Known, Pairs, frame_bytes, mcp_frames, values, weighted
from .oracles import DEADLINE, Batch, IdKey, Tally, assert_quiet_logs, decode, next_line
from .sizes import BATCH, examples_for

pytestmark = pytest.mark.anyio

# A top-level channel claim: mostly none; the connection's own (granted nothing, refused nothing); another.
claims = weighted(st.none(), 60, st.just(Known("channel")) | st.just("acp_00000000-0000-0000-0000-000000000000")
                  | values)


def with_claim(frame: Any, claim: Any) -> Any:
    if claim is None or not isinstance(frame, Pairs):
        return frame
    return Pairs((*frame.items, (CHANNEL_CLAIM, claim)))


bridge_frames = st.builds(with_claim, mcp_frames, claims)


@dataclass
class BridgeTarget:
    gateway: RunningGateway
    bridge: BridgeServer
    channel: str
    dialler: Dialler
    tally: Tally
    reader: asyncio.StreamReader | None = None
    writer: asyncio.StreamWriter | None = None
    sentinels: int = 0
    late: Counter[IdKey] = field(default_factory=Counter)  # see Batch.late

    async def dial(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if self.writer is not None:
            self.writer.close()
        reader, writer = await self.dialler.dial()
        async with asyncio.timeout(DEADLINE):
            ready = json.loads(await reader.readline())
        assert ready["method"] == READY_METHOD, ready
        self.reader, self.writer = reader, writer
        return reader, writer

    async def send_batch(self, batch: list[Any]) -> None:
        reader, writer = (self.reader, self.writer) if self.writer is not None else await self.dial()
        assert reader is not None
        known = {"channel": self.channel}
        data = b"".join(frame_bytes(frame, known) + b"\n" for frame in batch)
        self.tally.tried += len(batch)
        checks, refused_by = Batch("mcp", late=self.late), None
        for line in data.split(b"\n")[:-1]:
            if not line.strip():
                continue
            message = decode(line)
            checks.sent_message(message)
            if isinstance(message, dict) and CHANNEL_CLAIM in message and message[CHANNEL_CLAIM] != self.channel:
                # The bridge refuses it and closes: what follows is never read, and the requests still running
                # end with the connection, unanswered.
                refused_by = message
                checks.excused.update(checks.clean)
                break
        writer.write(data)
        self.sentinels += 1
        sentinel = f"openab-fuzz-sentinel-{self.sentinels}"
        if refused_by is None:
            writer.write(json.dumps({"jsonrpc": "2.0", "id": sentinel, "method": "ping"}).encode() + b"\n")
        with contextlib.suppress(ConnectionError):
            await writer.drain()
        try:
            async with asyncio.timeout(DEADLINE):
                await self.read_answers(reader, checks, sentinel, refused_by)
        except TimeoutError:
            self.tally.hangs += 1
            raise AssertionError(f"no answer within {DEADLINE} s: {checks.verdict()}") from None
        problems = checks.verdict()
        # A connection the bridge closed owes nothing any more.
        self.late = checks.still_owed() if self.writer is not None else Counter()
        assert not problems, problems
        assert self.bridge.connections <= 2  # ours, and one a claim just closed while it winds down

    async def read_answers(self, reader: asyncio.StreamReader, checks: Batch, sentinel: str,
                           refused_by: dict[str, Any] | None) -> None:
        answered_sentinel = refused_by is not None
        while True:
            line = await next_line(reader)
            if not line:
                if refused_by is None:
                    self.tally.crashes += 1
                    raise AssertionError(f"the bridge closed the connection: {checks.verdict()}")
                self.tally.reconnects += 1
                self.writer = None
                return
            message = json.loads(line)
            if message.get("id") == sentinel and "method" not in message:
                assert message["result"] == {}, message
                answered_sentinel = True
            else:
                checks.received(message)
                if refused_by is not None and message.get("error", {}).get("code") == BRIDGE_REFUSED:
                    assert CHANNEL_CLAIM in message["error"]["message"] or "channel" in message["error"]["message"]
            if answered_sentinel and checks.complete() and refused_by is None:
                return


async def still_serving(target: BridgeTarget) -> None:
    """After the run, on a fresh connection: the agent calls the browser's tool through the bridge."""
    reader, writer = await target.dial()
    call = {"jsonrpc": "2.0", "id": "good", "method": "tools/call", "params": {"name": ECHO, "arguments": {"ok": 1}}}
    writer.write(json.dumps(call).encode() + b"\n")
    async with asyncio.timeout(DEADLINE):
        answer = json.loads(await reader.readline())
    assert answer["result"]["content"][0]["text"] == '{"ok":1}', answer
    writer.close()


@contextlib.asynccontextmanager
async def bridge_target(tally: Tally) -> AsyncIterator[BridgeTarget]:
    root = Path(tempfile.mkdtemp(prefix="oab-fuzz-"))
    dialler: Dialler | None = None
    try:
        async with (
            run_gateway(browser_mode="bridge", browser_socket=root / "browser" / "browser.sock") as gateway,
            connect_extension(gateway.ws_url, gateway.token) as ext,
        ):
            bridge = gateway.pod.browser
            assert isinstance(bridge, BridgeServer)
            serve_echo(ext)
            await ext.initialize()
            session_id = await ext.new_session([BROWSER])
            await gateway.pod.tunnels.wait_attached(session_id, timeout=DEADLINE)
            session = gateway.pod.sessions.get(session_id)
            assert session is not None
            dialler = Dialler(bridge.path, session.channel, timeout=DEADLINE)
            bridge.agent_started(session, dialler.pid)  # as the runtime does, before it dials
            target = BridgeTarget(gateway, bridge, session.channel, dialler, tally)
            yield target
            await still_serving(target)
    finally:
        if dialler is not None:
            dialler.close()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
async def target(caplog: pytest.LogCaptureFixture) -> AsyncIterator[BridgeTarget]:
    tally = Tally("bridge/hypothesis")
    async with bridge_target(tally) as running:
        yield running
        if running.writer is not None:
            running.writer.close()
    assert_quiet_logs(caplog, collect=True)
    print(tally.line())


def fuzz_settings(inputs: int) -> settings:
    return settings(max_examples=examples_for(inputs), deadline=None, database=None,
                    suppress_health_check=list(HealthCheck))


async def run_one(target: BridgeTarget, caplog: pytest.LogCaptureFixture, batch: list[Any]) -> None:
    await target.send_batch(batch)
    assert_quiet_logs(caplog)


@fuzz_settings(2_000)
@given(st.lists(bridge_frames, min_size=BATCH, max_size=BATCH))
async def test_bridge_socket_survives_hostile_lines(
    target: BridgeTarget, caplog: pytest.LogCaptureFixture, batch: list[Any]
) -> None:
    await run_one(target, caplog, batch)


@pytest.mark.long
@fuzz_settings(100_000)
@given(st.lists(bridge_frames, min_size=BATCH, max_size=BATCH))
async def test_bridge_socket_survives_100k_hostile_lines(
    target: BridgeTarget, caplog: pytest.LogCaptureFixture, batch: list[Any]
) -> None:
    await run_one(target, caplog, batch)
