"""Hostile requests by the thousand on a session's real proxy endpoint, on one keep-alive HTTP client.

Bodies are JSON-RPC shaped and hostile (``generators``); headers are drawn from the ones the endpoint checks,
in their valid, wrong, doubled and oddly-cased forms, with the live token, MCP session id and port filled in
at send time. Behind the endpoint is the scripted extension's browser, so a ``tools/call`` crosses the
tunnel and back. Every answer must be a documented status with a JSON-RPC body where there is a body; a 5xx
without one is counted and fails the run.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from fake_extension import FakeExtension
from gateway_harness import RunningGateway
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_proxy import endpoint, extension, open_session, proxied

from openab_browser.core.mcp.http import McpHttpApp
from openab_browser.core.mcp.proxy import BrowserProxy

from .browser import serve_echo
from .generators import VERSIONS, Known, frame_bytes, mcp_frames, weighted
from .oracles import DEADLINE, Batch, Tally, assert_quiet_logs, decode, malformed
from .sizes import BATCH, examples_for

pytestmark = pytest.mark.anyio

ANSWERS = {200, 202, 204, 400, 401, 403, 404, 405, 406, 408, 413, 415}


def header(name: str, *choices: Any, absent: int = 1) -> st.SearchStrategy[list[tuple[str, Any]]]:
    """Absent ``absent`` times as often as present, else once; doubling is one choice per request (``doubled``).

    Each header alone is refused rarely, so that most requests reach the MCP server behind the checks.
    """
    once = st.sampled_from(choices).map(lambda value: [(name, value)])
    return weighted(st.just([]), absent, once) if absent else once


def usual(name: str, value: Any, *choices: Any) -> st.SearchStrategy[list[tuple[str, Any]]]:
    """Mostly the header a client sends; else absent, another value, or doubled."""
    return weighted(st.just([(name, value)]), 6, header(name, value, *choices, absent=0))


# Printable ASCII: what an HTTP client will put in a header at all.
header_text = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7e), max_size=12)
header_sets = st.tuples(
    usual("authorization", Known("Bearer"), Known("bearer"), Known("BEARER"), Known("Bearer  "), Known("Basic"),
          Known("Bearer-glued"), "Bearer", "Bearer " + "x" * 43, ""),
    usual("content-type", "application/json", "application/json; charset=utf-8", "APPLICATION/JSON",
          "text/plain", "application/json-seq", "", "multipart/form-data; boundary=x"),
    usual("accept", "application/json, text/event-stream", "application/json", "text/event-stream", "*/*",
          "text/*", "text/html", "application/*;q=0", ""),
    usual("mcp-session-id", Known("mcp_session"), Known("mcp_session_other"), "x", ""),
    header("mcp-protocol-version", *VERSIONS, "2099-01-01", "", "1", absent=2),
    header("mcp-method", "tools/call", "initialize", "ping", absent=5),
    header("mcp-name", "browser_echo", "x", absent=5),
# One Host at most: HTTP clients refuse to send two.
    weighted(st.just([]), 12, st.sampled_from([Known("host"), "localhost", "[::1]", "evil.example",
                                               "127.0.0.1.nip.io:80", "", Known("host_v6")]).map(
        lambda host: [("host", host)])),
    header("origin", "null", "http://127.0.0.1", "chrome-extension://abc", absent=12),
    st.lists(st.tuples(st.sampled_from(["x-aaa", "expect", "content-encoding", "cookie"]), header_text),
             max_size=2),
).map(lambda parts: [pair for part in parts for pair in part])


@dataclass(frozen=True)
class HttpInput:
    method: str
    path: str
    headers: list[tuple[str, Any]]
    body: Any


def doubled(headers: list[tuple[str, Any]], index: int | None) -> list[tuple[str, Any]]:
    """The headers with one of them sent twice (a doubled header must not let two checks disagree)."""
    if index is None or not headers or headers[index % len(headers)][0] == "host":  # clients send one Host
        return headers
    return [*headers, headers[index % len(headers)]]


http_inputs = st.builds(
    HttpInput,
    st.sampled_from(["POST"] * 10 + ["GET", "DELETE", "PUT", "OPTIONS", "PATCH", "HEAD"]),
    st.sampled_from(["/mcp"] * 15 + ["/", "/mcp/", "/MCP", "/mcp?x=1", "//mcp", "/mcp%00"]),
    st.builds(doubled, header_sets, weighted(st.none(), 6, st.integers(0, 15))),
    mcp_frames,
)


@dataclass
class ProxyTarget:
    gateway: RunningGateway
    proxy: BrowserProxy
    ext: FakeExtension
    session_id: str
    url: str
    token: str
    http: httpx.AsyncClient
    tally: Tally
    mcp_session: str | None = None
    statuses: dict[int, int] = field(default_factory=dict)

    @property
    def app(self) -> McpHttpApp:
        found = self.proxy.endpoint(self.session_id)
        assert found is not None, "the session's endpoint is gone"
        return found.app

    def known(self) -> dict[str, Any]:
        port = self.url.rsplit(":", 1)[1].split("/")[0]
        return {
            "Bearer": f"Bearer {self.token}", "bearer": f"bearer {self.token}", "BEARER": f"BEARER {self.token}",
            "Bearer  ": f"Bearer  {self.token}", "Basic": f"Basic {self.token}", "Bearer-glued": f"Bearer{self.token}",
            "mcp_session": self.mcp_session, "mcp_session_other": "x" + (self.mcp_session or ""),
            "host": f"127.0.0.1:{port}", "host_v6": f"[::1]:{port}",
        }

    async def initialize(self) -> None:
        """A fresh MCP session for the inputs that name one (the endpoint keeps the 16 last used)."""
        body = {"jsonrpc": "2.0", "id": "init", "method": "initialize",
                "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "fuzz"}}}
        answer = await self.http.post(self.url, json=body, headers=self.good_headers())
        assert answer.status_code == 200, answer.text
        self.mcp_session = answer.headers["mcp-session-id"]

    def good_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}", "Accept": "application/json, text/event-stream"}

    async def send(self, request: HttpInput) -> None:
        known = self.known()
        data = frame_bytes(request.body, known)
        headers = [(name, (known.get(value.name) or "") if isinstance(value, Known) else value)
                   for name, value in request.headers]
        checks = Batch("mcp")
        message = decode(data)
        checks.sent_message(message)
        url = self.url.removesuffix("/mcp") + request.path
        self.tally.tried += 1
        try:
            async with asyncio.timeout(DEADLINE), self.http.stream(
                request.method, url, headers=headers, content=data
            ) as response:
                await self.check(request, message, checks, response)
        except TimeoutError:
            self.tally.hangs += 1
            raise AssertionError(f"no answer within {DEADLINE} s to {request}") from None
        except (httpx.RemoteProtocolError, httpx.ReadError) as exc:
            self.tally.crashes += 1
            raise AssertionError(f"the endpoint dropped the connection: {exc!r} on {request}") from None

    async def check(self, request: HttpInput, message: Any, checks: Batch, response: httpx.Response) -> None:
        status = response.status_code
        self.statuses[status] = self.statuses.get(status, 0) + 1
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            assert status == 200, status
            if request.method == "GET":
                return  # the session's notification stream: open by contract, as long as the client wants
            await self.read_events(message, checks, response)
            return
        body = await response.aread()
        if status >= 500 and not _json_rpc_error(body):
            self.tally.bad_5xx += 1
        assert status in ANSWERS, (status, body[:300], request)
        if status in (202, 204) or request.method == "HEAD":
            assert body == b"", body[:300]
            return
        answer = decode(body)
        problem = malformed(answer, checks.sent) if isinstance(answer, dict) else "not a JSON object"
        assert problem is None, (problem, status, body[:300], request)
        assert status == 200 or "error" in answer, (status, answer)  # a refusal says why, in JSON-RPC

    async def read_events(self, message: Any, checks: Batch, response: httpx.Response) -> None:
        """SSE: progress and notifications, then the answer; a listen stream is done once acknowledged."""
        async for line in response.aiter_lines():
            if not line.startswith("data: "):
                continue
            event = json.loads(line.removeprefix("data: "))
            problem = malformed(event, checks.sent)
            assert problem is None, (problem, event)
            if "method" not in event:
                return
            if event["method"] == "notifications/subscriptions/acknowledged":
                assert isinstance(message, dict) and message.get("method") == "subscriptions/listen"
                return
        raise AssertionError(f"the event stream ended without an answer to {message!r}")

    async def after_batch(self) -> None:
        """Still serving: a known-good call through the tunnel; and the bounds hold."""
        if self.mcp_session not in self.app.sessions:
            await self.initialize()
        call = {"jsonrpc": "2.0", "id": "good", "method": "tools/call",
                "params": {"name": "browser_echo", "arguments": {"ok": 1}}}
        answer = await self.http.post(self.url, json=call,
                                      headers={**self.good_headers(), "Mcp-Session-Id": self.mcp_session or ""})
        assert answer.status_code == 200, answer.text
        assert answer.json()["result"]["content"][0]["text"] == '{"ok":1}', answer.text
        assert len(self.app.sessions) <= self.app.max_sessions
        assert len(self.proxy.gate.pending) <= self.proxy.gate.max_pending
        assert self.gateway.pod.tunnels.attached(self.session_id)


def _json_rpc_error(body: bytes) -> bool:
    answer = decode(body)
    return isinstance(answer, dict) and malformed(answer, Counter()) is None and "error" in answer


@contextlib.asynccontextmanager
async def proxy_target(tally: Tally) -> AsyncIterator[ProxyTarget]:
    async with proxied() as (gateway, proxy), extension(gateway) as ext:
        serve_echo(ext)
        session_id = await open_session(gateway, ext)
        url, token = await endpoint(gateway, proxy, session_id)
        async with httpx.AsyncClient(timeout=DEADLINE) as http:
            target = ProxyTarget(gateway, proxy, ext, session_id, url, token, http, tally)
            await target.initialize()
            yield target


@pytest.fixture
async def target(caplog: pytest.LogCaptureFixture) -> AsyncIterator[ProxyTarget]:
    tally = Tally("proxy/hypothesis")
    async with proxy_target(tally) as running:
        yield running
        await running.after_batch()
        print(tally.line(), "statuses", dict(sorted(running.statuses.items())))
    assert_quiet_logs(caplog, collect=True)


def fuzz_settings(inputs: int) -> settings:
    return settings(max_examples=examples_for(inputs), deadline=None, database=None,
                    suppress_health_check=list(HealthCheck))


async def run_one(target: ProxyTarget, caplog: pytest.LogCaptureFixture, batch: list[HttpInput]) -> None:
    for request in batch:
        await target.send(request)
    await target.after_batch()
    assert_quiet_logs(caplog)


@fuzz_settings(2_000)
@given(st.lists(http_inputs, min_size=BATCH, max_size=BATCH))
async def test_proxy_endpoint_survives_hostile_requests(
    target: ProxyTarget, caplog: pytest.LogCaptureFixture, batch: list[HttpInput]
) -> None:
    await run_one(target, caplog, batch)


@pytest.mark.long
@fuzz_settings(100_000)
@given(st.lists(http_inputs, min_size=BATCH, max_size=BATCH))
async def test_proxy_endpoint_survives_100k_hostile_requests(
    target: ProxyTarget, caplog: pytest.LogCaptureFixture, batch: list[HttpInput]
) -> None:
    await run_one(target, caplog, batch)

