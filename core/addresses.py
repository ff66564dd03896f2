"""What counts as this machine: the one place that decides whether a host name or address is loopback."""

from __future__ import annotations

import ipaddress

__all__ = ["LOOPBACK_NAMES", "is_loopback", "is_loopback_host"]

# How a client names this machine: what agents are told to reach without a proxy (``NO_PROXY``).
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and any loopback address (127.0.0.0/8, ``::1``, bracketed or not)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def is_loopback_host(header: str) -> bool:
    """True when an HTTP ``Host`` header (``name`` or ``name:port``, IPv6 bracketed) names this machine.

    A server that answers only on loopback checks this against DNS rebinding: a page of ``evil.example``
    whose name was rebound to 127.0.0.1 reaches the server with ``Host: evil.example``.
    """
    if header.startswith("["):
        name = header[: header.find("]") + 1] if "]" in header else header
    else:
        name = header.rsplit(":", 1)[0] if header.count(":") == 1 else header
    return is_loopback(name.lower())
