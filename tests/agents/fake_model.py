"""A scripted fake model server, so real agent CLIs can run offline against it.

One Starlette app speaks the four wire formats the agent CLIs use:

* OpenAI Chat Completions   ``POST /v1/chat/completions``   (opencode; streaming ``tool_calls``)
* OpenAI Responses          ``POST /v1/responses``          (codex, codex-acp; namespace tools)
* Anthropic Messages        ``POST /v1/messages`` (+ ``/count_tokens``)  (claude, claude-agent-acp)
* Gemini                    ``POST /v1beta/models/M:streamGenerateContent`` (gemini)
* ``GET /v1/models``        (some CLIs list models)

What the model says is decided per request from the conversation, so side requests (titles,
summaries, classifiers) never disturb the main turn:

1. Count the tool results already in the conversation: n.
2. If the script has an n-th call and the request offers a tool whose name is the call's
   ``tool`` or ends in ``_tool`` / ``.tool`` / ``-tool`` (every CLI prefixes MCP tools with its
   own server-name scheme), call it with the call's arguments.
3. Else, if the conversation ends in a tool result, answer ``script.answer`` with ``{result}``
   replaced by that result's text.
4. Else answer ``script.text``.

Requests that offer tools are the main turn; those can be slowed (``delay``) or held until
released or until the client goes away (``hang``), for cancel tests. Every request is logged.

Run it alone with ``python tests/agents/fake_model.py --tool echo`` (it prints its URL).
"""

from __future__ import annotations

import argparse
import json
import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

Json = dict[str, Any]

ANSWER = "FINAL ANSWER: tool returned <<{result}>>"


@dataclass
class Call:
    """One tool call the model makes: ``tool`` matches a tool name exactly or as a suffix."""

    tool: str
    arguments: Json = field(default_factory=dict)


@dataclass
class Script:
    """What the model does in a test. See the module docstring for the rules."""

    calls: list[Call] = field(default_factory=list)
    answer: str = ANSWER
    text: str = "Fake title"
    delay: float = 0.0  # seconds before each main-turn response
    hang: bool = False  # hold main-turn responses until release() or the client disconnects


@dataclass
class Logged:
    """One request the fake model received and what it decided."""

    kind: str  # chat, responses, anthropic, gemini, count_tokens, models, unknown
    path: str
    headers: dict[str, str]
    body: Json
    tools: list[str]
    decision: str  # "call", "answer", "text", or "" for non-model endpoints
    tool: str | None = None
    arguments: Json | None = None
    text: str | None = None
    finished: bool = False  # the full response went out (False: still hanging, or the client left)


def pick_tool(names: list[str], wanted: str) -> str | None:
    if wanted in names:
        return wanted
    for name in names:
        if name.endswith(("_" + wanted, "." + wanted, "-" + wanted)):
            return name
    return None


def flatten(content: Any) -> str:
    """Text of the assorted shapes a tool result comes back in."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(flatten(c) for c in content)
    if isinstance(content, dict):
        for key in ("text", "output", "content"):
            if key in content:
                return flatten(content[key])
        return json.dumps(content)
    return str(content)


@dataclass
class Turn:
    """The conversation as the fake needs it, whatever the wire format."""

    tools: list[str]
    results: list[str]  # tool results in order
    ends_in_result: bool


def chat_turn(body: Json) -> Turn:
    msgs = body.get("messages") or []
    tools = [t["function"]["name"] for t in body.get("tools") or [] if (t.get("function") or {}).get("name")]
    results = [flatten(m.get("content")) for m in msgs if m.get("role") == "tool"]
    return Turn(tools, results, bool(msgs) and msgs[-1].get("role") == "tool")


def responses_turn(body: Json) -> Turn:
    items = body.get("input") or []
    if isinstance(items, str):
        items = [{"type": "message", "role": "user", "content": items}]
    tools: list[str] = []
    for t in body.get("tools") or []:
        if t.get("type") == "namespace":  # codex groups each MCP server's tools: "mcp__<server>"
            tools += [f"{t['name']}.{sub['name']}" for sub in t.get("tools") or [] if sub.get("name")]
        elif t.get("name"):
            tools.append(t["name"])
    outputs = [i for i in items if str(i.get("type", "")).endswith("_call_output")]
    last = str(items[-1].get("type", "")) if items else ""
    return Turn(tools, [flatten(o.get("output")) for o in outputs], last.endswith("_call_output"))


def anthropic_turn(body: Json) -> Turn:
    msgs = body.get("messages") or []
    tools = [t["name"] for t in body.get("tools") or [] if t.get("name")]

    def tool_results(msg: Json) -> list[Json]:
        content = msg.get("content")
        return [c for c in content if c.get("type") == "tool_result"] if isinstance(content, list) else []

    results = [flatten(r.get("content")) for m in msgs for r in tool_results(m)]
    return Turn(tools, results, bool(msgs) and bool(tool_results(msgs[-1])))


def gemini_turn(body: Json) -> Turn:
    contents = body.get("contents") or []
    tools = [
        fd["name"]
        for t in body.get("tools") or []
        for fd in t.get("functionDeclarations") or t.get("function_declarations") or []
        if fd.get("name")
    ]

    def responses(c: Json) -> list[Json]:
        return [p["functionResponse"] for p in c.get("parts") or [] if "functionResponse" in p]

    results = [json.dumps(r.get("response")) for c in contents for r in responses(c)]
    return Turn(tools, results, bool(contents) and bool(responses(contents[-1])))


def sse(data: Any, event: str | None = None) -> str:
    head = f"event: {event}\n" if event else ""
    return head + "data: " + (data if isinstance(data, str) else json.dumps(data)) + "\n\n"


def pieces(text: str, size: int = 16) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


class FakeModel:
    """The server's state: the current script, the request log, and the hang switch."""

    def __init__(self, script: Script | None = None) -> None:
        self.script = script or Script()
        self.log: list[Logged] = []
        self.url = ""  # set once serving: http://127.0.0.1:PORT
        self.port = 0
        self.hanging = threading.Event()  # set while a main-turn response is held
        self._released = threading.Event()
        self._lock = threading.Lock()
        self.app = Starlette(
            routes=[
                Route("/{path:path}", self._get, methods=["GET"]),
                Route("/{path:path}", self._post, methods=["POST"]),
            ]
        )

    # -- what tests use ---------------------------------------------------------------------------

    def set_script(self, script: Script) -> None:
        self._released.clear()
        self.script = script

    def release(self) -> None:
        """Let held (``hang``) responses go out."""
        self._released.set()

    def calls(self) -> list[Logged]:
        """The requests the model answered with a tool call."""
        return [r for r in self.log if r.decision == "call"]

    def answers(self) -> list[Logged]:
        return [r for r in self.log if r.decision == "answer"]

    async def wait_hanging(self, timeout: float = 60) -> None:
        """Wait (without blocking the event loop) until a main-turn response is being held."""
        if not await anyio.to_thread.run_sync(self.hanging.wait, timeout):
            raise TimeoutError(f"no main-turn request reached the fake model in {timeout} s")

    # -- decisions ---------------------------------------------------------------------------------

    def decide(self, kind: str, request: Request, body: Json, turn: Turn) -> Logged:
        script = self.script
        entry = Logged(kind, request.url.path, dict(request.headers), body, turn.tools, "text", text=script.text)
        n = len(turn.results)
        tool = pick_tool(turn.tools, script.calls[n].tool) if n < len(script.calls) else None
        if tool is not None:
            entry.decision, entry.tool, entry.arguments, entry.text = "call", tool, script.calls[n].arguments, None
        elif turn.ends_in_result:
            entry.decision, entry.text = "answer", script.answer.replace("{result}", turn.results[-1])
        with self._lock:
            self.log.append(entry)
        return entry

    def _note(self, kind: str, request: Request, body: Json) -> None:
        """Log a request to an endpoint that is not a model turn."""
        with self._lock:
            self.log.append(Logged(kind, request.url.path, dict(request.headers), body, [], "", finished=True))

    async def _hold(self, entry: Logged) -> None:
        if not entry.tools:  # side requests (titles, summaries) are never held
            return
        if self.script.delay:
            await anyio.sleep(self.script.delay)
        if self.script.hang:
            self.hanging.set()
            # Abandoned on cancel: a client that goes away ends the response; release() ends the thread.
            await anyio.to_thread.run_sync(self._released.wait, abandon_on_cancel=True)

    def _stream(self, entry: Logged, events: Iterator[str]) -> StreamingResponse:
        async def body() -> AsyncIterator[str]:
            await self._hold(entry)
            for event in events:
                yield event
            entry.finished = True

        return StreamingResponse(body(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"})

    async def _json(self, entry: Logged, payload: Json) -> JSONResponse:
        await self._hold(entry)
        entry.finished = True
        return JSONResponse(payload)

    # -- routes ------------------------------------------------------------------------------------

    async def _get(self, request: Request) -> Response:
        if request.url.path.endswith("/models"):
            self._note("models", request, {})
            return JSONResponse(
                {"object": "list", "data": [{"id": "fake-model", "object": "model", "created": 0, "owned_by": "fake"}]}
            )
        self._note("unknown", request, {})
        return JSONResponse({"error": {"message": f"no GET {request.url.path} here"}}, status_code=404)

    async def _post(self, request: Request) -> Response:
        path = request.url.path
        try:
            body = json.loads(await request.body() or b"{}")
        except ValueError:
            return JSONResponse({"error": {"message": "body is not JSON"}}, status_code=400)
        if path.endswith("/chat/completions"):
            return await self.chat(request, body)
        if path.endswith("/responses"):
            return await self.responses(request, body)
        if path.endswith("/messages/count_tokens"):
            self._note("count_tokens", request, body)
            return JSONResponse({"input_tokens": 42})
        if path.endswith("/messages"):
            return await self.anthropic(request, body)
        if ":streamGenerateContent" in path or ":generateContent" in path:
            return await self.gemini(request, body)
        if ":countTokens" in path:
            self._note("count_tokens", request, body)
            return JSONResponse({"totalTokens": 42})
        self._note("unknown", request, body)
        return JSONResponse({"error": {"message": f"the fake model has no {path}"}}, status_code=404)

    # -- OpenAI Chat Completions -------------------------------------------------------------------

    async def chat(self, request: Request, body: Json) -> Response:
        entry = self.decide("chat", request, body, chat_turn(body))
        model = body.get("model", "fake-model")
        base = {"id": "chatcmpl-" + uuid.uuid4().hex[:12], "object": "chat.completion.chunk",
                "created": int(time.time()), "model": model}
        usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        call_id = "call_" + uuid.uuid4().hex[:12]
        args = json.dumps(entry.arguments)
        if not body.get("stream"):
            if entry.tool:
                message: Json = {"role": "assistant", "content": None, "tool_calls": [
                    {"id": call_id, "type": "function", "function": {"name": entry.tool, "arguments": args}}]}
            else:
                message = {"role": "assistant", "content": entry.text}
            finish = "tool_calls" if entry.tool else "stop"
            return await self._json(entry, {**base, "object": "chat.completion", "usage": usage,
                                            "choices": [{"index": 0, "message": message, "finish_reason": finish}]})

        def chunk(delta: Json, finish: str | None = None) -> str:
            return sse({**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})

        def events() -> Iterator[str]:
            yield chunk({"role": "assistant", "content": "" if entry.text else None})
            if entry.tool:
                yield chunk({"tool_calls": [{"index": 0, "id": call_id, "type": "function",
                                             "function": {"name": entry.tool, "arguments": ""}}]})
                for part in pieces(args):  # arguments arrive in fragments, as from a real model
                    yield chunk({"tool_calls": [{"index": 0, "function": {"arguments": part}}]})
                yield chunk({}, "tool_calls")
            else:
                for part in pieces(entry.text or ""):
                    yield chunk({"content": part})
                yield chunk({}, "stop")
            if (body.get("stream_options") or {}).get("include_usage"):
                yield sse({**base, "choices": [], "usage": usage})
            yield sse("[DONE]")

        return self._stream(entry, events())

    # -- OpenAI Responses --------------------------------------------------------------------------

    async def responses(self, request: Request, body: Json) -> Response:
        entry = self.decide("responses", request, body, responses_turn(body))
        item: Json
        if entry.tool:
            item = {"type": "function_call", "id": "fc_" + uuid.uuid4().hex[:12], "status": "completed",
                    "call_id": "call_" + uuid.uuid4().hex[:12], "name": entry.tool,
                    "arguments": json.dumps(entry.arguments)}
            if "." in entry.tool:  # codex rejects a bare name for a namespaced (MCP) tool
                item["namespace"], item["name"] = entry.tool.rsplit(".", 1)
        else:
            item = {"type": "message", "id": "msg_" + uuid.uuid4().hex[:12], "status": "completed", "role": "assistant",
                    "content": [{"type": "output_text", "text": entry.text, "annotations": []}]}
        usage = {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 5,
                 "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 15}
        response = {"id": "resp_" + uuid.uuid4().hex[:12], "object": "response", "created_at": int(time.time()),
                    "status": "completed", "model": body.get("model", "fake-model"), "output": [item], "usage": usage}
        if not body.get("stream"):
            return await self._json(entry, response)

        def events() -> Iterator[str]:
            seq = iter(range(1_000_000))

            def event(kind: str, **fields: Any) -> str:
                return sse({"type": kind, "sequence_number": next(seq), **fields}, kind)

            yield event("response.created", response={**response, "status": "in_progress", "output": []})
            if item["type"] == "message":
                yield event("response.output_item.added", output_index=0,
                            item={**item, "status": "in_progress", "content": []})
                at = {"item_id": item["id"], "output_index": 0, "content_index": 0}
                yield event("response.content_part.added", **at, part={"type": "output_text", "text": "",
                                                                       "annotations": []})
                for part in pieces(entry.text or ""):
                    yield event("response.output_text.delta", **at, delta=part)
                yield event("response.output_text.done", **at, text=entry.text)
            else:
                yield event("response.output_item.added", output_index=0, item=item)
                at = {"item_id": item["id"], "output_index": 0}
                yield event("response.function_call_arguments.delta", **at, delta=item["arguments"])
                yield event("response.function_call_arguments.done", **at, arguments=item["arguments"])
            yield event("response.output_item.done", output_index=0, item=item)
            yield event("response.completed", response=response)

        return self._stream(entry, events())

    # -- Anthropic Messages ------------------------------------------------------------------------

    async def anthropic(self, request: Request, body: Json) -> Response:
        entry = self.decide("anthropic", request, body, anthropic_turn(body))
        message_id = "msg_" + uuid.uuid4().hex[:16]
        model = body.get("model", "fake-model")
        usage = {"input_tokens": 10, "output_tokens": 5, "cache_creation_input_tokens": 0,
                 "cache_read_input_tokens": 0}
        block: Json
        if entry.tool:
            block = {"type": "tool_use", "id": "toolu_" + uuid.uuid4().hex[:16], "name": entry.tool,
                     "input": entry.arguments}
        else:
            block = {"type": "text", "text": entry.text}
        stop = "tool_use" if entry.tool else "end_turn"
        message = {"id": message_id, "type": "message", "role": "assistant", "model": model,
                   "stop_reason": None, "stop_sequence": None, "usage": usage}
        if not body.get("stream"):
            return await self._json(entry, {**message, "content": [block], "stop_reason": stop})

        def events() -> Iterator[str]:
            yield sse({"type": "message_start", "message": {**message, "content": []}}, "message_start")
            if entry.tool:
                yield sse({"type": "content_block_start", "index": 0,
                           "content_block": {**block, "input": {}}}, "content_block_start")
                for part in pieces(json.dumps(entry.arguments)):
                    yield sse({"type": "content_block_delta", "index": 0,
                               "delta": {"type": "input_json_delta", "partial_json": part}}, "content_block_delta")
            else:
                yield sse({"type": "content_block_start", "index": 0,
                           "content_block": {"type": "text", "text": ""}}, "content_block_start")
                for part in pieces(entry.text or ""):
                    yield sse({"type": "content_block_delta", "index": 0,
                               "delta": {"type": "text_delta", "text": part}}, "content_block_delta")
            yield sse({"type": "content_block_stop", "index": 0}, "content_block_stop")
            yield sse({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                       "usage": {"output_tokens": 5}}, "message_delta")
            yield sse({"type": "message_stop"}, "message_stop")

        return self._stream(entry, events())

    # -- Gemini ------------------------------------------------------------------------------------

    async def gemini(self, request: Request, body: Json) -> Response:
        entry = self.decide("gemini", request, body, gemini_turn(body))
        part = {"functionCall": {"name": entry.tool, "args": entry.arguments}} if entry.tool else {"text": entry.text}
        payload = {"candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": "STOP", "index": 0}],
                   "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15},
                   "modelVersion": "fake-model"}
        if ":streamGenerateContent" not in request.url.path:
            return await self._json(entry, payload)
        return self._stream(entry, iter([sse(payload)]))


@contextmanager
def serve_app(app: Any, *, lifespan: Literal["auto", "on", "off"] = "off") -> Iterator[int]:
    """Serve an ASGI app with uvicorn on 127.0.0.1, any free port, in a background thread; yields the port."""
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan=lifespan,
                            timeout_graceful_shutdown=1)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="uvicorn", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.01)
    try:
        yield server.servers[0].sockets[0].getsockname()[1]
    finally:
        server.should_exit = True
        thread.join(10)


@contextmanager
def serving(model: FakeModel) -> Iterator[FakeModel]:
    """Serve ``model`` on 127.0.0.1 at a free port, in a background thread."""
    with serve_app(model.app) as port:
        model.port, model.url = port, f"http://127.0.0.1:{port}"
        try:
            yield model
        finally:
            model.release()  # a held response would stall the shutdown


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tool", default="echo", help="call the tool whose name ends in this")
    parser.add_argument("--arguments", default='{"text": "hello"}', help="its arguments, as JSON")
    opts = parser.parse_args()
    model = FakeModel(Script(calls=[Call(opts.tool, json.loads(opts.arguments))]))
    with serving(model):
        print(f"fake model on {model.url}; Ctrl-C to stop", flush=True)
        with suppress(KeyboardInterrupt):
            threading.Event().wait()


if __name__ == "__main__":
    main()
