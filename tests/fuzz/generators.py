"""Hypothesis strategies for hostile JSON-RPC text: valid envelopes with hostile members, and the JSON that
`json.dumps` cannot write (duplicate keys, NaN-ish literals, numbers past 64 bits, lone surrogates, nesting near
and past the 128-level bound and orjson's 1024, truncated documents).

A generated value is plain JSON, or one of :class:`Raw` (literal text), :class:`Pairs` (an object that may
repeat keys) and :class:`Known` (a name the surface's runner fills in at send time: a live session id, a
connection id, a channel), written by :func:`write`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st


@dataclass(frozen=True)
class Raw:
    """Literal JSON text (maybe not JSON at all), written as it is."""

    text: str


@dataclass(frozen=True)
class Pairs:
    """An object written member by member, so a key may come twice."""

    items: tuple[tuple[str, Any], ...]


@dataclass(frozen=True)
class Known:
    """A value only the running server knows (``session``, ``connection``, ``channel``...)."""

    name: str


def write(value: Any, known: Mapping[str, Any], *, ascii_only: bool = True) -> str:
    """``value`` as JSON text; :class:`Known` names missing from ``known`` are written as ``null``."""
    if isinstance(value, Raw):
        return value.text
    if isinstance(value, Known):
        return json.dumps(known.get(value.name))
    if isinstance(value, Pairs):
        members = (json.dumps(key, ensure_ascii=ascii_only) + ":" + write(item, known, ascii_only=ascii_only)
                   for key, item in value.items)
        return "{" + ",".join(members) + "}"
    if isinstance(value, dict):
        return write(Pairs(tuple(value.items())), known, ascii_only=ascii_only)
    if isinstance(value, list):
        return "[" + ",".join(write(item, known, ascii_only=ascii_only) for item in value) + "]"
    return json.dumps(value, ensure_ascii=ascii_only)


def nested(depth: int, leaf: str = "0") -> Raw:
    """Arrays ``depth`` levels deep around ``leaf``."""
    return Raw("[" * depth + leaf + "]" * depth)


# Every character, lone surrogates included (written escaped: a lone surrogate has no UTF-8).
any_text = st.text(st.characters(codec=None, categories=None), max_size=24)
short_text = st.text(max_size=8)
# Literals json.dumps never writes and JSON parsers disagree on.
odd_literals = st.sampled_from([
    "NaN", "-NaN", "Infinity", "-Infinity", "1e400", "-1e400", "1e-400", "-0", "-0.0", "0.1e1", "1E+2", "01",
    "1.", ".5", "+1", "0x10", "18446744073709551615", "18446744073709551616", "-9223372036854775809",
    "9" * 400, "true1", "nul", "tru", "'x'", '"\\ud800"', '"\\udc00\\ud800"', '"\\u0000"', '"\\uZZZZ"', '"\\x41"',
    '"\t"', "undefined", "[,]", "{,}", "[1,]", '{"a":1,}', "", " ", "\u00a0", "\ufeff0",
]).map(Raw)
huge_ints = st.sampled_from([2**31, 2**53 + 1, 2**63 - 1, 2**63, 2**64 - 1, 2**64, -(2**63) - 1, 10**30])
# Near and past the 128-level bound, and past orjson's 1024 (where the document cannot be read at all).
depths = st.sampled_from([2, 64, 126, 127, 128, 129, 130, 254, 255, 512, 1022, 1023, 1024, 1025, 1026, 4000])
deep = st.builds(nested, depths, st.sampled_from(["0", "{}", '"["', '{"a":[', ""]))
scalars = (
    st.none() | st.booleans() | st.integers() | huge_ints | st.floats() | any_text | odd_literals
)


def _objects(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return (st.dictionaries(short_text, children, max_size=4)
            | st.lists(st.tuples(st.sampled_from(["a", "id", "method", "params", "type"]) | short_text, children),
                       max_size=4).map(lambda items: Pairs(tuple(items))))


values = st.recursive(scalars | deep, lambda children: st.lists(children, max_size=4) | _objects(children),
                      max_leaves=10)
ids = (
    st.integers(-3, 3) | huge_ints | st.floats() | short_text | st.none() | st.booleans()
    | st.sampled_from(["i" * 1024, "i" * 1025, "1", "007", "²", "١"]) | odd_literals
    | st.lists(st.integers(), max_size=2) | st.dictionaries(short_text, st.integers(), max_size=1)
)


def envelopes(methods: st.SearchStrategy[Any], params: st.SearchStrategy[Any]) -> st.SearchStrategy[Pairs]:
    """Request-, notification- and answer-shaped messages: mostly well-formed, each member sometimes hostile."""
    members = st.fixed_dictionaries(
        {"method": methods},
        optional={
            "jsonrpc": st.just("2.0") | st.sampled_from(["1.0", "2", "2.0 "]) | st.integers(1, 2) | st.none(),
            "id": ids,
            "params": params,
            "result": values,
            "error": values | st.fixed_dictionaries({"code": st.integers() | values, "message": any_text}),
            "extra": values,
        },
    )

    def arrange(fields: dict[str, Any], jsonrpc: bool, request: bool, answer: bool, duplicate: str | None,
                twice: Any) -> Pairs:
        if jsonrpc:
            fields.setdefault("jsonrpc", "2.0")
        if request:
            fields.setdefault("id", 1)
        if answer:  # answer-shaped: to ids the peer never used, or to its own requests
            fields.pop("method", None)
            if "error" not in fields:
                fields.setdefault("result", {})
        else:
            fields.pop("result", None)
            fields.pop("error", None)
        items = list(fields.items())
        if duplicate is not None and duplicate in fields:
            items.append((duplicate, twice))
        return Pairs(tuple(items))

    return st.builds(
        arrange, members, st.booleans() | st.just(True), st.booleans() | st.just(True),
        st.sampled_from([False, False, False, False, True]),
        st.none() | st.sampled_from(["id", "method", "params", "jsonrpc"]), values,
    )


def weighted(common: st.SearchStrategy[Any], times: int, rare: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """``common`` ``times`` times as often as ``rare``. (``one_of`` with a branch repeated does not weigh it:
    hypothesis draws each distinct branch alike.)"""
    return st.sampled_from([True] * times + [False]).flatmap(lambda pick: common if pick else rare)


def frames(methods: st.SearchStrategy[Any], params: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """One message's worth of hostile input: a :class:`Raw` text (or bytes, where the surface takes bytes)."""
    envelope = envelopes(methods, params)
    return weighted(envelope, 3, st.one_of(
        st.lists(envelope, max_size=3),  # a batch
        values,
        st.builds(_truncated, envelope, st.integers(0, 400)),
        st.binary(max_size=40),
        st.builds(lambda text: Raw(text), any_text),
    ))


@dataclass(frozen=True)
class Truncated:
    """A message cut after ``keep`` characters: half a document, maybe half a character."""

    message: Any
    keep: int


def _truncated(message: Any, keep: int) -> Truncated:
    return Truncated(message, keep)


def frame_bytes(frame: Any, known: Mapping[str, Any], *, ascii_only: bool = False) -> bytes:
    """The bytes of one generated frame; truncation cuts the UTF-8, so it may end inside a character."""
    if isinstance(frame, bytes):
        return frame
    if isinstance(frame, Truncated):
        # Unescaped, so the cut may fall inside a character (or a lone surrogate may be left raw).
        return frame_bytes(frame.message, known, ascii_only=False)[: frame.keep]
    return write(frame, known, ascii_only=ascii_only).encode("utf-8", "surrogatepass")


# -- MCP, as the proxy and the bridge take it ----------------------------------------------------------------

VERSIONS = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"]
STATELESS_META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
               "io.modelcontextprotocol/clientCapabilities": {}}

mcp_metas = st.none() | st.just(STATELESS_META) | st.fixed_dictionaries(
    {}, optional={"progressToken": ids, "io.modelcontextprotocol/protocolVersion": st.sampled_from(VERSIONS) | values,
                  "dev.openab/x": values})
mcp_params = st.one_of(
    values,
    st.fixed_dictionaries({"protocolVersion": st.sampled_from(VERSIONS) | values},
                          optional={"capabilities": values, "clientInfo": values, "_meta": mcp_metas}),
    st.fixed_dictionaries({"name": st.sampled_from(["browser_echo", "browser_click", "browser.echo"]) | any_text},
                          optional={"arguments": values, "_meta": mcp_metas}),
    st.fixed_dictionaries({}, optional={"cursor": values, "requestId": ids, "reason": any_text, "_meta": mcp_metas,
                                        "notifications": values}),
)
mcp_methods = st.sampled_from([
    "initialize", "ping", "tools/list", "tools/call", "server/discover", "subscriptions/listen",
    "notifications/initialized", "notifications/cancelled", "resources/list", "prompts/get", "logging/setLevel",
]) | short_text | values
# What an MCP client sends the proxy and the bridge.
mcp_frames = frames(mcp_methods, mcp_params)
