"""The gateway's ASGI application: `/acp` for the extension, `/healthz` and `/readyz` for the pod's probes,
`/metrics` (with the key) for Prometheus (:mod:`.metrics`).

`/healthz` says the process answers (a liveness probe restarts a pod that does not). `/readyz` says it takes
new connections: from the moment the pod serves until a stop begins to drain it, so a load balancer sends
nobody new to a pod on its way out, and only while at least one of its agents can start (a pod whose every agent
CLI is missing could answer no prompt: its rollout must not go green). Its body says which agents cannot start,
and why. Neither needs the key, so neither says anything about sessions.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route, WebSocketRoute

from openab_browser.core.addresses import is_loopback
from openab_browser.core.agents.availability import Availability
from openab_browser.core.agents.runtime import AgentRuntime
from openab_browser.core.errors import ConfigurationError
from openab_browser.core.pod import Pod
from openab_browser.core.settings import Settings

from .acp_endpoint import acp_http_endpoint, acp_websocket_endpoint
from .hub import ActivityReporter, HubDoor, HubEnvironment, HubPrefix, jupyterhub_version
from .metrics import metrics_endpoint, metrics_registry
from .pair_link import PairCodes, pair_claim_endpoint, pair_page_endpoint
from .pairing import MIN_KEY_CHARS, KeptKey
from .server import guard_for

__all__ = ["ConfigurationError", "Readiness", "check_key", "create_app", "drainer"]

log = logging.getLogger(__name__)

# RFC 7230 token characters: all a browser may put in a WebSocket subprotocol (base64's / and = are not).
_SUBPROTOCOL_SAFE = re.compile(r"[A-Za-z0-9!#$%&'*+\-.^_`|~]+")



@dataclass(slots=True)
class Readiness:
    """Whether the pod takes new connections: it serves (the lifespan has started it), is not draining, and one of
    its agents can start (``agents``: which can, looked up within a bound; ``None``: a backend of its own)."""

    serving: bool = False
    draining: bool = False
    agents: Callable[[], Availability] | None = None

    @property
    def state(self) -> str:
        if self.draining or not self.serving:
            return "draining" if self.draining else "starting"
        return "no_agent" if self.agents is not None and not self.agents().any_startable else "ready"

    def body(self) -> dict[str, object]:
        state = self.state
        body: dict[str, object] = {"ready": state == "ready", "state": state}
        availability = self.agents() if self.agents is not None else None
        if availability is not None and availability.cannot_start:
            body["reason"] = availability.reason
            body["cannot_start"] = dict(availability.cannot_start)
        return body


async def _healthz(_request: Request) -> JSONResponse:
    # Alive, and nothing more: the probe needs no key, so it must not say how many sessions there are.
    return JSONResponse({"ok": True})


async def _readyz(request: Request) -> JSONResponse:
    readiness: Readiness = request.app.state.readiness
    body = readiness.body()
    return JSONResponse(body, status_code=200 if body["ready"] else 503)


def drainer(app: Starlette) -> Callable[[], Awaitable[None]]:
    """The stop's drain for :class:`~openab_browser.gateway.server.DrainingServer`: `/readyz` fails from its first
    moment
    (on the sockets still open, e.g. a proxy's kept-alive ones), then the pod drains its turns and tool calls."""
    pod: Pod = app.state.pod
    readiness: Readiness = app.state.readiness

    async def drain() -> None:
        readiness.draining = True
        await pod.drain()

    return drain


def check_key(settings: Settings, kept: KeptKey | None = None) -> None:
    """Refuse to serve with no key unless asked for explicitly on loopback, or with a key short enough to guess
    off loopback; warn about a key a browser cannot send. A ``kept`` key (its verifier) is one the pod made."""
    key = settings.token.get_secret_value() if settings.token is not None else None
    if kept is not None:
        return  # a key the pod made: 256 bits, of the characters a browser sends
    if key is None and not settings.insecure_no_key:
        raise ConfigurationError(
            "refusing to serve /acp without a key: give one in OPENAB_ACP_AUTH_KEY or --key-file (`openab run` "
            "makes and keeps one itself), or pass --insecure-no-key on 127.0.0.1 for development"
        )
    if key is None and not is_loopback(settings.host):
        raise ConfigurationError(
            f"refusing to serve /acp on {settings.host} without a key: give one in OPENAB_ACP_AUTH_KEY or "
            "--key-file, or bind to 127.0.0.1"
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


def create_app(pod: Pod, hub: HubEnvironment | None = None, kept: KeptKey | None = None) -> Starlette:
    """The pod's application. Its socket guard (``app.state.guard``, from the settings) is the one to serve it
    with: ``uvicorn_config`` takes it when given none, and ``/metrics`` reads its counts.

    With ``hub`` (a JupyterHub single-user server, :mod:`.hub`) the hub's tokens open ``/acp`` instead of a key,
    everything is served under the hub's prefix, and the pod reports its activity to the hub. With ``kept`` (the key
    the pod made itself, :mod:`.pairing`) ``/acp`` takes the key its verifier matches."""
    settings = pod.settings
    if hub is None:
        check_key(settings, kept)
    elif settings.token is not None or settings.insecure_no_key or kept is not None:
        raise ConfigurationError("--jupyterhub takes the hub's tokens instead of a key: give no key and no "
                                 "--insecure-no-key (the hub's proxy and its tokens guard the pod)")
    door = HubDoor(hub, cache_secs=settings.hub_auth_cache_secs) if hub is not None else None
    reporter = ActivityReporter(
        hub, lambda: len(pod.connections) > 0 or pod.connections.turns_in_flight > 0,
        interval=settings.hub_activity_interval,
    ) if hub is not None else None
    readiness = Readiness(agents=pod.backend.availability.now if isinstance(pod.backend, AgentRuntime) else None)
    guard = guard_for(settings)
    refusals: Counter[str] = Counter()

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        await pod.start()
        sweeper = asyncio.create_task(pod.run(), name="session sweeper")
        tasks = [sweeper]
        if reporter is not None:
            tasks.append(asyncio.create_task(reporter.run(), name="hub activity"))
        readiness.serving = True
        if readiness.agents is not None and (reason := readiness.agents().reason) is not None:
            # Each missing agent is named as the runtime starts; this says what it means for the pod.
            if readiness.state == "no_agent":
                log.error("not ready: %s; /readyz answers 503 and the panel says so at connect", reason)
            else:
                log.warning("ready, but %s", reason)
        try:
            yield
        finally:
            readiness.serving = False
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            await pod.aclose()

    app = Starlette(
        routes=[
            WebSocketRoute("/acp", acp_websocket_endpoint),
            Route("/acp", acp_http_endpoint),
            Route("/healthz", _healthz),
            Route("/readyz", _readyz),
            Route("/metrics", metrics_endpoint),
            # The one-click pairing link `openab run` prints (.pair_link): its page, and the code's one claim.
            Route("/pair", pair_page_endpoint, methods=["GET"]),
            Route("/pair/claim", pair_claim_endpoint, methods=["POST"]),
        ],
        lifespan=lifespan,
        # Under a hub everything is served below its prefix, which its proxy keeps in the path.
        middleware=[Middleware(HubPrefix, prefix=hub.prefix, version=jupyterhub_version())] if hub is not None else [],
    )
    app.state.pod = pod
    app.state.readiness = readiness
    app.state.guard = guard
    app.state.refusals = refusals
    app.state.pair_codes = PairCodes()
    app.state.kept_key = kept
    app.state.metrics = metrics_registry(pod, guard, refusals)
    app.state.hub = door
    app.state.hub_activity = reporter
    return app
