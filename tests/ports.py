"""Ports for the servers a test starts itself (a pod, a hub, a page): one free on 127.0.0.1 now."""

from __future__ import annotations

import socket

__all__ = ["free_port"]


def free_port() -> int:
    """A port nothing listens on at this moment (another process may take it before the caller binds it: use it
    only for a program that must be told its port before it starts)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
