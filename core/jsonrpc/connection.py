"""The asyncio adapter around :class:`openab_browser.core.jsonrpc.Peer`.

A transport (a WebSocket, a child's stdio, a Unix socket) reads whole messages and calls :meth:`feed`, and
runs :meth:`RpcConnection.run` with a coroutine that writes one message. Everything else is here once:
awaiting answers with a timeout, answering each of the peer's requests exactly once, running slow handlers
as tasks so that the read loop never waits behind them, ``$/cancel_request``, a bounded send buffer, and
failing every waiter at once when the connection ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Protocol

from ..errors import ConnectionClosed, RequestTimeout
from .errors import INTERNAL_ERROR, REQUEST_CANCELLED, LocalRpcError, RpcError
from .protocol import (
    Notification,
    Peer,
    Request,
    RequestFailed,
    RequestId,
    Response,
    id_key,
)

__all__ = [
    "ConnectionClosed",
    "Handler",
    "Later",
    "RequestTimeout",
    "RpcConnection",
    "SendMessage",
]

log = logging.getLogger(__name__)

SendMessage = Callable[[bytes], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class Later:
    """Returned by a handler whose answer takes time: the connection runs it as a task."""

    work: Coroutine[Any, Any, Any]


class Handler(Protocol):
    """What answers the peer's messages on an :class:`RpcConnection` (the ACP server, an agent, a relay)."""

    def handle_request(self, request: Request) -> Any:
        """Return the result, raise :class:`RpcError`, or return :class:`Later` for slow work."""

    def handle_notification(self, notification: Notification) -> None:
        """Must not block; start a task for anything slow."""


class RpcConnection:
    """One JSON-RPC connection over any transport that moves whole messages, run on asyncio.

    Owns the :class:`Peer` (ids, deadlines, bounds), the futures our requests wait on, the tasks answering the
    peer's requests (cancelled by ``$/cancel_request`` or when the connection closes) and the send buffer. The
    transport gives it each message it receives (:meth:`feed`) and runs :meth:`run` to send; :meth:`close`
    fails every waiter at once. Limits: ``max_send_buffer`` bytes queued (over it the connection closes: a peer
    that does not read cannot make us buffer without end), and the peer's own bounds.

    When the connection closes itself (the send buffer overflowed, the writer failed), the transport is not
    told by any read: it must await :meth:`wait_closed` beside its reads and then close its socket, with
    :attr:`peer_at_fault` saying whether the peer caused it.
    """

    def __init__(
        self,
        handler: Handler,
        *,
        name: str,
        peer: Peer | None = None,
        max_send_buffer: int = 64 << 20,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name = name
        self._handler = handler
        self._peer = peer if peer is not None else Peer()
        self._clock = clock
        self._waiters: dict[int, asyncio.Future[Any]] = {}
        self._tasks: dict[tuple[str, RequestId], asyncio.Task[None]] = {}
        self._background: set[asyncio.Task[Any]] = set()
        self._outbox: deque[bytes] = deque()
        self._outbox_bytes = 0
        self._max_send_buffer = max_send_buffer
        self._wakeup = asyncio.Event()
        # The writer's send while it runs; a request sends its own message with it when nothing else is being
        # sent or waits to be (one message in flight at a time, so no transport can reorder two).
        self._send: SendMessage | None = None
        self._sending = False
        # When the writer next looks at the deadlines by itself: -inf while it runs (it looks before it sleeps),
        # inf asleep with none to keep. A request whose deadline comes sooner wakes it; any other needs no pass.
        self._looks_at = float("inf")
        self._closed_reason: str | None = None
        self._closed_event = asyncio.Event()
        self._peer_at_fault = False
        self.last_sent = clock()

    # -- state ------------------------------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._closed_reason is not None

    @property
    def closed_reason(self) -> str | None:
        return self._closed_reason

    @property
    def peer_at_fault(self) -> bool:
        """Whether the connection closed because of what the peer did (it stopped reading what we send)."""
        return self._peer_at_fault

    async def wait_closed(self) -> str:
        """Return the reason once the connection is closed, by whoever closed it."""
        await self._closed_event.wait()
        return self._closed_reason or "closed"

    # -- inbound ----------------------------------------------------------------------------------------------

    def feed(self, data: bytes | str) -> None:
        """Handle one whole received message. Never blocks and never raises for bad input."""
        if self.closed:
            return
        for event in self._peer.receive(data):
            if isinstance(event, Request):
                self._dispatch_request(event)
            elif isinstance(event, Notification):
                self._dispatch_notification(event)
            else:
                self._settle(event.id, event)
        self._flush()

    def _dispatch_request(self, request: Request) -> None:
        try:
            outcome = self._handler.handle_request(request)
        except RpcError as error:
            self._peer.send_error(request.id, error)
            return
        except Exception:
            log.exception("%s: handler for %s failed", self.name, request.method)
            self._peer.send_error(request.id, LocalRpcError(INTERNAL_ERROR, f"Internal error in {request.method}"))
            return
        if isinstance(outcome, Later):
            key = id_key(request.id)
            task = asyncio.get_running_loop().create_task(self._answer_later(request, outcome.work))
            self._tasks[key] = task
            task.add_done_callback(lambda _t, key=key: self._tasks.pop(key, None))  # type: ignore[misc]
        else:
            self._peer.send_result(request.id, outcome)

    async def _answer_later(self, request: Request, work: Coroutine[Any, Any, Any]) -> None:
        try:
            result = await work
        except RpcError as error:
            self._answer(request.id, error=error)
        except asyncio.CancelledError:
            # Cancelled by $/cancel_request, or by close() (then the answer goes nowhere, harmlessly).
            self._answer(request.id, error=LocalRpcError(REQUEST_CANCELLED, "Request cancelled"))
            raise
        except Exception:
            log.exception("%s: handler for %s failed", self.name, request.method)
            self._answer(request.id, error=LocalRpcError(INTERNAL_ERROR, f"Internal error in {request.method}"))
        else:
            self._answer(request.id, result=result)

    def _answer(self, request_id: RequestId, *, result: Any = None, error: RpcError | None = None) -> None:
        if self.closed:
            return
        if error is not None:
            self._peer.send_error(request_id, error)
        else:
            self._peer.send_result(request_id, result)
        self._flush()

    def _dispatch_notification(self, notification: Notification) -> None:
        if notification.method == "$/cancel_request":
            params = notification.params if isinstance(notification.params, dict) else {}
            request_id = params.get("requestId")
            task = self._tasks.get(id_key(request_id))
            if task is not None:
                task.cancel()
        try:
            self._handler.handle_notification(notification)
        except Exception:
            log.exception("%s: notification handler for %s failed", self.name, notification.method)

    def _settle(self, request_id: int, event: Response | RequestFailed) -> None:
        waiter = self._waiters.pop(request_id, None)
        if waiter is None or waiter.done():
            return
        if isinstance(event, Response):
            if event.error is not None:
                waiter.set_exception(event.error)
            else:
                waiter.set_result(event.result)
        elif event.timed_out:
            waiter.set_exception(RequestTimeout(event.method, request_id, 0.0))
        else:
            waiter.set_exception(ConnectionClosed(event.detail))

    # -- outbound ---------------------------------------------------------------------------------------------

    async def request(
        self,
        method: str,
        params: Any = None,
        *,
        timeout: float,
        sent: Callable[[int], None] | None = None,
    ) -> Any:
        """Send a request and wait for its result.

        Raises :class:`RpcError` (the peer's error), :class:`RequestTimeout` or :class:`ConnectionClosed`.
        ``sent`` is told the wire id before waiting, so callers can later cancel it by id.
        """
        if self.closed:
            raise ConnectionClosed(self._closed_reason or "closed")
        deadline = self._clock() + timeout
        request_id = self._peer.send_request(method, params, deadline=deadline)
        waiter: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiters[request_id] = waiter
        if sent is not None:
            sent(request_id)
        try:
            messages = self._peer.data_to_send()
            if len(messages) == 1 and self._send is not None and not self._outbox and not self._sending:
                # The writer is idle: this task writes the message itself, which spares a pass of the writer.
                if deadline < self._looks_at:
                    self._wakeup.set()
                await self._send_now(self._send, messages[0])
            else:
                self._queue(messages)
            return await waiter
        except RequestTimeout:
            raise RequestTimeout(method, request_id, timeout) from None
        finally:
            self._waiters.pop(request_id, None)
            # Cancelled by our caller: stop waiting so a late answer is dropped.
            self._peer.abandon(request_id)

    def set_timeout(self, request_id: int, timeout: float) -> None:
        """Give a request in flight ``timeout`` seconds from now instead of what it had left."""
        if self._peer.set_deadline(request_id, self._clock() + timeout):
            self._wakeup.set()  # the run loop sleeps until the soonest deadline: it may be sooner now

    def notify(self, method: str, params: Any = None) -> None:
        if self.closed:
            return
        self._peer.send_notification(method, params)
        self._flush()

    def spawn(self, work: Coroutine[Any, Any, Any], *, name: str | None = None) -> asyncio.Task[Any]:
        """Run background work tied to this connection: it is cancelled when the connection closes."""
        task = asyncio.get_running_loop().create_task(work, name=name)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    def _flush(self) -> None:
        self._queue(self._peer.data_to_send())

    def _queue(self, messages: list[bytes]) -> None:
        queued = False
        for message in messages:
            self._outbox.append(message)
            self._outbox_bytes += len(message)
            queued = True
        if self._outbox_bytes > self._max_send_buffer:
            self.close(f"send buffer over {self._max_send_buffer} bytes: the peer is not reading", peer_at_fault=True)
        if queued:
            # Only something to send wakes the writer: a received answer or notification that sends nothing back
            # would cost a pass of its loop for each message (a request's deadline gone early needs no pass).
            self._wakeup.set()

    # -- running ----------------------------------------------------------------------------------------------

    async def _write(self, send: SendMessage, message: bytes) -> None:
        """Write one message, the only one being written (the writer's and a request's own writes both come here)."""
        self._sending = True
        try:
            await send(message)
        finally:
            self._sending = False
        self.last_sent = self._clock()

    async def _send_now(self, send: SendMessage, message: bytes) -> None:
        """A request's own write; what was queued meanwhile goes to the writer."""
        try:
            await self._write(send, message)
        except Exception as exc:  # the transport went away: this request, and every other, fails as closed
            self.close(f"send failed: {exc}")
        finally:
            if self._outbox:
                self._wakeup.set()

    async def run(self, send: SendMessage) -> None:
        """Write queued messages and enforce request deadlines until the connection closes."""
        self._send = send
        try:
            while True:
                self._looks_at = float("-inf")
                while self._outbox and not self.closed and not self._sending:
                    message = self._outbox.popleft()
                    self._outbox_bytes -= len(message)
                    await self._write(send, message)
                if self.closed:
                    return
                self._wakeup.clear()
                deadline = self._peer.next_deadline()
                self._looks_at = float("inf") if deadline is None else deadline
                wait = None if deadline is None else max(0.0, deadline - self._clock())
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(wait):
                        await self._wakeup.wait()
                self._looks_at = float("-inf")
                for failure in self._peer.expire(self._clock()):
                    self._settle(failure.id, failure)
        except (OSError, ConnectionError) as exc:
            self.close(f"send failed: {exc}")
        finally:
            self._send = None
            if not self.closed:
                self.close("writer stopped")

    def close(self, reason: str, *, peer_at_fault: bool = False) -> None:
        """End the connection: every waiter fails now with ``reason``; handlers are cancelled.

        ``peer_at_fault`` says the peer broke a bound, so the transport can close its socket with a code that
        tells the peer it was refused rather than that we failed.
        """
        if self.closed:
            return
        self._closed_reason = reason
        self._peer_at_fault = peer_at_fault
        for failure in self._peer.fail_all(reason):
            self._settle(failure.id, failure)
        for task in [*self._tasks.values(), *self._background]:
            task.cancel()
        self._outbox.clear()
        self._outbox_bytes = 0
        self._wakeup.set()
        self._closed_event.set()

