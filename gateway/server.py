"""Serving the gateway with uvicorn, in the foreground (``openab run``) or inside a test or the demo."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import uvicorn
from starlette.types import ASGIApp

__all__ = ["running_server", "uvicorn_config"]


def uvicorn_config(app: ASGIApp, *, host: str, port: int, max_frame_bytes: int, log_level: str) -> uvicorn.Config:
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        lifespan="on",
        log_level=log_level,
        # Frames between our limit and this one get our own 1009 close; larger ones never reach memory.
        ws_max_size=2 * max_frame_bytes,
        proxy_headers=False,
        server_header=False,
    )


@contextlib.asynccontextmanager
async def running_server(
    app: ASGIApp, *, host: str = "127.0.0.1", port: int = 0, max_frame_bytes: int = 8 << 20,
    log_level: str = "warning", start_timeout: float = 15.0,
) -> AsyncIterator[str]:
    """Serve ``app`` until the block ends; yields its base URL (``http://host:port``) with the real port."""
    server = uvicorn.Server(
        uvicorn_config(app, host=host, port=port, max_frame_bytes=max_frame_bytes, log_level=log_level)
    )
    task = asyncio.create_task(server.serve(), name="uvicorn")
    try:
        async with asyncio.timeout(start_timeout):
            while not server.started:
                if task.done():
                    task.result()
                    raise RuntimeError("the server stopped while starting")
                await asyncio.sleep(0.02)
        sockname = server.servers[0].sockets[0].getsockname()
        shown = f"[{sockname[0]}]" if ":" in sockname[0] else sockname[0]
        yield f"http://{shown}:{sockname[1]}"
    finally:
        server.should_exit = True
        with contextlib.suppress(TimeoutError, asyncio.CancelledError):
            async with asyncio.timeout(10):
                await asyncio.shield(task)
        if not task.done():
            task.cancel()
