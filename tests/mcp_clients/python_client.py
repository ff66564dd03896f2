"""One session of a Python SDK 1.x client against a proxy endpoint, as an agent built on that release runs it.

Runs in a venv of one `mcp` 1.x release (`.venv-mcp/<version>`, made by scripts/bootstrap.sh), never in the suite's
own venv, whose `mcp` is 2.x: initialize (the release's own newest revision), tools/list, one tools/call, the DELETE
the client sends when it closes; then the same client with a wrong token. Prints one JSON object of what that agent
would have seen.

    OPENAB_TEST_TOKEN=... OPENAB_TEST_WRONG_TOKEN=... python python_client.py <url> <tool> <arguments as JSON>

The tokens come from the environment so that they are not on a command line other processes can read. mypy reads
this file against the suite's `mcp` 2.x, where the 1.x names do not exist: they are looked up at run time.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import json
import os
import sys
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import httpx

ClientSession: Any = importlib.import_module("mcp").ClientSession
_TRANSPORT: Any = importlib.import_module("mcp.client.streamable_http")
LATEST_PROTOCOL_VERSION: str = importlib.import_module("mcp.types").LATEST_PROTOCOL_VERSION
# How long a client waits for an answer. The oldest releases never surface an HTTP error to the session: a refused
# request is logged and its answer never comes, so without this the wrong-token run would wait forever.
READ_TIMEOUT = timedelta(seconds=10)


@contextlib.asynccontextmanager
async def transport(url: str, token: str) -> AsyncIterator[tuple[Any, Any, Any]]:
    """The release's own Streamable HTTP client, called the way that release documents."""
    headers = {"Authorization": f"Bearer {token}"}
    if hasattr(_TRANSPORT, "streamable_http_client"):  # 1.24 on: the client takes a configured httpx client
        async with (
            httpx.AsyncClient(headers=headers, timeout=httpx.Timeout(30, read=60)) as http,
            _TRANSPORT.streamable_http_client(url, http_client=http) as streams,
        ):
            yield streams
    else:
        async with _TRANSPORT.streamablehttp_client(url, headers=headers) as streams:
            yield streams


async def session_of(url: str, token: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    report: dict[str, Any] = {"sdkLatest": LATEST_PROTOCOL_VERSION}
    async with transport(url, token) as (read, write, session_id), \
            ClientSession(read, write, read_timeout_seconds=READ_TIMEOUT) as session:
        initialized = await session.initialize()
        report["negotiated"] = initialized.protocolVersion
        report["server"] = initialized.serverInfo.model_dump(mode="json", exclude_none=True)
        report["sessionId"] = session_id()
        report["tools"] = [listed.name for listed in (await session.list_tools()).tools]
        called = await session.call_tool(tool, arguments)
        report["result"] = called.model_dump(mode="json", by_alias=True, exclude_none=True)
        ended = session_id()
    # Leaving the client sent DELETE for its session: the id must now be unknown to the server (404).
    async with httpx.AsyncClient(timeout=10) as http:
        after = await http.post(url, json={"jsonrpc": "2.0", "id": 99, "method": "tools/list"}, headers={
            "Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream",
            "Mcp-Session-Id": ended or ""})
    report["afterDelete"] = after.status_code
    return report


async def refused(url: str, token: str) -> str:
    """What the client says when the endpoint will not take its token."""
    try:
        async with transport(url, token) as (read, write, _), \
                ClientSession(read, write, read_timeout_seconds=READ_TIMEOUT) as session:
            await session.initialize()
    except Exception as error:  # an ExceptionGroup from the transport's task group, or the session's error
        return _leaves(error)
    return "connected"


def _leaves(error: BaseException) -> str:
    if isinstance(error, BaseExceptionGroup):
        return "; ".join(_leaves(inner) for inner in error.exceptions)
    return f"{type(error).__name__}: {error}"


async def main() -> None:
    url, tool, arguments = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    token, wrong = os.environ["OPENAB_TEST_TOKEN"], os.environ["OPENAB_TEST_WRONG_TOKEN"]
    report = await session_of(url, token, tool, arguments)
    report["wrongToken"] = await refused(url, wrong)
    print(json.dumps(report))


if __name__ == "__main__":
    asyncio.run(main())
