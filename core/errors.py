"""Every exception openab raises on purpose, rooted in :class:`OpenabError`.

Shaped like httpx's: a caller catches one class, not a tuple. A timeout is also a builtin ``TimeoutError`` and
a lost peer also a ``ConnectionError``, so code that knows nothing of openab still reads them right; a failure
that callers tell apart carries a typed reason (an enum), never a string to match.

Where each is raised::

    OpenabError
    ├── TransportError                     a JSON-RPC request got no answer:
    │   ├── RequestTimeout (TimeoutError)  not in time
    │   └── ConnectionClosed (ConnectionError)  the peer went away first
    ├── Overloaded                         a bound was reached; retry when load drops
    │   ├── TooManyPendingRequests         unanswered requests on one connection
    │   └── TooManySessions                sessions in one pod
    ├── ConfigurationError (ValueError)    settings the pod refuses to start with
    ├── InstallationError                  openab's own shipped files are missing or damaged
    ├── ConfigError                        an agent CLI's MCP config file we cannot read or write
    │   └── ConfigConflict                 that file already holds another live session's entry
    ├── AgentExited                        the agent process ended (or never started)
    │   └── AgentNotFound                  its command is not installed
    ├── PermissionUnavailable              nobody can answer a permission request
    ├── TunnelError                        a browser tunnel could not carry a call (``reason``: TunnelFailure)
    │   └── BrowserNotConnected            the session has no browser attached
    ├── BridgeError                        the bridge socket cannot be served
    │   └── AncestryError                  a relay's process ancestry names no single session
    └── FileRefused                        a file call (upload, download) refused or failed, in words for the agent
        └── TransferInvalid                a chunk request names no open transfer of its session, or breaks a rule

:class:`openab_browser.core.jsonrpc.RpcError`, a JSON-RPC error object, is an ``OpenabError`` too, in two kinds
(:mod:`openab_browser.core.jsonrpc.errors`): ``LocalRpcError``, what our side answers with, and ``RemoteRpcError``,
what a peer answered us with.
"""

from __future__ import annotations

import enum

__all__ = [
    "AgentExited",
    "AgentNotFound",
    "AncestryError",
    "BridgeError",
    "BrowserNotConnected",
    "ConfigConflict",
    "ConfigError",
    "ConfigurationError",
    "ConnectionClosed",
    "FileRefused",
    "InstallationError",
    "OpenabError",
    "Overloaded",
    "PermissionUnavailable",
    "RequestTimeout",
    "TooManyPendingRequests",
    "TooManySessions",
    "TransferInvalid",
    "TransportError",
    "TunnelError",
    "TunnelFailure",
]


class OpenabError(Exception):
    """The root: everything openab raises on purpose."""


class TransportError(OpenabError):
    """A request got no answer, and the peer may or may not have acted on it."""


class RequestTimeout(TransportError, TimeoutError):
    """No answer came in time. ``request_id`` is the abandoned id, for cancel notifications."""

    def __init__(self, method: str, request_id: int, timeout: float) -> None:
        super().__init__(f"{method} got no answer within {timeout:g} s")
        self.method = method
        self.request_id = request_id
        self.timeout = timeout


class ConnectionClosed(TransportError, ConnectionError):
    """The connection ended before the answer came."""


class Overloaded(OpenabError):
    """A bound was reached. Nothing was done; the same call may succeed when load drops."""


class TooManyPendingRequests(Overloaded):
    """Raised by ``Peer.send_request`` when the bound on unanswered requests is reached."""


class TooManySessions(Overloaded):
    """The pod holds as many sessions as it may."""


class ConfigurationError(OpenabError, ValueError):
    """Settings the pod refuses to start with; the message says which and what to change."""


class InstallationError(OpenabError):
    """A file openab ships with (the browser tool catalogue) is missing or unreadable: reinstall openab."""


class ConfigError(OpenabError):
    """An agent CLI's MCP config file could not be read, parsed or written; nothing was changed."""


class ConfigConflict(ConfigError):
    """The config file already holds another live session's entry: give each session's agent its own
    working directory (and home)."""


class AgentExited(OpenabError):
    """The agent process ended, or could not be started."""


class AgentNotFound(AgentExited):
    """The agent's command is not installed (or not on ``PATH``)."""


class PermissionUnavailable(OpenabError):
    """The extension cannot answer permission requests (it did not say it can, or its socket is gone)."""


class TunnelFailure(enum.Enum):
    """Why a browser tunnel failed a call; ``value`` is the words shown to the agent."""

    NOT_CONNECTED = "browser not connected"
    DISCONNECTED = "browser disconnected"
    TIMED_OUT = "timed out"
    OVERLOADED = "too many calls in flight"
    SHUTTING_DOWN = "shutting down"
    HANDSHAKE = "handshake failed"
    MALFORMED = "malformed answer"


class TunnelError(OpenabError):
    """The tunnel could not carry a request. The message names the server and the session.

    ``reason`` is the typed cause; ``detail`` the human text. A timeout is also raised as a ``TimeoutError``
    and a lost browser as a ``ConnectionError`` (see :meth:`build`).
    """

    def __init__(self, detail: str, *, reason: TunnelFailure, session_id: str, server: str) -> None:
        super().__init__(f"{detail} (browser server {server!r}, session {session_id})")
        self.reason = reason
        self.detail = detail
        self.session_id = session_id
        self.server = server

    @classmethod
    def build(cls, detail: str, *, reason: TunnelFailure, session_id: str, server: str) -> TunnelError:
        """The error for ``reason``: one that is also a ``TimeoutError`` or ``ConnectionError`` where it is one."""
        kind = {
            TunnelFailure.TIMED_OUT: _TunnelTimeout,
            TunnelFailure.DISCONNECTED: _TunnelClosed,
            TunnelFailure.NOT_CONNECTED: BrowserNotConnected,
        }.get(reason, cls)
        return kind(detail, reason=reason, session_id=session_id, server=server)


class _TunnelTimeout(TunnelError, TimeoutError):
    pass


class _TunnelClosed(TunnelError, ConnectionError):
    pass


class BrowserNotConnected(TunnelError, ConnectionError):
    """The session has no browser attached: the person has not opened the openab side panel."""


class BridgeError(OpenabError):
    """The bridge's Unix socket cannot be served (its folder or file is unsafe, or in use)."""


class AncestryError(BridgeError):
    """A relay's process ancestry names no session, or more than one."""


class FileRefused(OpenabError):
    """A file carried across the gap (``browser_upload``, ``browser_download``) was refused or failed: a path rule,
    a cap, a digest that did not match. The message is meant for the agent: it says what to do instead."""


class TransferInvalid(FileRefused):
    """A ``_openab/file/read`` or ``write`` names no open transfer of its session, of that direction, or breaks a
    rule of the transfer (an offset out of order, a chunk too large, a write past the cap)."""
