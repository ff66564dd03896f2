"""The MCP protocol's words as openab uses them, each said once: revisions, ``_meta`` keys, HTTP header names,
error codes, and the name our browser server goes by.

The revisions are the browser tool catalogue's (``extension/catalogue.json``, read by :mod:`.catalogue`),
which the extension's MCP server (``extension/lib/mcp.js``) reads too: one list for both ends.
"""

from __future__ import annotations

from typing import Final

from . import META_PREFIX
from .catalogue import catalogue
from .protocol_file import META

__all__ = [
    "HANDSHAKE_VERSIONS",
    "HEADER_MISMATCH",
    "LATEST_HANDSHAKE_VERSION",
    "META_ACTION",
    "META_CLIENT_CAPABILITIES",
    "META_CLIENT_INFO",
    "META_DOWNLOAD",
    "META_EARLIER",
    "META_GUARD",
    "META_GUARD_RULE",
    "META_RECEIPT",
    "META_SERVER_INFO",
    "META_SPEC_PREFIX",
    "META_SUBSCRIPTION_ID",
    "META_TRUNCATED",
    "META_VERSION",
    "PROTOCOL_VERSION_HEADER",
    "REQUESTED_HANDSHAKE_VERSION",
    "SERVER_NAME",
    "SESSION_ID_HEADER",
    "STATELESS_VERSION",
    "UNSUPPORTED_PROTOCOL_VERSION",
]

# The name agents see our server by: their tool names become mcp__openab_browser__<tool> and the like.
SERVER_NAME: Final = "openab_browser"

# Handshake-era revisions (``initialize`` negotiates one), oldest first.
HANDSHAKE_VERSIONS: Final = catalogue().handshake_versions
LATEST_HANDSHAKE_VERSION: Final = HANDSHAKE_VERSIONS[-1]
# What our own MCP clients ask for (the tunnel toward the extension, the built-in agent): the revision every
# peer we met speaks, and what the extension answers when asked for one it does not know.
REQUESTED_HANDSHAKE_VERSION: Final = catalogue().requested_handshake_version
# The stateless revision: no ``initialize``, the version travels in each request's ``_meta``.
STATELESS_VERSION: Final = catalogue().stateless_version

META_SPEC_PREFIX: Final = "io.modelcontextprotocol/"
META_VERSION: Final = META_SPEC_PREFIX + "protocolVersion"
META_SERVER_INFO: Final = META_SPEC_PREFIX + "serverInfo"
META_CLIENT_INFO: Final = META_SPEC_PREFIX + "clientInfo"
META_CLIENT_CAPABILITIES: Final = META_SPEC_PREFIX + "clientCapabilities"
META_SUBSCRIPTION_ID: Final = META_SPEC_PREFIX + "subscriptionId"
# Ours: a text result cut to its bound carries {"shownChars", "totalChars"} here.
META_TRUNCATED: Final = META_PREFIX + "truncated"
# Ours, on a tunnelled step that ``repeat`` runs over a step that may already have happened (docs/journal.md):
# {"action", "tool", "at", "why"} of that earlier step, so the person is asked on a card that names it.
META_EARLIER: Final = META["earlier"]
# Ours: what the extension's guard decided for a tool call ("allowed", "asked-allowed", "denied"), on its result.
META_GUARD: Final = META["guard"]
# Ours: the rule that made that decision, a word of a fixed vocabulary ("routine", "site-rule-never",
# "risky-word:<risk>", ...), beside it on the result; the audit log keeps it (validated: it comes from the browser).
META_GUARD_RULE: Final = META["guardRule"]
# Ours: what the browser downloaded ({"name", "size", "sha256", "type", "url"}), on browser_download's result.
META_DOWNLOAD: Final = META["download"]
# Ours (docs/journal.md): a state-changing step's action id, on the tunnelled call and echoed on its result.
META_ACTION: Final = META["action"]
# Ours: what a committed state-changing step changed ({"url_before", "url_after", "element", "delta", ...}).
META_RECEIPT: Final = META["receipt"]
# Ours: on an ``isError`` result of a step the browser began but cannot say the end of (the page went to another
# page under it): "effect_unknown", the journal's own word, so the step is held as one that may have happened.
META_OUTCOME: Final = META["outcome"]

# Streamable HTTP headers, lower-case as ASGI gives them.
SESSION_ID_HEADER: Final = "mcp-session-id"
PROTOCOL_VERSION_HEADER: Final = "mcp-protocol-version"

# 2026-07-28 error codes (the spec reserves -32020...-32099).
HEADER_MISMATCH: Final = -32020
UNSUPPORTED_PROTOCOL_VERSION: Final = -32022
