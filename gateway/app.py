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
from openab.core.settings import Settings

from .acp_endpoint import acp_http_endpoint, acp_websocket_endpoint
from .pairing import MIN_KEY_CHARS

__all__ = ["ConfigurationError", "check_key", "create_app"]

log = logging.getLogger(__name__)

# RFC 7230 token characters: all a browser may put in a WebSocket subprotocol (base64's / and = are not).
_SUBPROTOCOL_SAFE = re.compile(r"[A-Za-z0-9!#$%&'*+\-.^_`|~]+")



async def _healthz(_request: Request) -> JSONResponse:
    # Alive, and nothing more: the probe needs no key, so it must not say how many sessions there are.
    return JSONResponse({"ok": True})


def check_key(settings: Settings) -> None:
    """Refuse to serve with no key unless asked for explicitly on loopback, or with a key short enough to guess
    off loopback; warn about a key a browser cannot send."""
    key = settings.token.get_secret_value() if settings.token is not None else None
    if key is None and not settings.insecure_no_key:
        raise ConfigurationError(
            "refusing to serve /acp without a key: give one in OPENAB_ACP_AUTH_KEY or --token-file (`openab run` "
            "makes and keeps one itself), or pass --insecure-no-key on 127.0.0.1 for development"
        )
    if key is None and not is_loopback(settings.host):
        raise ConfigurationError(
            f"refusing to serve /acp on {settings.host} without a key: give one in OPENAB_ACP_AUTH_KEY or "
            "--token-file, or bind to 127.0.0.1"
        )
    if key is not None and len(key) < MIN_KEY_CHARS:
        if not is_loopback(settings.host):
            raise ConfigurationError(
                f"refusing to serve /acp on {settings.host} with a {len(key)}-character key: it needs at least "
                f"{MIN_KEY_CHARS} (128 bits, e.g. `openssl rand -hex 32`)"
            )
        log.warning("the key is shorter than %d characters: fine for a try on loopback, too weak for anything else",
                    MIN_KEY_CHARS)
    if key is not None and not _SUBPROTOCOL_SAFE.fullmatch(key):
        log.warning(
            "the key has characters a browser cannot send in the openab.bearer.<key> subprotocol, so the "
            "extension will fail to connect; use letters, digits and -._~ only (e.g. `openssl rand -hex 32`)"
        )


def create_app(pod: Pod) -> Starlette:
    settings = pod.settings
    check_key(settings)

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
