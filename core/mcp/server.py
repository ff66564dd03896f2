"""The browser tools' MCP server, once, without a transport.

The agent's MCP client reaches a session's browser either through the proxy (Streamable HTTP,
``openab_browser.core.proxy``) or through the bridge (stdio relay and Unix socket, ``openab_browser.bridge``). Both hand
each decoded JSON-RPC message to :meth:`BrowserMcp.handle` and write back what it returns; everything
MCP means lives here:

* both eras: the handshake (``initialize`` negotiating 2024-11-05 ... 2025-11-25, ``ping``,
  ``notifications/initialized``) and the stateless 2026-07-28 revision (``server/discover``, the version
  and capabilities in every request's ``_meta``, ``resultType`` on every result). A request that carries the
  2026 ``_meta`` is served statelessly; anything else is served in the handshake era;
* ``tools/list``: the attached browser's tools, else the known ``browser_*`` set, so an agent that lists
  once at start-up, before the side panel is open, still knows what it may call;
* names the browser sends that clients reject (``browser.click``) are exposed as ``browser_click`` and
  mapped back on call; a name that cannot be made valid is dropped, not passed on to break the whole list;
* ``tools/call`` through :meth:`TunnelRegistry.call_tool`, with ``notifications/cancelled`` and progress;
  failures to reach the browser are ``isError`` results the model can read and act on, the browser's own
  MCP errors stay JSON-RPC errors. A call whose answer was lost (the socket dropped, the call timed out) may
  have run: the result says its outcome is unknown and to look at the page before acting again, and nothing
  here ever sends it again;
* a request nested past :data:`~openab_browser.core.jsonrpc.protocol.MAX_DEPTH` gets -32600, whichever hop parsed it;
* text results over ``max_text_chars`` are cut with a marker that says how to ask for less; images pass;
* ``notifications/tools/list_changed`` when a browser attaches, detaches or changes its tools;
* ``browser_upload`` and ``browser_download`` carry a file across the gap (docs/files.md): the call is handed to
  :class:`openab_browser.core.files.FileCall`, which checks the path, opens the transfer, rewrites the arguments and
  finishes the call; the audit record names the file;
* a state-changing call (not read-only in the catalogue) is a step of the pod's action journal (docs/journal.md,
  :class:`~openab_browser.core.mcp.journal.ActionJournal`): it carries its action id to the browser, a re-issue of it
  joins it or is answered from it, and the steps an earlier run of the pod left unfinished open the session's
  next result.

Tool payloads are the browser's JSON, passed on without being re-modelled or copied.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any

from .. import META_PREFIX, package_version
from ..catalogue import catalogue
from ..errors import OpenabError, TunnelFailure
from ..files import FILE_TOOLS, FileCall, Transfers
from ..jsonrpc import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    SERVER_OVERLOADED,
    Invalid,
    JsonObject,
    LocalRpcError,
    Notification,
    Request,
    RequestId,
    RpcError,
    classify,
    error_message,
    id_key,
    notification_message,
    result_message,
)
from ..jsonrpc.protocol import too_deep, too_deep_error
from ..mcp_vocabulary import (
    HANDSHAKE_VERSIONS,
    LATEST_HANDSHAKE_VERSION,
    META_ACTION,
    META_EARLIER,
    META_SERVER_INFO,
    META_SPEC_PREFIX,
    META_SUBSCRIPTION_ID,
    META_TRUNCATED,
    META_VERSION,
    SERVER_NAME,
    STATELESS_VERSION,
    UNSUPPORTED_PROTOCOL_VERSION,
)
from ..tasks import StopScope
from ..tunnel.registry import BROWSER_NOT_CONNECTED, BrowserNotConnected, TunnelEvent, TunnelRegistry
from ..tunnel.tunnel import TunnelError
from .audit import AuditLog, Ended
from .journal import EXPLICIT_CANCEL, ActionJournal
from .tools import BROWSER_TOOLS, INSTRUCTIONS, STATIC_NAMES, exposed_name

__all__ = ["BrowserMcp", "Limits", "Send", "bound_result", "stateless_version"]

log = logging.getLogger(__name__)

Send = Callable[[JsonObject], None]
"""Takes one server->client JSON-RPC notification; must not block (transports queue, boundedly)."""

@dataclass(frozen=True)
class Limits:
    """Bounds of one server. ``call_timeout`` ``None`` means the registry's (the pod's tunnel timeout)."""

    max_text_chars: int = 1 << 20
    max_running_calls: int = 64
    call_timeout: float | None = None


def stateless_version(message: Mapping[str, Any]) -> str | None:
    """The 2026-07-28-style ``_meta`` protocol version a request carries, if any."""
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    version = meta.get(META_VERSION) if isinstance(meta, dict) else None
    return version if isinstance(version, str) else None


def _tool_failure(text: str) -> JsonObject:
    return {"content": [{"type": "text", "text": text}], "isError": True}


def _lost_call(name: str, error: TunnelError) -> JsonObject:
    """The result for a call the tunnel could not carry to its end, worded so that no action is done twice."""
    if isinstance(error, BrowserNotConnected):
        return _tool_failure(BROWSER_NOT_CONNECTED)
    if error.reason in (TunnelFailure.OVERLOADED, TunnelFailure.SHUTTING_DOWN):  # refused before it was sent
        return _tool_failure(f"{name} was not run: {error.detail}.")
    if catalogue().read_only(name):  # MCP's readOnlyHint: after a lost answer, calling it again changes nothing
        return _tool_failure(f"{name} did not finish: {error.detail}. It only reads the page, so calling it again "
                             "is safe once the browser answers (the openab side panel open).")
    # The browser may have clicked, typed or navigated before the answer was lost: "try again" would do it twice.
    return _tool_failure(
        f"{name} did not finish: {error.detail}. Its outcome is unknown: the browser may already have done it "
        f"(a click, typing or a navigation may have happened). Do not call {name} again blindly: call "
        "browser_snapshot to see the page as it is now, then decide."
    )


class BrowserMcp:
    """One agent-facing MCP session with one session's browser.

    ``send`` receives server->client notifications (``list_changed``; progress when a request has no sink of
    its own); ``audit``, when given, gets one record per ``tools/call``; ``files``, the pod's transfers, carries
    the file tools' files; ``journal``, the pod's action journal, holds the state-changing ones. Call
    :meth:`close` when the MCP session ends: running calls are cancelled (a journalled step runs on for the
    window, for a re-issue to join) and the tunnel listener is removed.
    """

    def __init__(
        self,
        registry: TunnelRegistry,
        session_id: str,
        *,
        send: Send | None = None,
        limits: Limits | None = None,
        server_version: str | None = None,
        audit: AuditLog | None = None,
        files: Transfers | None = None,
        journal: ActionJournal | None = None,
    ) -> None:
        self.registry = registry
        self.audit = audit
        self.journal = journal  # None: no journal (every call goes to the browser as it comes)
        self.files = files  # None: file tools go to the browser as they are (a pod without file transfers)
        self.session_id = session_id
        self.limits = limits or Limits()
        self._send = send
        self._server_version = server_version or package_version()
        self.protocol_version: str | None = None
        self.initialized = False
        self.closed = False
        self._running: dict[tuple[str, RequestId], StopScope] = {}
        # exposed name -> the browser's own name, from the last tool list seen.
        self._names: dict[str, str] = {}
        self._subscribers: dict[tuple[str, RequestId], Callable[[], None]] = {}
        self._closing = asyncio.Event()
        self._unsubscribe = registry.add_listener(self._on_tunnel_event)

    # -- the one entry point -----------------------------------------------------------------------------

    async def handle(self, message: Any, *, progress: Send | None = None) -> JsonObject | None:
        """Answer one client message: the response for a request, ``None`` for anything else.

        ``None`` for a request means it was cancelled by ``notifications/cancelled``: per MCP it gets no
        answer (an HTTP transport must still end its response). ``progress`` receives this request's
        ``notifications/progress``; without it they go to ``send``.
        """
        kind = classify(message, ids="mcp")
        if isinstance(kind, Invalid):
            return error_message(kind.id, kind.error)
        if isinstance(kind, Notification):
            self._notification(kind.method, kind.params)
            return None
        if not isinstance(kind, Request):
            return None  # a response (we send no requests) or a malformed notification: no answer
        request_id, method, params = kind.id, kind.method, kind.params
        # The proxy and the bridge parse on their own: the bound every JSON-RPC peer keeps is kept here too,
        # before anything relays what the next hop could not write.
        if too_deep(message):
            return error_message(request_id, too_deep_error())
        if params is not None and not isinstance(params, dict):
            return error_message(request_id, LocalRpcError(INVALID_PARAMS, "params must be an object"))
        try:
            result = await self._request(request_id, method, params or {}, stateless_version(message), progress)
        except RpcError as exc:
            return error_message(request_id, exc)
        except Exception:
            # A bug of ours must cost one answer, not the transport that called us.
            log.exception("browser MCP: %s failed for session %s", method, self.session_id)
            return error_message(request_id, LocalRpcError(INTERNAL_ERROR, f"Internal error in {method}"))
        if result is None:
            return None
        return result_message(request_id, result)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self._unsubscribe()
        self._closing.set()  # listen streams end gracefully, with their result
        for key, call in list(self._running.items()):
            if key not in self._subscribers:
                call.stop()

    @property
    def running_calls(self) -> int:
        return len(self._running)

    # -- notifications from the client ------------------------------------------------------------------

    def _notification(self, method: str, params: Any) -> None:
        if method == "notifications/initialized":
            self.initialized = True
        elif method == "notifications/cancelled" and isinstance(params, dict):
            call = self._running.get(id_key(params.get("requestId")))
            if call is not None:
                call.stop(EXPLICIT_CANCEL)  # the journal cancels the step at once, not after the window

    # -- requests ---------------------------------------------------------------------------------------

    async def _request(
        self, request_id: RequestId, method: str, params: JsonObject, stateless: str | None, progress: Send | None
    ) -> JsonObject | None:
        if self.closed:
            raise LocalRpcError(INVALID_REQUEST, "This MCP session is closed: connect (initialize) again")
        if stateless is not None and stateless != STATELESS_VERSION:
            raise LocalRpcError(
                UNSUPPORTED_PROTOCOL_VERSION,
                f"Unsupported protocol version {stateless!r}",
                {"supported": [*HANDSHAKE_VERSIONS, STATELESS_VERSION], "requested": stateless},
            )
        if method == "initialize":
            return self._initialize(params)
        if method == "ping":
            return self._complete({}, stateless)
        if method == "server/discover":
            return self._discover()
        if method == "tools/list":
            return self._complete(await self._list_tools(params), stateless, listing=True)
        if method == "tools/call":
            result = await self._run(request_id, self._call_tool(params, progress or self._send))
            return None if result is None else self._complete(result, stateless)
        if method == "subscriptions/listen" and stateless is not None:
            return await self._run(request_id, self._listen(request_id, params, progress or self._send))
        raise LocalRpcError(METHOD_NOT_FOUND, f"Method not found: {method}")

    def _initialize(self, params: JsonObject) -> JsonObject:
        requested = params.get("protocolVersion")
        # Echo a version we speak; otherwise offer our latest and let the client decide (MCP lifecycle).
        version = requested if requested in HANDSHAKE_VERSIONS else LATEST_HANDSHAKE_VERSION
        self.protocol_version = version
        return {
            "protocolVersion": version,
            "capabilities": {"tools": {"listChanged": True}},
            "serverInfo": self._server_info(),
            "instructions": INSTRUCTIONS,
        }

    def _discover(self) -> JsonObject:
        self.protocol_version = STATELESS_VERSION
        return {
            "resultType": "complete",
            # Only stateless versions: a dual-era client that sees none falls back to initialize anyway.
            "supportedVersions": [STATELESS_VERSION],
            "capabilities": {"tools": {"listChanged": True}},
            "instructions": INSTRUCTIONS,
            "ttlMs": 0,
            "cacheScope": "private",
            "_meta": {META_SERVER_INFO: self._server_info()},
        }

    def _server_info(self) -> JsonObject:
        return {"name": SERVER_NAME, "title": "openab browser", "version": self._server_version}

    def _complete(self, result: JsonObject, stateless: str | None, *, listing: bool = False) -> JsonObject:
        """Add what a 2026-07-28 result must carry; handshake-era results go out as they are."""
        if stateless is None:
            return result
        out = dict(result)
        out.setdefault("resultType", "complete")
        if listing:
            out.setdefault("ttlMs", 0)  # the tool set follows the browser: never cache it
            out.setdefault("cacheScope", "private")
        meta = dict(out.get("_meta") or {})
        meta.setdefault(META_SERVER_INFO, self._server_info())
        out["_meta"] = meta
        return out

    # -- tools/list -------------------------------------------------------------------------------------

    async def _list_tools(self, params: JsonObject) -> JsonObject:
        if params.get("cursor") is not None:
            raise LocalRpcError(INVALID_PARAMS, "Invalid cursor: this server lists every tool on one page")
        return {"tools": await self._current_tools()}

    async def _current_tools(self) -> list[JsonObject]:
        """The tools as the agent sees them, refreshing the name map on the way."""
        try:
            browser_tools = await self.registry.list_tools(self.session_id)
        except BrowserNotConnected:
            browser_tools = list(BROWSER_TOOLS)
        except OpenabError as exc:  # the tunnel failed, or the browser answered with an error
            log.warning("tools/list for session %s fell back to the known tools: %s", self.session_id, exc)
            browser_tools = list(BROWSER_TOOLS)
        names: dict[str, str] = {}
        tools: list[JsonObject] = []
        for tool in browser_tools:
            original = tool.get("name")
            exposed = exposed_name(original) if isinstance(original, str) else None
            if exposed is None or not isinstance(original, str):
                log.warning("browser tool %r dropped: no valid MCP tool name can stand for it", original)
                continue
            if exposed in names:
                log.warning("browser tool %r dropped: %r already stands for %r", original, exposed, names[exposed])
                continue
            names[exposed] = original
            tools.append(tool if exposed == original else {**tool, "name": exposed})
        self._names = names
        return tools

    async def _browser_name(self, exposed: str) -> str:
        if exposed not in self._names:
            await self._current_tools()
        original = self._names.get(exposed)
        if original is not None:
            return original
        raise LocalRpcError(
            INVALID_PARAMS, f"Unknown tool: {exposed}. Available: {', '.join(sorted(self._names)) or 'none'}"
        )

    # -- tools/call -------------------------------------------------------------------------------------

    async def _run(self, request_id: RequestId, work: Coroutine[Any, Any, JsonObject]) -> JsonObject | None:
        """Run a long request (a tool call, a listen stream) so that it can be stopped by id.

        It runs in the caller's task, in a :class:`StopScope`: ``notifications/cancelled`` (and :meth:`close`)
        stop it without cancelling the caller, which then answers nothing; a cancel of the caller itself (its
        transport closed) reaches the call as it is, and stops the browser too."""
        key = id_key(request_id)
        if key in self._running or len(self._running) >= self.limits.max_running_calls:
            work.close()
            if key in self._running:
                raise LocalRpcError(INVALID_REQUEST, f"Invalid Request: id {request_id!r} is already in use")
            raise LocalRpcError(
                SERVER_OVERLOADED, f"Too many tool calls in flight (max {self.limits.max_running_calls})"
            )
        async with StopScope() as call:
            self._running[key] = call
            try:
                return await work
            finally:
                self._running.pop(key, None)
        return None  # stopped by the client (or this server closed): no answer

    async def _call_tool(self, params: JsonObject, progress: Send | None) -> JsonObject:
        """One ``tools/call``: a state-changing one through the journal, a read straight to the browser."""
        journal = self.journal
        if journal is None:
            return (await self._call_recorded(params, progress, None))[0]
        name = params.get("name")
        # A name neither the catalogue nor the browser knows is refused before any step could start.
        if journal.journals(name, params.get("arguments")) and (name in STATIC_NAMES or name in self._names):
            result = await journal.call(
                self.session_id, params,
                lambda forwarded, action, earlier: self._call_recorded(forwarded, progress, action, earlier),
            )
        else:
            journal.read(self.session_id)
            result = (await self._call_recorded(params, progress, None))[0]
        untold = journal.untold_text(self.session_id)  # steps a restart left unfinished open the next result
        if untold is not None:
            result = {**result, "content": [{"type": "text", "text": untold}, *result.get("content", [])]}
        return result

    async def _call_recorded(
        self, params: JsonObject, progress: Send | None, action: str | None, earlier: JsonObject | None = None
    ) -> tuple[JsonObject, Ended]:
        """One call to the browser (a journalled step's when ``action``), recorded in the audit log however it
        ends (cancelled included); returns its result and how it ended (the journal tells a lost answer apart)."""
        started = time.monotonic()
        ended: Ended = None
        file: dict[str, Any] = {}  # a file call's {"name", "size", "sha256"}, for its record
        try:
            try:
                result = await self._call_browser(params, progress, file, action, earlier)
            except TunnelError as exc:  # BrowserNotConnected too: the audit keeps why, the agent gets a result
                ended = exc
                return _lost_call(str(params.get("name")), exc), exc
            ended = result
            return result, result
        except BaseException as exc:
            ended = exc
            raise
        finally:
            if self.audit is not None:
                self.audit.tool_call(self.session_id, params, ended, time.monotonic() - started, file=file or None,
                                     action=action)

    async def _call_browser(
        self, params: JsonObject, progress: Send | None, file: dict[str, Any], action: str | None,
        earlier: JsonObject | None = None,
    ) -> JsonObject:
        name = params.get("name")
        if not isinstance(name, str) or not name:
            raise LocalRpcError(INVALID_PARAMS, "tools/call needs a tool `name`")
        arguments = params.get("arguments")
        if arguments is not None and not isinstance(arguments, dict):
            raise LocalRpcError(INVALID_PARAMS, "tools/call `arguments` must be an object")
        if not self.registry.attached(self.session_id):
            if name in STATIC_NAMES or name in self._names:
                return _tool_failure(BROWSER_NOT_CONNECTED)
            raise LocalRpcError(INVALID_PARAMS, f"Unknown tool: {name}")
        original = await self._browser_name(name)
        meta, on_progress = self._progress_route(params, progress)
        if action is not None:  # the browser echoes it and never runs the same action twice (docs/journal.md)
            meta = {**(meta or {}), META_ACTION: action, **({META_EARLIER: earlier} if earlier else {})}

        async def send(forwarded: Any) -> Any:
            return await self.registry.call_tool(
                self.session_id, original, forwarded, meta=meta, progress=on_progress, timeout=self.limits.call_timeout,
            )

        if self.files is not None and name in FILE_TOOLS:
            call = FileCall(self.files, self.session_id, name)
            try:
                result = await call.run(arguments, send)
            finally:
                file.update(call.audit or {})
        else:
            result = await send(arguments)
        if not isinstance(result, dict) or not isinstance(result.get("content"), list):
            raise LocalRpcError(
                INTERNAL_ERROR, f"The browser answered {name} with a malformed result (no content list)"
            )
        return bound_result(result, name, self.limits.max_text_chars)

    def _progress_route(self, params: JsonObject, progress: Send | None) -> tuple[JsonObject | None, Any]:
        """The ``_meta`` to forward and the progress callback, restoring the agent's own token on the way back."""
        meta = params.get("_meta")
        if not isinstance(meta, dict):
            return None, None
        token = meta.get("progressToken")
        # Our own keys are the pod's to give: an agent's action id would replay another step's recorded outcome,
        # its "earlier" step would put its words on the person's card.
        forwarded = {k: v for k, v in meta.items() if not k.startswith((META_SPEC_PREFIX, META_PREFIX))}
        forwarded.pop("progressToken", None)
        if token is None or progress is None:
            return forwarded or None, None
        # Two agents may both pick token 1: the browser sees a token unique in the pod.
        forwarded["progressToken"] = f"openab-progress-{uuid.uuid4().hex}"
        sink = progress

        def on_progress(inner: JsonObject) -> None:
            sink(notification_message("notifications/progress", {**inner, "progressToken": token}))

        return forwarded, on_progress

    # -- list_changed -----------------------------------------------------------------------------------

    async def _listen(self, request_id: RequestId, params: JsonObject, sink: Send | None) -> JsonObject:
        """2026-07-28 ``subscriptions/listen``: the one way a stateless client hears that the tools changed."""
        if sink is None:
            raise LocalRpcError(INVALID_REQUEST, "subscriptions/listen needs a stream to send on")
        wanted = params.get("notifications")
        honored = {"toolsListChanged": True} if isinstance(wanted, dict) and wanted.get("toolsListChanged") else {}
        meta = {META_SUBSCRIPTION_ID: request_id}
        sink(notification_message("notifications/subscriptions/acknowledged",
                                  {"notifications": honored, "_meta": meta}))
        key = id_key(request_id)
        changed = notification_message("notifications/tools/list_changed", {"_meta": meta})
        self._subscribers[key] = (lambda: sink(changed)) if honored else (lambda: None)
        try:
            await self._closing.wait()
        finally:
            self._subscribers.pop(key, None)
        return {"resultType": "complete", "_meta": meta}  # the graceful end: this server is closing

    def _on_tunnel_event(self, event: TunnelEvent) -> None:
        if event.session_id != self.session_id or self.closed:
            return
        self._names = {}  # another browser, or other tools: map names afresh on the next call
        for notify in list(self._subscribers.values()):
            notify()
        if self._send is None or not self.initialized:
            return  # a client hears nothing before `initialized`; a stateless one has no channel for it
        self._send(notification_message("notifications/tools/list_changed"))


def bound_result(result: JsonObject, tool: str, max_chars: int) -> JsonObject:
    """``result`` with its text cut to ``max_chars`` characters in all, and a marker saying how to get the rest.

    Image and audio blocks are never cut: the browser already bounds them and a cut image is useless. The
    result is returned as it is (not copied) when it is within the bound.
    """
    content: list[Any] = result["content"]
    total = sum(len(_text_of(block) or "") for block in content)
    if total <= max_chars:
        return result
    budget = max_chars
    bounded: list[Any] = []
    cut_at: int | None = None
    for block in content:
        text = _text_of(block)
        if text is None:
            bounded.append(block)
            continue
        if len(text) <= budget:
            bounded.append(block)
            budget -= len(text)
            continue
        if cut_at is None:
            cut_at = len(bounded)
            bounded.append(_with_text(block, text[:budget]))
        budget = 0
    assert cut_at is not None
    shown = max_chars
    marker = (
        f"\n\n[openab: output truncated: {total - shown} of {total} characters were left out (results are "
        f"limited to {max_chars} characters). To get the rest, call {tool} again with a smaller max_chars and "
        f"an offset to page through it, or narrow it with a selector or ref.]"
    )
    cut_block = bounded[cut_at]
    bounded[cut_at] = _with_text(cut_block, (_text_of(cut_block) or "") + marker)
    out = {**result, "content": bounded}
    meta = dict(result.get("_meta") or {})
    meta[META_TRUNCATED] = {"shownChars": shown, "totalChars": total}
    out["_meta"] = meta
    return out


def _text_of(block: Any) -> str | None:
    if not isinstance(block, dict):
        return None
    if block.get("type") == "text" and isinstance(block.get("text"), str):
        return str(block["text"])
    resource = block.get("resource")
    if block.get("type") == "resource" and isinstance(resource, dict) and isinstance(resource.get("text"), str):
        return str(resource["text"])
    return None


def _with_text(block: JsonObject, text: str) -> JsonObject:
    if block.get("type") == "resource":
        return {**block, "resource": {**block["resource"], "text": text}}
    return {**block, "text": text}


