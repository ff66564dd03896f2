"""Run the real gateway (uvicorn on 127.0.0.1, port 0) inside a test."""

from __future__ import annotations

import contextlib
import secrets
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import SecretStr

from openab_browser.core.acp.backend import AgentBackend, NoAgentBackend
from openab_browser.core.pod import Pod
from openab_browser.core.settings import Settings
from openab_browser.gateway.app import create_app
from openab_browser.gateway.assemble import assemble
from openab_browser.gateway.server import ConnectionGuard, running_server


@dataclass
class RunningGateway:
    pod: Pod
    base_url: str
    token: str | None
    guard: ConnectionGuard

    @property
    def ws_url(self) -> str:
        return "ws" + self.base_url.removeprefix("http") + "/acp"


@contextlib.asynccontextmanager
async def run_gateway(
    *,
    backend: AgentBackend | None = None,
    keyless: bool = False,
    token: str | None = None,
    port: int = 0,
    pod: Pod | None = None,
    **settings: Any,
) -> AsyncIterator[RunningGateway]:
    """Serve a pod on 127.0.0.1 with ``backend`` (default: none, so prompts fail clearly) and the browser access
    ``settings`` name (default: the proxy). Pass ``port`` and ``token`` (or a whole ``pod``) to bring a gateway
    back where a client expects it after a restart."""
    if pod is None and "state_dir" not in settings:
        # Each gateway keeps its state (the session naming secret, session folders) in a folder of its own, never
        # in the user's real state dir.
        with tempfile.TemporaryDirectory(prefix="oab-state-") as state:
            async with run_gateway(
                backend=backend, keyless=keyless, token=token, port=port, state_dir=Path(state), **settings
            ) as running:
                yield running
        return
    if pod is None:
        key = None if keyless else (token or secrets.token_urlsafe(24))
        if keyless:
            settings.setdefault("insecure_no_key", True)
        pod = assemble(
            Settings(token=None if key is None else SecretStr(key), port=port, **settings),
            backend=backend or NoAgentBackend(),
        )
    key = pod.settings.token.get_secret_value() if pod.settings.token is not None else None
    app = create_app(pod)
    guard: ConnectionGuard = app.state.guard
    async with running_server(app, port=port, max_frame_bytes=pod.settings.max_frame_bytes, guard=guard,
                              ws_deflate=pod.settings.ws_deflate) as base_url:
        yield RunningGateway(pod, base_url, key, guard)


