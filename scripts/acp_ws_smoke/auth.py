"""The checks of section 1: who the handshake lets in, and how it is told the key."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

from .client import ACP_SUBPROTOCOL, Target, expect


async def no_key(target: Target) -> str:
    return await target.refused(token=None)


async def wrong_key(target: Target) -> str:
    return await target.refused(token="wrong-" + target.token)


async def wrong_key_header(target: Target) -> str:
    return await target.refused(token="wrong-" + target.token, header=True)


async def key_in_query(target: Target) -> str:
    # A key in the URL ends up in proxy logs and histories: the gateway must not honour it.
    parts = urlsplit(target.url)
    query = (parts.query + "&" if parts.query else "") + f"token={target.token}"
    return await target.refused(token=None, url=urlunsplit(parts._replace(query=query)))


async def key_as_subprotocol(target: Target) -> str:
    async with target.open() as client:
        chosen = client.ws.subprotocol
        expect(chosen == ACP_SUBPROTOCOL, f"accepted, but the subprotocol echoed is {chosen!r}, not acp.v1")
        await client.initialize()
    return "accepted, acp.v1 echoed"


async def key_as_header(target: Target) -> str:
    async with target.open(header=True) as client:
        await client.initialize()
    return "accepted"
