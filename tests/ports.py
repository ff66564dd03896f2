"""Ports for the servers a test starts itself (a pod, a hub, a page): one free on this host now."""

from __future__ import annotations

import contextlib
import os
import random
import re
import socket
from pathlib import Path

__all__ = ["free_port"]

# Below the kernel's range for ephemeral ports, down to here: the ports free_port picks from where it can. Above
# every port Chrome refuses to load from (its highest is 10080), so a page served there loads.
_LOWEST = 11_000
_TRIES = 64
_given: set[int] = set()  # ports this process handed out: never twice, whoever released them


def _ephemeral_low() -> int:
    """The first port of the range the kernel takes ports from for connections and for servers bound to port 0."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    return 32_768  # Linux's default


def _share(low: int, high: int) -> range:
    """This process's share of the ports from ``low`` to ``high``: all of them, or under pytest-xdist a slice of its
    own per worker. ``_given`` is per process, and a port one worker picked is free until its server binds it,
    seconds later: another worker picking it meanwhile put two tests' servers on one port."""
    worker = re.fullmatch(r"gw(\d+)", os.environ.get("PYTEST_XDIST_WORKER", ""))
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
    if worker is None or count < 2:
        return range(low, high)
    size = (high - low) // count
    start = low + int(worker.group(1)) % count * size
    return range(start, start + size)


def _bindable(port: int) -> bool:
    """Whether nothing holds ``port`` on any IPv4 address now (no listener, no connection, no socket waiting to
    close: a bind without SO_REUSEADDR is refused for each)."""
    with socket.socket() as s:
        try:
            s.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A port nothing uses at this moment, for a program that must be told its port before it starts.

    Picked below the kernel's ephemeral range where it can: a port the kernel gave a socket and took back (what
    binding port 0 returns) is the very kind it hands the next connection or server on port 0, so a suite that starts
    hundreds of them met "address already in use" there. Below the range only an explicit bind can take it."""
    low = _ephemeral_low()
    if low - _LOWEST >= 1_000:
        for _ in range(_TRIES):
            port = random.choice(_share(_LOWEST, low))
            if port not in _given and _bindable(port):
                _given.add(port)
                return port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    _given.add(port)
    return port
