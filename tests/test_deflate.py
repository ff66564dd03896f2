"""permessage-deflate as the pod serves it (core/sockets.py's LeanDeflate): negotiated without context takeover
either way, so an idle socket holds no zlib state; binary, short and incompressible messages sent with RSV1
clear; a deflate bomb stopped at the socket's size bound; odd or broken offers declined, never fatal.

The frames are looked at as they arrive, before inflating (a ``websockets`` client whose extension records each
frame's RSV1 bit), on real uvicorn through the pod's own WebSocket protocol (``gateway/server.py``).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import random
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
import websockets
from gateway_harness import run_gateway
from starlette.applications import Starlette
from starlette.routing import WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect
from websockets.extensions.base import Extension
from websockets.extensions.permessage_deflate import ClientPerMessageDeflateFactory, PerMessageDeflate
from websockets.frames import Frame, Opcode
from websockets.typing import ExtensionParameter

from openab_browser.core.sockets import DEFLATE_MIN_BYTES, DEFLATE_SAMPLE_BYTES, LeanDeflate
from openab_browser.gateway.server import running_server

pytestmark = pytest.mark.anyio

# What the pod sends for each word the client says (see _sender).
PAGE = ('{"role":"link","name":"Next page","ref":"e12"},' * 2000).encode()  # a snapshot's kind of text
NOISE = base64.b64encode(random.Random(7).randbytes(48 << 10))  # base64 of random bytes: deflate takes ~23 %
MESSAGES: dict[str, str | bytes] = {
    "binary": b"\0" * (64 << 10),  # compresses to nothing, and still goes as it is: file data never pays
    "short": "ok",
    "page": PAGE.decode(),
    "noise": NOISE.decode(),
    "long page": (PAGE * 4).decode(),  # past the sample: the rest compressed after it
}


async def _sender(websocket: WebSocket) -> None:
    """Sends MESSAGES[word] for each text word; any other text is answered with its length and SHA-256."""
    await websocket.accept()
    try:
        while True:
            text = await websocket.receive_text()
            message = MESSAGES.get(text)
            if isinstance(message, bytes):
                await websocket.send_bytes(message)
            elif message is not None:
                await websocket.send_text(message)
            else:
                await websocket.send_text(f"{len(text)} {hashlib.sha256(text.encode()).hexdigest()}")
    except WebSocketDisconnect:
        pass


class _Recorded(PerMessageDeflate):
    """The client's inflater, noting each data frame's opcode and RSV1 bit before inflating it."""

    frames: list[tuple[Opcode, bool]]

    def decode(self, frame: Frame, *, max_size: int | None = None) -> Frame:
        self.frames.append((frame.opcode, frame.rsv1))
        return super().decode(frame, max_size=max_size)


class _Recording(ClientPerMessageDeflateFactory):
    def __init__(self, **offer: Any) -> None:
        super().__init__(**offer)
        self.extension: _Recorded | None = None

    def process_response_params(
        self, params: Sequence[ExtensionParameter], accepted_extensions: Sequence[Extension],
    ) -> PerMessageDeflate:
        agreed = super().process_response_params(params, accepted_extensions)
        self.extension = _Recorded(agreed.remote_no_context_takeover, agreed.local_no_context_takeover,
                                   agreed.remote_max_window_bits, agreed.local_max_window_bits,
                                   agreed.compress_settings)
        self.extension.frames = []
        return self.extension


@pytest.fixture
async def sender() -> AsyncIterator[str]:
    async with running_server(Starlette(routes=[WebSocketRoute("/ws", _sender)])) as base:
        yield base.replace("http", "ws", 1) + "/ws"


async def _exchange(url: str, recording: _Recording, words: Sequence[str]) -> list[tuple[Opcode, bool]]:
    """Each word sent and its message received and checked; the frames' opcode and RSV1, in order."""
    async with websockets.connect(url, extensions=[recording], compression=None, open_timeout=10,
                                  max_size=None) as ws:
        assert recording.extension is not None, "permessage-deflate was not negotiated"
        for word in words:
            await ws.send(word)
            assert await asyncio.wait_for(ws.recv(), 10) == MESSAGES[word]
        return list(recording.extension.frames)


async def test_binary_short_and_incompressible_messages_go_with_rsv1_clear(sender: str) -> None:
    recording = _Recording(client_max_window_bits=True)  # Chrome's offer
    frames = await _exchange(sender, recording, ["binary", "short", "page", "noise", "long page", "page"])
    assert frames == [(Opcode.BINARY, False), (Opcode.TEXT, False), (Opcode.TEXT, True), (Opcode.TEXT, False),
                      (Opcode.TEXT, True), (Opcode.TEXT, True)]


async def test_the_pod_takes_no_context_over_either_way(sender: str) -> None:
    async with websockets.connect(sender, compression="deflate", open_timeout=10) as ws:
        assert ws.response is not None
        agreed = ws.response.headers["Sec-WebSocket-Extensions"]
        assert "server_no_context_takeover" in agreed and "client_no_context_takeover" in agreed, agreed
        # The client compresses each of its messages afresh, as agreed; the pod inflates each whole.
        for size in (10, DEFLATE_MIN_BYTES * 3, 300_000, 10):
            text = (f"{{'a': {size}}}" * size)[:size]
            await ws.send(text)
            assert await asyncio.wait_for(ws.recv(), 10) == f"{size} {hashlib.sha256(text.encode()).hexdigest()}"


async def test_a_client_that_offers_no_deflate_gets_plain_frames(sender: str) -> None:
    async with websockets.connect(sender, compression=None, open_timeout=10, max_size=None) as ws:
        assert ws.response is not None and "Sec-WebSocket-Extensions" not in ws.response.headers
        for word in ("page", "binary", "short"):
            await ws.send(word)
            assert await asyncio.wait_for(ws.recv(), 10) == MESSAGES[word]


async def _handshake(url: str, offer: str) -> tuple[int, str | None]:
    """A bare upgrade request offering ``offer``: the status and the extensions the pod took."""
    host, _, rest = url.removeprefix("ws://").partition("/")
    name, port = host.rsplit(":", 1)
    reader, writer = await asyncio.wait_for(asyncio.open_connection(name, int(port)), 10)
    try:
        writer.write((
            f"GET /{rest} HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
            f"Sec-WebSocket-Extensions: {offer}\r\n\r\n").encode())
        head = (await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)).decode("latin-1")
    finally:
        writer.close()
    lines = head.split("\r\n")
    taken = [line.split(":", 1)[1].strip() for line in lines if line.lower().startswith("sec-websocket-extensions:")]
    return int(lines[0].split()[1]), taken[0] if taken else None


AGREED = "permessage-deflate; server_no_context_takeover; client_no_context_takeover; server_max_window_bits="


@pytest.mark.parametrize(("offer", "taken"), [
    ("permessage-deflate; client_max_window_bits", AGREED + "12; client_max_window_bits=12"),  # Chrome's
    ("permessage-deflate", AGREED + "12"),
    ("permessage-deflate; server_max_window_bits=10; client_max_window_bits=9",
     AGREED + "10; client_max_window_bits=9"),
    ("permessage-deflate; server_max_window_bits=15; client_max_window_bits=15",
     AGREED + "12; client_max_window_bits=12"),
    ("permessage-deflate; client_max_window_bits=8", AGREED + "12; client_max_window_bits=8"),
    ("permessage-deflate; server_max_window_bits=8", None),  # zlib cannot compress in a 256-byte window
    ("permessage-deflate; server_max_window_bits=99", None),
    ("permessage-deflate; server_max_window_bits", None),
    ("permessage-deflate; mystery=1", None),
    ("permessage-deflate; server_no_context_takeover; server_no_context_takeover", None),
    ("permessage-deflate; client_no_context_takeover=yes", None),
    ("x-webkit-deflate-frame", None),
    ("permessage-deflate; server_max_window_bits=8, permessage-deflate", AGREED + "12"),  # the next offer
    ("permessage-deflate, permessage-deflate", AGREED + "12"),  # once only
])
async def test_odd_offers_are_negotiated_or_declined_and_the_socket_opens(sender: str, offer: str,
                                                                           taken: str | None) -> None:
    assert await _handshake(sender, offer) == (101, taken)


@pytest.mark.parametrize("offer", ["permessage-deflate; =", "permessage-deflate;;", ", ,;", "permessage-deflate; a=\""])
async def test_an_offer_that_does_not_parse_is_a_bad_request(sender: str, offer: str) -> None:
    assert (await _handshake(sender, offer))[0] == 400
    assert (await _handshake(sender, "permessage-deflate"))[0] == 101  # and the server serves on


async def test_small_windows_both_ways(sender: str) -> None:
    recording = _Recording(server_max_window_bits=9, client_max_window_bits=9)
    async with websockets.connect(sender, extensions=[recording], compression=None, open_timeout=10) as ws:
        assert recording.extension is not None and recording.extension.remote_max_window_bits == 9
        await ws.send("long page")
        assert await asyncio.wait_for(ws.recv(), 10) == MESSAGES["long page"]
        text = PAGE.decode() * 3
        await ws.send(text)
        assert await asyncio.wait_for(ws.recv(), 10) == f"{len(text)} {hashlib.sha256(text.encode()).hexdigest()}"


async def _closed_with(url: str, token: str | None, message: str | Sequence[str]) -> int | None:
    """Sends ``message`` (a list: one message in fragments) compressed; the close code the pod gave."""
    subprotocols: Any = [f"openab.bearer.{token}", "acp.v1"]
    async with websockets.connect(url, subprotocols=subprotocols, compression="deflate", open_timeout=10) as ws:
        with pytest.raises(websockets.ConnectionClosedError) as closed:
            await ws.send(message)
            await asyncio.wait_for(ws.recv(), 30)
        return closed.value.rcvd.code if closed.value.rcvd is not None else None


async def test_a_deflate_bomb_stops_at_the_sockets_bound() -> None:
    """64 MiB that deflate to about 64 KiB, whole or in fragments: the pod inflates no more than its bound (twice
    its frame limit) and closes with 1009; a well-behaved socket after it is served."""
    async with run_gateway(max_frame_bytes=64 << 10) as gateway:
        assert await _closed_with(gateway.ws_url, gateway.token, "[" * (64 << 20)) == 1009
        assert await _closed_with(gateway.ws_url, gateway.token, ["[" * (1 << 20)] * 64) == 1009
        subprotocols: Any = [f"openab.bearer.{gateway.token}", "acp.v1"]
        async with websockets.connect(gateway.ws_url, subprotocols=subprotocols, compression="deflate",
                                      open_timeout=10) as ws:
            await ws.send('{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}')
            answer = await asyncio.wait_for(ws.recv(), 10)
            assert '"id":1' in str(answer) and '"result"' in str(answer), answer


def _inflated(frames: Sequence[Frame]) -> bytes:
    """The message a client with the negotiated parameters reads from ``frames`` (no context of its own kept)."""
    client = PerMessageDeflate(True, True, 12, 12)
    return b"".join(bytes(client.decode(frame).data) for frame in frames)


@pytest.mark.parametrize("first", [b"x" * 10, PAGE[:DEFLATE_MIN_BYTES * 2]])
def test_a_fragmented_message_is_compressed_whole_or_not_at_all(first: bytes) -> None:
    pod = LeanDeflate(True, True, 12, 12, {"memLevel": 5})
    sent = [pod.encode(Frame(Opcode.TEXT, first, fin=False)), pod.encode(Frame(Opcode.CONT, PAGE, fin=False)),
            pod.encode(Frame(Opcode.CONT, PAGE, fin=True))]
    compressed = len(first) >= DEFLATE_MIN_BYTES
    assert [frame.rsv1 for frame in sent] == [compressed, False, False]
    assert sum(len(frame.data) for frame in sent) < len(first) + 2 * len(PAGE) if compressed else True
    assert _inflated(sent) == first + PAGE + PAGE
    # The next message starts afresh: a binary one between fragments of text never is compressed.
    after = [pod.encode(Frame(Opcode.BINARY, PAGE)), pod.encode(Frame(Opcode.TEXT, PAGE))]
    assert [frame.rsv1 for frame in after] == [False, True]
    assert _inflated(after) == PAGE + PAGE


def test_the_sample_decides_for_the_whole_message() -> None:
    pod = LeanDeflate(True, True, 12, 12, {"memLevel": 5})
    # Incompressible first, compressible after: judged on the sample, sent as it is.
    mixed = NOISE[:DEFLATE_SAMPLE_BYTES] + PAGE * 10
    assert not pod.encode(Frame(Opcode.TEXT, mixed)).rsv1
    # Compressible first: compressed whole, and whole again when inflated.
    mixed = PAGE[:DEFLATE_SAMPLE_BYTES] + NOISE
    frame = pod.encode(Frame(Opcode.TEXT, mixed))
    assert frame.rsv1 and _inflated([frame]) == mixed
    # Exactly the threshold, and one byte short of it.
    assert pod.encode(Frame(Opcode.TEXT, PAGE[:DEFLATE_MIN_BYTES])).rsv1
    assert not pod.encode(Frame(Opcode.TEXT, PAGE[:DEFLATE_MIN_BYTES - 1])).rsv1
    # Control frames pass as they are.
    ping = Frame(Opcode.PING, b"x")
    assert pod.encode(ping) is ping
