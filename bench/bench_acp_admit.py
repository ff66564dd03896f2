"""Issue 35, item 3: what checking the `/acp` key against its kept verifier costs one admit, against comparing it
with the key itself (as the pod did before), same run, alternating rounds.

Two measures, each path beside its baseline:

- ``admit``: one ``gateway.auth.admit`` of an upgrade's headers, the key in the ``openab.bearer.<key>``
  subprotocol as a browser sends it: ``key`` compares with the key in memory (``hmac.compare_digest``);
  ``verifier`` hashes the presented key (PBKDF2-SHA256, the kept iterations) and compares with the kept verifier
  (:class:`~openab_browser.gateway.acp_key.KeptVerifier`, its file stat'ed for a rotation each time); both for the right
  key and a wrong one (what an attacker's try costs the pod).
- ``handshake``: a whole WebSocket upgrade to a real uvicorn pod on loopback (TCP connect, HTTP upgrade, 101, close)
  with the key, one pod holding the key (as an operator's ``OPENAB_ACP_AUTH_KEY``), one holding the verifier.

Run: ``python bench/bench_acp_admit.py [--quick] [--out DIR]``.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pydantic import SecretStr
from websockets.asyncio.client import connect
from websockets.typing import Subprotocol

from bench.common import arguments, interleaved, summary, timed_sync, write_result
from openab_browser.core.acp.backend import NoAgentBackend
from openab_browser.core.settings import Settings
from openab_browser.gateway.acp_key import ITERATIONS, KeptVerifier, settle_kept_key
from openab_browser.gateway.app import create_app
from openab_browser.gateway.assemble import assemble
from openab_browser.gateway.auth import Admitted, admit
from openab_browser.gateway.pairing import KeptKey
from openab_browser.gateway.server import running_server

NAME = "acp_admit"


def _headers(key: str) -> dict[str, str]:
    return {"host": "127.0.0.1:1", "sec-websocket-protocol": f"openab.bearer.{key}, acp.v1"}


@contextlib.asynccontextmanager
async def _pod(state: Path, kept: KeptKey | None, key: str) -> AsyncIterator[str]:
    settings = Settings(port=0, state_dir=state, token=None if kept is not None else SecretStr(key))
    pod = assemble(settings, backend=NoAgentBackend())
    async with running_server(create_app(pod, kept=kept), max_frame_bytes=settings.max_frame_bytes) as url:
        yield url


def _handshakes(calls: int, url: str, key: str) -> Callable[[], Awaitable[list[float]]]:
    offered = [Subprotocol(f"openab.bearer.{key}"), Subprotocol("acp.v1")]

    async def run() -> list[float]:
        samples = []
        for _ in range(calls):
            start = time.perf_counter()
            async with connect(url, subprotocols=offered, compression=None, open_timeout=10):
                pass
            samples.append(time.perf_counter() - start)
        return samples
    return run


async def _run(rounds: int, calls: int, handshakes: int) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="oab-admit-") as tmp:
        state = Path(tmp) / "state"
        settled = settle_kept_key(state, strong=32)
        assert settled.key is not None
        key, door = settled.key, KeptVerifier(settled.path)
        wrong = secrets.token_urlsafe(32)
        for presented in (key, wrong):  # each path says what it should before it is timed
            assert isinstance(admit(_headers(presented), key=key, allowed_origins=[]), Admitted) == (presented == key)
            assert isinstance(admit(_headers(presented), key=None, allowed_origins=[], verifier=door),
                              Admitted) == (presented == key)
        admit_samples = await interleaved(rounds, {
            "key, right": timed_sync(calls, lambda: admit(_headers(key), key=key, allowed_origins=[])),
            "verifier, right": timed_sync(calls, lambda: admit(_headers(key), key=None, allowed_origins=[],
                                                            verifier=door)),
            "key, wrong": timed_sync(calls, lambda: admit(_headers(wrong), key=key, allowed_origins=[])),
            "verifier, wrong": timed_sync(calls, lambda: admit(_headers(wrong), key=None, allowed_origins=[],
                                                            verifier=door)),
        })
        kept = KeptKey(settled.path, door)
        async with _pod(Path(tmp) / "with-key", None, key) as with_key, _pod(state, kept, key) as with_verifier:
            handshake_samples = await interleaved(rounds, {
                "key": _handshakes(handshakes, with_key.replace("http", "ws", 1) + "/acp", key),
                "verifier": _handshakes(handshakes, with_verifier.replace("http", "ws", 1) + "/acp", key),
            })
    admits = {name: summary(s) for name, s in admit_samples.items()}
    shakes = {name: summary(s) for name, s in handshake_samples.items()}
    return {
        "kdf": f"pbkdf2-sha256, {ITERATIONS} iterations",
        "rounds": rounds,
        "admit": admits,
        "admit_added_ms": {which: round(admits[f"verifier, {which}"]["p50_ms"] - admits[f"key, {which}"]["p50_ms"], 4)
                           for which in ("right", "wrong")},
        "handshake": shakes,
        "handshake_ratio": round(shakes["verifier"]["p50_ms"] / shakes["key"]["p50_ms"], 3),
    }


def main(argv: Sequence[str] | None = None) -> int:
    args = arguments("What checking the /acp key against its verifier costs an admit, same run", argv)
    rounds, calls, handshakes = (2, 20, 5) if args.quick else (10, 500, 100)
    result = asyncio.run(_run(rounds, calls, handshakes))
    write_result(NAME, result, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
