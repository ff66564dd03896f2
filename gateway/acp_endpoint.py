"""`GET /acp`: the extension's WebSocket, bound to an :class:`AcpServerConnection`.

One JSON-RPC message per text frame; binary frames are ignored; a frame over the transport limit (8 MiB)
closes the connection with 1009, because nothing in it can be trusted enough to answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid

from starlette.responses import PlainTextResponse, Response
from starlette.websockets import WebSocket, WebSocketDisconnect

from openab.core.pod import Pod

from .auth import Admitted, admit

__all__ = ["acp_http_endpoint", "acp_websocket_endpoint"]

log = logging.getLogger(__name__)

MESSAGE_TOO_BIG = 1009


def _over_limit(text: str, limit: int) -> bool:
    # A str's UTF-8 size lies between its length and four times its length: encode only when in doubt.
    if len(text) > limit:
        return True
    return len(text) * 4 > limit and len(text.encode("utf-8", "surrogatepass")) > limit


async def acp_websocket_endpoint(websocket: WebSocket) -> None:
    pod: Pod = websocket.app.state.pod
    settings = pod.settings
    key = settings.token.get_secret_value() if settings.token is not None else None
    verdict = admit(websocket.headers, key=key, allowed_origins=settings.allowed_origins)
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

    async def send(message: bytes) -> None:
        await websocket.send_text(message.decode())

    writer = asyncio.create_task(server.rpc.run(send), name=f"{server.id} writer")
    keepalive = asyncio.create_task(server.keepalive(), name=f"{server.id} keepalive")
    reason = "socket closed"
    try:
        while True:
            message = await websocket.receive()
            if message["type"] == "websocket.disconnect":
                reason = f"client closed the socket ({message.get('code', 1005)})"
                break
            text = message.get("text")
            if text is None:
                continue
            if _over_limit(text, settings.max_frame_bytes):
                reason = f"frame over {settings.max_frame_bytes} bytes"
                with contextlib.suppress(Exception):
                    await websocket.close(MESSAGE_TOO_BIG, reason)
                break
            server.rpc.feed(text)
    except WebSocketDisconnect as exc:
        reason = f"client closed the socket ({exc.code})"
    finally:
        server.connection_lost(reason)
        for task in (writer, keepalive):
            task.cancel()
        for task in (writer, keepalive):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


async def acp_http_endpoint(_request: object) -> Response:
    return PlainTextResponse(
        "This is an ACP WebSocket endpoint: connect with a WebSocket client (subprotocol acp.v1).",
        426,
        headers={"Upgrade": "websocket"},
    )
