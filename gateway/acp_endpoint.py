"""`GET /acp`: the extension's WebSocket, bound to an :class:`AcpServerConnection`.

One JSON-RPC message per text frame; a binary frame is a file chunk's request (docs/files.md), answered here by the
file methods in the order frames come (any other binary frame is ignored); a frame over the transport limit (8 MiB)
closes the connection with 1009, because nothing in it can be trusted enough to answer. When the connection
closes itself (a client that stops reading overflows its send buffer), the socket is closed too, with 1008
and the reason, rather than left open answering pings with nothing behind it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.websockets import WebSocket, WebSocketDisconnect

from openab_browser.core.acp.file_methods import FileMethods
from openab_browser.core.acp.server import AcpServerConnection
from openab_browser.core.pod import Pod

from .auth import Admitted
from .hub import admit_acp

__all__ = ["acp_http_endpoint", "acp_websocket_endpoint"]

log = logging.getLogger(__name__)

MESSAGE_TOO_BIG = 1009
# The client broke a rule of the endpoint (it stopped reading what it is sent): a refusal, not our failure.
# 1011 would say the server failed, and invite the client to retry at once in the same way.
POLICY_VIOLATION = 1008
# The connection stopped for a reason of ours (its writer failed): the server's condition, not the client's.
INTERNAL_ERROR = 1011
# How long the close frame may wait behind what the client has not read yet.
CLOSE_TIMEOUT = 10.0
# RFC 6455: a close frame's reason is at most 123 bytes of UTF-8.
_MAX_CLOSE_REASON = 123
# How long a file chunk's answer may wait for the client to read: as long as a transfer may go without a chunk.
FILE_ANSWER_TIMEOUT = 30.0


def _close_reason(reason: str) -> str:
    return reason.encode()[:_MAX_CLOSE_REASON].decode(errors="ignore")


def _over_limit(text: str, limit: int) -> bool:
    # A str's UTF-8 size lies between its length and four times its length, and is its length when it is
    # ASCII (a flag on the str, read in constant time): encode, which copies the frame, only when in doubt.
    if len(text) > limit:
        return True
    if len(text) * 4 <= limit or text.isascii():
        return False
    return len(text.encode("utf-8", "surrogatepass")) > limit


async def acp_websocket_endpoint(websocket: WebSocket) -> None:
    pod: Pod = websocket.app.state.pod
    settings = pod.settings
    verdict = await admit_acp(websocket)
    if not isinstance(verdict, Admitted):
        headers = {"WWW-Authenticate": "Bearer"} if verdict.status == 401 else None
        await websocket.send_denial_response(PlainTextResponse(verdict.reason, verdict.status, headers=headers))
        return

    connection_uuid = str(uuid.uuid4())
    server = pod.accept(f"acp_conn_{connection_uuid}")
    await websocket.accept(
        subprotocol=verdict.subprotocol, headers=[(b"acp-connection-id", connection_uuid.encode())]
    )
    log.info("%s opened from %s", server.id, websocket.client.host if websocket.client else "?")

    # The RPC writer and the file chunks' answers (sent by the reader) take turns on the socket.
    sending = asyncio.Lock()

    async def answer(message: bytes | str) -> None:
        try:
            async with sending:
                if isinstance(message, str):
                    await websocket.send_text(message)
                else:
                    await websocket.send_bytes(message)
        except WebSocketDisconnect as exc:
            # A ConnectionError is what the RPC writer expects of a transport that went away.
            raise ConnectionError(f"the client closed the socket ({exc.code})") from None

    async def send(message: bytes) -> None:
        await answer(message.decode())

    files = server.files  # the binary file frames take the same checks as the JSON methods
    writer = asyncio.create_task(server.rpc.run(send), name=f"{server.id} writer")
    keepalive = asyncio.create_task(server.keepalive(), name=f"{server.id} keepalive")
    reader = asyncio.create_task(_read(websocket, server, settings.max_frame_bytes, files, answer),
                                 name=f"{server.id} reader")
    closed = asyncio.create_task(server.rpc.wait_closed(), name=f"{server.id} closed")
    reason = "socket closed"
    closed_itself = False
    try:
        # Reads alone cannot see the connection close itself: a client that stops reading sends nothing more.
        await asyncio.wait((reader, closed), return_when=asyncio.FIRST_COMPLETED)
        if reader.done():
            reason = reader.result()
        else:
            reason, closed_itself = closed.result(), True
    finally:
        # Sessions, tunnels and the agent's turn go now, before the close below waits on the client.
        server.connection_lost(reason)
        # The writer may be stuck behind data the client does not read: nothing more goes out but the close.
        for task in (writer, keepalive, reader, closed):
            task.cancel()
        for task in (writer, keepalive, reader, closed):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
    if closed_itself:
        await _close_socket(websocket, server, reason)


async def _read(websocket: WebSocket, server: AcpServerConnection, max_frame_bytes: int, files: FileMethods | None,
                send: Callable[[bytes | str], Awaitable[None]]) -> str:
    """Feed each text frame to the connection, and answer each binary frame (a file chunk) in turn, until the
    socket ends; returns why it ended."""
    try:
        while True:
            message = await websocket.receive()
            if message["type"] == "websocket.disconnect":
                return f"client closed the socket ({message.get('code', 1005)})"
            text = message.get("text")
            if text is None:
                data = message.get("bytes")
                if data is None or files is None:
                    continue
                if len(data) > max_frame_bytes:
                    reason = f"frame over {max_frame_bytes} bytes"
                    with contextlib.suppress(Exception):
                        await websocket.close(MESSAGE_TOO_BIG, reason)
                    return reason
                # Answered before the next frame is read: a client's chunks in flight wait in its socket, not here.
                answer = files.frame(data)
                if answer is None:
                    continue  # not a file frame: ignored, as any other binary frame
                try:
                    async with asyncio.timeout(FILE_ANSWER_TIMEOUT):
                        await send(answer)
                except TimeoutError:
                    return f"the client read no file chunk's answer for {FILE_ANSWER_TIMEOUT:g} s"
                except ConnectionError as exc:
                    return str(exc)
                continue
            if _over_limit(text, max_frame_bytes):
                reason = f"frame over {max_frame_bytes} bytes"
                with contextlib.suppress(Exception):
                    await websocket.close(MESSAGE_TOO_BIG, reason)
                return reason
            server.rpc.feed(text)
    except WebSocketDisconnect as exc:
        return f"client closed the socket ({exc.code})"


async def _close_socket(websocket: WebSocket, server: AcpServerConnection, reason: str) -> None:
    """The connection closed itself: close the socket with a code and the reason, so the client learns why."""
    code = POLICY_VIOLATION if server.rpc.peer_at_fault else INTERNAL_ERROR
    log.log(logging.WARNING if server.rpc.peer_at_fault else logging.INFO,
            "%s: closing the socket with %d: %s", server.id, code, reason)
    # The close frame queues behind what the client has not read: bounded, since it may never read again.
    with contextlib.suppress(Exception):
        async with asyncio.timeout(CLOSE_TIMEOUT):
            await websocket.close(code, _close_reason(reason))


async def acp_http_endpoint(request: Request) -> Response:
    """A plain HTTP request to ``/acp``: the same door as the WebSocket's, so a client whose socket would not open
    learns why (the extension asks here: a browser does not tell a page why a WebSocket failed).

    401 wrong or missing key, 403 a refused ``Host`` or ``Origin``, and only past those 426: the address and the
    credentials are right and the request was not a WebSocket upgrade (a proxy in between that does not pass
    upgrades, when the client did send one).
    """
    verdict = await admit_acp(request)
    if not isinstance(verdict, Admitted):
        headers = {"WWW-Authenticate": "Bearer"} if verdict.status == 401 else None
        return PlainTextResponse(verdict.reason, verdict.status, headers=headers)
    return PlainTextResponse(
        "This is an ACP WebSocket endpoint and the key is right: connect with a WebSocket client (subprotocol "
        "acp.v1). If a WebSocket client was refused, a proxy in between does not pass WebSocket upgrades.",
        426,
        headers={"Upgrade": "websocket"},
    )
