"""Who may open `/acp`: decided from the upgrade request alone, before any frame is read.

ACP has no authentication of its own, so the transport is the trust boundary. With a key, a client proves
it in ``Authorization: Bearer <key>`` or, from a browser that cannot set headers on a WebSocket, in the
subprotocol entry ``openab.bearer.<key>``; never in the URL, where proxies and histories would keep it.
Without a key the endpoint is loopback-only and admits a browser page only from an allowed ``Origin``, and
only requests whose ``Host`` names this machine: a page whose own name was rebound to 127.0.0.1 (DNS
rebinding), or a proxy forwarding another name to the loopback port, is refused. With a key the ``Host`` is
not checked: a TLS proxy in front of the pod may name it anything, and the key is the credential.
``/metrics`` takes a metrics key of its own when one is set (:func:`admit_scrape`), which never opens ``/acp``.
The key the pod made itself is known to the pod only as a verifier (:mod:`.acp_key`): a presented key is hashed
and compared with it, so the pod's disk holds nothing that a copy could present.
"""

from __future__ import annotations

import hmac
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from starlette.requests import HTTPConnection

from openab_browser.core.addresses import is_loopback_host

if TYPE_CHECKING:
    from .acp_key import KeptVerifier

__all__ = [
    "ACP_SUBPROTOCOL", "BEARER_SUBPROTOCOL_PREFIX", "Admitted", "Refused", "admit", "admit_connection", "admit_scrape",
]

ACP_SUBPROTOCOL: Final = "acp.v1"
BEARER_SUBPROTOCOL_PREFIX: Final = "openab.bearer."


@dataclass(frozen=True, slots=True)
class Admitted:
    """The handshake may proceed; ``subprotocol`` is the one to echo."""

    subprotocol: str | None


@dataclass(frozen=True, slots=True)
class Refused:
    """The handshake is refused with HTTP ``status`` and a ``reason`` that says what to do; ``kind`` is which
    check refused it (``key``, ``host`` or ``origin``), as ``/metrics`` counts it."""

    status: int
    reason: str
    kind: str = "key"


def _offered_subprotocols(headers: Mapping[str, str]) -> list[str]:
    raw = headers.get("sec-websocket-protocol", "")
    return [entry.strip() for entry in raw.split(",") if entry.strip()]


def _presented_key(headers: Mapping[str, str], offered: list[str]) -> str | None:
    authorization = headers.get("authorization", "")
    scheme, _, credentials = authorization.partition(" ")
    if scheme.lower() == "bearer" and credentials.strip():
        return credentials.strip()
    for entry in offered:
        if entry.startswith(BEARER_SUBPROTOCOL_PREFIX):
            return entry[len(BEARER_SUBPROTOCOL_PREFIX) :]
    return None


def _matches(presented: str | None, key: str) -> bool:
    # Constant time in the key's characters: a wrong key's answer says nothing of how near it was.
    return presented is not None and hmac.compare_digest(presented.encode(), key.encode())


def admit(headers: Mapping[str, str], *, key: str | None, allowed_origins: list[str],
          verifier: KeptVerifier | None = None) -> Admitted | Refused:
    """Decide on one upgrade request. ``headers`` has lower-case names. The key is ``key`` itself (the operator's)
    or the one ``verifier`` checks (the pod's kept key); with neither, the keyless rules below."""
    offered = _offered_subprotocols(headers)
    subprotocol = ACP_SUBPROTOCOL if ACP_SUBPROTOCOL in offered else None
    if key is not None or verifier is not None:
        presented = _presented_key(headers, offered)
        right = _matches(presented, key) if key is not None else verifier is not None and verifier.matches(presented)
        if not right:
            return Refused(
                401,
                "Missing or wrong key: send `Authorization: Bearer <key>` or the WebSocket subprotocol "
                "`openab.bearer.<key>` together with `acp.v1`",
            )
        return Admitted(subprotocol)
    host = headers.get("host", "")
    if not is_loopback_host(host):
        return Refused(
            403, f"Host {host!r} is not a loopback name: without a key /acp serves this machine only; connect to "
                 "127.0.0.1 or localhost, or set a key", "host",
        )
    origin = headers.get("origin")
    if origin is not None and origin not in allowed_origins:
        return Refused(
            403, f"Origin {origin!r} is not allowed: add it to OPENAB_ACP_ALLOWED_ORIGINS or set a key", "origin",
        )
    return Admitted(subprotocol)


def admit_connection(connection: HTTPConnection) -> Admitted | Refused:
    """The pod's door for one request or upgrade (``/acp``, ``/metrics``): :func:`admit` under the pod's key and
    origins (or its kept key's verifier, ``app.state.kept_key``), with a refusal counted by kind in the app's
    ``refusals``, which ``/metrics`` reports."""
    settings = connection.app.state.pod.settings
    kept = getattr(connection.app.state, "kept_key", None)
    # The kept key is checked by its verifier even on the start that made it (and so holds it in memory too):
    # a rotation while the pod runs then closes the door to the old key at once.
    verifier = kept.verifier if kept is not None else None
    key = settings.token.get_secret_value() if settings.token is not None and verifier is None else None
    return _counted(connection, admit(connection.headers, key=key, allowed_origins=settings.allowed_origins,
                                      verifier=verifier))


def admit_scrape(connection: HTTPConnection) -> Admitted | Refused:
    """The door of ``/metrics``: with a metrics key set (``OPENAB_METRICS_KEY[_FILE]``), that key alone, as
    ``Authorization: Bearer``, and not the person's ``/acp`` key (a scraper's credential opens the counts, never
    a browser; the person's key stays off the monitoring's disk); without one, :func:`admit_connection`."""
    metrics_key = connection.app.state.pod.settings.metrics_token
    if metrics_key is None:
        return admit_connection(connection)
    scheme, _, credentials = connection.headers.get("authorization", "").partition(" ")
    presented = credentials.strip() if scheme.lower() == "bearer" and credentials.strip() else None
    if not _matches(presented, metrics_key.get_secret_value()):
        return _counted(connection, Refused(
            401, "Missing or wrong metrics key: scrape /metrics with `Authorization: Bearer <metrics key>`, the key "
                 "in OPENAB_METRICS_KEY_FILE (in Prometheus, `authorization: {credentials_file: ...}`)"))
    return Admitted(None)


def _counted(connection: HTTPConnection, verdict: Admitted | Refused) -> Admitted | Refused:
    """``verdict``, a refusal counted by kind in the app's ``refusals``, which ``/metrics`` reports."""
    if isinstance(verdict, Refused):
        refusals: Counter[str] | None = getattr(connection.app.state, "refusals", None)
        if refusals is not None:
            refusals[verdict.kind] += 1
    return verdict
