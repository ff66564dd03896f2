#!/usr/bin/env python3
"""The operator's smoke test of a deployed openab gateway's `/acp` endpoint.

    OPENAB_ACP_TOKEN=<key> scripts/acp-ws-smoke.py wss://host/acp

It connects as a client would (and, for the tunnel checks, as a mock side-panel extension would), prints one
PASS/FAIL/SKIP line per check, a summary per section and ``RESULT: p/t checks passed``. Exit code: 0 when every
check that ran passed, 2 when any failed, 3 when it could not start (no key, a bad URL or CA file).

It needs only what ``pip install openab`` brings (``websockets``) and imports nothing of openab's own, so it
judges the gateway against the wire contract (docs/mcp-over-acp-tunnel-contract.md, docs/architecture.md) and not
against the code it tests. Prompts reach the pod's agent: a few checks need an agent that follows simple
instructions (a long reply, an exact echo, a long count to cancel): they say SKIP by themselves when the pod's
agent is the built-in one without a model (session/new names it ``builtin`` and it answers a one-word PONG request
with other words, its help), and ``--skip-model-checks`` skips them for any agent. No line it prints contains the
key.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import ssl
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus
from websockets.typing import Subprotocol

Json = dict[str, Any]
# A server request's answer from the mock extension: the result to send, or None to leave it unanswered.
RequestHandler = Callable[[Json], Awaitable[Any]]

ACP_SUBPROTOCOL = Subprotocol("acp.v1")
KEEPALIVE = "_openab/keepalive"  # the gateway's own idle notification; never part of what a check waits for
FRAME_LIMIT = 8 * 1024 * 1024
REQUEST_LIMIT = 1024 * 1024
NESTING_LIMIT = 128
MAX_ACP_SERVERS = 8
EXIT_FAILED = 2
EXIT_USAGE = 3

PONG_PROMPT = "Reply with exactly one word: PONG"
LINES_PROMPT = "Output the lines LINE 0001 to LINE 0600, one per line, each exactly as written, nothing else."
UNICODE_TEXT = "你好 🎉 👨‍👩‍👧‍👦 ❤️"
UNICODE_PROMPT = f"Repeat exactly, nothing else: {UNICODE_TEXT}"
COUNT_PROMPT = "Count from 1 to 400, one number per line, nothing else."
AGENT_META = "dev.openab/agent"  # session/new's answer names the session's agent under this _meta key
BUILTIN_AGENT = "builtin"


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


@dataclass
class Outcome:
    section: str
    name: str
    status: str  # PASS, FAIL, SKIP
    detail: str


Check = Callable[[Target], Awaitable[str]]


class Suite:
    def __init__(self, target: Target, *, skip_model: bool, check_timeout: float) -> None:
        self.target = target
        self.skip_model = skip_model
        self.check_timeout = check_timeout
        self.outcomes: list[Outcome] = []
        self._no_model: str | None = None
        self._probed = False

    async def run(self, section: str, name: str, check: Check, *, model: bool = False) -> None:
        if model and self.skip_model:
            self.report(Outcome(section, name, "SKIP", "needs a model that follows instructions "
                                                       "(--skip-model-checks)"))
            return
        if model and check not in QUOTED_BY_BUILTIN and (why := await self.no_model()) is not None:
            self.report(Outcome(section, name, "SKIP", why))
            return
        limit = self.check_timeout + (self.target.long_timeout if model else self.target.prompt_timeout)
        try:
            async with asyncio.timeout(limit):
                detail = await check(self.target)
            outcome = Outcome(section, name, "PASS", detail)
        except Skipped as exc:
            outcome = Outcome(section, name, "SKIP", str(exc))
        except CheckFailed as exc:
            outcome = Outcome(section, name, "FAIL", str(exc))
        except TimeoutError:
            outcome = Outcome(section, name, "FAIL", f"did not finish within {limit:g} s")
        except ConnectionClosed as exc:
            outcome = Outcome(section, name, "FAIL", f"the gateway closed the connection ({exc})")
        except (OSError, InvalidHandshake) as exc:
            outcome = Outcome(section, name, "FAIL", f"cannot connect: {type(exc).__name__}: {exc}")
        self.report(outcome)

    async def no_model(self) -> str | None:
        """Why the model checks cannot pass here, once per run: the pod's own built-in agent with no model behind
        it follows no free-form instruction. Any other agent, or a probe that goes wrong, lets the checks run
        (and say what they find)."""
        if not self._probed:
            self._probed = True
            with contextlib.suppress(CheckFailed, TimeoutError, ConnectionClosed, OSError, InvalidHandshake):
                async with asyncio.timeout(self.check_timeout + self.target.prompt_timeout):
                    self._no_model = await builtin_without_model(self.target)
        return self._no_model

    def report(self, outcome: Outcome) -> None:
        self.outcomes.append(outcome)
        detail = outcome.detail.replace(self.target.token, "<key>") if self.target.token else outcome.detail
        print(f"{outcome.status}  [{outcome.section}] {outcome.name}: {detail}", flush=True)

    def summary(self) -> bool:
        print()
        sections: dict[str, list[Outcome]] = {}
        for outcome in self.outcomes:
            sections.setdefault(outcome.section, []).append(outcome)
        for section, outcomes in sections.items():
            ran = [o for o in outcomes if o.status != "SKIP"]
            passed = sum(o.status == "PASS" for o in ran)
            skipped = len(outcomes) - len(ran)
            print(f"{section:<22} {passed}/{len(ran)}" + (f" ({skipped} skipped)" if skipped else ""))
        ran = [o for o in self.outcomes if o.status != "SKIP"]
        passed = sum(o.status == "PASS" for o in ran)
        print(f"RESULT: {passed}/{len(ran)} checks passed")
        return passed == len(ran)


def expect(condition: bool, failure: str) -> None:
    if not condition:
        raise CheckFailed(failure)


def expect_error(reply: Reply, code: int, what: str) -> str:
    expect(reply.error_code == code, f"{what}: expected error {code}, got {brief(reply.response)}")
    return f"error {code}"


# -- 1. transport and auth -----------------------------------------------------------------------------------


async def no_key(target: Target) -> str:
    return await target.refused(token=None)


async def wrong_key(target: Target) -> str:
    return await target.refused(token="wrong-" + target.token)


async def wrong_key_header(target: Target) -> str:
    return await target.refused(token="wrong-" + target.token, header=True)


async def key_in_query(target: Target) -> str:
    # A key in the URL ends up in proxy logs and histories: the gateway must not honour it.
    parts = urlsplit(target.url)
    query = (parts.query + "&" if parts.query else "") + f"token={target.token}"
    return await target.refused(token=None, url=urlunsplit(parts._replace(query=query)))


async def key_as_subprotocol(target: Target) -> str:
    async with target.open() as client:
        chosen = client.ws.subprotocol
        expect(chosen == ACP_SUBPROTOCOL, f"accepted, but the subprotocol echoed is {chosen!r}, not acp.v1")
        await client.initialize()
    return "accepted, acp.v1 echoed"


async def key_as_header(target: Target) -> str:
    async with target.open(header=True) as client:
        await client.initialize()
    return "accepted"


# -- 2. protocol ---------------------------------------------------------------------------------------------


async def initialize_shape(target: Target) -> str:
    async with target.open() as client:
        reply = await client.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        response, result = reply.response, reply.result
        expect(response.get("jsonrpc") == "2.0", f"jsonrpc is {response.get('jsonrpc')!r}")
        expect(response.get("id") == 1, f"the id came back as {response.get('id')!r}, sent 1")
        version = result.get("protocolVersion")
        expect(version == 1 and type(version) is int, f"protocolVersion is {version!r}, not the integer 1")
        capabilities = result.get("agentCapabilities") or {}
        expect(capabilities.get("loadSession") is False, "agentCapabilities.loadSession is not false")
        expect(isinstance((capabilities.get("sessionCapabilities") or {}).get("resume"), dict),
               "agentCapabilities.sessionCapabilities.resume is not an object")
        expect("promptCapabilities" in capabilities, "agentCapabilities.promptCapabilities is missing")
        expect(isinstance(result.get("authMethods"), list), "authMethods is not a list")
    return "protocolVersion 1, loadSession false, resume offered"


async def session_new(target: Target) -> str:
    async with target.open() as client:
        await client.initialize()
        session_id = await client.new_session()
        expect(session_id.startswith("sess_"), f"sessionId {session_id!r} does not start with sess_")
    return "sess_..."


async def prompt_pong(target: Target) -> str:
    async with target.open() as client:
        await client.initialize()
        session_id = await client.new_session()
        reply = await client.call("session/prompt", {"sessionId": session_id,
                                                     "prompt": [{"type": "text", "text": PONG_PROMPT}]},
                                  timeout=target.prompt_timeout)
        stop = reply.result.get("stopReason") if isinstance(reply.result, dict) else None
        expect(stop == "end_turn", f"stopReason {stop!r}, expected end_turn")
        chunks = [u for u in reply.updates if u.get("update", {}).get("sessionUpdate") == "agent_message_chunk"
                  and u.get("update", {}).get("content", {}).get("type") == "text"]
        expect(bool(chunks), "no agent_message_chunk text arrived before the answer")
        expect(all(u.get("sessionId") == session_id for u in reply.updates), "a session/update named another session")
    return f"{len(chunks)} text chunk(s), end_turn"


async def builtin_without_model(target: Target) -> str | None:
    """Why the pod's agent cannot pass the model checks, or None: session/new names the built-in agent, and it
    answers a one-word request with other words (its help). An agent that says nothing at all is not excused: that
    is a fault the checks are there to show."""
    async with target.open() as client:
        await client.initialize()
        result = (await client.call("session/new", {"cwd": "/home/agent", "mcpServers": []})).result
        meta = result.get("_meta") if isinstance(result, dict) else None
        agent = meta.get(AGENT_META) if isinstance(meta, dict) else None
        session_id = result.get("sessionId") if isinstance(result, dict) else None
        if agent != BUILTIN_AGENT or not isinstance(session_id, str):
            return None
        reply = await client.call("session/prompt", {"sessionId": session_id,
                                                     "prompt": [{"type": "text", "text": PONG_PROMPT}]},
                                  timeout=target.prompt_timeout)
        said = reply.text().strip()
    # Only the one word counts: the built-in agent quotes a request it cannot follow, PONG included.
    if not said or re.fullmatch(r"\W*pong\W*", said, re.IGNORECASE):
        return None
    return (f"the pod's agent is the built-in one without a model (asked for PONG, it said {brief(said, 80)}): "
            "give the pod a model (--model-url) or an agent CLI to run this check; --skip-model-checks skips it")


async def session_resume(target: Target) -> str:
    async with target.open() as client:
        await client.initialize()
        session_id = await client.new_session()
        result = (await client.call("session/resume", {"sessionId": session_id, "cwd": "/home/agent",
                                                       "mcpServers": []})).result
        expect(isinstance(result, dict) and not set(result) - {"_meta"}, f"session/resume answered {brief(result)}")
    return "{}"


async def unknown_method(target: Target) -> str:
    async with target.open() as client:
        await client.initialize()
        return expect_error(await client.call("openab/smoke/no-such-method", {}), -32601, "an unknown method")


async def session_close(target: Target) -> str:
    async with target.open() as client:
        await client.initialize()
        session_id = await client.new_session()
        expect((await client.call("session/close", {"sessionId": session_id})).result == {}, "close did not answer {}")
        again = await client.call("session/close", {"sessionId": session_id})
        expect("error" not in again.response, f"a second close failed: {brief(again.response)}")
        after = await client.call("session/prompt", {"sessionId": session_id,
                                                     "prompt": [{"type": "text", "text": PONG_PROMPT}]})
        expect("error" in after.response, "a prompt on the closed session was accepted")
    return "closed, idempotent, prompts refused after"


# -- 3. edge cases -------------------------------------------------------------------------------------------


async def version_high(target: Target) -> str:
    async with target.open() as client:
        result = (await client.call("initialize", {"protocolVersion": 5, "clientCapabilities": {}})).result
        expect(result.get("protocolVersion") == 1, f"protocolVersion 5 was answered with {brief(result)}")
    return "negotiated down to 1"


async def version_zero(target: Target) -> str:
    async with target.open() as client:
        return expect_error(await client.call("initialize", {"protocolVersion": 0}), -32602, "protocolVersion 0")


async def version_missing(target: Target) -> str:
    async with target.open() as client:
        return expect_error(await client.call("initialize", {"clientCapabilities": {}}), -32602, "no protocolVersion")


async def new_before_initialize(target: Target) -> str:
    async with target.open() as client:
        reply = await client.call("session/new", {"cwd": "/home/agent", "mcpServers": []})
        return expect_error(reply, -32002, "session/new before initialize")


async def wrong_jsonrpc(target: Target) -> str:
    async with target.open() as client:
        reply = await client.call("", raw={"jsonrpc": "1.0", "id": 1, "method": "initialize",
                                           "params": {"protocolVersion": 1}})
        return expect_error(reply, -32600, 'jsonrpc "1.0"')


async def object_id(target: Target) -> str:
    async with target.open() as client:
        await client.send({"jsonrpc": "2.0", "id": {}, "method": "initialize", "params": {"protocolVersion": 1}})
        return expect_error(await client.until_response(None, timeout=8, what="id {}"), -32600, "an object id")


async def new_without_cwd(target: Target) -> str:
    async with target.open() as client:
        await client.initialize()
        return expect_error(await client.call("session/new", {"mcpServers": []}), -32602, "session/new without cwd")


async def resume_without_id(target: Target) -> str:
    async with target.open() as client:
        await client.initialize()
        reply = await client.call("session/resume", {"cwd": "/home/agent", "mcpServers": []})
        return expect_error(reply, -32602, "session/resume without sessionId")


async def prompt_resource_link(target: Target) -> str:
    async with target.open() as client:
        await client.initialize()
        session_id = await client.new_session()
        reply = await client.call("session/prompt", {"sessionId": session_id, "prompt": [
            {"type": "text", "text": PONG_PROMPT},
            {"type": "resource_link", "uri": "file:///x", "name": "X"},
        ]}, timeout=target.prompt_timeout)
        expect("error" not in reply.response, f"a resource_link block was refused: {brief(reply.response)}")
    return "accepted"


async def prompt_image(target: Target) -> str:
    async with target.open() as client:
        await client.initialize()
        session_id = await client.new_session()
        reply = await client.call("session/prompt", {"sessionId": session_id, "prompt": [
            {"type": "image", "mimeType": "image/png", "data": "iVBORw0KGgo="},
        ]})
        return expect_error(reply, -32602, "an image block (not offered in promptCapabilities)")


async def cancel_is_silent(target: Target) -> str:
    async with target.open() as client:
        await client.initialize()
        session_id = await client.new_session()
        await client.notify("session/cancel", {"sessionId": session_id})
        frames = await client.quiet_for(3.0)
        expect(not frames, f"a session/cancel notification was answered: {brief(frames[0]) if frames else ''}")
    return "no frame within 3 s"


async def cancel_with_id(target: Target) -> str:
    async with target.open() as client:
        await client.initialize()
        session_id = await client.new_session()
        return expect_error(await client.call("session/cancel", {"sessionId": session_id}), -32600,
                            "session/cancel sent as a request")


async def oversized_reply(target: Target) -> str:
    async with target.open() as client:
        await client.initialize()
        session_id = await client.new_session()
        reply = await client.call("session/prompt", {"sessionId": session_id,
                                                     "prompt": [{"type": "text", "text": LINES_PROMPT}]},
                                  timeout=target.long_timeout)
        text = reply.text()
        numbers = [int(word) for line in text.splitlines() if (word := line.strip().removeprefix("LINE ")).isdigit()]
        expect(len(text) > 4096, f"the reply is {len(text)} chars; a 600-line reply must be longer than 4096")
        expect(max(numbers, default=0) >= 550, f"the last LINE seen is {max(numbers, default=0)}, expected 550+")
    return f"{len(text)} chars, up to LINE {max(numbers):04d}"


async def unicode_intact(target: Target) -> str:
    async with target.open() as client:
        await client.initialize()
        session_id = await client.new_session()
        reply = await client.call("session/prompt", {"sessionId": session_id,
                                                     "prompt": [{"type": "text", "text": UNICODE_PROMPT}]},
                                  timeout=target.prompt_timeout)
        expect("error" not in reply.response, f"the prompt failed: {brief(reply.response)}")
        missing = [marker for marker in UNICODE_TEXT.split() if marker not in reply.text()]
        expect(not missing, f"missing from the reply: {' '.join(missing)} (got {brief(reply.text())})")
    return "every marker intact"


# -- 4. limits -----------------------------------------------------------------------------------------------


async def frame_over_limit(target: Target) -> str:
    async with target.open() as client:
        await client.initialize()
        pad = "x" * (FRAME_LIMIT + 64)
        await client.send(json.dumps({"jsonrpc": "2.0", "id": 7, "method": "initialize",
                                      "params": {"protocolVersion": 1, "pad": pad}}))
        try:
            frames = await client.quiet_for(10.0)
        except ConnectionClosed as exc:
            code = exc.rcvd.code if exc.rcvd else None
            return f"closed ({code})"
        raise CheckFailed(f"the socket stayed open after an {FRAME_LIMIT + 64}-byte frame"
                          + (f" and answered {brief(frames[0])}" if frames else ""))


async def request_over_limit(target: Target) -> str:
    async with target.open() as client:
        await client.initialize()
        pad = "x" * (REQUEST_LIMIT + 64)
        reply = await client.call("initialize", {"protocolVersion": 1, "pad": pad}, timeout=15)
        expect("error" in reply.response, "a request over 1 MiB was answered with a result")
        follow = await client.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        expect(follow.result.get("protocolVersion") == 1, "the socket did not answer after the refusal")
    return f"error {reply.error_code}, socket still serves"


async def id_too_long(target: Target) -> str:
    async with target.open() as client:
        await client.send({"jsonrpc": "2.0", "id": "i" * 1025, "method": "initialize",
                           "params": {"protocolVersion": 1}})
        return expect_error(await client.until_response(None, timeout=8, what="a 1025-char id"), -32600,
                            "a 1025-character id")


async def nested_too_deep(target: Target) -> str:
    async with target.open() as client:
        depth = NESTING_LIMIT + 2
        await client.send('{"jsonrpc":"2.0","id":5,"method":"initialize","params":' + "[" * depth + "]" * depth + "}")
        reply = await client.until_response(5, timeout=8, what="a message nested too deep")
        expect_error(reply, -32600, f"a message {depth + 1} levels deep")
        follow = await client.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        expect(follow.result.get("protocolVersion") == 1, "the socket did not answer after the refusal")
    return "error -32600, socket still serves"


async def too_many_servers(target: Target) -> str:
    async with target.open(on_request=answer_connect) as client:
        await client.initialize()
        servers = [{"type": "acp", "id": f"srv-{n}", "name": f"browser-{n}"} for n in range(MAX_ACP_SERVERS + 1)]
        reply = await client.call("session/new", {"cwd": "/home/agent", "mcpServers": servers})
        expect("error" in reply.response, f"{len(servers)} acp servers were accepted (the limit is {MAX_ACP_SERVERS})")
    return f"error {reply.error_code}"


async def not_json(target: Target) -> str:
    async with target.open() as client:
        await client.send("{not json")
        reply = await client.until_response(None, timeout=8, what="a frame that is not JSON")
        expect_error(reply, -32700, "a frame that is not JSON")
        await client.initialize()
    return "error -32700, socket still serves"


# -- 5. lifecycle --------------------------------------------------------------------------------------------


async def cancel_running_prompt(target: Target) -> str:
    async with target.open() as client:
        await client.initialize()
        session_id = await client.new_session()
        client.next_id += 1
        prompt_id = client.next_id
        await client.send({"jsonrpc": "2.0", "id": prompt_id, "method": "session/prompt",
                           "params": {"sessionId": session_id, "prompt": [{"type": "text", "text": COUNT_PROMPT}]}})
        cancelled = False

        async def cancel_once(_update: Json) -> None:
            nonlocal cancelled
            if not cancelled:
                cancelled = True
                await client.notify("session/cancel", {"sessionId": session_id})

        reply = await client.until_response(prompt_id, timeout=target.long_timeout, what="the cancelled prompt",
                                            on_update=cancel_once)
        expect(cancelled, "the prompt ended before any session/update, so there was nothing to cancel")
        stop = reply.result.get("stopReason") if isinstance(reply.result, dict) else None
        expect(stop == "cancelled", f"stopReason {stop!r} after session/cancel, expected cancelled")
    return "stopReason cancelled"


async def resume_elsewhere(target: Target) -> str:
    async with target.open() as first, target.open() as second:
        await first.initialize()
        session_id = await first.new_session()
        await second.initialize()
        result = (await second.call("session/resume", {"sessionId": session_id, "cwd": "/home/agent",
                                                       "mcpServers": []})).result
        expect(isinstance(result, dict), f"session/resume from a second socket answered {brief(result)}")
        told = await first.quiet_for(2.0)
        moved = [m for m in told if m.get("method") == "_openab/session/moved"]
        expect(bool(moved), "the socket that lost the session was not told (_openab/session/moved)")
        reply = await first.call("session/prompt", {"sessionId": session_id,
                                                    "prompt": [{"type": "text", "text": PONG_PROMPT}]})
        expect("error" in reply.response, "the old socket could still prompt the session it lost")
    return "taken over; the old socket told and refused"


async def foreign_session(target: Target) -> str:
    # Another client's session id must not let this one prompt or close it.
    async with target.open() as owner, target.open() as other:
        await owner.initialize()
        session_id = await owner.new_session()
        await other.initialize()
        await other.call("session/close", {"sessionId": session_id})
        prompting = await other.call("session/prompt", {"sessionId": session_id,
                                                        "prompt": [{"type": "text", "text": PONG_PROMPT}]})
        expect("error" in prompting.response, "another socket prompted a session it does not hold")
        # Closing is idempotent, so a foreign close may be answered {}; what counts is that nothing was closed.
        still = await owner.call("session/prompt", {"sessionId": session_id,
                                                    "prompt": [{"type": "text", "text": PONG_PROMPT}]},
                                 timeout=target.prompt_timeout)
        expect("error" not in still.response,
               f"after another socket's session/close the owner cannot prompt: {brief(still.response)}")
    return "refused"


# -- 6. the MCP-over-ACP tunnel, with a mock extension -------------------------------------------------------


class MockExtension:
    """Answers `mcp/connect` with ``conn-N`` and the inner MCP handshake with one harmless tool."""

    def __init__(self) -> None:
        self.connects: list[Json] = []
        self.inner: list[Json] = []

    async def __call__(self, request: Json) -> Any:
        params = request.get("params") or {}
        if request.get("method") == "mcp/connect":
            self.connects.append(request)
            return {"connectionId": f"conn-{len(self.connects)}"}
        if request.get("method") == "mcp/message":
            self.inner.append(request)
            if params.get("method") == "initialize":
                return {"protocolVersion": params.get("protocolVersion", "2025-06-18"), "capabilities": {"tools": {}},
                        "serverInfo": {"name": "acp-ws-smoke", "version": "1"}}
            if params.get("method") == "tools/list":
                return {"tools": [{"name": "smoke_echo", "description": "echoes its text",
                                   "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}}]}
        return None

    def handshakes_done(self, count: int) -> bool:
        """``count`` connections made, and each one's inner handshake as far as its tool list."""
        listed = sum(1 for m in self.inner if (m.get("params") or {}).get("method") == "tools/list")
        return len(self.connects) >= count and listed >= count


async def answer_connect(request: Json) -> Any:
    if request.get("method") == "mcp/connect":
        return {"connectionId": "conn-1"}
    return None


async def declared_servers(target: Target, servers: list[Json]) -> MockExtension:
    mock = MockExtension()
    expected = sum(1 for server in servers if server.get("type") == "acp")
    async with target.open(on_request=mock) as client:
        await client.initialize()
        await client.new_session(servers)
        # mcp/connect comes after the session/new answer, then the inner handshake; once the expected ones are
        # done, a quiet spell shows any extra or repeated connection.
        await client.until(lambda: mock.handshakes_done(expected), 10.0)
        await client.quiet_for(2.0)
    return mock


async def tunnel_single(target: Target) -> str:
    mock = await declared_servers(target, [{"type": "acp", "id": "srv-solo", "name": "browser"}])
    expect(len(mock.connects) == 1, f"{len(mock.connects)} mcp/connect requests for one declared server")
    params = mock.connects[0].get("params") or {}
    expect(params.get("acpId") == "srv-solo", f"mcp/connect named {brief(params)}, not acpId srv-solo")
    return "one mcp/connect, acpId srv-solo"


async def tunnel_handshake(target: Target) -> str:
    mock = await declared_servers(target, [{"type": "acp", "id": "srv-solo", "name": "browser"}])
    methods = [(m.get("params") or {}).get("method") for m in mock.inner]
    expect(bool(mock.connects), "no mcp/connect")
    expect("initialize" in methods, f"no inner initialize on conn-1 (inner requests: {methods})")
    connection_ids = {(m.get("params") or {}).get("connectionId") for m in mock.inner}
    expect(connection_ids == {"conn-1"}, f"inner messages named connections {sorted(map(str, connection_ids))}")
    return "inner " + ", ".join(str(m) for m in methods)


async def tunnel_two(target: Target) -> str:
    mock = await declared_servers(target, [{"type": "acp", "id": "srv-a", "name": "browser-a"},
                                           {"type": "acp", "id": "srv-b", "name": "browser-b"}])
    named = sorted(str((m.get("params") or {}).get("acpId")) for m in mock.connects)
    expect(named == ["srv-a", "srv-b"], f"mcp/connect for {named}, expected srv-a and srv-b once each")
    ids = [m.get("id") for m in mock.connects]
    expect(len(set(map(json.dumps, ids))) == 2, f"the two mcp/connect requests share an id: {ids}")
    return "one each, distinct ids"


async def tunnel_mixed(target: Target) -> str:
    mock = await declared_servers(target, [{"type": "acp", "id": "srv-x", "name": "browser"},
                                           {"type": "http", "name": "web", "url": "http://example/mcp", "headers": []}])
    named = [str((m.get("params") or {}).get("acpId")) for m in mock.connects]
    expect(named == ["srv-x"], f"mcp/connect for {named}, expected only srv-x")
    return "only srv-x connected"


async def tunnel_refused_connect(target: Target) -> str:
    # An extension that refuses the connection must not break the session.
    async def refuse(request: Json) -> Any:
        if request.get("method") == "mcp/connect":
            await client.send({"jsonrpc": "2.0", "id": request["id"],
                               "error": {"code": -32603, "message": "no browser here"}})
        return None

    async with target.open(on_request=refuse) as client:
        await client.initialize()
        session_id = await client.new_session([{"type": "acp", "id": "srv-r", "name": "browser"}])
        await client.quiet_for(2.0)
        result = (await client.call("session/resume", {"sessionId": session_id, "cwd": "/home/agent",
                                                       "mcpServers": []})).result
        expect(isinstance(result, dict), "the session did not survive a refused mcp/connect")
    return "session still serves"


SECTIONS: list[tuple[str, list[tuple[str, Check, bool]]]] = [
    ("Transport / Auth", [
        ("no key", no_key, False),
        ("wrong key (subprotocol)", wrong_key, False),
        ("wrong key (Authorization header)", wrong_key_header, False),
        ("key only in the query string", key_in_query, False),
        ("key as subprotocol openab.bearer.<key>", key_as_subprotocol, False),
        ("key as Authorization: Bearer", key_as_header, False),
    ]),
    ("Protocol", [
        ("initialize", initialize_shape, False),
        ("session/new", session_new, False),
        ("session/prompt streams and ends", prompt_pong, False),
        ("session/resume", session_resume, False),
        ("unknown method", unknown_method, False),
        ("session/close", session_close, False),
    ]),
    ("Edge cases", [
        ("initialize protocolVersion 5", version_high, False),
        ("initialize protocolVersion 0", version_zero, False),
        ("initialize without protocolVersion", version_missing, False),
        ("session/new before initialize", new_before_initialize, False),
        ('jsonrpc "1.0"', wrong_jsonrpc, False),
        ("id {}", object_id, False),
        ("not JSON", not_json, False),
        ("session/new without cwd", new_without_cwd, False),
        ("session/resume without sessionId", resume_without_id, False),
        ("prompt with a resource_link", prompt_resource_link, False),
        ("prompt with an image", prompt_image, False),
        ("session/cancel notification is not answered", cancel_is_silent, False),
        ("session/cancel with an id", cancel_with_id, False),
        ("a 600-line reply arrives whole", oversized_reply, True),
        ("unicode round trip", unicode_intact, True),
    ]),
    ("Limits", [
        ("frame over 8 MiB closes the socket", frame_over_limit, False),
        ("request over 1 MiB is refused, socket stays", request_over_limit, False),
        ("id over 1024 characters", id_too_long, False),
        ("nesting over 128 levels", nested_too_deep, False),
        ("more than 8 acp servers", too_many_servers, False),
    ]),
    ("Lifecycle", [
        ("session/cancel ends a running prompt", cancel_running_prompt, True),
        ("session/resume from another socket", resume_elsewhere, False),
        ("another socket's session", foreign_session, False),
    ]),
    ("MCP-over-ACP tunnel", [
        ("one acp server, one mcp/connect", tunnel_single, False),
        ("inner MCP handshake", tunnel_handshake, False),
        ("two acp servers", tunnel_two, False),
        ("acp and http servers mixed", tunnel_mixed, False),
        ("mcp/connect refused", tunnel_refused_connect, False),
    ]),
]


# The built-in agent quotes a request it cannot follow, so an exact echo passes through it too: against a default
# pod this still checks that the ingress keeps UTF-8 intact.
QUOTED_BY_BUILTIN: frozenset[Check] = frozenset({unicode_intact})


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Smoke-test a deployed openab gateway's /acp endpoint. The key comes from OPENAB_ACP_TOKEN "
                    "(never a flag: it would show in `ps`).")
    parser.add_argument("url", nargs="?", default=os.environ.get("ACP_URL", "ws://localhost:8080/acp"),
                        help="the gateway's /acp URL, ws:// or wss:// (default $ACP_URL, else ws://localhost:8080/acp)")
    parser.add_argument("--ca-file", help="trust this CA bundle (PEM) for wss://, e.g. the pod's self-signed CA")
    parser.add_argument("--skip-model-checks", action="store_true",
                        help="skip the checks that need an agent that follows instructions (no model behind the pod)")
    parser.add_argument("--prompt-timeout", type=float, default=90.0, help="seconds a short prompt may take")
    parser.add_argument("--long-timeout", type=float, default=180.0, help="seconds a long prompt may take")
    parser.add_argument("--only", action="append", metavar="SECTION",
                        help="run only the sections whose name contains this (repeatable), e.g. --only tunnel")
    return parser.parse_args(argv)


async def main_async(args: argparse.Namespace, token: str) -> int:
    context: ssl.SSLContext | None = None
    if args.url.startswith("wss://"):
        context = ssl.create_default_context(cafile=args.ca_file)
    target = Target(args.url, token, context, args.prompt_timeout, args.long_timeout)
    suite = Suite(target, skip_model=args.skip_model_checks, check_timeout=30.0)
    print(f"acp-ws-smoke: {args.url}", flush=True)
    for section, checks in SECTIONS:
        if args.only and not any(word.lower() in section.lower() for word in args.only):
            continue
        for name, check, model in checks:
            await suite.run(section, name, check, model=model)
    return 0 if suite.summary() else EXIT_FAILED


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    token = os.environ.get("OPENAB_ACP_TOKEN", "")
    if not token:
        print("acp-ws-smoke: set OPENAB_ACP_TOKEN to the gateway's key (the checks need a key to compare "
              "refusals against)", file=sys.stderr)
        return EXIT_USAGE
    if urlsplit(args.url).scheme not in ("ws", "wss"):
        print(f"acp-ws-smoke: {args.url!r} is not a ws:// or wss:// URL", file=sys.stderr)
        return EXIT_USAGE
    if args.ca_file and not os.path.isfile(args.ca_file):
        print(f"acp-ws-smoke: --ca-file {args.ca_file} does not exist", file=sys.stderr)
        return EXIT_USAGE
    try:
        return asyncio.run(main_async(args, token))
    except KeyboardInterrupt:
        return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
