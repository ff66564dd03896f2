"""Hostile frames by the thousand on a real `/acp` socket, the one the scripted extension serves its browser on.

The frames reach the ACP server (sessions, prompts, declarations that open tunnels back to the extension) and
the tunnel (``mcp/message`` for live connection ids, answers to the gateway's own requests). After each batch
a sentinel request must be answered and every clean request must have had exactly one well-formed answer; a
text frame that is not UTF-8 is the one input the socket closes on (1007), and only then is it dialled again.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import websockets
from fake_extension import FakeExtension, connect_extension
from gateway_harness import RunningGateway, run_gateway
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_proxy import BROWSER, endpoint, first_text, mcp_client

from openab_browser.core.mcp.proxy import BrowserProxy

from .browser import serve_echo
from .generators import Known, any_text, frame_bytes, frames, ids, short_text, values
from .oracles import DEADLINE, Batch, IdKey, Tally, assert_quiet_logs, decode
from .sizes import BATCH, examples_for

pytestmark = pytest.mark.anyio

INVALID_PAYLOAD = 1007  # RFC 6455: a text frame that is not UTF-8

servers = st.fixed_dictionaries(
    {"type": st.sampled_from(["acp", "http", "stdio", "ACP"]) | values},
    optional={"name": st.just("browser") | short_text | values, "id": short_text | values,
              "serverId": st.just("browser-1") | short_text | values, "url": any_text},
)
blocks = st.fixed_dictionaries(
    {"type": st.sampled_from(["text", "resource_link", "image", "audio"]) | values},
    optional={"text": any_text | values, "uri": any_text, "name": short_text, "mimeType": short_text},
)
session_ids = st.just(Known("session")) | st.just("sess_00000000-0000-0000-0000-000000000000") | short_text | values
params = st.one_of(
    values,
    st.fixed_dictionaries({"protocolVersion": st.integers(-2, 3) | values},
                          optional={"clientCapabilities": values, "clientInfo": values, "_meta": values}),
    st.fixed_dictionaries({"cwd": st.just("/") | values, "mcpServers": st.lists(servers, max_size=9) | values},
                          optional={"_meta": values}),
    st.fixed_dictionaries({"sessionId": session_ids},
                          optional={"cwd": values, "mcpServers": st.lists(servers, max_size=3) | values,
                                    "prompt": st.lists(blocks, max_size=3) | values, "_meta": values}),
    st.fixed_dictionaries({"connectionId": st.just(Known("connection")) | short_text | values},
                          optional={"method": st.sampled_from(["notifications/tools/list_changed",
                                                               "notifications/progress", "tools/call"]) | values,
                                    "params": values, "serverId": short_text}),
    st.fixed_dictionaries({"requestId": ids}),
)
methods = st.sampled_from([
    "initialize", "session/new", "session/resume", "session/prompt", "session/cancel", "session/close",
    "session/load", "mcp/message", "mcp/connect", "mcp/disconnect", "$/cancel_request", "_openab/keepalive",
]) | short_text | values
acp_frames = frames(methods, params)


@dataclass
class AcpTarget:
    """The gateway, and the extension whose socket takes the frames; dialled again only after a 1007."""

    gateway: RunningGateway
    tally: Tally
    stack: contextlib.AsyncExitStack = field(default_factory=contextlib.AsyncExitStack)
    ext: FakeExtension | None = None
    session_id: str | None = None
    sentinels: int = 0
    late: Counter[IdKey] = field(default_factory=Counter)  # see Batch.late

    async def connect(self) -> FakeExtension:
        await self.stack.aclose()
        self.stack = contextlib.AsyncExitStack()
        ext = await self.stack.enter_async_context(connect_extension(self.gateway.ws_url, self.gateway.token))
        serve_echo(ext)
        await ext.initialize()
        self.session_id = await ext.new_session([BROWSER])
        await self.gateway.pod.tunnels.wait_attached(self.session_id, timeout=DEADLINE)
        self.ext = ext
        return ext

    def known(self) -> dict[str, Any]:
        connections = list(self.ext.connections) if self.ext is not None else []
        return {"session": self.session_id, "connection": connections[-1] if connections else None}

    async def send_batch(self, batch: list[Any]) -> None:
        ext = self.ext or await self.connect()
        known, checks, closing = self.known(), Batch("json-rpc", late=self.late), False
        rest: list[Any] = []
        for number, frame in enumerate(batch):
            data = frame_bytes(frame, known, ascii_only=True)
            self.tally.tried += 1
            if isinstance(frame, bytes):
                await ext.ws.send(data)  # a binary frame: ignored by contract
                continue
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                await ext.ws.send(data, text=True)
                closing, rest = True, batch[number + 1:]
                break
            checks.sent_message(decode(data))
            await ext.ws.send(text)
        if closing:
            await self._closed_by_contract(ext)
            if rest:  # the rest of the batch, on the socket dialled again
                await self.send_batch(rest)
            return
        self.sentinels += 1
        sentinel = f"openab-fuzz-sentinel-{self.sentinels}"
        await ext.send({"jsonrpc": "2.0", "id": sentinel, "method": "openab-fuzz/ping"})
        answered_sentinel = False
        try:
            async with asyncio.timeout(DEADLINE):
                while not (answered_sentinel and checks.complete()):
                    message = await ext.inbox.get()
                    if message.get("id") == sentinel and "method" not in message:
                        assert message["error"]["code"] == -32601, message
                        answered_sentinel = True
                        continue
                    checks.received(message)
        except TimeoutError:
            self.tally.hangs += 1
            raise AssertionError(f"no answer within {DEADLINE} s: {checks.verdict()}") from None
        problems = checks.verdict()
        self.late = checks.still_owed()
        assert not problems, problems
        self.sane()

    async def _closed_by_contract(self, ext: FakeExtension) -> None:
        async with asyncio.timeout(DEADLINE):
            await ext.closed.wait()
        assert ext.close_code == INVALID_PAYLOAD, ext.close_code
        self.tally.reconnects += 1
        self.ext = None

    def sane(self) -> None:
        """The pod holds what this one socket can have made, and its browser is still attached."""
        pod = self.gateway.pod
        assert len(pod.connections) <= 2  # ours, and the one a 1007 just closed while it winds down
        assert len(pod.sessions) <= pod.settings.max_sessions_per_connection * (self.tally.reconnects + 1) + 1
        if self.ext is not None and not self.ext.closed.is_set():
            assert not self.ext.ws.close_code, self.ext.ws.close_code


@contextlib.asynccontextmanager
async def acp_target(tally: Tally) -> AsyncIterator[AcpTarget]:
    async with run_gateway() as gateway:
        target = AcpTarget(gateway, tally)
        try:
            await target.connect()
            yield target
        finally:
            await target.stack.aclose()


async def still_serving(target: AcpTarget) -> None:
    """After the run: a fresh session's agent calls a browser tool through the proxy, end to end."""
    ext = target.ext or await target.connect()
    assert ext.ws.close_code is None
    session_id = await ext.new_session([BROWSER])
    await target.gateway.pod.tunnels.wait_attached(session_id, timeout=DEADLINE)
    proxy = target.gateway.pod.browser
    assert isinstance(proxy, BrowserProxy)
    url, token = await endpoint(target.gateway, proxy, session_id)
    async with mcp_client(url, token) as client:
        result = await client.call_tool("browser_echo", {"after": "the fuzz"})
    assert not result.is_error and first_text(result) == '{"after":"the fuzz"}'


@pytest.fixture
async def target(request: pytest.FixtureRequest, caplog: pytest.LogCaptureFixture) -> AsyncIterator[AcpTarget]:
    tally = Tally("acp/hypothesis")
    async with acp_target(tally) as running:
        yield running
        await still_serving(running)
    assert_quiet_logs(caplog, collect=True)
    print(tally.line())


def fuzz_settings(inputs: int) -> settings:
    return settings(max_examples=examples_for(inputs), deadline=None, database=None,
                    suppress_health_check=list(HealthCheck))


async def run_one(target: AcpTarget, caplog: pytest.LogCaptureFixture, batch: list[Any]) -> None:
    try:
        await target.send_batch(batch)
    except websockets.ConnectionClosed as exc:
        target.tally.crashes += 1
        raise AssertionError(f"the gateway closed the socket: {exc}") from None
    assert_quiet_logs(caplog)


@fuzz_settings(2_000)
@given(st.lists(acp_frames, min_size=BATCH, max_size=BATCH))
async def test_acp_socket_survives_hostile_frames(
    target: AcpTarget, caplog: pytest.LogCaptureFixture, batch: list[Any]
) -> None:
    await run_one(target, caplog, batch)


@pytest.mark.long
@fuzz_settings(100_000)
@given(st.lists(acp_frames, min_size=BATCH, max_size=BATCH))
async def test_acp_socket_survives_100k_hostile_frames(
    target: AcpTarget, caplog: pytest.LogCaptureFixture, batch: list[Any]
) -> None:
    await run_one(target, caplog, batch)
