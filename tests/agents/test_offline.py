"""The offline runner: a wrapped command reaches the ports we carry in, and nothing else."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
from collections.abc import Iterator

import pytest

from .offline import HostRelay, can_unshare

pytestmark = pytest.mark.skipif(not can_unshare(), reason="needs root (or user namespaces) for unshare -n")

# Reads "PORT" or "HOST:PORT" per line and prints what it says, or the error's errno name.
PROBE = """
import errno, socket, sys
for line in sys.stdin:
    host, _, port = line.strip().rpartition(":")
    try:
        with socket.create_connection((host or "127.0.0.1", int(port)), timeout=5) as s:
            print(s.recv(100).decode(), flush=True)
    except OSError as e:
        print(errno.errorcode.get(e.errno or 0, type(e).__name__), flush=True)
"""


def greeter(text: bytes) -> Iterator[int]:
    with socket.create_server(("127.0.0.1", 0)) as server:

        def serve() -> None:
            while True:
                try:
                    conn, _ = server.accept()
                except OSError:
                    return
                with conn:
                    conn.sendall(text)

        threading.Thread(target=serve, daemon=True).start()
        yield server.getsockname()[1]


@pytest.fixture
def early() -> Iterator[int]:
    yield from greeter(b"early")


@pytest.fixture
def late() -> Iterator[int]:
    yield from greeter(b"late")


def test_wrapped_command_reaches_only_the_ports_carried_in(early: int, late: int) -> None:
    with HostRelay([early]) as relay:
        probe = subprocess.Popen(relay.wrap([sys.executable, "-c", PROBE]), stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, text=True)
        assert probe.stdin is not None and probe.stdout is not None
        try:
            probe.stdin.write(f"{early}\n{late}\n1.1.1.1:443\n")
            probe.stdin.flush()
            assert probe.stdout.readline().strip() == "early"
            assert probe.stdout.readline().strip() == "ECONNREFUSED"  # the host's port, not carried in
            assert probe.stdout.readline().strip() == "ENETUNREACH"  # the world

            relay.add(late)  # a port known only after the command started
            probe.stdin.write(f"{late}\n")
            probe.stdin.flush()
            assert probe.stdout.readline().strip() == "late"
        finally:
            probe.stdin.close()
            assert probe.wait(10) == 0
