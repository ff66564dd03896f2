"""A call stopped without stopping its caller: :class:`StopScope`, and the HTTP answer's watch that uses it.

A tool call runs in its caller's task (the HTTP request's, the bridge connection's); ``notifications/cancelled``,
the session's close and a client gone away stop it through a :class:`StopScope`. What a user would notice if this
went wrong: a stopped call that takes its transport down with it, a cancel of the transport that is swallowed (a
pod that never shuts down), a cancel that lands on the next request, or an answer held until the client gives up.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import pytest

from openab_browser.core.mcp.http import _Watch
from openab_browser.core.tasks import StopScope

pytestmark = pytest.mark.anyio


async def _calling(
    inside: Callable[[], Awaitable[None]], after: Callable[[], Awaitable[str]] | None = None
) -> tuple[asyncio.Task[tuple[bool, str | None]], StopScope]:
    """A task that runs ``inside`` in a StopScope, then ``after``; given back once it is inside, with its scope.
    The task's result: whether the call was stopped, and what ``after`` returned."""
    scopes: list[StopScope] = []
    entered = asyncio.Event()

    async def caller() -> tuple[bool, str | None]:
        async with StopScope() as call:
            scopes.append(call)
            entered.set()
            await inside()
        return call.stopped, None if after is None else await after()

    task = asyncio.ensure_future(caller())
    await entered.wait()
    return task, scopes[0]


async def _a_while() -> None:
    await asyncio.sleep(30)


async def test_a_stopped_call_ends_and_its_task_goes_on() -> None:
    async def answer() -> str:
        await asyncio.sleep(0)  # no cancel left over for the caller's next wait
        return "answered the transport"

    task, call = await _calling(_a_while, answer)
    call.stop("the agent asked")
    assert await asyncio.wait_for(task, 5) == (True, "answered the transport")
    assert task.cancelling() == 0


async def test_the_stop_message_reaches_what_the_call_was_waiting_for() -> None:
    seen: list[tuple[Any, ...]] = []

    async def waiting() -> None:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError as exc:
            seen.append(exc.args)
            raise

    task, call = await _calling(waiting)
    call.stop("openab: notifications/cancelled")
    await asyncio.wait_for(task, 5)
    assert seen == [("openab: notifications/cancelled",)]


async def test_a_cancel_of_the_task_itself_goes_through_a_stopped_call() -> None:
    async def not_reached() -> str:  # the pod is shutting the transport down
        await asyncio.sleep(30)
        return "answered"

    task, call = await _calling(_a_while, not_reached)
    call.stop()
    task.cancel()  # in the same turn: the transport's own cancel
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 5)
    assert task.cancelled()


async def test_a_cancel_of_the_task_while_in_the_call_is_not_taken_for_a_stop() -> None:
    task, _ = await _calling(_a_while)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 5)


async def test_a_stop_after_the_call_ended_does_not_cancel_the_next_wait() -> None:
    ended = asyncio.Event()
    go_on = asyncio.Event()

    async def next_request() -> str:  # on the same connection
        ended.set()
        await go_on.wait()
        return "the next request answered"

    async def at_once() -> None:
        return None

    task, call = await _calling(at_once, next_request)
    await ended.wait()
    call.stop("late")
    go_on.set()
    assert await asyncio.wait_for(task, 5) == (False, "the next request answered")
    assert not call.stopped


class _Client:
    """The ASGI side of one request whose body was read: it goes away when told, and keeps what it is sent."""

    def __init__(self) -> None:
        self.sent: list[MutableMapping[str, Any]] = []
        self.gone = asyncio.Event()

    async def receive(self) -> dict[str, Any]:
        await self.gone.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: MutableMapping[str, Any]) -> None:
        self.sent.append(message)


async def test_an_answer_that_comes_as_the_watch_starts_is_not_held() -> None:
    # The watch's task is started (its first step scheduled) in the very turn the call's answer came: the
    # answer must still go out at once, not when the client gives up and goes away.
    client = _Client()
    async with StopScope() as call:
        watch = _Watch(client.receive, client.send, call, 8)
        watch.note({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 1}})
        async with asyncio.timeout(5):  # in this task (wait_for would run it in a new one, after the watch's)
            await watch.aclose()
    assert not call.stopped
    # The note is the request's to write, with its answer after it.
    assert [note["params"] for note in watch.notes] == [{"progress": 1}]
    assert client.sent == []


async def test_a_client_gone_mid_call_stops_the_call_and_the_notes_went_out_as_events() -> None:
    client = _Client()
    reached = asyncio.Event()
    async with StopScope() as call:
        watch = _Watch(client.receive, client.send, call, 8)
        try:
            watch.note({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 1}})
            reached.set()
            await asyncio.sleep(0.1)
            client.gone.set()
            await asyncio.sleep(30)
        finally:
            await asyncio.wait_for(watch.aclose(), 5)
    assert call.stopped
    assert client.sent[0]["type"] == "http.response.start"
    assert (b"content-type", b"text/event-stream") in client.sent[0]["headers"]
    assert b'"progress":1' in client.sent[1]["body"] and client.sent[1]["more_body"]


async def test_notes_past_the_bound_are_dropped_not_grown() -> None:
    client = _Client()
    async with StopScope() as call:
        watch = _Watch(client.receive, client.send, call, 3)
        for step in range(1000):
            watch.note({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": step}})
        assert len(watch.notes) == 3
        await asyncio.wait_for(watch.aclose(), 5)
