"""A TCP relay between an agent's MCP client and a session's MCP endpoint that cuts the agent's connection the way a
network blip does (an abort: no FIN, no answer), for the action journal's tests (issue 25).

A cut is planned per call, by a marker (the call's nonce) seen in the bytes: ``before`` the request reaches the
pod (the marker's chunk is never passed on), ``during`` the call (the test calls :meth:`cut` while the browser
runs it), or ``after`` (the chunk of the answer that carries the marker is never passed back).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Literal
from urllib.parse import urlsplit, urlunsplit

Cut = Literal["none", "before", "during", "after"]
_CHUNK = 1 << 16


@dataclass(eq=False)
class _Pair:
    client: asyncio.StreamWriter
    upstream: asyncio.StreamWriter
    markers: set[bytes] = field(default_factory=set)  # the markers of the requests sent on it

    def abort(self) -> None:
        for writer in (self.client, self.upstream):
            writer.transport.abort()


@dataclass
class CuttingRelay:
    upstream_host: str
    upstream_port: int
    plans: dict[bytes, Cut] = field(default_factory=dict)
    cuts: int = 0
    _pairs: set[_Pair] = field(default_factory=set)
    _server: asyncio.Server | None = None

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.sockets[0].getsockname()[1])

    def url(self, endpoint: str) -> str:
        """``endpoint``'s URL with the relay's port in place of its own."""
        parts = urlsplit(endpoint)
        return urlunsplit(parts._replace(netloc=f"127.0.0.1:{self.port}"))

    def cut(self, marker: bytes) -> None:
        """Abort the connection(s) that carry the request with ``marker``."""
        for pair in list(self._pairs):
            if marker in pair.markers:
                self.cuts += 1
                pair.abort()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(10):
                up_reader, up_writer = await asyncio.open_connection(self.upstream_host, self.upstream_port)
        except OSError:
            writer.transport.abort()
            return
        pair = _Pair(writer, up_writer)
        self._pairs.add(pair)
        try:
            await asyncio.gather(self._pump(reader, pair, up=True), self._pump(up_reader, pair, up=False))
        finally:
            self._pairs.discard(pair)
            pair.abort()

    async def _pump(self, reader: asyncio.StreamReader, pair: _Pair, *, up: bool) -> None:
        writer = pair.upstream if up else pair.client
        with contextlib.suppress(OSError, asyncio.IncompleteReadError):
            while chunk := await reader.read(_CHUNK):
                for marker, plan in list(self.plans.items()):
                    if marker not in chunk:
                        continue
                    if up:
                        pair.markers.add(marker)
                    if (plan == "before" and up) or (plan == "after" and not up):
                        del self.plans[marker]  # once: the re-issue goes through
                        self.cuts += 1
                        pair.abort()
                        return
                writer.write(chunk)
                await writer.drain()
        pair.abort()


@contextlib.asynccontextmanager
async def cutting_relay(endpoint: str) -> AsyncIterator[CuttingRelay]:
    parts = urlsplit(endpoint)
    assert parts.hostname is not None and parts.port is not None
    relay = CuttingRelay(parts.hostname, parts.port)
    relay._server = await asyncio.start_server(relay._serve, "127.0.0.1", 0)
    try:
        yield relay
    finally:
        relay._server.close()
        for pair in list(relay._pairs):
            pair.abort()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(5):
                await relay._server.wait_closed()
