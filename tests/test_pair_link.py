"""The one-click pairing link's gateway side: `GET /pair` (the page a browser without the extension shows) and
`POST /pair/claim` (a code for the gateway's URL and key), on a real uvicorn on loopback, and the link a real
`openab run` prints to its terminal. The code is good once, for a while; wrong codes are refused, then rate
limited per client address only, so a right code is never refused (issue 33: wrong codes from other addresses
once made it 429); no log line holds a code; a web page cannot claim one.

Clients at other addresses connect from other loopback source addresses (127.0.0.2 and on reach a pod on
127.0.0.1), so the pod sees them as it sees hosts on a network. Time is the pod's own monotonic clock, injected
into its :class:`PairCodes` (``app.state.pair_codes``), so an expiry or a rate limit's window passes without a
sleep.
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
from ports import free_port
from pydantic import SecretStr
from terminal_run import terminal_run

from openab_browser.core.acp.backend import NoAgentBackend
from openab_browser.core.settings import Settings
from openab_browser.gateway.app import create_app
from openab_browser.gateway.assemble import assemble
from openab_browser.gateway.pair_link import MAX_ADDRESSES, Claimed, Limited, PairCodes, Wrong, WrongCodes, address_key
from openab_browser.gateway.pairing import pair_link
from openab_browser.gateway.server import running_server

pytestmark = pytest.mark.anyio

URL = "ws://127.0.0.1:1/acp"
JSON = {"content-type": "application/json"}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@contextlib.asynccontextmanager
async def serving(state: Path, codes: PairCodes, *, key: str | None = "k" * 43,
                  proxies: list[str] | None = None) -> AsyncIterator[str]:
    settings = Settings(token=None if key is None else SecretStr(key), insecure_no_key=key is None, port=0,
                        state_dir=state)
    app = create_app(assemble(settings, backend=NoAgentBackend()))
    app.state.pair_codes = codes
    async with running_server(app, guard=app.state.guard, proxies=proxies) as base:
        yield base


async def claim(http: httpx.AsyncClient, base: str, code: str, **headers: str) -> httpx.Response:
    return await http.post(f"{base}/pair/claim", json={"code": code}, headers=headers)


def from_address(address: str) -> httpx.AsyncClient:
    """A client whose connections leave from ``address`` (any of 127.0.0.0/8 reaches a pod on 127.0.0.1): the pod
    sees each as its own client address, as it would see hosts on a network."""
    return httpx.AsyncClient(transport=httpx.AsyncHTTPTransport(local_address=address))


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
        assert "start `openab run` again for a new link" in again.json()["error"], "it says what to do"


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
        assert "start `openab run` again for a new one" in expired.json()["error"], "it says what to do"
        assert (await claim(http, base, late)).status_code == 403, "an expired code is gone once tried"


async def test_wrong_codes_are_rate_limited_per_address_then_the_window_passes(state: Path) -> None:
    clock = Clock()
    codes = PairCodes(clock=clock)
    code = codes.issue(URL)
    async with serving(state, codes) as base, from_address("127.0.0.2") as flooder, \
            from_address("127.0.0.3") as other:
        for _ in range(5):
            assert (await claim(flooder, base, secrets.token_urlsafe(18))).status_code == 403
        for _ in range(20):
            limited = await claim(flooder, base, secrets.token_urlsafe(18))
            assert limited.status_code == 429 and int(limited.headers["retry-after"]) == 60
            assert "wait 60 s" in limited.json()["error"] and "A right code is always taken" in \
                limited.json()["error"]
        wrong = await claim(other, base, secrets.token_urlsafe(18))
        assert wrong.status_code == 403, "the flood limits the address it came from, no other"
        clock.now += 59
        assert (await claim(flooder, base, secrets.token_urlsafe(18))).status_code == 429, \
            "a wrong code sent while limited counts: the wait ends a window after the flood stops"
        clock.now += 60
        assert (await claim(flooder, base, secrets.token_urlsafe(18))).status_code == 403
        assert (await claim(flooder, base, code)).status_code == 200


async def test_a_right_code_is_taken_even_from_an_address_over_its_limit(state: Path) -> None:
    # A neighbour behind the same NAT, proxy or port-forward shares the person's address: its wrong codes count
    # there, and the person's right code is still taken.
    codes = PairCodes()
    code = codes.issue(URL)
    async with serving(state, codes) as base, from_address("127.0.0.2") as shared:
        for _ in range(10):
            await claim(shared, base, secrets.token_urlsafe(18))
        assert (await claim(shared, base, secrets.token_urlsafe(18))).status_code == 429
        assert (await claim(shared, base, code)).json() == {"url": URL, "key": "k" * 43}


async def test_wrong_codes_from_many_addresses_never_refuse_the_right_one(state: Path) -> None:
    # The attack of issue 33: 55 wrong codes from 11 addresses, then the person's own claim from another.
    codes = PairCodes()
    code = codes.issue(URL)
    statuses: list[int] = []
    async with serving(state, codes) as base:
        for n in range(2, 13):
            async with from_address(f"127.0.0.{n}") as attacker:
                statuses += [(await claim(attacker, base, secrets.token_urlsafe(18))).status_code for _ in range(5)]
        async with from_address("127.0.0.1") as person:
            right = await claim(person, base, code)
    assert right.status_code == 200 and right.json() == {"url": URL, "key": "k" * 43}, \
        f"the right code after 55 wrong ones from 11 other addresses: {right.status_code} {right.text}"
    assert statuses == [403] * 55, "no address went over its own limit"


async def test_behind_a_proxy_the_address_counted_is_the_one_it_forwards_and_only_then(state: Path) -> None:
    codes = PairCodes()
    code = codes.issue(URL)
    async with serving(state, codes, proxies=["127.0.0.2"]) as base, from_address("127.0.0.2") as proxy:
        for _ in range(5):
            await claim(proxy, base, secrets.token_urlsafe(18), **{"x-forwarded-for": "203.0.113.7"})
        assert (await claim(proxy, base, secrets.token_urlsafe(18),
                            **{"x-forwarded-for": "203.0.113.7"})).status_code == 429
        assert (await claim(proxy, base, secrets.token_urlsafe(18),
                            **{"x-forwarded-for": "203.0.113.8"})).status_code == 403, \
            "the proxy's other clients are not one address"
        async with from_address("127.0.0.3") as direct:
            # Not from the proxy: its X-Forwarded-For is its own claim, not believed; it counts as 127.0.0.3.
            for n in range(5):
                await claim(direct, base, secrets.token_urlsafe(18), **{"x-forwarded-for": f"198.51.100.{n}"})
            assert (await claim(direct, base, secrets.token_urlsafe(18),
                                **{"x-forwarded-for": "198.51.100.9"})).status_code == 429
        assert (await claim(proxy, base, code, **{"x-forwarded-for": "203.0.113.7"})).status_code == 200


async def test_the_table_of_addresses_is_bounded(state: Path) -> None:
    # Many addresses, each over its limit, in a table of 4: the least recent give way, no table grows.
    codes = PairCodes(wrong=WrongCodes(max_addresses=4))
    code = codes.issue(URL)
    async with serving(state, codes) as base:
        for n in range(2, 14):
            async with from_address(f"127.0.0.{n}") as attacker:
                for _ in range(6):
                    await claim(attacker, base, secrets.token_urlsafe(18))
            assert len(codes.wrong) <= 4
        async with from_address("127.0.0.13") as latest:
            assert (await claim(latest, base, secrets.token_urlsafe(18))).status_code == 429, "kept: the most recent"
        async with from_address("127.0.0.2") as first:
            assert (await claim(first, base, secrets.token_urlsafe(18))).status_code == 403, "gave way"
        async with from_address("127.0.0.14") as person:
            assert (await claim(person, base, code)).status_code == 200


def test_many_addresses_never_limit_a_new_one_and_the_table_stays_bounded() -> None:
    clock = Clock()
    codes = PairCodes(clock=clock)
    code = codes.issue(URL)
    for n in range(20_000):
        assert codes.claim(secrets.token_urlsafe(18), f"10.{n // 65536}.{n // 256 % 256}.{n % 256}") == Wrong()
    assert len(codes.wrong) == MAX_ADDRESSES
    assert codes.claim(code, "10.9.9.9") == Claimed(URL), "a right code, at once"
    clock.now += 61
    codes.claim(secrets.token_urlsafe(18), "10.9.9.8")
    assert len(codes.wrong) == 1, "addresses whose window passed are dropped"


def test_an_address_is_counted_as_its_v4_address_or_its_v6_slash_64() -> None:
    assert address_key("10.1.2.3") == "10.1.2.3"
    assert address_key("::ffff:10.1.2.3") == "10.1.2.3"
    assert address_key("2001:db8:1:2:aaaa::1") == address_key("2001:db8:1:2:bbbb::2") == "2001:db8:1:2::/64"
    assert address_key("2001:db8:1:3::1") != address_key("2001:db8:1:2::1")
    assert address_key("testclient") == "testclient"
    wrong = WrongCodes(failures=2)
    assert wrong.wrong("2001:db8::1", 0) is None and wrong.wrong("2001:db8::2", 0) is None
    assert wrong.wrong("2001:db8::3", 0) == Limited(60.0, first=True), "one /64 is one address"
    assert wrong.wrong("2001:db8::4", 1) == Limited(59.0, first=False), "told once per wait"
    assert wrong.wrong("2001:db8:0:1::1", 1) is None


def test_the_codes_are_bounded() -> None:
    codes = PairCodes()
    first = codes.issue(URL)
    for _ in range(8):
        codes.issue(URL)
    assert codes.claim(first, "c") == Wrong(), "the oldest of more than 8 codes is dropped"


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
            async with from_address("127.0.0.2") as flooder:
                for _ in range(8):  # the wrong ones, then the limited ones
                    await claim(flooder, base, secrets.token_urlsafe(18))
                assert (await claim(flooder, base, other)).status_code == 200
    assert scan.lines > 0 and scan.secrets >= 12, scan.summary()
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
        shown_key = re.search(r"Key: {9}(\S+)\n", shown)
        assert shown_key is not None, shown
        key = shown_key.group(1)
        assert code not in key and key not in found.group(0)
        async with httpx.AsyncClient() as http:
            page = await http.get(f"{base}/pair")
            assert "the openab extension will ask you to confirm" in page.text
            got = await claim(http, base, code)
            assert got.json() == {"url": f"ws://127.0.0.1:{port}/acp", "key": key}
            assert (await claim(http, base, code)).status_code == 403


async def test_a_link_printed_before_a_rotation_claims_no_key(state: Path) -> None:
    """`openab key rotate` while the pod runs: the link the start printed was for the old key, which the pod no
    longer takes; it is refused, and says what to do, rather than hand out a key that opens nothing."""
    import asyncio
    import sys

    with terminal_run(state) as shown:
        found = re.search(r": (http://127\.0\.0\.1:\d+)/pair#code=([A-Za-z0-9_-]{24})\n", shown)
        assert found is not None, shown
        rotate = await asyncio.create_subprocess_exec(sys.executable, "-m", "openab_browser.gateway.cli", "key",
                                                      "rotate", "--state-dir", str(state),
                                                      stdout=asyncio.subprocess.DEVNULL)
        async with asyncio.timeout(60):
            assert await rotate.wait() == 0
        async with httpx.AsyncClient() as http:
            refused = await claim(http, found.group(1), found.group(2))
        assert refused.status_code == 410 and "openab key rotate" in refused.json()["error"]


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_a_log_never_gets_the_link(state: Path, log_format: str) -> None:
    from test_pairing import _env, start_output

    logged = start_output("--port", str(free_port()), "--state-dir", str(state), "--log-format", log_format,
                          env=_env(), terminal=False)
    assert "pair the side panel" in logged and "Gateway URL: ws://127.0.0.1:" in logged, logged
    assert "/pair#code=" not in logged and "open this link" not in logged.lower()
