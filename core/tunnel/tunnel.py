"""Opening one MCP server that the extension provides over its `/acp` socket (MCP-over-ACP).

Two wire forms are spoken, chosen per server by :func:`establish`:

* **connection** (:class:`.connection_form.ConnectionTunnel`): ``mcp/connect`` hands out a ``connectionId``
  and the inner MCP shakes hands;
* **stateless** (:class:`.stateless_form.StatelessTunnel`): for a browser that answers ``mcp/connect`` with
  -32601; each request carries its own ``_meta``.

Callers hold a :class:`.base.Tunnel` and need not know which: :meth:`Tunnel.request` returns the inner MCP
result, raises :class:`~openab_browser.core.jsonrpc.RpcError` for an inner MCP error and :class:`TunnelError` when the
tunnel itself failed (timeout, socket gone), naming the server and session.

This module is also where the tunnel's public names are imported from.
"""

from __future__ import annotations

import asyncio

from ..errors import TunnelError, TunnelFailure
from ..jsonrpc import ConnectionClosed, RpcConnection
from .base import Form, ProgressCallback, Tunnel, TunnelAddress, TunnelOwner
from .connection_form import ConnectionTunnel
from .stateless_form import StatelessTunnel

__all__ = [
    "ConnectionTunnel",
    "Form",
    "ProgressCallback",
    "StatelessTunnel",
    "Tunnel",
    "TunnelAddress",
    "TunnelError",
    "TunnelOwner",
    "establish",
]


async def establish(conn: RpcConnection, address: TunnelAddress, *, timeout: float, request_timeout: float) -> Tunnel:
    """Open a tunnel to one declared server: connect, shake hands, fetch its tools, all within ``timeout``.

    The connection form is tried first; a browser without ``mcp/connect`` gets the stateless form. Raises
    :class:`TunnelError` when the browser cannot be reached that way, and :class:`RpcError` when it answers
    ``tools/list`` with an MCP error.
    """

    def failure(detail: str, reason: TunnelFailure) -> TunnelError:
        return TunnelError.build(detail, reason=reason, session_id=address.session_id, server=address.name)

    try:
        async with asyncio.timeout(timeout):
            tunnel: Tunnel | None = await ConnectionTunnel.open(conn, address, timeout=timeout)
            if tunnel is None:
                tunnel = await StatelessTunnel.open(conn, address, timeout=timeout)
            await tunnel.list_tools(timeout=min(timeout, request_timeout))
            return tunnel
    except TunnelError:
        raise  # already says what failed; a tunnel timeout must not read as the deadline below
    except TimeoutError:
        raise failure(
            f"the browser did not finish connecting within {timeout:g} s", TunnelFailure.TIMED_OUT
        ) from None
    except ConnectionClosed as exc:
        raise failure(f"connecting failed: {exc}", TunnelFailure.DISCONNECTED) from None
