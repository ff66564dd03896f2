"""The one-click pairing link: `openab run` prints ``https://<pod>/pair#code=<code>``; the person opens it once in
the Chrome where the openab extension is installed, the extension asks them to confirm, and trades the code for the
gateway's URL and key at ``POST /pair/claim``.

The code is not the key: it is random of its own, good for one claim within :data:`CODE_TTL` seconds, and travels
in the link's fragment, which a browser never sends, so no access log or proxy sees it; the claim carries it in a
JSON body. It is compared in constant time with every code outstanding.

What keeps a code from being guessed is its length, :data:`CODE_BYTES` from ``secrets`` (144 bits): with at most
:data:`MAX_CODES` outstanding, a billion guesses a second for a century find one with odds below 2**-79. So no
limit stands between a right code and its claim: a right code is always compared and always claims, whatever
wrong ones came before, from any address, the claimant's own included (a neighbour behind the same NAT, proxy or
port-forward shares it). An earlier pod also refused claims once 50 wrong codes a minute came from anywhere,
which let anyone who reached ``/pair/claim`` keep pairing refused for everyone (issue 33); there is no such
pod-wide count. Wrong codes are counted per client address only (:class:`WrongCodes`): an address that keeps
sending them is told 429 and how long to wait, and is logged once per wait instead of once per request.
Every store here is bounded: :data:`MAX_CODES` codes, :data:`MAX_ADDRESSES` addresses' counts, :data:`MAX_BODY`
bytes of a claim.

The door is `/acp`'s (:mod:`.auth`): without a key the pod serves loopback only, so a claim must name a loopback
``Host`` (a page whose name was rebound to 127.0.0.1 is refused); with a key a TLS proxy may name the pod anything.
A claim must be JSON (a web page cannot send that cross-origin without a preflight, which this pod never answers)
and comes from an extension or a non-browser client, never from a web page's ``Origin``.
"""

from __future__ import annotations

import hmac
import ipaddress
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

from openab_browser.core.addresses import is_loopback_host

__all__ = [
    "ADDRESS_FAILURES", "CODE_BYTES", "CODE_TTL", "MAX_ADDRESSES", "MAX_BODY", "MAX_CODES", "WINDOW", "Claimed",
    "Expired", "Limited", "PairCodes", "Wrong", "WrongCodes", "address_key", "pair_claim_endpoint",
    "pair_page_endpoint",
]

log = logging.getLogger(__name__)

CODE_TTL: Final = 600.0
# 144 bits, 24 characters: past guessing at any rate (the module's docstring), short enough for one line of a terminal.
CODE_BYTES: Final = 18
MAX_CODES: Final = 8
MAX_ADDRESSES: Final = 1024
MAX_BODY: Final = 1024
# Wrong codes one address may send in WINDOW seconds before it is told to wait.
ADDRESS_FAILURES: Final = 5
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
    """A wrong code from an address over its limit: ``retry_after`` seconds until it is under it again; ``first``
    for the refusal that began this wait (the one worth a log line)."""

    retry_after: float
    first: bool = False


@dataclass(slots=True)
class _Code:
    code: str
    url: str
    expires: float


def address_key(host: str) -> str:
    """Whose count a client address adds to: an IPv4 address itself, an IPv6 address's /64 (one host is commonly
    given a whole /64, so counting its addresses one by one would limit nothing), an IPv4-mapped one as IPv4."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host  # not an address (a test client's name, a Unix socket's ""): counted as it is
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    return str(address)


@dataclass(slots=True)
class _Failures:
    times: deque[float]
    told: bool = False


class WrongCodes:
    """Wrong pairing codes counted per client address (:func:`address_key`) in a sliding window: at most ``failures``
    in ``window`` seconds, and each one after those is :class:`Limited` for that address alone. Sans-I/O: the
    caller gives the time.

    The table holds at most ``max_addresses`` addresses, ordered by their latest wrong code, so the front is both
    the least recently seen and the first whose window has passed: those are dropped first, then, when more
    addresses are live than fit, the least recent of them (an address with that many others to spare resets only
    its own count, which guards no code: see the module's docstring)."""

    def __init__(self, *, failures: int = ADDRESS_FAILURES, window: float = WINDOW,
                 max_addresses: int = MAX_ADDRESSES) -> None:
        if failures < 1 or window <= 0 or max_addresses < 1:
            raise ValueError("WrongCodes needs failures >= 1, window > 0 and max_addresses >= 1")
        self.failures = failures
        self.window = window
        self.max_addresses = max_addresses
        self._by_address: OrderedDict[str, _Failures] = OrderedDict()

    def __len__(self) -> int:
        return len(self._by_address)

    def wrong(self, address: str, now: float) -> Limited | None:
        """Count a wrong code from ``address`` at ``now``; :class:`Limited` when it was over its limit already."""
        key = address_key(address)
        entry = self._by_address.pop(key, None) or _Failures(deque(maxlen=self.failures))
        while entry.times and entry.times[0] <= now - self.window:
            entry.times.popleft()
        over = len(entry.times) >= self.failures
        # Counted while over too: an address that keeps sending stays limited until it stops for a window.
        entry.times.append(now)
        first = over and not entry.told
        entry.told = over
        self._by_address[key] = entry
        self._bound(now)
        return Limited(max(1.0, entry.times[0] + self.window - now), first) if over else None

    def _bound(self, now: float) -> None:
        while self._by_address:
            oldest = next(iter(self._by_address.values()))
            if oldest.times[-1] > now - self.window and len(self._by_address) <= self.max_addresses:
                return
            self._by_address.popitem(last=False)


@dataclass
class PairCodes:
    """The pod's outstanding pairing codes (at most :data:`MAX_CODES`, the oldest dropped for a new one), each for
    one claim before it expires, and the wrong codes counted per address (:class:`WrongCodes`), which never hold
    back a right one. ``clock`` is monotonic seconds, injected so a test can move time past an expiry."""

    ttl: float = CODE_TTL
    clock: Callable[[], float] = time.monotonic
    wrong: WrongCodes = field(default_factory=WrongCodes)
    _codes: deque[_Code] = field(default_factory=lambda: deque(maxlen=MAX_CODES))

    def issue(self, url: str) -> str:
        """A new code that claims ``url`` (the gateway URL the side panel dials) and the key, once."""
        code = secrets.token_urlsafe(CODE_BYTES)
        self._codes.append(_Code(code, url, self.clock() + self.ttl))
        return code

    def claim(self, code: str, client: str) -> Claimed | Wrong | Expired | Limited:
        now = self.clock()
        # Every code is compared, found or not: how long the answer takes says nothing of which one nearly matched.
        # Compared before any count is read: no one's wrong codes, not even this address's, refuse a right one.
        found = None
        for entry in self._codes:
            if hmac.compare_digest(entry.code.encode(), code.encode()):
                found = entry
        if found is None:
            return self.wrong.wrong(client, now) or Wrong()
        self._codes.remove(found)
        return Expired() if found.expires <= now else Claimed(found.url)


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
    kept = getattr(request.app.state, "kept_key", None)
    key = settings.token.get_secret_value() if settings.token is not None else None
    if key is None and kept is not None and kept.key is not None:
        key = kept.key.get_secret_value()  # the key this start made: the pod's only copy, in memory
    if key is None and kept is None and not is_loopback_host(request.headers.get("host", "")):
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
        wait = int(verdict.retry_after + 0.999)
        # Once per wait: an address sending wrong codes as fast as it can adds a line a minute, not one a request.
        log.log(logging.WARNING if verdict.first else logging.DEBUG,
                "pairing: too many wrong pairing codes from %s; its wrong codes get 429 for %d s", client, wait)
        return _refusal(429, f"This pairing code is wrong or was used already, and too many such came from this "
                             f"address: wait {wait} s before trying another. A right code is always taken: start "
                             "`openab run` again for a new link, or paste the gateway URL and key into the side "
                             "panel's settings.", **{"retry-after": str(wait)})
    if isinstance(verdict, Wrong):
        log.warning("pairing: a wrong or used pairing code from %s", client)
        return _refusal(403, "This pairing code is wrong or was used already: start `openab run` again for a "
                             "new link, or paste the gateway URL and key into the side panel's settings.")
    if isinstance(verdict, Expired):
        log.info("pairing: an expired pairing code from %s", client)
        return _refusal(410, f"This pairing link has expired (a link lasts {codes.ttl / 60:g} minutes): start "
                             "`openab run` again for a new one, or paste the gateway URL and key into the side "
                             "panel's settings.")
    if kept is not None and not kept.verifier.matches(key):
        # `openab key rotate` ran since this link was printed (or this start holds the verifier alone).
        log.info("pairing: a pairing code from %s for a key the pod no longer takes", client)
        return _refusal(410, "This pairing link was for a key the pod no longer takes (`openab key rotate` ran): "
                             "paste the gateway URL and the new key into the side panel's settings.")
    log.info("pairing: a side panel at %s claimed a pairing code", client)
    return JSONResponse({"url": verdict.url, "key": key or ""}, headers={"cache-control": "no-store"})
