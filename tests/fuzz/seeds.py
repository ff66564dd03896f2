"""Seed inputs and libFuzzer dictionaries for the atheris harnesses: well-formed messages of each surface, so
coverage-guided mutation starts inside JSON-RPC rather than rediscovering JSON byte by byte."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

_ENVELOPE = ['"jsonrpc"', '"2.0"', '"id"', '"method"', '"params"', '"result"', '"error"', '"code"', '"message"',
             "null", "true", "false", "{}", "[]", "-32600", "1e400", "18446744073709551616", '"\\ud800"', "NaN"]


def _request(request_id: Any, method: str, params: Any = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return message


ACP = [
    _request(1, "initialize", {"protocolVersion": 1, "clientCapabilities": {}}),
    _request(2, "session/new", {"cwd": "/", "mcpServers": [{"type": "acp", "name": "browser", "id": "b"}]}),
    _request("3", "session/prompt", {"sessionId": "sess_x", "prompt": [{"type": "text", "text": "hi"}]}),
    _request(4, "session/resume", {"sessionId": "sess_x", "cwd": "/", "mcpServers": []}),
    _request(5, "session/close", {"sessionId": "sess_x"}),
    {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "sess_x"}},
    {"jsonrpc": "2.0", "method": "mcp/message", "params": {"connectionId": "c", "method": "notifications/x"}},
    {"jsonrpc": "2.0", "id": 1, "result": {"connectionId": "c"}},
    {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": 1}},
]
ACP_WORDS = ["initialize", "session/new", "session/resume", "session/prompt", "session/close", "session/cancel",
             "mcp/message", "mcp/connect", '"sessionId"', '"mcpServers"', '"cwd"', '"protocolVersion"',
             '"prompt"', '"type"', '"acp"', '"text"', '"resource_link"', '"serverId"', '"connectionId"', '"_meta"']

MCP = [
    _request(1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "x"}}),
    _request(2, "tools/list"),
    _request(3, "tools/call", {"name": "browser_echo", "arguments": {"a": 1}}),
    _request("4", "ping"),
    _request(5, "server/discover", {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}),
    _request(6, "tools/call", {"name": "browser_click", "arguments": {},
                               "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                                         "progressToken": 1}}),
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 3}},
]
MCP_WORDS = ["initialize", "tools/list", "tools/call", "ping", "server/discover", "subscriptions/listen",
             "notifications/initialized", "notifications/cancelled", '"name"', '"arguments"', '"_meta"',
             '"io.modelcontextprotocol/protocolVersion"', '"2026-07-28"', '"2025-06-18"', '"progressToken"',
             '"channel_id"', '"requestId"', '"cursor"']


def write_corpus(
    folder: Path, messages: list[dict[str, Any]], words: list[str], *, suffix: bytes = b""
) -> tuple[Path, Path]:
    """A corpus folder of one seed per file (each message, then ``suffix``), and a libFuzzer dictionary file."""
    corpus = folder / "corpus"
    corpus.mkdir(parents=True, exist_ok=True)
    for number, message in enumerate(messages):
        (corpus / f"seed-{number}").write_bytes(json.dumps(message).encode() + suffix)
    dictionary = folder / "words.dict"
    dictionary.write_text("".join(f"{json.dumps(word)}\n" for word in _ENVELOPE + words))
    return corpus, dictionary
