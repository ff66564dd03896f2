"""The gateway's ASGI application: `/acp` for the extension, `/healthz` for the pod's probes."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import AsyncIterator

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route, WebSocketRoute

from openab.core.addresses import is_loopback
from openab.core.errors import ConfigurationError
from openab.core.pod import Pod

from .acp_endpoint import acp_http_endpoint, acp_websocket_endpoint

__all__ = ["ConfigurationError", "create_app"]

log = logging.getLogger(__name__)

# RFC 7230 token characters: all a browser may put in a WebSocket subprotocol (base64's / and = are not).
_SUBPROTOCOL_SAFE = re.compile(r"[A-Za-z0-9!#$%&'*+\-.^_`|~]+")



async def _healthz(request: Request) -> JSONResponse:
    pod: Pod = request.app.state.pod
    return JSONResponse({"ok": True, "sessions": len(pod.sessions)})


def create_app(pod: Pod) -> Starlette:
    settings = pod.settings
    if settings.token is None and not is_loopback(settings.host):
        raise ConfigurationError(
            f"refusing to serve /acp on {settings.host} without a key: set --token or OPENAB_ACP_AUTH_KEY, "
            "or bind to 127.0.0.1"
        )
    if settings.token is not None and not _SUBPROTOCOL_SAFE.fullmatch(settings.token.get_secret_value()):
        log.warning(
            "the key has characters a browser cannot send in the openab.bearer.<key> subprotocol, so the "
            "extension will fail to connect; use letters, digits and -._~ only (e.g. `openssl rand -hex 32`)"
        )

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        await pod.start()
        sweeper = asyncio.create_task(pod.run(), name="session sweeper")
        try:
            yield
        finally:
            sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sweeper
            await pod.aclose()

    app = Starlette(
        routes=[
            WebSocketRoute("/acp", acp_websocket_endpoint),
            Route("/acp", acp_http_endpoint),
            Route("/healthz", _healthz),
        ],
        lifespan=lifespan,
    )
    app.state.pod = pod
    return app
