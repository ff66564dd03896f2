"""The one-click pairing link: `openab run` prints ``https://<pod>/pair#code=<code>``; the person opens it once in
the Chrome where the openab extension is installed, the extension asks them to confirm, and trades the code for the
gateway's URL and key at ``POST /pair/claim``.

The code is not the key: it is random of its own, good for one claim within :data:`CODE_TTL` seconds, and travels
in the link's fragment, which a browser never sends, so no access log or proxy sees it; the claim carries it in a
JSON body. It is compared in constant time with every code outstanding. Wrong codes are counted per client and for
the whole pod in a sliding window: over either limit, claims are refused (429) before any code is compared, so
guessing is bounded however many addresses an attacker has. Every store here is bounded: :data:`MAX_CODES` codes,
:data:`MAX_CLIENTS` clients' counts, :data:`MAX_BODY` bytes of a claim.

The door is `/acp`'s (:mod:`.auth`): without a key the pod serves loopback only, so a claim must name a loopback
``Host`` (a page whose name was rebound to 127.0.0.1 is refused); with a key a TLS proxy may name the pod anything.
A claim must be JSON (a web page cannot send that cross-origin without a preflight, which this pod never answers)
and comes from an extension or a non-browser client, never from a web page's ``Origin``.
"""

from __future__ import annotations

import hmac
import logging
import secrets
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

import orjson
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response

from openab.core.addresses import is_loopback_host

__all__ = [
    "CODE_TTL", "MAX_BODY", "MAX_CLIENTS", "MAX_CODES", "Claimed", "Expired", "Limited", "PairCodes", "Wrong",
    "pair_claim_endpoint", "pair_page_endpoint",
]

log = logging.getLogger(__name__)

CODE_TTL: Final = 600.0
MAX_CODES: Final = 8
MAX_CLIENTS: Final = 1024
MAX_BODY: Final = 1024
# Wrong codes allowed in WINDOW seconds, from one client and from all of them.
CLIENT_FAILURES: Final = 5
GLOBAL_FAILURES: Final = 50
WINDOW: Final = 60.0


@dataclass(frozen=True, slots=True)
class Claimed:
    url: str


@dataclass(frozen=True, slots=True)
class Wrong:
    pass


@dataclass(frozen=True, slots=True)
class Expired:
    pass


@dataclass(frozen=True, slots=True)
class Limited:
    retry_after: float


@dataclass(slots=True)
class _Code:
    code: str
    url: str
    expires: float


@dataclass
class PairCodes:
    """The pod's outstanding pairing codes (at most :data:`MAX_CODES`, the oldest dropped for a new one), each for
    one claim before it expires, and the counts of wrong codes that refuse claims for a while. ``clock`` is
    monotonic seconds, injected so a test can move time past an expiry."""

    ttl: float = CODE_TTL
    clock: Callable[[], float] = time.monotonic
    client_failures: int = CLIENT_FAILURES
    global_failures: int = GLOBAL_FAILURES
    window: float = WINDOW
    _codes: deque[_Code] = field(default_factory=lambda: deque(maxlen=MAX_CODES))
    _by_client: OrderedDict[str, deque[float]] = field(default_factory=OrderedDict)
    _all: deque[float] = field(default_factory=deque)

    def issue(self, url: str) -> str:
        """A new code that claims ``url`` (the gateway URL the side panel dials) and the key, once."""
        code = secrets.token_urlsafe(18)
        self._codes.append(_Code(code, url, self.clock() + self.ttl))
        return code

    def claim(self, code: str, client: str) -> Claimed | Wrong | Expired | Limited:
        now = self.clock()
        mine = self._by_client.get(client)
        for failures in (self._all, mine):
            while failures and failures[0] <= now - self.window:
                failures.popleft()
        if len(self._all) >= self.global_failures:
            return Limited(max(1.0, self._all[0] + self.window - now))
        if mine is not None and len(mine) >= self.client_failures:
            return Limited(max(1.0, mine[0] + self.window - now))
        # Every code is compared, found or not: how long the answer takes says nothing of which one nearly matched.
        found = None
        for entry in self._codes:
            if hmac.compare_digest(entry.code.encode(), code.encode()):
                found = entry
        if found is None:
            self._failed(client, now)
            return Wrong()
        self._codes.remove(found)
        return Expired() if found.expires <= now else Claimed(found.url)

    def _failed(self, client: str, now: float) -> None:
        self._all.append(now)
        while len(self._all) > self.global_failures:
            self._all.popleft()
        failures = self._by_client.pop(client, None) or deque(maxlen=self.client_failures)
        failures.append(now)
        self._by_client[client] = failures  # the most recent last: the least recent is the one evicted
        while len(self._by_client) > MAX_CLIENTS:
            self._by_client.popitem(last=False)


PAGE: Final = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<title>Pair openab</title>
<style>body{font:16px system-ui,sans-serif;margin:3em auto;max-width:34em;padding:0 1em;line-height:1.5}</style>
</head><body>
<h1>Pair the openab side panel</h1>
<p>Open this link in the Chrome where openab is installed; the openab extension will ask you to confirm.</p>
<p>If you see this page there, the extension is not installed or not enabled in this browser: install it
(<code>openab extension path</code> on the pod says where it is), then open the link again. Without the extension,
paste the gateway URL and key <code>openab run</code> printed into the side panel's settings.</p>
</body></html>
"""

_PAGE_HEADERS: Final = {
    "cache-control": "no-store",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
    "content-security-policy": "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'",
}


async def pair_page_endpoint(_request: Request) -> Response:
    """``GET /pair``: what a browser without the extension shows for the link; the code stays in its fragment."""
    return HTMLResponse(PAGE, headers=_PAGE_HEADERS)


def _refusal(status: int, message: str, **headers: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers={"cache-control": "no-store", **headers})


async def _bounded_body(request: Request) -> bytes | None:
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_BODY:
            return None
    return body


async def pair_claim_endpoint(request: Request) -> Response:
    """``POST /pair/claim`` ``{"code": ...}``: the gateway URL and key, once per code (see the module's docstring)."""
    settings = request.app.state.pod.settings
    codes: PairCodes = request.app.state.pair_codes
    key = settings.token.get_secret_value() if settings.token is not None else None
    if key is None and not is_loopback_host(request.headers.get("host", "")):
        return _refusal(403, "Without a key this pod pairs on loopback only: open the link at 127.0.0.1.")
    origin = request.headers.get("origin")
    if origin is not None and not origin.startswith("chrome-extension://"):
        return _refusal(403, "A pairing code is claimed by the openab extension, not by a web page.")
    if request.headers.get("content-type", "").split(";")[0].strip().lower() != "application/json":
        return _refusal(415, "Send the claim as JSON: {\"code\": \"...\"}.")
    body = await _bounded_body(request)
    if body is None:
        return _refusal(413, f"A claim is at most {MAX_BODY} bytes.")
    try:
        parsed = orjson.loads(body)
    except orjson.JSONDecodeError:
        parsed = None
    code = parsed.get("code") if isinstance(parsed, dict) else None
    if not isinstance(code, str) or not code:
        return _refusal(400, "Send the claim as JSON: {\"code\": \"...\"}.")
    client = request.client.host if request.client is not None else "unknown"
    verdict = codes.claim(code, client)
    if isinstance(verdict, Limited):
        log.warning("pairing: too many wrong codes; claims from %s refused for %.0f s", client, verdict.retry_after)
        return _refusal(429, "Too many wrong pairing codes: wait a minute and open the link again.",
                        **{"retry-after": str(int(verdict.retry_after + 0.999))})
    if isinstance(verdict, Wrong):
        log.warning("pairing: a wrong or used pairing code from %s", client)
        return _refusal(403, "This pairing code is wrong or was used already: start `openab run` again for a "
                             "new link, or paste the gateway URL and key into the side panel's settings.")
    if isinstance(verdict, Expired):
        log.info("pairing: an expired pairing code from %s", client)
        return _refusal(410, f"This pairing link has expired (a link lasts {codes.ttl / 60:g} minutes): start "
                             "`openab run` again for a new one, or paste the gateway URL and key into the side "
                             "panel's settings.")
    log.info("pairing: a side panel at %s claimed a pairing code", client)
    return JSONResponse({"url": verdict.url, "key": key or ""}, headers={"cache-control": "no-store"})
