"""openab as a JupyterHub single-user server (``openab run --jupyterhub``): the hub spawns the pod, its proxy routes
``/user/<name>/`` to it, and the pod takes the hub's credentials instead of a key of its own.

The spawner's environment says who the pod is for (``JUPYTERHUB_USER``, ``JUPYTERHUB_SERVER_NAME``), where it is
served (``JUPYTERHUB_SERVICE_PREFIX``, ``JUPYTERHUB_SERVICE_URL``), how to ask the hub (``JUPYTERHUB_API_URL``, the
pod's own ``JUPYTERHUB_API_TOKEN``) and which scopes open it (``JUPYTERHUB_OAUTH_ACCESS_SCOPES``: the access to
this one server). A person's API token, made on the hub, is sent as the key always was (``Authorization: Bearer``
or the ``openab.bearer.<token>`` subprotocol) and checked by the ``jupyterhub`` package's own service auth
(:class:`jupyterhub.services.auth.HubAuth`, which caches each answer ``OPENAB_HUB_AUTH_CACHE_SECS``): the token
must name a hub user or service whose scopes include access to this server, so another person's token, a token
whose scopes leave out the server, or a revoked one (once its cached answer expires) gets 401 or 403.

:class:`ActivityReporter` tells the hub the pod is in use (an open ``/acp`` socket or a turn running), as
jupyterhub-singleuser does (``POST users/<name>/activity``), so ``jupyterhub-idle-culler`` stops only idle pods.
The ``jupyterhub`` package is imported only here and only in that mode: ``pip install openab-browser[hub]``.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.metadata
import json
import logging
import math
import re
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final
from urllib.parse import quote, urlsplit

import httpx
from starlette.requests import HTTPConnection
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from openab_browser.core.errors import ConfigurationError

from .auth import Admitted, Refused, _counted, _offered_subprotocols, _presented_key, admit_connection, admit_scrape

__all__ = [
    "METRICS_SCOPE", "ActivityReporter", "HubDoor", "HubEnvironment", "HubPrefix", "admit_acp", "admit_metrics",
    "hub_pairing_line", "jupyterhub_version",
]

log = logging.getLogger(__name__)

# The scope the hub's own /hub/metrics asks of Prometheus: the same credential scrapes every pod.
METRICS_SCOPE: Final = "read:metrics"
# A hub token is 32 hex characters; anything much longer, or with characters no token has, is refused before the
# hub is asked (a 100 kB header must not become a 100 kB request to the hub, nor a cache key per attempt).
MAX_TOKEN_CHARS: Final = 256
_TOKEN_SHAPE = re.compile(r"[A-Za-z0-9._~+/=-]+")
# How long a handshake waits for the hub's answer about a token.
HUB_ANSWER_TIMEOUT: Final = 10.0
# The least time between two activity posts when sockets open faster than that.
NUDGE_SPACING: Final = 1.0
_REQUIRED = ("JUPYTERHUB_API_URL", "JUPYTERHUB_API_TOKEN", "JUPYTERHUB_USER", "JUPYTERHUB_SERVICE_PREFIX")


@dataclass(frozen=True, slots=True)
class HubEnvironment:
    """What the hub's spawner told the pod, read once at start-up; ``api_token`` is the pod's own credential
    with the hub (it reports activity with it), never logged."""

    api_url: str
    api_token: str
    user: str
    server_name: str
    prefix: str
    access_scopes: frozenset[str]
    activity_url: str
    service_url: str | None
    public_url: str | None
    base_url: str = "/"

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> HubEnvironment:
        missing = [name for name in _REQUIRED if not env.get(name)]
        if missing:
            raise ConfigurationError(
                f"--jupyterhub: {', '.join(missing)} not set; the hub's spawner sets them when it starts `openab run "
                "--jupyterhub` as a single-user server (docs/deploy.md, \"A team on JupyterHub\")"
            )
        user = env["JUPYTERHUB_USER"]
        server_name = env.get("JUPYTERHUB_SERVER_NAME", "")
        prefix = env["JUPYTERHUB_SERVICE_PREFIX"]
        if not prefix.startswith("/"):
            raise ConfigurationError(f"JUPYTERHUB_SERVICE_PREFIX {prefix!r} is not a path")
        prefix = prefix if prefix.endswith("/") else prefix + "/"
        raw_scopes = env.get("JUPYTERHUB_OAUTH_ACCESS_SCOPES") or env.get("JUPYTERHUB_OAUTH_SCOPES")
        if raw_scopes:
            try:
                parsed = json.loads(raw_scopes)
            except ValueError:
                raise ConfigurationError("JUPYTERHUB_OAUTH_ACCESS_SCOPES is not a JSON list of scopes") from None
            if not isinstance(parsed, list) or not all(isinstance(s, str) and s for s in parsed) or not parsed:
                raise ConfigurationError("JUPYTERHUB_OAUTH_ACCESS_SCOPES is not a JSON list of scopes")
            scopes = frozenset(parsed)
        else:
            # What the hub grants for this server when it names no scopes (JupyterHub < 3 spawners).
            scopes = frozenset({f"access:servers!server={user}/{server_name}"})
        api_url = env["JUPYTERHUB_API_URL"].rstrip("/")
        activity_url = env.get("JUPYTERHUB_ACTIVITY_URL") or f"{api_url}/users/{quote(user, safe='')}/activity"
        return cls(
            api_url=api_url, api_token=env["JUPYTERHUB_API_TOKEN"], user=user, server_name=server_name, prefix=prefix,
            access_scopes=scopes, activity_url=activity_url, service_url=env.get("JUPYTERHUB_SERVICE_URL") or None,
            public_url=env.get("JUPYTERHUB_PUBLIC_URL") or env.get("JUPYTERHUB_PUBLIC_HUB_URL") or None,
            base_url=(env.get("JUPYTERHUB_BASE_URL") or "/").rstrip("/") + "/",
        )

    def bind(self) -> tuple[str | None, int | None]:
        """The host and port the spawner chose (``JUPYTERHUB_SERVICE_URL``), or ``None`` for each it did not."""
        if not self.service_url:
            return None, None
        parts = urlsplit(self.service_url)
        return parts.hostname, parts.port


class HubDoor:
    """Admits a hub API token to this pod: asks the hub who holds it (the ``jupyterhub`` package's ``HubAuth``,
    whose cache answers again for ``cache_secs`` without asking) and whether its scopes include access to this
    server. Owns nothing but that client; one per pod."""

    def __init__(self, environment: HubEnvironment, *, cache_secs: int) -> None:
        from jupyterhub.services.auth import HubAuth

        self.environment = environment
        self._auth: Any = HubAuth(
            api_url=environment.api_url, api_token=environment.api_token, cache_max_age=cache_secs,
            access_scopes=set(environment.access_scopes),
        )

    async def check(self, token: str | None, scopes: frozenset[str] | None = None) -> Admitted | Refused:
        """Admitted if ``token`` is a live hub token with any of ``scopes`` (by default: access to this server).
        The verdict's subprotocol is left for the caller to set."""
        required = self.environment.access_scopes if scopes is None else scopes
        if token is None:
            return Refused(401, "Missing hub token: send a JupyterHub API token (made on the hub's Token page) as "
                                "`Authorization: Bearer <token>` or the subprotocol `openab.bearer.<token>`")
        if len(token) > MAX_TOKEN_CHARS or not _TOKEN_SHAPE.fullmatch(token):
            return Refused(401, "That is not a JupyterHub API token: make one on the hub's Token page")
        try:
            model = await asyncio.wait_for(self._auth.user_for_token(token, sync=False), HUB_ANSWER_TIMEOUT)
        except TimeoutError:
            log.warning("the hub did not answer about a token within %.0f s", HUB_ANSWER_TIMEOUT)
            return Refused(503, "The hub did not answer in time; try again in a moment", "hub")
        except Exception as exc:  # HubAuth raises tornado's HTTPError (hub down, hub 5xx) or aiohttp's errors
            log.warning("the hub could not check a token: %s", type(exc).__name__)
            return Refused(503, "The hub could not check the token now; try again in a moment", "hub")
        if not model:
            return Refused(401, "The hub does not know this token (wrong, expired or revoked): make a new one on "
                                "the hub's Token page")
        if not self._auth.check_scopes(set(required), model):
            who = model.get("name", "?")
            return Refused(403, f"The hub token of {who!r} may not access this server: a token opens only its "
                                "owner's own server, and only with the access scope", "scope")
        return Admitted(None)


async def admit_acp(connection: HTTPConnection) -> Admitted | Refused:
    """The door of ``/acp``: a hub token with access to this server when the pod runs under a hub, else the
    pod's own key (:func:`.auth.admit_connection`)."""
    door: HubDoor | None = connection.app.state.hub
    if door is None:
        return admit_connection(connection)
    offered = _offered_subprotocols(connection.headers)
    verdict = await door.check(_presented_key(connection.headers, offered))
    if isinstance(verdict, Admitted):
        reporter: ActivityReporter | None = connection.app.state.hub_activity
        if reporter is not None:
            reporter.nudge()
        return Admitted("acp.v1" if "acp.v1" in offered else None)
    return _counted(connection, verdict)


async def admit_metrics(connection: HTTPConnection) -> Admitted | Refused:
    """The door of ``/metrics``: the metrics key when one is set; under a hub without one, a hub token with
    ``read:metrics`` (the credential the hub's Prometheus scrapes ``/hub/metrics`` with), never a person's."""
    door: HubDoor | None = connection.app.state.hub
    if door is None or connection.app.state.pod.settings.metrics_token is not None:
        return admit_scrape(connection)
    scheme, _, credentials = connection.headers.get("authorization", "").partition(" ")
    presented = credentials.strip() if scheme.lower() in ("bearer", "token") and credentials.strip() else None
    return _counted(connection, await door.check(presented, frozenset({METRICS_SCOPE})))


class HubPrefix:
    """Serves the app under the hub's prefix (``/user/<name>/``), which the hub's proxy keeps in the path it
    forwards: ``/user/<name>/acp`` reaches ``/acp``. The probes and ``/metrics`` stay at the root too (a kubelet
    and a Prometheus that scrapes pods by address know no prefix); any other path is 404, and the prefix itself
    says what is served here (the hub waits for it to answer).

    Every HTTP answer names the ``jupyterhub`` package the pod checks tokens with (``X-JupyterHub-Version``), as
    jupyterhub-singleuser's do: the hub compares it with its own when the pod starts, and warns when it is
    missing."""

    def __init__(self, app: ASGIApp, prefix: str, version: str) -> None:
        self.app = app
        self.prefix = prefix
        self.root = prefix.rstrip("/")
        self.version_header = (b"x-jupyterhub-version", version.encode("ascii"))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, receive, send)
            return
        if scope["type"] == "http":
            send = self._versioned(send)
        path: str = scope["path"]
        if path in (self.root, self.prefix) and scope["type"] == "http":
            await JSONResponse({"service": "openab", "acp": self.prefix + "acp"})(scope, receive, send)
        elif path.startswith(self.prefix):
            await self.app({**scope, "root_path": scope.get("root_path", "") + self.root}, receive, send)
        elif path in ("/healthz", "/readyz", "/metrics"):
            await self.app(scope, receive, send)
        elif scope["type"] == "http":
            await PlainTextResponse(f"Not found: this pod serves {self.prefix}acp", 404)(scope, receive, send)
        else:  # a WebSocket elsewhere: refused before the upgrade
            await receive()
            await send({"type": "websocket.http.response.start", "status": 404, "headers": []})
            await send({"type": "websocket.http.response.body", "body": b""})

    def _versioned(self, send: Send) -> Send:
        async def versioned(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", ()), self.version_header]}
            await send(message)

        return versioned


def jupyterhub_version() -> str:
    """The version of the ``jupyterhub`` package installed beside the pod (``openab-browser[hub]``)."""
    return importlib.metadata.version("jupyterhub")


class ActivityReporter:
    """Tells the hub when the pod was last in use, as jupyterhub-singleuser does: every ``interval`` the pod is in
    use (``busy()``: a socket open or a turn running) counts as activity now, and a time the hub has not been told
    yet is posted to ``users/<name>/activity`` with the pod's own hub token. An idle pod posts nothing, so the
    hub's last activity for it ages and the culler may stop it. A failed post is retried at the next tick.

    A socket just admitted (:meth:`nudge`) is told at once, not at the next tick: a culler that looked in between
    would stop the pod its person has just opened, if it had been idle for nearly the culler's timeout."""

    def __init__(self, environment: HubEnvironment, busy: Callable[[], bool], *, interval: float,
                 post: Callable[[str, dict[str, Any]], Awaitable[int]] | None = None) -> None:
        self._env = environment
        self._busy = busy
        self._interval = interval
        self._post = post or self._post_to_hub
        self._last: datetime | None = None
        self._told: datetime | None = None
        self._failures = 0
        self._wake = asyncio.Event()
        self._posted_at = -math.inf

    def nudge(self) -> None:
        """In use now: tell the hub without waiting for the next tick."""
        self._last = datetime.now(UTC)
        self._wake.set()

    async def _post_to_hub(self, url: str, body: dict[str, Any]) -> int:
        async with httpx.AsyncClient(timeout=10.0, trust_env=False) as client:
            response = await client.post(url, json=body, headers={"Authorization": f"token {self._env.api_token}"})
            return response.status_code

    async def tick(self) -> None:
        """One look: note activity if in use, tell the hub if it has not been told."""
        if self._busy():
            self._last = datetime.now(UTC)
        if self._last is None or self._last == self._told:
            return
        stamp = self._last.isoformat().replace("+00:00", "Z")
        body = {"servers": {self._env.server_name: {"last_activity": stamp}}, "last_activity": stamp}
        self._posted_at = time.monotonic()
        try:
            status = await self._post(self._env.activity_url, body)
        except (httpx.HTTPError, OSError) as exc:
            status, reason = 0, type(exc).__name__
        else:
            reason = f"HTTP {status}"
        if 200 <= status < 300:
            self._told = self._last
            self._failures = 0
            return
        self._failures += 1
        if self._failures in (1, 10) or self._failures % 100 == 0:
            log.warning("could not tell the hub this pod is in use (%s, %d times in a row); the idle culler may stop "
                        "it", reason, self._failures)

    async def run(self) -> None:
        while True:
            started = time.monotonic()
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.tick(), self._interval + 10.0)
            # However many sockets open, at most one post a second (or one an interval, if shorter).
            await asyncio.sleep(max(0.0, self._posted_at + min(NUDGE_SPACING, self._interval) - time.monotonic()))
            remaining = self._interval - (time.monotonic() - started)
            if remaining > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), remaining)


def hub_pairing_line(environment: HubEnvironment) -> str:
    """What the log says a person enters in the side panel: the hub's address of this pod's /acp, and a hub
    token instead of a key (no secret: the token is the person's to make)."""
    if environment.public_url:
        parts = urlsplit(environment.public_url)
        origin = f"{parts.scheme}://{parts.netloc}"
        sockets = f"{'wss' if parts.scheme == 'https' else 'ws'}://{parts.netloc}"
    else:
        origin, sockets = "https://<the hub's address>", "wss://<the hub's address>"
    return (f"Gateway URL: {sockets}{environment.prefix}acp; Key: an API token {environment.user} makes on the hub "
            f"({origin}{environment.base_url}hub/token)")
