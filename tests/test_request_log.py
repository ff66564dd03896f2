"""What a real `openab run` writes to its log per HTTP request, in both log formats: a line or so, never a traceback.

uvicorn's access formatter unpacks a record's five arguments itself, so redaction must leave them in their
shape. Every kind of request a pod meets (probes, scrapes with and without the key, `/acp` upgrades with and
without it, unknown paths, a key in the query, a request that is not HTTP) is sent in rounds; after each
round a marker request's own access line says the round's lines are all written (stderr and stdout, where
uvicorn's text access lines go: a container collects both), and the lines between two
markers are counted. The key the pod was given appears in none of them.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import secrets
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

ROUNDS = 4
START_TIMEOUT = 60.0


@dataclass
class Output:
    """A child's stderr and stdout (uvicorn's text access lines go there), read line by line on a thread, with a
    wait for a line containing some text."""

    lines: list[str] = field(default_factory=list)
    changed: threading.Condition = field(default_factory=threading.Condition)
    ended: bool = False

    def read(self, stream: Iterator[str]) -> None:
        for line in stream:
            with self.changed:
                self.lines.append(line.rstrip("\n"))
                self.changed.notify_all()
        with self.changed:
            self.ended = True
            self.changed.notify_all()

    def wait_for(self, text: str, timeout: float = 30.0) -> int:
        """The index of the first line containing ``text``, once it is there."""
        with self.changed:
            found = self.changed.wait_for(
                lambda: self.ended or any(text in line for line in self.lines), timeout=timeout)
            for i, line in enumerate(self.lines):
                if text in line:
                    return i
        raise AssertionError(f"{text!r} never reached the output (ended={self.ended}, waited={found}):\n"
                             + "\n".join(self.lines[-40:]))


@contextmanager
def openab_run(state: Path | None, env: dict[str, str], *args: str) -> Iterator[tuple[str, Output]]:
    """A real `openab run ARGS` keeping its state in ``state`` (``None``: where ``env`` says), with ``env`` and no
    other ``OPENAB_*`` variable; yields its address (``host:port``; ARGS may give another ``--port``) and its
    output as it comes, once it serves."""
    port = _free_port()
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("OPENAB_")},
           **({"OPENAB_STATE_DIR": str(state)} if state is not None else {}), **env}
    process = subprocess.Popen(
        [sys.executable, "-m", "openab_browser.gateway.cli", "run", "--port", str(port), *args],
        env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    assert process.stdout is not None
    err = Output()
    reader = threading.Thread(target=err.read, args=(process.stdout,), daemon=True)
    reader.start()
    try:
        # uvicorn says "startup complete" before it listens: "running on" is said once the socket accepts.
        err.wait_for("Uvicorn running on", START_TIMEOUT)
        yield f"127.0.0.1:{port}", err
    finally:
        process.terminate()
        process.wait(timeout=30)
        reader.join(timeout=30)


def one_round(address: str, key: str, n: int) -> int:
    """Every kind of request, once; returns how many were sent."""
    base = f"http://{address}"
    bearer = {"Authorization": f"Bearer {key}"}
    sent = 0
    with httpx.Client(timeout=10, trust_env=False) as http:
        for path, headers in [
            ("/healthz", {}), ("/readyz", {}),
            ("/metrics", {}), ("/metrics", {"Authorization": f"Bearer {key[::-1]}"}), ("/metrics", bearer),
            (f"/nope-{n}", {}), (f"/nope-{n}?token={key}", {}), (f"/acp?token={key}", {}),
            (f"/x-{n}%20authorization%3A%20{key}", {}),
        ]:
            http.get(base + path, headers=headers)
            sent += 1
    for offered in ([], [f"openab.bearer.{key[::-1]}", "acp.v1"]):
        with pytest.raises(InvalidStatus):
            connect(f"ws://{address}/acp", subprotocols=offered or None, open_timeout=10)  # type: ignore[arg-type]
        sent += 1
    with connect(f"ws://{address}/acp", subprotocols=[f"openab.bearer.{key}", "acp.v1"],  # type: ignore[list-item]
                 open_timeout=10) as ws:
        ws.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}))
        assert json.loads(ws.recv(timeout=10))["result"]["protocolVersion"] == 1
    sent += 1
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as raw:  # not HTTP at all
        raw.sendall(b"NOT HTTP\x00\r\n\r\n")
        with suppress(OSError):
            raw.recv(4096)
    sent += 1
    return sent


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_every_kind_of_request_logs_a_line_or_so_and_no_traceback_nor_key(tmp_path: Path, log_format: str) -> None:
    key = secrets.token_hex(32)
    with openab_run(tmp_path / "state", {"OPENAB_ACP_AUTH_KEY": key}, "--log-format", log_format) as (address, err):
        marks = [err.wait_for("Application startup complete")]
        per_round = 0
        for n in range(ROUNDS):
            per_round = one_round(address, key, n)
            httpx.get(f"http://{address}/marker-{n}", timeout=10, trust_env=False)
            marks.append(err.wait_for(f"/marker-{n}"))
    text = "\n".join(err.lines)
    assert "Logging error" not in text and "Traceback" not in text, text[:4000]
    assert key not in text and key[::-1] not in text
    counts = [after - before for before, after in itertools.pairwise(marks)]
    # One access line a request, an upgrade's accept and close lines: a few lines each, however many rounds.
    assert all(count <= 3 * (per_round + 1) for count in counts), (counts, text[-4000:])
    assert max(counts[1:]) - min(counts[1:]) <= 3, counts
    if log_format == "json":
        records = [json.loads(line) for line in err.lines if line.startswith("{")]
        assert len(records) == len([line for line in err.lines if line.strip()]), "a line that is not JSON"
        access = [r["message"] for r in records if r["logger"] == "uvicorn.access"]
    else:
        access = [line for line in err.lines if re.search(r'" \d{3}( |$)', line)]
    assert any('"GET /healthz HTTP/1.1" 200' in line for line in access), access[:5]
    assert any('"GET /nope-1?[redacted] HTTP/1.1" 404' in line for line in access), access[:20]
    assert len([line for line in access if "/marker-" in line]) == ROUNDS


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
