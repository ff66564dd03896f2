"""What runs, in order: each section's checks, their names as printed, and which need a model."""

from __future__ import annotations

from .auth import key_as_header, key_as_subprotocol, key_in_query, no_key, wrong_key, wrong_key_header
from .client import Check
from .edge_cases import (
    cancel_is_silent,
    cancel_with_id,
    new_before_initialize,
    new_without_cwd,
    not_json,
    object_id,
    oversized_reply,
    prompt_image,
    prompt_resource_link,
    resume_without_id,
    unicode_intact,
    version_high,
    version_missing,
    version_zero,
    wrong_jsonrpc,
)
from .lifecycle import cancel_running_prompt, foreign_session, resume_elsewhere
from .limits import frame_over_limit, id_too_long, nested_too_deep, request_over_limit, too_many_servers
from .protocol import initialize_shape, prompt_pong, session_close, session_new, session_resume, unknown_method
from .tunnel import tunnel_handshake, tunnel_mixed, tunnel_refused_connect, tunnel_single, tunnel_two

SECTIONS: list[tuple[str, list[tuple[str, Check, bool]]]] = [
    ("Transport / Auth", [
        ("no key", no_key, False),
        ("wrong key (subprotocol)", wrong_key, False),
        ("wrong key (Authorization header)", wrong_key_header, False),
        ("key only in the query string", key_in_query, False),
        ("key as subprotocol openab.bearer.<key>", key_as_subprotocol, False),
        ("key as Authorization: Bearer", key_as_header, False),
    ]),
    ("Protocol", [
        ("initialize", initialize_shape, False),
        ("session/new", session_new, False),
        ("session/prompt streams and ends", prompt_pong, False),
        ("session/resume", session_resume, False),
        ("unknown method", unknown_method, False),
        ("session/close", session_close, False),
    ]),
    ("Edge cases", [
        ("initialize protocolVersion 5", version_high, False),
        ("initialize protocolVersion 0", version_zero, False),
        ("initialize without protocolVersion", version_missing, False),
        ("session/new before initialize", new_before_initialize, False),
        ('jsonrpc "1.0"', wrong_jsonrpc, False),
        ("id {}", object_id, False),
        ("not JSON", not_json, False),
        ("session/new without cwd", new_without_cwd, False),
        ("session/resume without sessionId", resume_without_id, False),
        ("prompt with a resource_link", prompt_resource_link, False),
        ("prompt with an image", prompt_image, False),
        ("session/cancel notification is not answered", cancel_is_silent, False),
        ("session/cancel with an id", cancel_with_id, False),
        ("a 600-line reply arrives whole", oversized_reply, True),
        ("unicode round trip", unicode_intact, True),
    ]),
    ("Limits", [
        ("frame over 8 MiB closes the socket", frame_over_limit, False),
        ("request over 1 MiB is refused, socket stays", request_over_limit, False),
        ("id over 1024 characters", id_too_long, False),
        ("nesting over 128 levels", nested_too_deep, False),
        ("more than 8 acp servers", too_many_servers, False),
    ]),
    ("Lifecycle", [
        ("session/cancel ends a running prompt", cancel_running_prompt, True),
        ("session/resume from another socket", resume_elsewhere, False),
        ("another socket's session", foreign_session, False),
    ]),
    ("MCP-over-ACP tunnel", [
        ("one acp server, one mcp/connect", tunnel_single, False),
        ("inner MCP handshake", tunnel_handshake, False),
        ("two acp servers", tunnel_two, False),
        ("acp and http servers mixed", tunnel_mixed, False),
        ("mcp/connect refused", tunnel_refused_connect, False),
    ]),
]


# The built-in agent quotes a request it cannot follow, so an exact echo passes through it too: against a default
# pod this still checks that the ingress keeps UTF-8 intact.
QUOTED_BY_BUILTIN: frozenset[Check] = frozenset({unicode_intact})
