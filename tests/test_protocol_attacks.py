"""Hostile frames at every JSON-RPC surface: the `/acp` socket, the agent's MCP endpoint, the bridge relay.

Each attack is bounded in time, gets exactly one answer when it is a request (none when it is not), and leaves
the connection serving. "Exactly one" is checked against a sentinel request sent right after: the gateway
answers in order, so anything after the sentinel's answer would be a second answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import shutil
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import websockets
from fake_extension import connect_extension, text_result
from gateway_harness import RunningGateway, run_gateway
from websockets.asyncio.client import ClientConnection

from openab_browser.bridge.framing import READY_METHOD
from openab_browser.bridge.relay_loop import run_relay
from openab_browser.core.jsonrpc import Later, Notification, Request, RequestTimeout, RpcConnection
from openab_browser.core.jsonrpc.protocol import MAX_DEPTH, Peer
from openab_browser.core.mcp.access import HttpEndpoint
from openab_browser.core.mcp.proxy import BrowserProxy

pytestmark = pytest.mark.anyio

BOUND = 10.0  # seconds any one attack may take, answers included


@contextlib.asynccontextmanager
async def raw_socket(gateway: RunningGateway) -> AsyncIterator[ClientConnection]:
    """A client of our own, not the fake extension: it sends exactly the bytes a test writes."""
    ws = await websockets.connect(
        gateway.ws_url, subprotocols=[f"openab.bearer.{gateway.token}", "acp.v1"],  # type: ignore[list-item]
        max_size=16 << 20, open_timeout=10,
    )
    try:
        yield ws
    finally:
        await ws.close()


class Sentinel:
    """Sends a frame, then a sentinel request, and returns every answer that came before the sentinel's."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self.count = 0

    async def answers_to(self, *frames: str) -> list[dict[str, Any]]:
        self.count += 1
        sentinel = f"sentinel-{self.count}"
        for frame in frames:
            await self.ws.send(frame)
        await self.ws.send(json.dumps({"jsonrpc": "2.0", "id": sentinel, "method": "katashiro/ping"}))
        answers: list[dict[str, Any]] = []
        async with asyncio.timeout(BOUND):
            while True:
                message = json.loads(await self.ws.recv())
                if message.get("method") == "_openab/keepalive":
                    continue
                if message.get("id") == sentinel:
                    assert message["error"]["code"] == -32601  # the socket still serves
                    return answers
                answers.append(message)


@contextlib.asynccontextmanager
async def agents_endpoint() -> AsyncIterator[HttpEndpoint]:
    """A gateway with one extension session, and the MCP endpoint its agent would be handed."""
    async with run_gateway() as gw, connect_extension(gw.ws_url, gw.token) as ext:
        proxy = gw.pod.browser
        assert isinstance(proxy, BrowserProxy)
        await ext.initialize()
        session = gw.pod.sessions.get(await ext.new_session())
        assert session is not None
        entry = (await proxy.open(session)).entry
        assert isinstance(entry, HttpEndpoint)
        yield entry


def request_frame(request_id: str, *, method: str = "katashiro/ping", params: str | None = None) -> str:
    frame = f'{{"jsonrpc":"2.0","id":{request_id},"method":"{method}"'
    return frame + (f',"params":{params}}}' if params is not None else "}")


def nested_params(depth: int) -> str:
    """Params that make a request envelope ``depth`` levels deep in all (the envelope is level 1)."""
    return "[" * (depth - 1) + "]" * (depth - 1)


# -- ids of every JSON type ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("raw_id", "echoed", "code"), [
    ("null", None, -32601),
    ("0", 0, -32601),
    ("-7", -7, -32601),
    ("1.5", 1.5, -32601),
    ("-0.0", -0.0, -32601),
    ("1e308", 1e308, -32601),
    ("18446744073709551615", 18446744073709551615, -32601),  # the largest integer orjson reads as one
    ("18446744073709551616", 1.8446744073709552e19, -32601),  # past it: read, and echoed, as a float
    ("123456789012345678901234567890", 1.2345678901234568e29, -32601),
    ('""', "", -32601),
    ('"\\u0000\\n\\ud83c\\udf89"', "\x00\n🎉", -32601),
    ('"' + "i" * 1024 + '"', "i" * 1024, -32601),
    ('"' + "i" * 1025 + '"', None, -32600),  # too long to echo: refused with null
    ('"' + "i" * 500_000 + '"', None, -32600),
    ("true", None, -32600),
    ("false", None, -32600),
    ("{}", None, -32600),
    ('{"id":1}', None, -32600),
    ("[]", None, -32600),
    ("[1]", None, -32600),
])
async def test_every_kind_of_id_gets_exactly_one_answer(
    gateway: RunningGateway, raw_id: str, echoed: Any, code: int
) -> None:
    async with raw_socket(gateway) as ws:
        [answer] = await Sentinel(ws).answers_to(request_frame(raw_id))
    assert answer["id"] == echoed and answer["error"]["code"] == code
    if code == -32601:
        assert answer["error"]["message"] == "Method not found: katashiro/ping"


async def test_a_number_orjson_cannot_hold_is_a_parse_error_and_the_socket_serves(gateway: RunningGateway) -> None:
    async with raw_socket(gateway) as ws:
        [answer] = await Sentinel(ws).answers_to(request_frame("1e400"))
    assert answer["id"] is None and answer["error"]["code"] == -32700


async def test_answers_with_ids_we_never_used_are_dropped_without_a_word(gateway: RunningGateway) -> None:
    async with raw_socket(gateway) as ws:
        replies = [
            json.dumps({"jsonrpc": "2.0", "id": reply_id, "result": {}})
            for reply_id in [1, "1", "²", "١", 2**64, -1, 1.5, None, "9" * 30]
        ]
        assert await Sentinel(ws).answers_to(*replies) == []



@pytest.mark.parametrize("named", ["{}", "[]", '{"a":[1]}', "[[]]"])
async def test_a_cancellation_naming_an_object_for_an_id_changes_nothing(gateway: RunningGateway, named: str) -> None:
    # Found by tests/fuzz: an unhashable requestId made the cancellation lookup raise in the read loop, which
    # ended the socket; on the agents' MCP endpoint the same notification got a bare 500.
    async with raw_socket(gateway) as ws:
        sentinel = Sentinel(ws)
        cancel = '{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":' + named + "}}"
        assert await sentinel.answers_to(cancel) == []
        assert await sentinel.answers_to(request_frame("1")) != []  # still serving


async def test_a_cancellation_naming_an_object_is_accepted_by_the_agents_mcp_endpoint() -> None:
    async with agents_endpoint() as entry:
        headers = {"Authorization": f"Bearer {entry.token}", "Accept": "application/json, text/event-stream"}
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t"}}}
        async with httpx.AsyncClient(timeout=BOUND) as http:
            opened = await http.post(entry.url, json=init, headers=headers)
            headers["Mcp-Session-Id"] = opened.headers["mcp-session-id"]
            cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": {"a": 1}}}
            answer = await http.post(entry.url, json=cancel, headers=headers)
    assert answer.status_code == 202, answer.text



@pytest.mark.parametrize("bad_id", [True, {"a": 1}, [1], "i" * 1025])
async def test_the_agents_mcp_endpoint_refuses_an_id_mcp_does_not_allow_under_null(bad_id: Any) -> None:
    # Found by tests/fuzz: a refusal of the HTTP layer (no Mcp-Session-Id here) echoed the body's id as it was.
    async with agents_endpoint() as entry:
        headers = {"Authorization": f"Bearer {entry.token}", "Accept": "application/json, text/event-stream"}
        async with httpx.AsyncClient(timeout=BOUND) as http:
            answer = await http.post(entry.url, json={"jsonrpc": "2.0", "id": bad_id, "method": "ping"},
                                     headers=headers)
    assert answer.status_code == 400
    assert answer.json()["id"] is None and answer.json()["error"]["code"] == -32600, answer.text


# -- nesting ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("depth", "accepted"), [(127, True), (128, True), (129, False), (300, False),
                                                 (100_000, False)])
async def test_nesting_is_bounded_at_128_levels_on_the_acp_socket(
    gateway: RunningGateway, caplog: pytest.LogCaptureFixture, depth: int, accepted: bool
) -> None:
    async with raw_socket(gateway) as ws:
        sentinel = Sentinel(ws)
        [answer] = await sentinel.answers_to(request_frame('"deep"', params=nested_params(depth)))
        # The same depth as a notification is never answered, unless it is too deep to read at all: then
        # nobody can tell it was one, and it gets the null-id error any unreadable frame gets.
        notified = await sentinel.answers_to(
            '{"jsonrpc":"2.0","method":"session/cancel","params":' + nested_params(depth) + "}"
        )
        assert [(a["id"], a["error"]["code"]) for a in notified] == ([] if depth <= 1024 else [(None, -32600)])
    if accepted:
        assert answer["error"]["code"] == -32601  # past the bound check, to the dispatcher
        return
    # Past orjson's own 1024 levels the id is unreadable: null, as for any unusable id.
    assert answer["id"] == ("deep" if depth <= 1024 else None)
    assert answer["error"]["code"] == -32600
    assert answer["error"]["message"] == (
        f"Invalid Request: nested more than {MAX_DEPTH} levels deep (the limit of every openab hop); "
        "send flatter JSON"
    )
    assert "Traceback" not in caplog.text


async def test_nesting_is_bounded_on_the_agents_mcp_endpoint_too() -> None:
    async with agents_endpoint() as entry:
        headers = {
            "Authorization": f"Bearer {entry.token}", "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2026-07-28",
        }
        meta = '"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",' \
               '"io.modelcontextprotocol/clientCapabilities":{}}'
        async with httpx.AsyncClient(timeout=BOUND) as http:
            answers = {}
            # envelope (1), params (2), arguments (3): the list makes the rest.
            for depth in (128, 129, 300, 100_000):
                body = ('{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"browser_click",' + meta
                        + ',"arguments":{"x":' + nested_params(depth - 2) + "}}}")
                response = await http.post(entry.url, content=body, headers=headers)
                answers[depth] = (response.status_code, response.json())
    status, fits = answers[128]
    assert status == 200 and fits["result"]["isError"] is True  # past the bound check: "browser not connected"
    for depth in (129, 300):
        status, refused = answers[depth]
        assert refused["id"] == 7 and refused["error"]["code"] == -32600
        assert "nested more than 128 levels deep" in refused["error"]["message"]
    status, unreadable = answers[100_000]
    # Past orjson's 1024 levels nothing can be read, the id neither: the answer still names the bound (it was
    # orjson's bare "depth limit exceeded" until tests/fuzz asked for the words every other hop uses).
    assert status == 400 and unreadable["id"] is None and unreadable["error"]["code"] == -32600
    assert "nested more than 128 levels deep" in unreadable["error"]["message"]


# -- floods ----------------------------------------------------------------------------------------------------


class Stalling:
    """A handler whose every request waits for ``release``: requests stay open until then."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.started = 0

    def handle_request(self, request: Request) -> Any:
        async def work() -> str:
            self.started += 1
            await self.release.wait()
            return "done"

        return Later(work())

    def handle_notification(self, notification: Notification) -> None:
        return None


async def test_a_request_given_less_time_while_nothing_else_happens_times_out_then() -> None:
    # The tunnel gives a call its whole timeout again when the person answers a card: a deadline moved sooner
    # must wake the connection's loop, which was asleep until the old one, on a socket where nothing else moves.
    wrote = asyncio.Event()

    async def send(_message: bytes) -> None:
        wrote.set()

    connection = RpcConnection(Stalling(), name="quiet")
    writer = asyncio.create_task(connection.run(send))
    sent: list[int] = []
    call = asyncio.create_task(connection.request("mcp/message", {}, timeout=600, sent=sent.append))
    try:
        async with asyncio.timeout(BOUND):
            await wrote.wait()  # written, and the loop back asleep until 600 s from now
            connection.set_timeout(sent[0], 0.2)
            with pytest.raises(RequestTimeout):
                await call
    finally:
        call.cancel()
        connection.close("test over")
        await writer


@pytest.mark.parametrize("meanwhile", [0, 20], ids=["a quiet socket", "notifications and stray answers arriving"])
async def test_a_request_the_peer_never_answers_times_out_at_its_deadline(meanwhile: int) -> None:
    # The connection's writer enforces the deadlines, waking only when it has something to send or one comes:
    # frames that arrive and ask for nothing back must neither hold a deadline off nor be needed to meet it.
    written: list[bytes] = []

    async def send(message: bytes) -> None:
        written.append(message)

    connection = RpcConnection(Stalling(), name="silent")
    writer = asyncio.create_task(connection.run(send))
    try:
        async with asyncio.timeout(BOUND):
            began = asyncio.get_running_loop().time()
            call = asyncio.create_task(connection.request("mcp/message", {}, timeout=0.3))
            for n in range(meanwhile):
                await asyncio.sleep(0.01)
                connection.feed(json.dumps({"jsonrpc": "2.0", "method": "noted", "params": {"n": n}}))
                connection.feed(json.dumps({"jsonrpc": "2.0", "id": 10_000 + n, "result": {}}))
            with pytest.raises(RequestTimeout):
                await call
            took = asyncio.get_running_loop().time() - began
        assert 0.3 <= took < 1.5, took
        assert len(written) == 1  # the request itself; nothing was sent back for what arrived
    finally:
        connection.close("test over")
        await writer


async def test_a_request_with_less_time_than_one_in_flight_times_out_at_its_own_deadline() -> None:
    # A request writes its own message when the writer is idle, and wakes the writer only when its deadline comes
    # before the one the writer sleeps to: here an unanswered call of 600 s, then one of 0.3 s.
    async def send(_message: bytes) -> None:
        return None

    connection = RpcConnection(Stalling(), name="two deadlines")
    writer = asyncio.create_task(connection.run(send))
    long_call = asyncio.create_task(connection.request("mcp/message", {}, timeout=600))
    try:
        async with asyncio.timeout(BOUND):
            await asyncio.sleep(0.05)  # the writer asleep until 600 s from now
            began = asyncio.get_running_loop().time()
            with pytest.raises(RequestTimeout):
                await connection.request("mcp/message", {}, timeout=0.3)
            took = asyncio.get_running_loop().time() - began
        assert 0.3 <= took < 1.5, took
        assert not long_call.done()
    finally:
        long_call.cancel()
        connection.close("test over")
        await writer


async def test_messages_leave_in_the_order_they_were_made_one_write_at_a_time() -> None:
    # A transport whose write waits (a socket's buffer full, a lock) while requests, answers and notifications
    # keep coming: they go out in the order they were made, and never two writes at once, whichever task writes.
    written: list[Any] = []
    all_written = asyncio.Event()
    writing = 0
    most = 0

    async def send(message: bytes) -> None:
        nonlocal writing, most
        writing += 1
        most = max(most, writing)
        await asyncio.sleep(0.01)
        written.append(json.loads(message))
        writing -= 1
        if len(written) == 60:
            all_written.set()

    connection = RpcConnection(Stalling(), name="slow socket")
    writer = asyncio.create_task(connection.run(send))
    calls: list[asyncio.Task[Any]] = []
    try:
        async with asyncio.timeout(BOUND):
            for n in range(30):
                calls.append(asyncio.create_task(connection.request(f"r{n}", {}, timeout=600)))
                await asyncio.sleep(0)
                connection.notify(f"n{n}")
                if n % 3 == 0:
                    await asyncio.sleep(0.015)
            await all_written.wait()
        assert most == 1
        assert [m["method"] for m in written] == [name for n in range(30) for name in (f"r{n}", f"n{n}")]
    finally:
        for call in calls:
            call.cancel()
        connection.close("test over")
        await writer


async def test_a_flood_over_the_open_request_bound_is_refused_at_once_and_the_rest_complete() -> None:
    handler = Stalling()
    written: list[dict[str, Any]] = []
    wrote = asyncio.Event()

    async def send(message: bytes) -> None:
        written.append(json.loads(message))
        wrote.set()

    connection = RpcConnection(handler, name="flood", peer=Peer(max_open_requests=64))
    writer = asyncio.create_task(connection.run(send))
    try:
        async with asyncio.timeout(BOUND):
            for n in range(10_000):
                connection.feed(request_frame(str(n), method="work"))
            while len(written) < 10_000 - 64:
                wrote.clear()
                await wrote.wait()
            refused = [m for m in written if m["error"]["code"] == -32000]
            assert len(refused) == len(written) == 10_000 - 64
            assert refused[0]["error"]["message"] == "Too many requests in flight (max 64)"
            assert {m["id"] for m in refused} == set(range(64, 10_000))
            handler.release.set()
            while len(written) < 10_000:
                wrote.clear()
                await wrote.wait()
        assert sorted(m["id"] for m in written if m.get("result") == "done") == list(range(64))
        assert handler.started == 64
    finally:
        connection.close("test over")
        writer.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await writer


async def test_a_pipelined_flood_on_the_acp_socket_gets_one_answer_each(gateway: RunningGateway) -> None:
    async with raw_socket(gateway) as ws:
        answers = await Sentinel(ws).answers_to(*(request_frame(str(n)) for n in range(3000)))
        assert [a["id"] for a in answers] == list(range(3000))
        assert {a["error"]["code"] for a in answers} == {-32601}


async def test_a_flood_of_tool_calls_over_the_bound_is_refused_and_the_browser_sees_only_the_admitted() -> None:
    release, admitted = asyncio.Event(), asyncio.Event()
    seen: list[int] = []

    async def slow(arguments: dict[str, Any]) -> dict[str, Any]:
        seen.append(int(arguments["n"]))
        if len(seen) == 16:
            admitted.set()
        await release.wait()
        return text_result("done")

    async with run_gateway() as gw, connect_extension(gw.ws_url, gw.token) as ext:
        ext.add_tool("browser_slow", slow)
        await ext.initialize()
        session_id = await ext.new_session([{"type": "acp", "name": "browser", "id": "srv"}])
        await gw.pod.tunnels.wait_attached(session_id, timeout=5)
        from openab_browser.core.mcp.server import BrowserMcp, Limits

        mcp = BrowserMcp(gw.pod.tunnels, session_id, limits=Limits(max_running_calls=16))
        calls = [
            asyncio.create_task(mcp.handle({"jsonrpc": "2.0", "id": n, "method": "tools/call",
                                            "params": {"name": "browser_slow", "arguments": {"n": n}}}))
            for n in range(200)
        ]
        async with asyncio.timeout(BOUND):
            await admitted.wait()  # the admitted calls reach the browser; the rest are answered already
            finished = [c for c in calls if c.done()]
            assert len(finished) == 200 - 16
            assert all(c.result()["error"]["code"] == -32000 for c in finished)  # type: ignore[index]
            release.set()
            results = await asyncio.gather(*calls)
        mcp.close()
    assert sum(1 for r in results if r is not None and "result" in r) == 16
    assert sorted(seen) == sorted(r["id"] for r in results if r is not None and "result" in r)


# -- the bridge relay: a lost call is answered once and never sent again ---------------------------------------


class Lines:
    """The relay's stdout (the read end of its pipe), as decoded lines."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self.reader = reader
        self.lines: list[dict[str, Any]] = []

    async def answer_to(self, request_id: Any) -> dict[str, Any]:
        async with asyncio.timeout(BOUND):
            while True:
                for line in self.lines:
                    if line.get("id") == request_id and "method" not in line:
                        return line
                self.lines.append(json.loads(await self.reader.readline()))


@contextlib.asynccontextmanager
async def relay_on_pipes(path: Path, wait: float) -> AsyncIterator[tuple[int, Lines]]:
    """The real relay loop on a thread of this process, its stdin and stdout pipes ours: yields the write end
    of its stdin and its stdout's lines; closing stdin at the end must let it finish."""
    stdin_read, stdin_write = os.pipe()
    stdout_read, stdout_write = os.pipe()
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(stdout_read, "rb"))
    done = loop.run_in_executor(None, functools.partial(run_relay, path, wait=wait, stdin=stdin_read,
                                                        stdout=stdout_write))
    try:
        yield stdin_write, Lines(reader)
    finally:
        os.close(stdin_write)
        async with asyncio.timeout(BOUND):
            assert await done == 0
        transport.close()
        os.close(stdin_read)
        os.close(stdout_write)


async def test_the_relay_says_a_lost_tool_call_has_an_unknown_outcome_and_never_resends_it() -> None:
    root = Path(tempfile.mkdtemp(prefix="oab-"))
    received: list[dict[str, Any]] = []
    connections = 0

    async def pod(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """A stand-in for the pod's bridge socket: its first connection dies under the first tool call."""
        nonlocal connections
        connections += 1
        first = connections == 1
        ready = {"jsonrpc": "2.0", "method": READY_METHOD, "params": {"sessionId": "s", "channel": "c"}}
        writer.write(json.dumps(ready).encode() + b"\n")
        try:
            while line := await reader.readline():
                message = json.loads(line)
                received.append(message)
                if first and message.get("method") == "tools/call":
                    return  # the pod restarted mid-call: the click may have happened, the answer is lost
                if "id" in message:
                    answer = {"jsonrpc": "2.0", "id": message["id"], "result": text_result("pong")}
                    writer.write(json.dumps(answer).encode() + b"\n")
        finally:
            writer.close()

    server = await asyncio.start_unix_server(pod, str(root / "browser.sock"))
    try:
        async with relay_on_pipes(root / "browser.sock", wait=5) as (stdin, output):
            call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                    "params": {"name": "browser_click", "arguments": {"ref": "e6"}}}
            os.write(stdin, json.dumps(call).encode() + b"\n")
            lost = await output.answer_to(1)
            said = lost["error"]["message"]
            assert "the outcome of browser_click is unknown" in said and "may or may not have run" in said
            assert "Call browser_snapshot to see the page as it is now before calling browser_click again" in said
            # After the relay is back, the agent's next request is served: anything re-sent would have come first.
            os.write(stdin, json.dumps({"jsonrpc": "2.0", "id": 2, "method": "ping"}).encode() + b"\n")
            assert (await output.answer_to(2))["result"] == text_result("pong")
            assert [m.get("method") for m in received] == ["tools/call", "ping"]
            assert connections == 2
            assert [line["id"] for line in output.lines] == [1, 2]  # one answer each
    finally:
        server.close()
        await server.wait_closed()
        shutil.rmtree(root, ignore_errors=True)
