"""Sockets before they speak a protocol, for every HTTP listener of the pod (the `/acp` gateway and each
session's MCP proxy endpoint): a deadline for each request head, and a log of closed sockets that a flood
cannot flood. And once a socket speaks WebSocket, the permessage-deflate it gets (:class:`LeanDeflateFactory`).

A socket that has sent no whole request head may be anyone's, and uvicorn would hold it for ever: the
first head is due ``head_timeout()`` seconds after accept (a TLS handshake in between spends the same time:
the protocol is made at accept, before the handshake), each later one (keep-alive) that long after its first
byte, since uvicorn stops its own keep-alive timer at that byte. What admits or bounds sockets is the
listener's business (:meth:`HeadTimedHttp.on_head`, :meth:`HeadTimedHttp.on_head_timeout`).

The request heads are parsed by httptools when it is installed (uvicorn's ``HttpToolsProtocol``: a C parser,
about a fifth less of the pod's CPU per proxied tool call than h11's pure Python), else by h11. h11 refuses a
head over 16 KiB itself; on httptools, which would take any size, the same bound is :class:`HeadTimedHttp`'s.
"""

from __future__ import annotations

import asyncio
import logging
import time
import zlib
from collections import Counter
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Final

from uvicorn.protocols.http.h11_impl import H11Protocol
from websockets.extensions.base import Extension
from websockets.extensions.permessage_deflate import PerMessageDeflate, ServerPerMessageDeflateFactory
from websockets.frames import CTRL_OPCODES, Frame, Opcode
from websockets.typing import ExtensionParameter

__all__ = [
    "ACCEPT_BURST", "DEFLATE_MIN_BYTES", "DEFLATE_SAMPLE_BYTES", "HEAD_MAX_BYTES", "HTTP_PARSER", "ClosedSockets",
    "HeadTimedHttp", "LeanDeflate", "LeanDeflateFactory",
]

# asyncio accepts as many sockets in one go as the listen backlog it is given (uvicorn's default: 2,048) before
# any of them reaches a protocol that could refuse it, and a refused one's file is closed loops later. A flood
# then holds a burst's worth of files no cap has looked at: a few bursts of this size stay inside the files a
# listener keeps in reserve, where 2,048 at once ran a 1,024-file pod out of them ("accept() out of system
# resource").
ACCEPT_BURST = 64


class ClosedSockets:
    """Sockets closed on purpose, by reason (``counts``, for operators and tests), logged at most once per
    ``log_every`` seconds with how many went since the last line."""

    def __init__(
        self, logger: logging.Logger, *, log_every: float = 10.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.counts: Counter[str] = Counter()
        self._log, self._log_every, self._clock = logger, log_every, clock
        self._unlogged = 0
        self._logged_at = float("-inf")

    def __getitem__(self, reason: str) -> int:
        return self.counts[reason]

    def add(self, reason: str) -> None:
        self.counts[reason] += 1
        self._unlogged += 1
        now = self._clock()
        if now - self._logged_at >= self._log_every:
            self._log.warning("closed %d connection(s) in the last %g s; the latest: %s", self._unlogged,
                              self._log_every, reason)
            self._unlogged, self._logged_at = 0, now


if TYPE_CHECKING:  # the same attributes and hooks either way, as far as HeadTimedHttp and its subclasses go
    _Http = H11Protocol
else:
    try:  # uvicorn's module imports httptools: a missing or unusable one leaves h11
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol as _Http
    except ImportError:
        _Http = H11Protocol

HTTP_PARSER: Final = "h11" if _Http is H11Protocol else "httptools"
"""What parses the pod's request heads: httptools when installed, else h11 (see the module docstring)."""
# h11's own bound on an unfinished head (its max_incomplete_event_size default), and ours on httptools.
HEAD_MAX_BYTES: Final = 16 << 10


class HeadTimedHttp(_Http):
    """uvicorn's HTTP/1.1 protocol with a deadline on every request head (see the module docstring), on
    httptools when installed (:data:`HTTP_PARSER`), a head over :data:`HEAD_MAX_BYTES` refused with a 400 either way.

    Subclasses say how long a head may take (:meth:`head_timeout`) and may override :meth:`on_head` (a whole
    head arrived) and :meth:`on_head_timeout` (it did not: the default aborts the socket).
    """

    def head_timeout(self) -> float:
        return 10.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_timer: asyncio.TimerHandle | None = None
        self._seen_cycle: object = None  # the request cycle whose head was last looked at
        self._head_bytes = 0  # bytes of a head not yet whole (httptools only: h11 bounds its own)
        # Made at accept (asyncio calls the factory then, before any TLS handshake): the first head's clock.
        self._accepted_at = self.loop.time()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm(self.head_timeout() - (self.loop.time() - self._accepted_at))

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        in_head = self._between_requests()
        super().data_received(data)
        if self.transport.get_protocol() is not self:  # a WebSocket upgrade: the head was whole
            self._disarm()
            return
        self._look_at_head()
        if _BOUND_HEADS and not self._head_fits(in_head, len(data)):
            return
        if self._head_timer is None and self._between_requests() and not self.transport.is_closing():
            self._arm()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._look_at_head()  # a pipelined request may have started

    def on_head(self) -> None:
        """A whole request head arrived (``self.headers`` has it)."""

    def on_head_timeout(self) -> None:
        self.transport.abort()

    def _head_fits(self, was_in_head: bool, received: int) -> bool:
        """httptools keeps every byte of a head until it is whole: counted here while no head is whole, before
        and after the bytes just parsed (a head that starts inside them counts from the next ones: one read's
        worth at most)."""
        if not (was_in_head and self._between_requests()):
            self._head_bytes = 0
            return True
        self._head_bytes += received
        if self._head_bytes <= HEAD_MAX_BYTES or self.transport.is_closing():
            return True
        self.send_400_response(f"Request head over {HEAD_MAX_BYTES} bytes.")
        return False

    def _between_requests(self) -> bool:
        return self.cycle is None or self.cycle.response_complete

    def _look_at_head(self) -> None:
        if self.cycle is self._seen_cycle:
            return
        self._seen_cycle = self.cycle
        self._disarm()
        self.on_head()

    def _arm(self, delay: float | None = None) -> None:
        self._disarm()
        self._head_timer = self.loop.call_later(
            self.head_timeout() if delay is None else max(0.0, delay), self._timed_out
        )

    def _disarm(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _timed_out(self) -> None:
        self._head_timer = None
        if self.transport.get_protocol() is self and not self.transport.is_closing():
            self.on_head_timeout()


_BOUND_HEADS: Final = HTTP_PARSER == "httptools"


# -- permessage-deflate -----------------------------------------------------------------------------------------

# A message shorter than this goes uncompressed: it fits in one TCP segment either way, so deflate would save no
# packet and no round trip, and compressing it with a fresh context costs about 10 us (a JSON-RPC call or answer).
DEFLATE_MIN_BYTES: Final = 1024
# What deflate is tried on first: a message whose first this-many bytes deflate does not take a quarter off
# (base64 of a screenshot or a file: 0.77; random bytes: 1.0; a page's text or a snapshot: 0.1-0.3) goes
# uncompressed, for the cost of compressing this much and not the whole (about 50 ms per MiB).
DEFLATE_SAMPLE_BYTES: Final = 16 << 10
_EMPTY_BLOCK: Final = b"\x00\x00\xff\xff"  # how a sync flush ends; RFC 7692 drops it from each message


class LeanDeflate(PerMessageDeflate):
    """permessage-deflate that holds no zlib state between messages and compresses only what pays.

    Negotiated without context takeover either way (:class:`LeanDeflateFactory`): each message is compressed,
    or inflated, by a zlib object made for it and dropped after it, so an idle socket holds none (uvicorn's
    default kept about 38 KiB of compressor and 11 KiB of inflater on every socket). RFC 7692 lets any message
    go uncompressed, RSV1 clear, on a deflate socket: binary messages always do (file data, already compressed
    or random), text shorter than :data:`DEFLATE_MIN_BYTES` does, and so does text whose first
    :data:`DEFLATE_SAMPLE_BYTES` deflate leaves at more than three quarters of their size. Incoming messages are
    inflated as ``PerMessageDeflate`` does, bounded by the socket's ``max_size`` (a deflate bomb stops there).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # A fragmented message compressed from its first frame: its continuation frames are too.
        self._compressing = False

    def encode(self, frame: Frame) -> Frame:
        if frame.opcode in CTRL_OPCODES:
            return frame
        if frame.opcode is Opcode.CONT:
            if not self._compressing:
                return frame
            self._compressing = not frame.fin
            return super().encode(frame)
        if frame.opcode is not Opcode.TEXT or len(frame.data) < DEFLATE_MIN_BYTES:
            return frame
        if not frame.fin:  # a fragment cannot be judged whole: compress it as the library would
            self._compressing = True
            return super().encode(frame)
        data = memoryview(frame.data)
        encoder = zlib.compressobj(wbits=-self.local_max_window_bits, **self.compress_settings)
        head = encoder.compress(data[:DEFLATE_SAMPLE_BYTES]) + encoder.flush(zlib.Z_SYNC_FLUSH)
        sample = min(len(data), DEFLATE_SAMPLE_BYTES)
        if 4 * (len(head) - len(_EMPTY_BLOCK)) > 3 * sample:
            return frame
        if len(data) > DEFLATE_SAMPLE_BYTES:
            head += encoder.compress(data[DEFLATE_SAMPLE_BYTES:]) + encoder.flush(zlib.Z_SYNC_FLUSH)
        return Frame(frame.opcode, head[: -len(_EMPTY_BLOCK)], True, True, frame.rsv2, frame.rsv3)


class LeanDeflateFactory(ServerPerMessageDeflateFactory):
    """The pod's permessage-deflate (:class:`LeanDeflate`), in the window and memory level uvicorn's default uses
    (12 bits, level 5), with no context taken over from one message to the next, either way. RFC 7692 lets a
    server add ``server_no_context_takeover`` and ``client_no_context_takeover`` to any offer, and a client must
    accept both (Chrome does). The cost: a client's short messages deflate less well (on the wire, a few dozen
    bytes each) and each inflated message makes its inflater (about 3 us). A client's own offer is otherwise
    negotiated as the library does: parameters it cannot take decline deflate for that socket, not the socket.
    """

    def __init__(self) -> None:
        super().__init__(
            server_no_context_takeover=True, client_no_context_takeover=True,
            server_max_window_bits=12, client_max_window_bits=12, compress_settings={"memLevel": 5},
        )

    def process_request_params(
        self, params: Sequence[ExtensionParameter], accepted_extensions: Sequence[Extension],
    ) -> tuple[list[ExtensionParameter], PerMessageDeflate]:
        response, negotiated = super().process_request_params(params, accepted_extensions)
        return response, LeanDeflate(
            negotiated.remote_no_context_takeover, True, negotiated.remote_max_window_bits,
            negotiated.local_max_window_bits, self.compress_settings,
        )
