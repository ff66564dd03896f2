"""Request heads on the pod's HTTP protocol (core/sockets.py's HeadTimedHttp), whichever parser it runs on
(httptools when installed, else h11; ``HTTP_PARSER`` says which): a head over HEAD_MAX_BYTES is refused with a
400 and the socket closed, whole or dripped in small pieces, first on the socket or after a keep-alive answer;
a head under it is served, and so are pipelined requests whose bytes run from one request into the next.

The parser is picked when core/sockets.py is imported: with httptools installed (a dependency) this runs on it;
``pip uninstall httptools`` (or a PYTHONPATH without it) runs the same tests on h11."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from openab_browser.core.sockets import HEAD_MAX_BYTES, HTTP_PARSER
from openab_browser.gateway.server import running_server

pytestmark = pytest.mark.anyio


async def _echo(request: Request) -> Response:
    return Response(b"got " + str(len(await request.body())).encode(), media_type="text/plain")


@pytest.fixture
async def port() -> AsyncIterator[int]:
    async with running_server(Starlette(routes=[Route("/echo", _echo, methods=["POST"])])) as base:
        yield int(base.rsplit(":", 1)[1])


def _request(padding: int = 0, body: bytes = b"{}") -> bytes:
    pad = b"X-Padding: " + b"a" * padding + b"\r\n" if padding else b""
    return (b"POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/plain\r\n" + pad
            + b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)


async def _answer(reader: asyncio.StreamReader) -> bytes:
    """One whole answer (its head and its Content-Length body), or what came before the socket closed."""
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
    lengths = [line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")]
    length = int(lengths[0]) if lengths else 0
    return head + await asyncio.wait_for(reader.readexactly(length), 10)


async def _refused(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, data: bytes, piece: int) -> int:
    """Writes ``data`` in pieces until the server has closed; the bytes written by then. Asserts the 400, or the
    reset that a close with unread bytes is (which may lose the 400 on the way), never an answer of the app's."""
    written = 0
    with contextlib.suppress(ConnectionError):
        for start in range(0, len(data), piece):
            writer.write(data[start:start + piece])
            await asyncio.wait_for(writer.drain(), 10)
            written += piece
            await asyncio.sleep(0.001 if piece < HEAD_MAX_BYTES else 0)  # let the server read what came
    answer = b""
    with contextlib.suppress(ConnectionError):
        answer = await asyncio.wait_for(reader.read(), 10)
    assert answer == b"" or answer.startswith(b"HTTP/1.1 400"), (HTTP_PARSER, answer[:80])
    return written


async def test_a_head_under_the_bound_is_served(port: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(_request(HEAD_MAX_BYTES - 1024))
        assert (await _answer(reader)).endswith(b"got 2"), HTTP_PARSER
    finally:
        writer.close()


@pytest.mark.parametrize("piece", [1 << 20, 512])
async def test_a_head_over_the_bound_is_refused(port: int, piece: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        written = await _refused(reader, writer, _request(1 << 20), piece)
    finally:
        writer.close()
    if piece < HEAD_MAX_BYTES:  # dripped: refused soon after the bound, not once the whole head came
        assert written < 4 * HEAD_MAX_BYTES, (HTTP_PARSER, written)


async def test_the_bound_holds_for_the_head_after_a_keep_alive_answer(port: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(_request())
        assert (await _answer(reader)).endswith(b"got 2")
        await _refused(reader, writer, _request(1 << 20), 512)
    finally:
        writer.close()


async def test_pipelined_requests_with_bodies_are_all_served(port: int) -> None:
    """Bodies and the next heads in the same writes: none of a body is taken for a head's bytes."""
    body = b"b" * (HEAD_MAX_BYTES * 3)
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(_request(HEAD_MAX_BYTES // 2, body) + _request(HEAD_MAX_BYTES // 2, body) + _request())
        answers = [await _answer(reader) for _ in range(3)]
    finally:
        writer.close()
    assert [answer.rsplit(b"\r\n\r\n", 1)[1] for answer in answers] == [
        f"got {len(body)}".encode(), f"got {len(body)}".encode(), b"got 2"]
