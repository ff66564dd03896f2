"""A ``browser_upload`` or ``browser_download`` call as the pod's MCP server runs it (docs/files.md).

:class:`FileCall` is what :class:`openab_browser.core.mcp.server.BrowserMcp` hands such a call to: it checks the agent's
arguments, opens the transfer, rewrites the arguments the browser gets (the pod's ``file`` object in, the agent's
``path`` and any ``file`` of its own out), sends the call through the function it is given, and finishes it: an
upload's result passes as the browser gave it; a download is checked against the browser's word and moved into
place, and the agent gets the pod's own text. The transfer ends with the call, however the call ends.

While the browser works, the call also watches its transfer: one that fails on the browser's side (a write past
its cap, a gap between chunks past the idle timeout, a file that changed) cancels the call in the browser and
ends it with that reason. Every refusal and failure is an ``isError`` result that says what to do.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

from ..errors import FileRefused
from ..mcp_vocabulary import META_DOWNLOAD
from .transfers import FRAME_VERSION, WINDOW, Direction, Transfer, Transfers

__all__ = ["DOWNLOAD_TOOL", "FILE_TOOLS", "UPLOAD_TOOL", "FileCall", "Send"]

UPLOAD_TOOL: Final = "browser_upload"
DOWNLOAD_TOOL: Final = "browser_download"
FILE_TOOLS: Final = frozenset({UPLOAD_TOOL, DOWNLOAD_TOOL})
# Never sent on: the browser has no use for a path in the pod, and only the pod sets `file`.
_POD_ONLY: Final = ("path", "file")
_MAX_URL_CHARS: Final = 8192
_CANCEL_WAIT: Final = 5.0
_MAX_NAME_SHOWN: Final = 200
# What the pod takes beside JSON chunks (docs/files.md): binary frames of this version, this many chunks in flight.
# An extension that knows neither ignores them and moves the file in JSON, one chunk at a time.
_OFFER: Final = {"frames": FRAME_VERSION, "window": WINDOW}

Send = Callable[[dict[str, Any]], Awaitable[Any]]
"""Sends the call down the tunnel with the arguments given; returns the browser's result as it came."""


def _failure(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": True}


def _string(arguments: Mapping[str, Any], key: str, *, required: bool, what: str) -> str | None:
    value = arguments.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value:
        raise FileRefused(f"`{key}` must be {what}")
    return value


class FileCall:
    """One file call of one session. ``audit`` holds ``{"name", "size", "sha256"}`` once the file is known (an
    upload's when opened, a download's once placed): the audit record names it, never its content."""

    def __init__(self, transfers: Transfers, session_id: str, tool: str) -> None:
        if tool not in FILE_TOOLS:
            raise ValueError(f"{tool} is not a file tool")
        self.transfers = transfers
        self.session_id = session_id
        self.tool = tool
        self.audit: dict[str, Any] | None = None

    async def run(self, arguments: Mapping[str, Any] | None, send: Send) -> Any:
        """The call's result: the browser's (an upload, or any ``isError`` of the browser), the pod's own text
        (a finished download), or an ``isError`` result saying why it was refused or failed. A :class:`TunnelError`
        or JSON-RPC error of the tunnel propagates, once the transfer has ended."""
        try:
            transfer, forwarded = await self._prepare(dict(arguments or {}))
        except FileRefused as exc:
            return _failure(f"{self.tool} was not run: {exc}.")
        try:
            result = await self._watched(transfer, send(forwarded))
            return self._finish(transfer, result)
        except FileRefused as exc:
            return _failure(f"{self.tool} failed: {exc}.")
        finally:
            self.transfers.end(transfer)

    # -- before ------------------------------------------------------------------------------------------------

    async def _prepare(self, arguments: dict[str, Any]) -> tuple[Transfer, dict[str, Any]]:
        forwarded = {k: v for k, v in arguments.items() if k not in _POD_ONLY}
        if self.tool == UPLOAD_TOOL:
            _string(arguments, "ref", required=True, what="the ref of a file field or drop zone, from browser_snapshot")
            path = _string(arguments, "path", required=True,
                           what="the file's path in your working folder, relative to it (e.g. report.pdf)")
            assert path is not None
            transfer = await self.transfers.open_upload(self.session_id, path)
            forwarded["file"] = {"transfer": transfer.id, "name": transfer.name, "size": transfer.size,
                                 "sha256": transfer.sha256, "type": transfer.type, **_OFFER}
            self.audit = {"name": transfer.name, "size": transfer.size, "sha256": transfer.sha256}
            return transfer, forwarded
        ref = _string(arguments, "ref", required=False, what="the ref of a link, from browser_snapshot")
        url = _string(arguments, "url", required=False, what="an http or https address")
        if ref is not None and url is not None:
            raise FileRefused("give `ref` or `url`, not both")
        if url is not None and (len(url) > _MAX_URL_CHARS or url.split(":", 1)[0].lower() not in ("http", "https")
                                or any(ord(c) < 32 or ord(c) == 127 for c in url)):
            raise FileRefused("`url` must be an http or https address (no file:, data: or other schemes)")
        path = _string(arguments, "path", required=False,
                       what="the name to write in your working folder, relative to it (e.g. invoice.pdf)")
        transfer = self.transfers.open_download(self.session_id, path)
        forwarded["file"] = {"transfer": transfer.id, "max_bytes": transfer.size, **_OFFER}
        return transfer, forwarded

    # -- while the browser works ---------------------------------------------------------------------------------

    async def _watched(self, transfer: Transfer, sending: Awaitable[Any]) -> Any:
        """The browser's answer, unless the transfer fails first: then the call is cancelled in the browser."""
        call = asyncio.ensure_future(sending)
        failed = asyncio.ensure_future(transfer.failed.wait())
        try:
            while True:
                # No idle clock before the first chunk (the person may be deciding): the call's timeout bounds
                # that. After it, wake when the transfer would be idle too long.
                left = self.transfers.idle_left(transfer)
                wait = self.transfers.limits.idle_timeout if left is None else max(left, 0.0)
                await asyncio.wait({call, failed}, timeout=wait, return_when=asyncio.FIRST_COMPLETED)
                if transfer.failure is not None:
                    raise FileRefused(transfer.failure)
                if call.done():
                    return call.result()
                if self.transfers.check_idle(transfer):
                    raise FileRefused(transfer.failure or "the transfer failed")
        finally:
            failed.cancel()
            if not call.done():
                call.cancel()  # the tunnel tells the browser (mcp/cancel)
                await asyncio.wait({call}, timeout=_CANCEL_WAIT)
            if call.done() and not call.cancelled():
                call.exception()  # retrieved: a failed call after a failed transfer is not "never retrieved"

    # -- after -------------------------------------------------------------------------------------------------

    def _finish(self, transfer: Transfer, result: Any) -> Any:
        if transfer.direction is Direction.UPLOAD or not isinstance(result, dict) or result.get("isError") is True:
            return result  # the browser's own words; an unfinished download is removed as the transfer ends
        meta = result.get("_meta")
        reported = meta.get(META_DOWNLOAD) if isinstance(meta, dict) else None
        if not isinstance(reported, dict):
            raise FileRefused(f"the browser did not say what it downloaded (no _meta {META_DOWNLOAD!r}), so nothing "
                              "was kept; the side panel may be older than this pod: update the extension")
        placed = self.transfers.finish_download(transfer, reported)
        self.audit = {"name": placed.path, "size": placed.size, "sha256": placed.sha256}
        source = f" from {placed.url}" if placed.url else ""
        text = (f"Downloaded{source} to {placed.path} in your working folder: {placed.size} bytes, sha256 "
                f"{placed.sha256}, type {placed.type}.")
        if placed.renamed_from is not None:
            # The page's words, quoted and escaped: the name is the page's choice, never openab's.
            text += (f" The server named it {json.dumps(placed.renamed_from[:_MAX_NAME_SHOWN])}; a page chooses that "
                     "name, so it lands renamed: no folders, no dot or space first, never a name agent CLIs or "
                     "tools read as instructions or config.")
        text += " Read it there with your own tools."
        out: dict[str, Any] = {"content": [{"type": "text", "text": text}]}
        kept = {k: v for k, v in meta.items() if k != META_DOWNLOAD} if isinstance(meta, dict) else {}
        if kept:
            out["_meta"] = kept  # the guard's decision, for the audit record
        return out
