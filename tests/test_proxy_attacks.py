"""What another process on the pod can try against a session's proxy endpoint without its token.

Everything runs for real on 127.0.0.1 (the gateway, the scripted extension, the proxy listener); the attacker
is raw sockets, the agent is the official `mcp` client. Each test bounds its time and its connection count.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from collections.abc import AsyncIterator
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from test_proxy import ACCEPT, INIT, endpoint, extension, first_text, mcp_client, open_session, proxied

from openab_browser.core.mcp.proxy import BrowserProxy, ProxyEndpoint

pytestmark = pytest.mark.anyio

IDLE_SOCKETS = 300  # more than uvicorn's limit_concurrency (256) the endpoint used to have
# The pending-socket cap under these floods: below IDLE_SOCKETS, so the gate's displacement is what they exercise.
FLOOD_CAP = 200
INIT_BODY = json.dumps(INIT).encode()


def port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1].split("/")[0])


def listener(proxy: BrowserProxy) -> ProxyEndpoint:
    (found,) = proxy._endpoints.values()
    return found


def head(port: int, authorization: str | None, *, body: bytes = b"") -> bytes:
    lines = ["POST /mcp HTTP/1.1", f"Host: 127.0.0.1:{port}", "Content-Type: application/json",
             "Accept: application/json, text/event-stream", f"Content-Length: {len(body)}"]
    if authorization is not None:
        lines.append(f"Authorization: {authorization}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


async def read_answer(reader: asyncio.StreamReader) -> tuple[int, dict[str, str], bytes]:
    """One HTTP/1.1 answer with a Content-Length: status, lower-case headers, body."""
    async with asyncio.timeout(10):
        raw = await reader.readuntil(b"\r\n\r\n")
        status_line, *lines = raw.decode("latin-1").split("\r\n")
        headers = dict(line.split(": ", 1) for line in lines if line)
        headers = {name.lower(): value for name, value in headers.items()}
        body = await reader.readexactly(int(headers.get("content-length", "0")))
    return int(status_line.split(" ")[1]), headers, body


async def closed_by_server(reader: asyncio.StreamReader) -> bytes:
    """What the server sent before it closed the socket (EOF or reset)."""
    with contextlib.suppress(ConnectionError):
        return await reader.read()
    return b""


@contextlib.asynccontextmanager
async def sockets(port: int, count: int) -> AsyncIterator[list[tuple[asyncio.StreamReader, asyncio.StreamWriter]]]:
    opened: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
    try:
        async with asyncio.timeout(30):
            for _ in range(count):
                opened.append(await asyncio.open_connection("127.0.0.1", port))
        yield opened
    finally:
        for _, writer in opened:
            writer.close()


async def agent_still_served(url: str, token: str) -> None:
    async with mcp_client(url, token) as client:
        names = [tool.name for tool in (await client.list_tools()).tools]
        result = await client.call_tool("browser_whoami", {})
    assert names == ["browser_whoami"]
    assert not result.is_error and first_text(result) == "the person's browser"


async def whoami(_arguments: dict[str, Any]) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": "the person's browser"}]}


# -- idle and slow sockets -----------------------------------------------------------------------------------


async def test_300_idle_sockets_do_not_lock_the_agent_out() -> None:
    async with proxied() as (gateway, proxy), extension(gateway) as ext:
        ext.add_tool("browser_whoami", whoami)
        proxy.gate.max_pending = FLOOD_CAP
        url, token = await endpoint(gateway, proxy, await open_session(gateway, ext))
        async with sockets(port_of(url), IDLE_SOCKETS):
            # Answered (whatever the status), a later socket proves the server accepted the idle ones: the
            # kernel's accept queue is first in, first out. Only then does the agent come.
            async with httpx.AsyncClient(timeout=10) as http:
                await http.post(url, json=INIT, headers=ACCEPT)
            await agent_still_served(url, token)
            assert len(proxy.gate.pending) <= FLOOD_CAP  # strangers' file descriptors stay bounded
            assert proxy.gate.trusted[listener(proxy).session_id] >= 1  # the agent's socket is never displaced


async def test_a_socket_that_sends_no_request_head_is_closed() -> None:
    async with proxied() as (gateway, proxy), extension(gateway) as ext:
        proxy.head_timeout = 1.0  # the default is 5 s
        url, _ = await endpoint(gateway, proxy, await open_session(gateway, ext, browser=False))
        async with sockets(port_of(url), 5) as idle:
            async with asyncio.timeout(15):
                sent = [await closed_by_server(reader) for reader, _ in idle]
    assert sent == [b""] * 5


async def test_slowloris_a_head_sent_one_byte_a_second_is_cut_off() -> None:
    async with proxied() as (gateway, proxy), extension(gateway) as ext:
        proxy.head_timeout = 2.0
        url, token = await endpoint(gateway, proxy, await open_session(gateway, ext, browser=False))
        slow = head(port_of(url), f"Bearer {token}", body=b"{}")
        reader, writer = await asyncio.open_connection("127.0.0.1", port_of(url))
        closed = asyncio.ensure_future(closed_by_server(reader))
        written = 0
        try:
            async with asyncio.timeout(30):
                while written < len(slow) and not closed.done():
                    with contextlib.suppress(ConnectionError):
                        writer.write(slow[written:written + 1])
                        await writer.drain()
                    written += 1
                    await asyncio.wait({closed}, timeout=1.0)  # the pace of the attack, not a measurement
                answer = await closed
        finally:
            closed.cancel()
            writer.close()
    assert written < len(slow) // 2  # cut off long before the head was whole
    assert answer == b""  # and never answered


async def test_a_kept_alive_socket_owes_its_next_head_in_time_too() -> None:
    async with proxied() as (gateway, proxy), extension(gateway) as ext:
        proxy.head_timeout = 1.0
        url, token = await endpoint(gateway, proxy, await open_session(gateway, ext, browser=False))
        reader, writer = await asyncio.open_connection("127.0.0.1", port_of(url))
        try:
            writer.write(head(port_of(url), f"Bearer {token}", body=INIT_BODY))
            status, _, _ = await read_answer(reader)
            writer.write(b"POST /mcp HTTP/1.1\r\n")  # ... and the rest never comes
            async with asyncio.timeout(15):
                after = await closed_by_server(reader)
        finally:
            writer.close()
    assert status == 200
    assert after == b""


async def test_an_agents_idle_socket_outlives_its_clients_own_keep_alive() -> None:
    # httpx drops an idle pooled socket after 5 s; a server that closed it at the same 5 s raced the client's next
    # call, which then died with a read error. The server must be the one that waits longer.
    async with proxied() as (gateway, proxy), extension(gateway) as ext:
        url, token = await endpoint(gateway, proxy, await open_session(gateway, ext, browser=False))
        reader, writer = await asyncio.open_connection("127.0.0.1", port_of(url))
        try:
            writer.write(head(port_of(url), f"Bearer {token}", body=INIT_BODY))
            first, _, _ = await read_answer(reader)
            await asyncio.sleep(6)
            writer.write(head(port_of(url), f"Bearer {token}", body=INIT_BODY))
            second, _, _ = await read_answer(reader)
        finally:
            writer.close()
    assert (first, second) == (200, 200)


async def test_a_huge_header_block_is_refused_before_it_reaches_the_app() -> None:
    async with proxied() as (gateway, proxy), extension(gateway) as ext:
        ext.add_tool("browser_whoami", whoami)
        url, token = await endpoint(gateway, proxy, await open_session(gateway, ext))
        port = port_of(url)
        huge = head(port, f"Bearer {token}", body=INIT_BODY).replace(
            b"\r\n\r\n", b"\r\nX-Padding: " + b"a" * (1 << 20) + b"\r\n\r\n", 1)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            with contextlib.suppress(ConnectionError):
                writer.write(huge)
                async with asyncio.timeout(10):
                    await writer.drain()
            async with asyncio.timeout(10):
                answer = await closed_by_server(reader)
        finally:
            writer.close()
        await agent_still_served(url, token)
    # A 4xx from the HTTP parser, or a reset that lost it: never the app's 200 to this (authorized) request.
    assert answer == b"" or answer.startswith((b"HTTP/1.1 400", b"HTTP/1.1 431")), answer[:60]


# -- tokens --------------------------------------------------------------------------------------------------


async def test_300_sockets_with_a_wrong_token_each_get_401_and_the_agent_is_served() -> None:
    async with proxied() as (gateway, proxy), extension(gateway) as ext:
        ext.add_tool("browser_whoami", whoami)
        proxy.gate.max_pending = FLOOD_CAP
        url, token = await endpoint(gateway, proxy, await open_session(gateway, ext))
        port = port_of(url)
        statuses: list[int] = []
        challenges: list[str] = []
        async with sockets(port, IDLE_SOCKETS) as attackers:
            for reader, writer in attackers:  # each kept open afterwards, as keep-alive allows
                writer.write(head(port, "Bearer " + "x" * 43, body=INIT_BODY))
                with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
                    status, headers, body = await read_answer(reader)
                    statuses.append(status)
                    challenges.append(headers.get("www-authenticate", ""))
                    assert token.encode() not in body
            await agent_still_served(url, token)
    # Sockets the gate displaced for newer ones may be gone before they are read; every answer is a 401.
    assert len(statuses) >= FLOOD_CAP and set(statuses) == {401}
    assert all(challenge.startswith("Bearer") for challenge in challenges)


async def test_no_token_and_another_sessions_token_get_401() -> None:
    async with proxied() as (gateway, proxy), extension(gateway) as ext:
        url_a, token_a = await endpoint(gateway, proxy, await open_session(gateway, ext, browser=False))
        url_b, token_b = await endpoint(gateway, proxy, await open_session(gateway, ext, browser=False))
        refused = {
            "none": {},
            "other session": {"Authorization": f"Bearer {token_b}"},
            "token case changed": {"Authorization": f"Bearer {token_a.swapcase()}"},
            "token prefix": {"Authorization": f"Bearer {token_a[:-1]}"},
            "no credentials": {"Authorization": "Bearer"},
            "other scheme": {"Authorization": f"Basic {token_a}"},
            "scheme glued": {"Authorization": f"Bearer{token_a}"},
            "lower-case scheme, wrong token": {"Authorization": f"bearer {token_b}"},
        }
        async with httpx.AsyncClient(timeout=10) as http:
            answers = {name: await http.post(url_a, json=INIT, headers={**ACCEPT, **auth})
                       for name, auth in refused.items()}
            own = await http.post(url_b, json=INIT, headers={**ACCEPT, "Authorization": f"Bearer {token_b}"})
    for name, answer in answers.items():
        assert answer.status_code == 401, name
        assert answer.headers["www-authenticate"].startswith("Bearer"), name
        assert token_a not in answer.text and token_b not in answer.text, name
    assert own.status_code == 200


async def test_a_rebound_host_is_refused_on_a_socket_whose_loopback_host_was_served() -> None:
    # The endpoint remembers Host values that named this machine (a lookup instead of parsing an address each
    # call): one that was served must not let a DNS-rebound page's Host through, on the same socket or a new one,
    # nor a doubled Host whose first copy is the remembered one; nor may made-up names fill what it remembers.
    async with proxied() as (gateway, proxy), extension(gateway) as ext:
        url, token = await endpoint(gateway, proxy, await open_session(gateway, ext, browser=False))
        port = port_of(url)
        auth = {**ACCEPT, "Authorization": f"Bearer {token}"}
        async with httpx.AsyncClient(timeout=10) as http:
            served = [await http.post(url, json=INIT, headers=auth) for _ in range(2)]
            rebound = await http.post(url, json=INIT, headers={**auth, "Host": f"evil.example:{port}"})
            loopbacks = [await http.post(url, json=INIT, headers={**auth, "Host": f"127.0.0.{n}:{port}"})
                         for n in range(2, 30)]
            rebound_later = await http.post(url, json=INIT, headers={**auth, "Host": f"evil.example:{port}"})
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            body = json.dumps(INIT).encode()
            writer.write(f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nHost: evil.example\r\n"
                         f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\n"
                         f"Accept: application/json, text/event-stream\r\nContent-Length: {len(body)}\r\n\r\n"
                         .encode() + body)
            await writer.drain()
            doubled, _, _ = await asyncio.wait_for(read_answer(reader), 10)
        finally:
            writer.close()
        remembered = len(listener(proxy).app._loopback_hosts)
    assert [answer.status_code for answer in served] == [200, 200]
    assert rebound.status_code == 403 and rebound_later.status_code == 403, rebound.text
    assert {answer.status_code for answer in loopbacks} == {200}  # every loopback address is this machine
    assert doubled == 400
    assert remembered <= 8


@pytest.mark.parametrize("scheme", ["bearer", "BEARER", "bEaReR", "Bearer "])
async def test_the_bearer_scheme_is_case_insensitive(scheme: str) -> None:
    async with proxied() as (gateway, proxy), extension(gateway) as ext:
        url, token = await endpoint(gateway, proxy, await open_session(gateway, ext, browser=False))
        async with httpx.AsyncClient(timeout=10) as http:
            answer = await http.post(url, json=INIT, headers={**ACCEPT, "authorization": f"{scheme} {token}"})
    assert answer.status_code == 200 and answer.json()["result"]["protocolVersion"] == "2025-06-18"


# -- the listener's sockets ----------------------------------------------------------------------------------


async def test_accepted_sockets_have_tcp_nodelay() -> None:
    async with proxied() as (gateway, proxy), extension(gateway) as ext:
        url, token = await endpoint(gateway, proxy, await open_session(gateway, ext, browser=False))
        async with httpx.AsyncClient(timeout=10) as http:
            answer = await http.post(url, json=INIT, headers={**ACCEPT, "Authorization": f"Bearer {token}"})
            held = list(listener(proxy)._server.server_state.connections)
            options = [connection.transport.get_extra_info("socket").getsockopt(socket.IPPROTO_TCP,
                                                                               socket.TCP_NODELAY)
                       for connection in held]
    assert answer.status_code == 200
    assert options and all(options), options  # else a head and a body written apart wait 40 ms for an ACK


# -- Origin: the endpoint itself, or nobody ---------------------------------------------------------------

# What a browser-hosted MCP client served from the endpoint's own port sends (and MCP's conformance suite's
# DNS-rebinding scenario expects served); PORT is the endpoint's.
OWN_ORIGINS = ["http://127.0.0.1:PORT", "http://localhost:PORT", "http://[::1]:PORT", "http://127.9.8.7:PORT",
               "http://LOCALHOST:PORT"]
# A rebinding page, another local server's page, a sandboxed frame, and what no browser sends.
FOREIGN_ORIGINS = ["http://evil.example:PORT", "https://evil.example", "http://127.0.0.1:OTHER",
                   "http://127.0.0.1", "https://127.0.0.1:PORT", "null", "", "127.0.0.1:PORT",
                   "http://127.0.0.1:PORT/mcp", "http://user@127.0.0.1:PORT", "http://127.0.0.1:99999",
                   "http://127.0.0.1:PORT.evil.example", "http://localhost.evil.example:PORT",
                   "http://127.1:PORT"]


def _spelled(origin: str, port: int) -> str:
    return origin.replace("PORT", str(port)).replace("OTHER", str(port + 1 if port < 65535 else port - 1))


async def test_an_origin_is_served_only_when_it_is_the_endpoint_itself() -> None:
    async with proxied() as (gateway, proxy), extension(gateway) as ext:
        url, token = await endpoint(gateway, proxy, await open_session(gateway, ext, browser=False))
        port = port_of(url)
        auth = {"Authorization": f"Bearer {token}", **ACCEPT}
        answers: dict[tuple[str, bool], httpx.Response] = {}
        async with httpx.AsyncClient(timeout=10) as http:
            for origin in OWN_ORIGINS + FOREIGN_ORIGINS:
                for bearer in (True, False):
                    headers = {**(auth if bearer else ACCEPT), "Origin": _spelled(origin, port)}
                    answers[origin, bearer] = await http.post(url, json=INIT, headers=headers)
    own = {origin: (answers[origin, True].status_code, answers[origin, False].status_code) for origin in OWN_ORIGINS}
    assert own == {origin: (200, 401) for origin in OWN_ORIGINS}  # served; and the bearer still decides
    foreign = {origin: (answers[origin, True].status_code, answers[origin, False].status_code)
               for origin in FOREIGN_ORIGINS}
    assert foreign == {origin: (403, 403) for origin in FOREIGN_ORIGINS}  # refused before the token is tried
    assert "not this endpoint" in answers["http://evil.example:PORT", True].text
    assert token not in "".join(response.text for response in answers.values())


async def test_the_official_client_with_a_loopback_origin_calls_the_tools() -> None:
    async with proxied() as (gateway, proxy), extension(gateway) as ext:
        ext.add_tool("browser_whoami", whoami)
        url, token = await endpoint(gateway, proxy, await open_session(gateway, ext))
        origin = f"http://127.0.0.1:{port_of(url)}"
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}", "Origin": origin},
                               timeout=httpx2.Timeout(30, read=60)) as http,
            Client(streamable_http_client(url, http_client=http)) as client,
        ):
            result = await client.call_tool("browser_whoami", {})
        assert first_text(result) == "the person's browser"
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}", "Origin": f"http://evil.example:"
                                        f"{port_of(url)}"}, timeout=httpx2.Timeout(10)) as http,
        ):
            refused = await http.post(url, json=INIT, headers=ACCEPT)
        assert refused.status_code == 403


async def test_the_conformance_suites_localhost_request_is_served_only_with_this_sessions_token() -> None:
    # MCP's DNS-rebinding scenario (tests/test_mcp_clients.py) expects its own-origin loopback request served. That
    # request opens nothing by itself: without the key, or with another session's, it is still 401; and a rebound
    # page that copies the loopback Origin but cannot hide its own Host is 403 even with the right token.
    async with proxied() as (gateway, proxy), extension(gateway) as ext:
        url, token = await endpoint(gateway, proxy, await open_session(gateway, ext, browser=False))
        _, other = await endpoint(gateway, proxy, await open_session(gateway, ext, browser=False))
        port = port_of(url)
        loopback = {**ACCEPT, "Host": f"127.0.0.1:{port}", "Origin": f"http://127.0.0.1:{port}"}
        rebound = {**ACCEPT, "Host": "evil.example.com", "Origin": "http://evil.example.com"}
        tried = {
            "loopback, no key": loopback,
            "loopback, another session's token": {**loopback, "Authorization": f"Bearer {other}"},
            "loopback, this session's token": {**loopback, "Authorization": f"Bearer {token}"},
            "rebound Host and Origin, this session's token": {**rebound, "Authorization": f"Bearer {token}"},
            "rebound Host, loopback Origin, this session's token": {
                **loopback, "Host": f"evil.example.com:{port}", "Authorization": f"Bearer {token}"},
            "loopback Host, rebound Origin, this session's token": {
                **loopback, "Origin": f"http://evil.example.com:{port}", "Authorization": f"Bearer {token}"},
        }
        async with httpx.AsyncClient(timeout=10) as http:
            statuses = {name: (await http.post(url, json=INIT, headers=headers)).status_code
                        for name, headers in tried.items()}
    assert statuses == {
        "loopback, no key": 401,
        "loopback, another session's token": 401,
        "loopback, this session's token": 200,
        "rebound Host and Origin, this session's token": 403,
        "rebound Host, loopback Origin, this session's token": 403,
        "loopback Host, rebound Origin, this session's token": 403,
    }
