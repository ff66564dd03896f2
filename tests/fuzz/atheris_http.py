"""Coverage-guided fuzzing of the proxy's HTTP surface (``core/mcp/http.py`` and the MCP server behind it), as an
ASGI app called in-process: the request line, every header the endpoint checks and the body are all drawn from
the input. The client reads the whole answer, or, on an event stream, its first event, then goes away.

Per input: the app answers within :data:`DEADLINE` (else a hang), exactly once, with a documented status; a
refusal carries a JSON-RPC error body; no 5xx; every JSON or event-stream message is well-formed JSON-RPC;
nothing is logged as a failure. There is no browser behind (tool calls say so): the tunnel is the other
harnesses' and the hypothesis runs'.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

import atheris

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fuzz.atheris_support import LogTrap, check_answer, run

with atheris.instrument_imports(include=["openab_browser.core.mcp", "openab_browser.core.jsonrpc"]):
    from openab_browser.core.mcp.http import McpHttpApp
    from openab_browser.core.mcp.server import BrowserMcp
    from openab_browser.core.tunnel.registry import TunnelRegistry

DEADLINE = 5.0
TOKEN = "t" * 43
ANSWERS = {200, 202, 204, 400, 401, 403, 404, 405, 406, 408, 413, 415}
LIVE = object()  # the session id the app handed out last (absent while there is none)
# Each choice's first option is what a well-behaved agent sends, so a seed that ends in zeros is well-formed.
METHODS = [b"POST", b"GET", b"DELETE", b"POST", b"PUT", b"HEAD", b"POST"]
PATHS = ["/mcp", "/", "/mcp/", "/MCP", "/mcp"]
HEADERS: list[tuple[bytes, list[Any]]] = [
    (b"host", [b"127.0.0.1:9", b"localhost", b"[::1]:9", None, b"evil.example", b"[::1", b":", b""]),
    (b"authorization", [b"Bearer " + TOKEN.encode(), b"bearer  " + TOKEN.encode(), None, b"Bearer x",
                        b"Basic " + TOKEN.encode(), b"Bearer", b"\xff"]),
    (b"content-type", [b"application/json", b"application/json; charset=utf-8", None, b"text/plain", b";",
                       b"APPLICATION/JSON"]),
    (b"accept", [b"application/json, text/event-stream", b"application/json", b"text/event-stream", None, b"*/*",
                 b"text/html", b",,"]),
    (b"mcp-session-id", [LIVE, None, b"x", b""]),
    (b"mcp-protocol-version", [None, b"2025-06-18", b"2026-07-28", b"2099-01-01", b""]),
    (b"mcp-method", [None, b"tools/call", b"ping", b""]),
    (b"mcp-name", [None, b"browser_click", b""]),
    (b"origin", [None, b"null"]),
    (b"content-length", [None, b"99999999", b"-1", b"1"]),
]
# The input's last bytes choose: the method, the path, then for each header its value and whether it is sent
# twice; the bytes before them are the body.
CONTROLS = 2 + 2 * len(HEADERS)

loop = asyncio.new_event_loop()
trap = LogTrap()
registry = TunnelRegistry()


def new_server(send: Any) -> BrowserMcp:
    return BrowserMcp(registry, "sess_fuzz", send=send)


app = McpHttpApp(new_server, TOKEN, max_body_bytes=4096, body_timeout=1.0)


def scope_from(raw: bytes) -> tuple[dict[str, Any], bytes]:
    body, controls = raw[:-CONTROLS] if len(raw) > CONTROLS else b"", raw[-CONTROLS:].rjust(CONTROLS, b"\0")
    method = METHODS[controls[0] % len(METHODS)].decode()
    path = PATHS[controls[1] % len(PATHS)]
    headers: list[tuple[bytes, bytes]] = []
    for number, (name, choices) in enumerate(HEADERS):
        value = choices[controls[2 + 2 * number] % len(choices)]
        if value is LIVE:
            value = next(reversed(app.sessions), "").encode() or None
        if value is None:
            continue
        headers.append((name, value))
        if controls[3 + 2 * number] == 0xFF:
            headers.append((name, value))  # doubled
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method, "path": path,
             "raw_path": path.encode(), "query_string": b"", "root_path": "", "scheme": "http", "headers": headers,
             "server": ("127.0.0.1", 9), "client": ("127.0.0.1", 40000)}
    return scope, body


async def exchange(scope: dict[str, Any], body: bytes) -> tuple[list[int], bytes, bool]:
    statuses: list[int] = []
    chunks: list[bytes] = []
    streaming = False
    done = asyncio.Event()
    asked = False

    async def receive() -> dict[str, Any]:
        nonlocal asked
        if not asked:
            asked = True
            return {"type": "http.request", "body": body, "more_body": False}
        await done.wait()
        return {"type": "http.disconnect"}

    async def send(message: MutableMapping[str, Any]) -> None:
        nonlocal streaming
        if message["type"] == "http.response.start":
            statuses.append(message["status"])
            streaming = any(k == b"content-type" and v.startswith(b"text/event-stream") for k, v in message["headers"])
            if streaming and scope["method"] == "GET":
                done.set()  # the session's notification stream: it has nothing to say yet, and the client leaves
            return
        chunks.append(message.get("body", b""))
        if streaming or not message.get("more_body", False):
            done.set()  # a whole answer, or an event stream's first event: the client has what it came for

    async with asyncio.timeout(DEADLINE):
        await app(scope, receive, send)
    return statuses, b"".join(chunks), streaming


def test_one_input(raw: bytes) -> None:
    scope, body = scope_from(raw)
    try:
        statuses, answer, streaming = loop.run_until_complete(exchange(scope, body))
    except TimeoutError:
        raise AssertionError(
            f"no answer within {DEADLINE} s: {scope['method']} {scope['headers']} {body[:200]!r}") from None
    assert len(statuses) == 1, statuses
    status = statuses[0]
    assert status in ANSWERS, (status, answer[:300])
    if streaming:
        for line in answer.split(b"\n"):
            if line.startswith(b"data: "):
                check_answer(line.removeprefix(b"data: "))
    elif answer:
        check_answer(answer)
    elif status not in (202, 204):
        raise AssertionError(f"{status} without a body")
    trap.check()


if __name__ == "__main__":
    run(test_one_input)
