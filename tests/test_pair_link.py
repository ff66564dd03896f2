"""The one-click pairing link's gateway side: `GET /pair` (the page a browser without the extension shows) and
`POST /pair/claim` (a code for the gateway's URL and key), on a real uvicorn on loopback, and the link a real
`openab run` prints to its terminal. The code is good once, for a while; wrong codes are refused, then rate
limited per client and for the whole pod; no log line holds a code; a web page cannot claim one.

Time is the pod's own monotonic clock, injected into its :class:`PairCodes` (``app.state.pair_codes``), so an
expiry or a rate limit's window passes without a sleep.
"""

from __future__ import annotations

import contextlib
import re
import secrets
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from log_scan import scanning
from pydantic import SecretStr
from terminal_run import terminal_run
from test_log_format import free_port

from openab.core.acp.backend import NoAgentBackend
from openab.core.settings import Settings
from openab.gateway.app import create_app
from openab.gateway.assemble import assemble
from openab.gateway.pair_link import Claimed, Limited, PairCodes, Wrong
from openab.gateway.pairing import kept_key_path, pair_link
from openab.gateway.server import running_server

pytestmark = pytest.mark.anyio

URL = "ws://127.0.0.1:1/acp"
JSON = {"content-type": "application/json"}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@contextlib.asynccontextmanager
async def serving(state: Path, codes: PairCodes, *, key: str | None = "k" * 43) -> AsyncIterator[str]:
    settings = Settings(token=None if key is None else SecretStr(key), insecure_no_key=key is None, port=0,
                        state_dir=state)
    app = create_app(assemble(settings, backend=NoAgentBackend()))
    app.state.pair_codes = codes
    async with running_server(app, guard=app.state.guard) as base:
        yield base


async def claim(http: httpx.AsyncClient, base: str, code: str, **headers: str) -> httpx.Response:
    return await http.post(f"{base}/pair/claim", json={"code": code}, headers=headers)


async def test_a_code_claims_the_url_and_key_once(state: Path) -> None:
    codes = PairCodes()
    code = codes.issue(URL)
    assert len(code) >= 24 and code != "k" * 43
    async with serving(state, codes) as base, httpx.AsyncClient() as http:
        page = await http.get(f"{base}/pair")
        assert page.status_code == 200 and "Open this link in the Chrome where openab is installed" in page.text
        assert page.headers["cache-control"] == "no-store" and "frame-ancestors 'none'" in \
            page.headers["content-security-policy"]
        first = await claim(http, base, code, origin="chrome-extension://epimjfeomjdibnpnacpgphknapnecfjf")
        assert first.status_code == 200 and first.json() == {"url": URL, "key": "k" * 43}
        assert first.headers["cache-control"] == "no-store"
        again = await claim(http, base, code)
        assert again.status_code == 403 and "wrong or was used already" in again.json()["error"]


async def test_a_code_expires(state: Path) -> None:
    clock = Clock()
    codes = PairCodes(clock=clock)
    early, late = codes.issue(URL), codes.issue(URL)
    async with serving(state, codes) as base, httpx.AsyncClient() as http:
        clock.now += 599
        assert (await claim(http, base, early)).status_code == 200
        clock.now += 1
        expired = await claim(http, base, late)
        assert expired.status_code == 410 and "expired" in expired.json()["error"]
        assert (await claim(http, base, late)).status_code == 403, "an expired code is gone once tried"


async def test_wrong_codes_are_rate_limited_per_client_then_the_window_passes(state: Path) -> None:
    clock = Clock()
    codes = PairCodes(clock=clock)
    code = codes.issue(URL)
    async with serving(state, codes) as base, httpx.AsyncClient() as http:
        for _ in range(5):
            assert (await claim(http, base, secrets.token_urlsafe(18))).status_code == 403
        limited = await claim(http, base, code)
        assert limited.status_code == 429 and int(limited.headers["retry-after"]) == 60, \
            "over the limit even the right code is not compared"
        clock.now += 60
        assert (await claim(http, base, code)).status_code == 200, "the code was not spent by the refusal"


def test_wrong_codes_from_many_clients_hit_the_pods_own_limit() -> None:
    clock = Clock()
    codes = PairCodes(clock=clock)
    code = codes.issue(URL)
    for n in range(50):
        assert codes.claim(secrets.token_urlsafe(18), f"10.0.{n // 250}.{n % 250}") == Wrong()
    assert isinstance(codes.claim(code, "10.9.9.9"), Limited), "a client that never erred is refused too"
    clock.now += 60
    assert codes.claim(code, "10.9.9.9") == Claimed(URL)


def test_the_stores_are_bounded() -> None:
    codes = PairCodes()
    first = codes.issue(URL)
    for _ in range(8):
        codes.issue(URL)
    assert codes.claim(first, "c") == Wrong(), "the oldest of more than 8 codes is dropped"
    for n in range(2000):
        codes = codes if n % 40 else PairCodes()  # under the pod's limit, many clients' counts
        codes.claim("x" * 24, f"client-{n}")
    assert len(codes._by_client) <= 1024


@pytest.mark.parametrize(("headers", "body", "status"), [
    ({"origin": "https://evil.example", **JSON}, b'{"code": "c"}', 403),  # a web page, even with the right code
    ({"origin": "null", **JSON}, b'{"code": "c"}', 403),
    ({"content-type": "text/plain"}, b'{"code": "c"}', 415),  # what a page sends without a preflight
    (JSON, b'{"code": "' + b"c" * 2000 + b'"}', 413),
    (JSON, b"not json", 400),
    (JSON, b'{"code": 5}', 400),
    (JSON, b"[]", 400),
])
async def test_a_claim_not_from_the_extension_or_not_json_is_refused(
        state: Path, headers: dict[str, str], body: bytes, status: int) -> None:
    codes = PairCodes()
    code = codes.issue(URL)
    async with serving(state, codes) as base, httpx.AsyncClient() as http:
        refused = await http.post(f"{base}/pair/claim", content=body.replace(b'"c"', f'"{code}"'.encode()),
                                  headers=headers)
        assert refused.status_code == status, refused.text
        assert "error" in refused.json()
        assert (await claim(http, base, code)).status_code == 200, "a refused claim spends no code"
        assert (await http.get(f"{base}/pair/claim")).status_code == 405


async def test_without_a_key_a_claim_must_name_loopback(state: Path) -> None:
    codes = PairCodes()
    code = codes.issue(URL)
    async with serving(state, codes, key=None) as base, httpx.AsyncClient() as http:
        rebound = await claim(http, base, code, host="evil.example")  # DNS rebinding: the page's own name
        assert rebound.status_code == 403
        assert (await claim(http, base, code)).json() == {"url": URL, "key": ""}


async def test_no_log_line_holds_a_code(state: Path) -> None:
    with scanning("trace") as scan:
        codes = PairCodes()
        code, other = codes.issue(URL), codes.issue(URL)  # minted by `secrets`: the scan looks for both
        async with serving(state, codes) as base, httpx.AsyncClient() as http:
            assert (await claim(http, base, code)).status_code == 200
            assert (await claim(http, base, code)).status_code == 403
            assert (await claim(http, base, other[::-1])).status_code == 403
    assert scan.lines > 0 and scan.secrets >= 2, scan.summary()
    assert scan.leak_count == 0, "\n".join([scan.summary(), *scan.leaks])


def test_the_link_is_http_on_loopback_and_https_with_tls() -> None:
    assert pair_link("ws://127.0.0.1:8080/acp", "c0de") == "http://127.0.0.1:8080/pair#code=c0de"
    assert pair_link("wss://pod.example/acp", "c0de") == "https://pod.example/pair#code=c0de"
    assert pair_link("wss://pod.example/team/acp", "c0de") == "https://pod.example/team/pair#code=c0de"


async def test_openab_run_prints_a_link_that_claims_its_url_and_key(state: Path) -> None:
    with terminal_run(state) as shown:
        found = re.search(r"Or open this link once in that Chrome \(one use, 10 minutes\): "
                          r"(http://127\.0\.0\.1:(\d+))/pair#code=([A-Za-z0-9_-]{24})\n", shown)
        assert found is not None, shown
        base, port, code = found.groups()
        key = kept_key_path(state).read_text().strip()
        assert code not in key and key not in found.group(0)
        async with httpx.AsyncClient() as http:
            page = await http.get(f"{base}/pair")
            assert "the openab extension will ask you to confirm" in page.text
            got = await claim(http, base, code)
            assert got.json() == {"url": f"ws://127.0.0.1:{port}/acp", "key": key}
            assert (await claim(http, base, code)).status_code == 403


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_a_log_never_gets_the_link(state: Path, log_format: str) -> None:
    from test_pairing import _env, start_output

    logged = start_output("--port", str(free_port()), "--state-dir", str(state), "--log-format", log_format,
                          env=_env(), terminal=False)
    assert "pair the side panel" in logged and "Gateway URL: ws://127.0.0.1:" in logged, logged
    assert "/pair#code=" not in logged and "open this link" not in logged.lower()
