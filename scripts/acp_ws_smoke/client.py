"""One `/acp` connection as a client opens it, and the words every check is written in.

``Target`` is the gateway under test (its URL, key, TLS context and prompt timeouts) and opens connections to it;
``Client`` is one open connection; a check fails by raising ``CheckFailed`` (``expect``, ``expect_error``) and
stands aside by raising ``Skipped``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import InvalidHandshake, InvalidStatus
from websockets.typing import Subprotocol

Json = dict[str, Any]
# A server request's answer from the mock extension: the result to send, or None to leave it unanswered.
RequestHandler = Callable[[Json], Awaitable[Any]]

ACP_SUBPROTOCOL = Subprotocol("acp.v1")
KEEPALIVE = "_openab/keepalive"  # the gateway's own idle notification; never part of what a check waits for


class CheckFailed(Exception):
    """A check's expectation was not met; the message says what the gateway did instead."""


class Skipped(Exception):
    """The check cannot run here; the message says why."""


@dataclass
class Reply:
    """What came back for one request: its response and what the gateway sent meanwhile."""

    response: Json
    updates: list[Json] = field(default_factory=list)
    others: list[Json] = field(default_factory=list)

    @property
    def result(self) -> Any:
        if "error" in self.response:
            raise CheckFailed(f"expected a result, got error {brief(self.response['error'])}")
        return self.response.get("result")

    @property
    def error_code(self) -> Any:
        error = self.response.get("error")
        return error.get("code") if isinstance(error, dict) else None

    def text(self) -> str:
        return "".join(
            str(u.get("update", {}).get("content", {}).get("text", ""))
            for u in self.updates
            if u.get("update", {}).get("sessionUpdate") == "agent_message_chunk"
        )


def brief(value: Any, limit: int = 160) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} chars)"


class Client:
    """One `/acp` connection: requests with ids 1, 2, 3 ..., server requests answered by ``on_request``."""

    def __init__(self, ws: ClientConnection, on_request: RequestHandler | None = None) -> None:
        self.ws = ws
        self.next_id = 0
        self.on_request = on_request
        self.server_requests: list[Json] = []

    async def send(self, message: Json | str) -> None:
        await self.ws.send(message if isinstance(message, str) else json.dumps(message, ensure_ascii=False))

    async def receive(self, timeout: float) -> Json:
        """The next frame that is not a keepalive; server requests are answered on the way."""
        async with asyncio.timeout(timeout):
            while True:
                raw = await self.ws.recv()
                if isinstance(raw, bytes):
                    continue
                message = json.loads(raw)
                if not isinstance(message, dict) or message.get("method") == KEEPALIVE:
                    continue
                if "method" in message and "id" in message:
                    self.server_requests.append(message)
                    if self.on_request is not None:
                        result = await self.on_request(message)
                        if result is not None:
                            await self.send({"jsonrpc": "2.0", "id": message["id"], "result": result})
                return message

    async def call(self, method: str, params: Any = None, *, timeout: float = 8.0,
                   request_id: Any = None, raw: Json | None = None) -> Reply:
        if raw is None:
            if request_id is None:
                self.next_id += 1
                request_id = self.next_id
            raw = {"jsonrpc": "2.0", "id": request_id, "method": method}
            if params is not None:
                raw["params"] = params
        await self.send(raw)
        return await self.until_response(raw.get("id"), timeout=timeout, what=method)

    async def until_response(self, request_id: Any, *, timeout: float, what: str,
                             on_update: Callable[[Json], Awaitable[None]] | None = None) -> Reply:
        reply = Reply(response={})
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise CheckFailed(f"no answer to {what} within {timeout:g} s")
            try:
                message = await self.receive(left)
            except TimeoutError:
                raise CheckFailed(f"no answer to {what} within {timeout:g} s") from None
            if "method" not in message and message.get("id") == request_id:
                reply.response = message
                return reply
            if message.get("method") == "session/update":
                reply.updates.append(message.get("params") or {})
                if on_update is not None:
                    await on_update(message)
            else:
                reply.others.append(message)

    async def notify(self, method: str, params: Any = None) -> None:
        message: Json = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        await self.send(message)

    async def initialize(self) -> Json:
        result = (await self.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})).result
        if not isinstance(result, dict):
            raise CheckFailed(f"initialize answered {brief(result)}")
        return result

    async def new_session(self, servers: list[Json] | None = None) -> str:
        result = (await self.call("session/new", {"cwd": "/home/agent", "mcpServers": servers or []})).result
        session_id = result.get("sessionId") if isinstance(result, dict) else None
        if not isinstance(session_id, str):
            raise CheckFailed(f"session/new answered {brief(result)}")
        return session_id

    async def prompt(self, session_id: str, text: str, *, timeout: float = 8.0) -> Reply:
        """One session/prompt of a single text block, answered or not within ``timeout``."""
        return await self.call("session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]},
                               timeout=timeout)

    async def resume(self, session_id: str) -> Reply:
        """session/resume of ``session_id`` on this socket, with no MCP servers."""
        return await self.call("session/resume", {"sessionId": session_id, "cwd": "/home/agent", "mcpServers": []})

    async def until(self, done: Callable[[], bool], seconds: float) -> None:
        """Frames are received (server requests answered on the way) until ``done()``, for at most ``seconds``."""
        deadline = time.monotonic() + seconds
        with contextlib.suppress(TimeoutError):
            while not done() and (left := deadline - time.monotonic()) > 0:
                await self.receive(left)

    async def quiet_for(self, seconds: float) -> list[Json]:
        """Every frame (keepalives aside) that arrives within ``seconds``."""
        frames: list[Json] = []
        deadline = time.monotonic() + seconds
        with contextlib.suppress(TimeoutError):
            while (left := deadline - time.monotonic()) > 0:
                frames.append(await self.receive(left))
        return frames


@dataclass
class Target:
    """The gateway under test: its URL, key and TLS context, how long its prompts may take; opens connections."""

    url: str
    token: str
    ssl_context: ssl.SSLContext | None
    prompt_timeout: float
    long_timeout: float

    @contextlib.asynccontextmanager
    async def open(self, *, token: str | None = "", header: bool = False, url: str | None = None,
                   on_request: RequestHandler | None = None) -> Any:
        """A connection; ``token`` "" means the right key, None none; ``header`` sends it as a Bearer header."""
        key = self.token if token == "" else token
        protocols = [ACP_SUBPROTOCOL]
        headers: dict[str, str] = {}
        if key is not None and header:
            headers["Authorization"] = f"Bearer {key}"
        elif key is not None:
            protocols.insert(0, Subprotocol(f"openab.bearer.{key}"))
        async with connect(url or self.url, subprotocols=protocols, additional_headers=headers, open_timeout=8,
                           close_timeout=3, max_size=None, ssl=self.ssl_context, ping_interval=None) as ws:
            yield Client(ws, on_request)

    async def refused(self, **options: Any) -> str:
        """How the handshake was refused; fails the check when it was accepted."""
        try:
            async with self.open(**options):
                pass
        except InvalidStatus as exc:
            return f"refused with HTTP {exc.response.status_code}"
        except InvalidHandshake as exc:
            return f"refused ({type(exc).__name__})"
        raise CheckFailed("the gateway accepted the connection")


Check = Callable[[Target], Awaitable[str]]


def expect(condition: bool, failure: str) -> None:
    if not condition:
        raise CheckFailed(failure)


def expect_error(reply: Reply, code: int, what: str) -> str:
    expect(reply.error_code == code, f"{what}: expected error {code}, got {brief(reply.response)}")
    return f"error {code}"
