"""The built-in agent's MCP client: it reaches the browser server an ACP client hands it in
``session/new.mcpServers``, over Streamable HTTP (the proxy) or stdio (the bridge's relay, run as our child).

Just enough of MCP for one client: ``initialize``, ``tools/list`` and ``tools/call``. No server-to-client
requests, no resumable streams, no sampling.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
from pathlib import Path
from typing import Any, Final, Protocol

import httpx

from ... import package_version
from ...errors import OpenabError
from ...jsonrpc import (
    JsonObject,
    LocalRpcError,
    Notification,
    RemoteRpcError,
    Request,
    notification_message,
    request_message,
)
from ...mcp_vocabulary import REQUESTED_HANDSHAKE_VERSION, SESSION_ID_HEADER
from ..process import AgentProcess, scrubbed_env

__all__ = ["TOOL_TIMEOUT", "HttpMcpClient", "McpClient", "McpError", "StdioMcpClient", "connect_mcp"]

# A browser tool may wait on a page load or a person's permission answer.
TOOL_TIMEOUT: Final = 180.0


class McpError(OpenabError):
    """The browser's MCP server could not be reached or refused a request; the message says which."""


class McpClient(Protocol):
    """One connection to an MCP server, whatever carries it. ``request`` returns the JSON-RPC ``result`` and
    raises :class:`McpError` for everything else (no answer, an error answer, a lost server)."""

    async def request(self, method: str, params: JsonObject, *, timeout: float) -> Any: ...

    async def notify(self, method: str, params: JsonObject | None = None) -> None: ...

    async def aclose(self) -> None: ...


class HttpMcpClient:
    """Streamable HTTP: one POST per message; the answer is JSON or an SSE stream carrying it.

    Keeps the server's ``Mcp-Session-Id`` and the negotiated protocol version for later requests. Opens no
    GET stream, so server-initiated messages are never seen; the environment's proxies are ignored
    (``trust_env=False``) because the browser endpoint is on loopback.
    """

    def __init__(self, url: str, headers: dict[str, str]) -> None:
        self.url = url
        self._headers = {**headers, "Accept": "application/json, text/event-stream"}
        self._client = httpx.AsyncClient(timeout=httpx.Timeout(TOOL_TIMEOUT, connect=10.0), trust_env=False)
        self._ids = itertools.count(1)

    async def request(self, method: str, params: JsonObject, *, timeout: float) -> Any:
        request_id = next(self._ids)
        body = request_message(request_id, method, params)
        try:
            async with asyncio.timeout(timeout), self._client.stream(
                "POST", self.url, json=body, headers=self._headers
            ) as response:
                self._remember_session(response)
                if response.status_code in (401, 403):
                    raise McpError(f"the browser endpoint refused our token (HTTP {response.status_code})")
                if response.status_code >= 400:
                    raise McpError(f"the browser endpoint answered HTTP {response.status_code} to {method}")
                message = await self._read_answer(response, request_id)
        except TimeoutError:
            raise McpError(f"{method} got no answer within {timeout:g} s") from None
        except httpx.HTTPError as exc:
            raise McpError(f"cannot reach the browser endpoint: {exc}") from None
        if "error" in message:
            error = RemoteRpcError.from_json(message["error"])
            raise McpError(error.message or f"error {error.code}")
        result = message.get("result")
        if method == "initialize" and isinstance(result, dict) and isinstance(result.get("protocolVersion"), str):
            # Streamable HTTP: every later request names the version the server chose.
            self._headers["MCP-Protocol-Version"] = result["protocolVersion"]
        return result

    async def notify(self, method: str, params: JsonObject | None = None) -> None:
        body = notification_message(method, params)
        with contextlib.suppress(httpx.HTTPError):
            response = await self._client.post(self.url, json=body, headers=self._headers)
            self._remember_session(response)

    def _remember_session(self, response: httpx.Response) -> None:
        session = response.headers.get(SESSION_ID_HEADER)
        if session:
            self._headers["Mcp-Session-Id"] = session

    async def _read_answer(self, response: httpx.Response, request_id: int) -> JsonObject:
        kind = response.headers.get("content-type", "")
        if kind.startswith("text/event-stream"):
            data: list[str] = []
            async for line in response.aiter_lines():
                if line.startswith("data:"):
                    data.append(line[5:].lstrip())
                elif not line and data:
                    message = _loads("\n".join(data))
                    data = []
                    if isinstance(message, dict) and message.get("id") == request_id:
                        return message
            raise McpError("the browser endpoint closed its event stream without an answer")
        message = _loads((await response.aread()).decode("utf-8", "replace"))
        if not isinstance(message, dict):
            raise McpError("the browser endpoint answered with something that is not a JSON-RPC message")
        return message

    async def aclose(self) -> None:
        await self._client.aclose()


class _Quiet:
    # A stdio server's own requests (sampling, roots) get method-not-found: the agent offers none of them.

    def handle_request(self, request: Request) -> Any:
        raise LocalRpcError.method_not_found(request.method)

    def handle_notification(self, notification: Notification) -> None:
        return None


class StdioMcpClient:
    """A stdio MCP server (the bridge's ``openab browser-bridge``), run as our child.

    The child gets a scrubbed environment plus the entry's ``env`` and the bridge's channel variables; call
    :meth:`start` before the first request. Requests the server sends us are refused.
    """

    def __init__(self, command: str, args: list[str], env: dict[str, str]) -> None:
        self._process = AgentProcess(
            [command, *args], handler=_Quiet(), env=scrubbed_env(extra={**env, **_channel_env()}),
            cwd=Path.cwd(), name="browser-mcp",
        )

    async def start(self) -> None:
        """Start the server process (raises :class:`~openab_browser.core.errors.AgentNotFound` if not installed)."""
        await self._process.start()

    async def request(self, method: str, params: JsonObject, *, timeout: float) -> Any:
        try:
            return await self._process.rpc.request(method, params, timeout=timeout)
        except RemoteRpcError as exc:
            raise McpError(exc.message) from None
        except Exception as exc:
            raise McpError(f"the browser MCP server did not answer {method}: {exc}") from None

    async def notify(self, method: str, params: JsonObject | None = None) -> None:
        self._process.rpc.notify(method, params)

    async def aclose(self) -> None:
        await self._process.stop()


def _channel_env() -> dict[str, str]:
    # The bridge relay names its session and finds the pod's socket by these (see openab_browser.bridge).
    names = ("OPENAB_BROWSER_CHANNEL", "OPENAB_BROWSER_SOCKET")
    return {name: os.environ[name] for name in names if os.environ.get(name)}


async def connect_mcp(server: JsonObject) -> tuple[McpClient, list[JsonObject]]:
    """Open the browser server an ACP client handed us; returns the client and its tools.

    ``server`` is an ACP ``McpServer`` (http: ``url`` and ``headers``; stdio: ``command``, ``args``, ``env``).
    Raises :class:`McpError` when it cannot be reached or initialised; nothing is left open then.
    """
    client: McpClient
    if isinstance(server.get("url"), str):
        headers = {h["name"]: h["value"] for h in server.get("headers") or [] if isinstance(h, dict)
                   and isinstance(h.get("name"), str) and isinstance(h.get("value"), str)}
        client = HttpMcpClient(server["url"], headers)
    elif isinstance(server.get("command"), str):
        env = {e["name"]: e["value"] for e in server.get("env") or [] if isinstance(e, dict)
               and isinstance(e.get("name"), str) and isinstance(e.get("value"), str)}
        stdio = StdioMcpClient(server["command"], [str(a) for a in server.get("args") or []], env)
        await stdio.start()
        client = stdio
    else:
        raise McpError(f"unsupported MCP server entry (neither url nor command): {sorted(server)}")
    try:
        await client.request(
            "initialize",
            {"protocolVersion": REQUESTED_HANDSHAKE_VERSION, "capabilities": {},
             "clientInfo": {"name": "openab-builtin", "version": package_version()}},
            timeout=30.0,
        )
        await client.notify("notifications/initialized")
        listed = await client.request("tools/list", {}, timeout=30.0)
    except BaseException:
        await client.aclose()
        raise
    tools = [t for t in (listed or {}).get("tools") or [] if isinstance(t, dict) and isinstance(t.get("name"), str)]
    return client, tools


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        raise McpError("the browser endpoint sent malformed JSON") from None
