"""``openab browser-bridge``: the stdio MCP server an agent CLI spawns, relaying to the pod's browser socket.

The relay moves lines. The MCP server itself (both eras, tools, errors, size bounds) runs in the pod, one per
connection (:mod:`openab.bridge.server`), so the relay knows MCP only as far as it must to stand in when the
socket is down:

* it remembers which of the agent's requests are unanswered, and answers them with an error if the socket
  closes under them (a tool call may or may not have run; the error says so);
* while the socket is down (the pod restarting), requests wait, each for at most ``wait`` seconds, while it
  reconnects; after a reconnect it replays the agent's ``initialize`` (and ``notifications/initialized``)
  under a private id, so the new server is where the old one was, and tells a handshake-era agent that the
  tool list may have changed;
* when the pod refuses it (no session in its ancestry, another uid), every request gets that refusal as
  its error: an agent sees a clear MCP error, never a hang and never another session's browser.

Only MCP goes to stdout; diagnostics go to stderr.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final, Protocol

import orjson

from openab.core.jsonrpc import INTERNAL_ERROR, SERVER_OVERLOADED, Peer, Request, RpcError, dumps, notification_message

from .framing import BRIDGE_REFUSED, MAX_FRAME_BYTES, READY_METHOD, TOO_LARGE, error_line, frame_too_large, read_frame

__all__ = ["Output", "Relay", "serve_stdio"]

_PRIVATE_PREFIX: Final = "openab-relay/"
_MAX_IN_FLIGHT: Final = 1024


def _say(text: str) -> None:
    sys.stderr.write(f"[openab browser-bridge] {text}\n")
    sys.stderr.flush()


def _key(request_id: Any) -> tuple[str, Any]:
    return (type(request_id).__name__, request_id)


class Output(Protocol):
    """Where the relay writes the agent's stdout lines (a pipe in production, a buffer in tests)."""

    def write(self, data: bytes) -> None: ...

    async def drain(self) -> None: ...


class Relay:
    """One agent's stdio conversation, carried over the pod's socket at ``path``."""

    def __init__(
        self,
        path: Path,
        output: Output,
        *,
        wait: float = 10.0,
        connect_timeout: float = 5.0,
        max_frame_bytes: int = MAX_FRAME_BYTES,
        drain_timeout: float = 2.0,
        say: Callable[[str], None] = _say,
    ) -> None:
        self.path = path
        self.wait = wait
        self.connect_timeout = connect_timeout
        self.max_frame_bytes = max_frame_bytes
        self.drain_timeout = drain_timeout
        self._out = output
        self._say = say
        self._socket: asyncio.StreamWriter | None = None
        self._ready = asyncio.Event()
        self._refused: RpcError | None = None
        self._down_reason = "not connected yet"
        # key -> (id, method, tool name for tools/call): a lost call's error names the tool.
        self._in_flight: dict[tuple[str, Any], tuple[Any, str, str | None]] = {}
        self._initialize: dict[str, Any] | None = None
        self._initialized = False
        self._private: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._private_ids = 0
        self._answered = asyncio.Event()
        self._queue: asyncio.Queue[tuple[bytes, float]] = asyncio.Queue(maxsize=256)
        self.channel: str | None = None
        self.connects = 0

    # -- running ------------------------------------------------------------------------------------------

    async def run(self, stdin: asyncio.StreamReader) -> None:
        """Relay until the agent closes our stdin."""
        tasks = [
            asyncio.create_task(self._connection_loop(), name="socket"),
            asyncio.create_task(self._forward_loop(), name="forward"),
        ]
        try:
            await self._stdin_loop(stdin)
            # Input ended (a client closing stdin, or a file piped in): answer what was asked, boundedly.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.drain_timeout):
                    await self._queue.join()
                    while self._ready.is_set() and self._awaiting_answers():
                        self._answered.clear()
                        await self._answered.wait()
        finally:
            for task in tasks:
                task.cancel()
            for task in tasks:
                try:
                    await task
                except asyncio.CancelledError:
                    pass
                except (ConnectionError, OSError) as exc:  # the agent went away mid-write: nothing to tell it
                    self._say(f"stopped: {exc}")
            if self._socket is not None:
                self._socket.close()

    def _awaiting_answers(self) -> bool:
        # A listen stream ends only when its server does: no reason to stay for it.
        return any(method != "subscriptions/listen" for _, method, _tool in self._in_flight.values())

    async def _stdin_loop(self, stdin: asyncio.StreamReader) -> None:
        loop = asyncio.get_running_loop()
        while True:
            frame = await read_frame(stdin)
            if frame is None:
                return
            if frame is TOO_LARGE:
                await self._emit(error_line(frame_too_large(self.max_frame_bytes)))
                continue
            assert isinstance(frame, bytes)
            if frame.strip():
                await self._queue.put((frame, loop.time() + self.wait))

    # -- agent -> pod -------------------------------------------------------------------------------------

    async def _forward_loop(self) -> None:
        while True:
            frame, deadline = await self._queue.get()
            try:
                await self._forward(frame, deadline)
            finally:
                self._queue.task_done()

    async def _forward(self, frame: bytes, deadline: float) -> None:
        loop = asyncio.get_running_loop()
        try:
            message = orjson.loads(frame)
        except orjson.JSONDecodeError:
            message = None
        if not isinstance(message, dict):
            await self._answer_locally(frame, None)  # the engine's parse and envelope errors
            return
        if self._refused is None and not self._ready.is_set():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout_at(deadline):
                    await self._ready.wait()
        if self._refused is not None:
            await self._answer_locally(frame, self._refused)
            return
        if not self._ready.is_set() or self._socket is None:
            await self._answer_locally(frame, RpcError(
                INTERNAL_ERROR,
                f"the openab pod is not reachable at {self.path} ({self._down_reason}); waited "
                f"{self.wait:g} s. Is `openab run --browser-mode bridge` running in this pod?",
            ))
            return
        if not self._track(message):
            await self._answer_locally(frame, RpcError(
                SERVER_OVERLOADED, f"Too many requests in flight (max {_MAX_IN_FLIGHT})"
            ))
            return
        self._socket.write(frame + b"\n")
        with contextlib.suppress(ConnectionError, TimeoutError):
            async with asyncio.timeout_at(max(deadline, loop.time() + self.wait)):
                await self._socket.drain()

    def _track(self, message: dict[str, Any]) -> bool:
        """Note what the relay must remember of a message it forwards; ``False`` when it must not go."""
        method = message.get("method")
        if "id" in message and isinstance(method, str):
            if len(self._in_flight) >= _MAX_IN_FLIGHT:
                return False
            params = message.get("params")
            tool = params.get("name") if method == "tools/call" and isinstance(params, dict) else None
            self._in_flight[_key(message["id"])] = (message["id"], method, tool if isinstance(tool, str) else None)
            if method == "initialize":
                self._initialize = message
        elif method == "notifications/initialized":
            self._initialized = True
        elif method == "notifications/cancelled":
            params = message.get("params")
            if isinstance(params, dict):
                # A cancelled request gets no answer; stop waiting for one.
                self._in_flight.pop(_key(params.get("requestId")), None)
        return True

    async def _answer_locally(self, frame: bytes, error: RpcError | None) -> None:
        peer = Peer()
        for event in peer.receive(frame):
            if isinstance(event, Request) and error is not None:
                peer.send_error(event.id, error)
        for line in peer.data_to_send():
            await self._emit(line + b"\n")

    async def _emit(self, line: bytes) -> None:
        self._out.write(line)
        await self._out.drain()

    # -- pod -> agent -------------------------------------------------------------------------------------

    async def _connection_loop(self) -> None:
        delay = 0.05
        while True:
            connection = await self._connect()
            if self._refused is not None:
                self._ready.set()  # let waiting requests get the refusal now
                return
            if connection is not None:
                reader, writer = connection
                try:
                    if await self._serve(reader, writer):
                        delay = 0.05
                finally:
                    writer.close()
                    self._went_down()
            await asyncio.sleep(delay)
            delay = min(delay * 2, 1.0)

    async def _connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        writer: asyncio.StreamWriter | None = None
        try:
            async with asyncio.timeout(self.connect_timeout):
                reader, writer = await asyncio.open_unix_connection(str(self.path), limit=self.max_frame_bytes)
                greeting = await read_frame(reader)
        except (OSError, TimeoutError) as exc:
            if writer is not None:
                writer.close()
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else "no greeting in time"
            self._note_down(f"cannot connect: {reason}")
            return None
        try:
            hello = orjson.loads(greeting) if isinstance(greeting, bytes) else None
        except orjson.JSONDecodeError:
            hello = None
        if isinstance(hello, dict) and hello.get("method") == READY_METHOD:
            raw = hello.get("params")
            params: dict[str, Any] = raw if isinstance(raw, dict) else {}
            self.channel = str(params.get("channel"))
            self.connects += 1
            self._down_reason = "connected"
            self._say(f"connected to {self.path} on channel {self.channel}")
            return reader, writer
        writer.close()
        if isinstance(hello, dict) and "error" in hello:
            error = RpcError.from_json(hello["error"])
            if error.code == BRIDGE_REFUSED:
                self._refused = error
                self._say(f"the pod refused this relay: {error.message}")
                return None
            self._note_down(f"the pod answered {error.message!r}")
        else:
            self._note_down("the socket did not greet as an openab pod")
        return None

    def _note_down(self, reason: str) -> None:
        if reason != self._down_reason:
            self._say(f"{self.path}: {reason}; retrying")
        self._down_reason = reason

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """Carry the agent's messages over one connection; ``False`` if it never became usable."""
        pump = asyncio.create_task(self._pump(reader))
        try:
            if self.connects > 1 and self._initialize is not None and not await self._reinitialize(writer, pump):
                return False
            self._socket = writer
            self._ready.set()
            if self.connects > 1 and self._initialize is not None:
                # The browser may have come or gone while we were away.
                await self._emit(dumps(notification_message("notifications/tools/list_changed")) + b"\n")
            await pump
            return True
        finally:
            pump.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await pump

    async def _reinitialize(self, socket: asyncio.StreamWriter, pump: asyncio.Task[None]) -> bool:
        """Put the new server where the old one was: the agent's own ``initialize``, under a private id."""
        assert self._initialize is not None
        self._private_ids += 1
        private_id = f"{_PRIVATE_PREFIX}initialize/{self._private_ids}"
        answer: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._private[private_id] = answer
        socket.write(dumps({**self._initialize, "id": private_id}) + b"\n")
        try:
            # The pump ending first means the socket closed under us: no answer is coming.
            waiting: list[asyncio.Future[Any]] = [answer, pump]
            await asyncio.wait(waiting, timeout=self.connect_timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            self._private.pop(private_id, None)
        if not answer.done():
            answer.cancel()
            self._note_down("the pod did not answer initialize again")
            return False
        response = answer.result()
        if "error" in response:
            self._note_down(f"the pod refused initialize again: {response['error']}")
            return False
        if self._initialized:
            socket.write(dumps(notification_message("notifications/initialized")) + b"\n")
        self._say("re-initialized after reconnecting")
        return True

    async def _pump(self, reader: asyncio.StreamReader) -> None:
        while True:
            frame = await read_frame(reader)
            if frame is None:
                self._ready.clear()  # nothing more goes this way, even before the connection loop notices
                self._note_down("the pod closed the socket")
                return
            if frame is TOO_LARGE:
                self._say(f"dropped a message from the pod over the {self.max_frame_bytes}-byte bound")
                continue
            assert isinstance(frame, bytes)
            try:
                message = orjson.loads(frame)
            except orjson.JSONDecodeError:
                self._say("dropped a line from the pod that is not JSON")
                continue
            if isinstance(message, dict) and "id" in message and "method" not in message:
                request_id = message["id"]
                private = self._private.get(request_id) if isinstance(request_id, str) else None
                if private is not None:
                    if not private.done():
                        private.set_result(message)
                    continue
                self._in_flight.pop(_key(request_id), None)
                self._answered.set()
            await self._emit(frame + b"\n")

    def _went_down(self) -> None:
        self._ready.clear()
        self._socket = None
        lost, self._in_flight = list(self._in_flight.values()), {}
        self._answered.set()
        closed = "the openab pod's browser socket closed before this request was answered (the pod restarted?)"
        for request_id, method, tool in lost:
            if method == "subscriptions/listen":
                reason = f"{closed}; the stream ended without its close: listen again, and list the tools afresh"
            elif tool is not None:
                # Nothing re-sends a lost call, and the agent must not either before it has looked: the click
                # may have happened.
                reason = (
                    f"{closed}; the outcome of {tool} is unknown: it may or may not have run in the browser. "
                    f"Call browser_snapshot to see the page as it is now before calling {tool} again"
                )
            else:
                reason = f"{closed}; the outcome of {method} is unknown: it may or may not have run"
            self._out.write(error_line(RpcError(INTERNAL_ERROR, reason), request_id))


# -- stdio ------------------------------------------------------------------------------------------------


class _PipeOutput:
    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer

    def write(self, data: bytes) -> None:
        self._writer.write(data)

    async def drain(self) -> None:
        await self._writer.drain()


class _FileOutput:
    """stdout redirected to a regular file, which asyncio's pipe transports refuse."""

    def write(self, data: bytes) -> None:
        sys.stdout.buffer.write(data)

    async def drain(self) -> None:
        sys.stdout.buffer.flush()


async def _stdin_reader(limit: int) -> asyncio.StreamReader:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=limit)
    try:
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin.buffer)
    except ValueError:  # a regular file: read it on a thread
        def pump() -> None:
            while chunk := os.read(0, 1 << 16):
                loop.call_soon_threadsafe(reader.feed_data, chunk)
            loop.call_soon_threadsafe(reader.feed_eof)

        loop.run_in_executor(None, pump)
    return reader


async def _stdout_output() -> Output:
    loop = asyncio.get_running_loop()
    try:
        transport, protocol = await loop.connect_write_pipe(
            asyncio.streams.FlowControlMixin, sys.stdout.buffer
        )
    except ValueError:
        return _FileOutput()
    return _PipeOutput(asyncio.StreamWriter(transport, protocol, None, loop))


async def serve_stdio(path: Path, *, wait: float = 10.0) -> int:
    """Run the relay on this process's stdin and stdout; returns the exit status."""
    output = await _stdout_output()
    stdin = await _stdin_reader(MAX_FRAME_BYTES)
    relay = Relay(path, output, wait=wait)
    await relay.run(stdin)
    with contextlib.suppress(ConnectionError):
        await output.drain()
    return 0
