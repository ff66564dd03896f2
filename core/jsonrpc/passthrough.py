"""Long strings of an answer kept as the JSON text they arrived in, so a hop relays them without parsing them.

A screenshot comes back from the browser as one JSON-RPC answer holding 6 to 8 MiB of base64 under an
image's ``data``. The gateway reads the small rest of that answer (its id, the content list, ``isError``) and
writes the whole of it into the agent's HTTP answer; parsing the base64 into a Python string and writing it
out again was most of the gateway's time for such a call (docs/benchmarks.md, target 5). :func:`loads` parses
the answer with each long string under one of :attr:`PassThrough.keys` left out, and puts it back as an
``orjson.Fragment``: ``orjson.dumps`` copies a fragment's text into its output as it is.

Nothing changes in what the message means. A string is lifted only if it is a plain JSON string literal
(ASCII, printable, no escapes), which is checked, so it says exactly what ``orjson.loads`` would have read;
the rest is parsed by orjson as ever, so duplicate keys, nesting and errors behave as they always did. Only
answers (``id`` with ``result`` or ``error``, no ``method``) get fragments: requests and notifications are
validated at the edges as strings. Whatever the frame, the scan costs at most :attr:`PassThrough.max_steps`
steps of Python: a frame it cannot read within them (thousands of strings, long runs of backslashes) is
simply parsed whole.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final

import orjson

__all__ = ["PassThrough", "is_answer", "loads"]

# The bytes no JSON string may hold unescaped.
_CONTROL: Final = bytes(range(0x20))
# Checked a piece at a time: the pieces' copies stay small and reuse the allocator's memory.
_CHECK_PIECE: Final = 1 << 20
# A run of backslashes longer than this before a quote ends the scan: telling an escaped quote from an ending
# one means counting the run, and counting it must stay cheap.
_MAX_BACKSLASHES: Final = 64
# What stands in a skeleton for a lifted string: random per process, so no peer can write one on purpose.
_MARK: Final = f"openab-lifted-{os.urandom(16).hex()}:"


@dataclass(frozen=True, slots=True)
class PassThrough:
    """Which strings of an answer a :class:`~openab_browser.core.jsonrpc.protocol.Peer` keeps as raw JSON.

    ``keys``: the object keys whose string values may be lifted (MCP's ``data`` of an image or audio block and
    ``blob`` of a resource: base64, never read by a hop). ``min_chars``: shorter strings are parsed, as
    lifting them saves less than the scan costs. ``max_steps``: the bound on the scan's Python steps.
    """

    keys: frozenset[str] = frozenset({"data", "blob"})
    min_chars: int = 64 << 10
    max_steps: int = 512


def loads(data: bytes | str, rule: PassThrough) -> Any:
    """``orjson.loads(data)``, with the long strings that ``rule`` names in an answer as ``orjson.Fragment``.

    Raises ``orjson.JSONDecodeError`` exactly when ``orjson.loads`` would, with its words.
    """
    if len(data) < rule.min_chars:
        return orjson.loads(data)
    spans = _lifting(data, rule)
    if not spans:
        return orjson.loads(data)
    try:
        skeleton = orjson.loads(_skeleton(data, spans))
    except orjson.JSONDecodeError:
        return orjson.loads(data)  # its own error, in its own words
    literals = [data[start:end] for start, end in spans]
    if not is_answer(skeleton) or not all(_plain(literal) for literal in literals):
        return orjson.loads(data)
    if not _restore(skeleton, [orjson.Fragment(literal) for literal in literals], rule.keys):
        return orjson.loads(data)
    return skeleton


def _lifting(data: bytes | str, rule: PassThrough) -> list[tuple[int, int]]:
    """The spans (quotes included) of the string values to lift: long, under one of ``rule.keys``, no escape."""
    # The same scan reads a text frame (str) and a line (bytes): it needs the punctuation in the frame's type.
    quote, backslash, colon = ('"', "\\", ":") if isinstance(data, str) else (b'"', b"\\", b":")
    keys: set[Any] = {key if isinstance(data, str) else key.encode() for key in rule.keys}
    text: Any = data
    longest_key = max(map(len, keys), default=0)
    spans: list[tuple[int, int]] = []
    previous: tuple[int, int] | None = None  # the last string literal seen: a key when a colon follows it
    for start, end in _literals(text, quote, backslash, rule.max_steps):
        if (
            end - start - 2 >= rule.min_chars
            and previous is not None
            and previous[1] - previous[0] - 2 <= longest_key
            and text[previous[0] + 1 : previous[1] - 1] in keys
            and text[previous[1] : start].strip() == colon
            and text.find(backslash, start + 1, end - 1) < 0
        ):
            spans.append((start, end))
        previous = (start, end)
    return spans


def _literals(data: Any, quote: Any, backslash: Any, max_steps: int) -> Iterator[tuple[int, int]]:
    """Each string literal of ``data`` as (start, end past its closing quote), until the end of ``data`` or of
    ``max_steps`` finds. A quote inside a literal is escaped when an odd run of backslashes stands before it."""
    steps = 0
    position = 0
    while True:
        start = data.find(quote, position)
        if start < 0:
            return
        end = start
        while True:
            steps += 1
            if steps > max_steps:
                return
            end = data.find(quote, end + 1)
            if end < 0:
                return
            run = _backslashes_before(data, end, start, backslash)
            if run is None:
                return
            if run % 2 == 0:
                break
        yield start, end + 1
        position = end + 1


def _backslashes_before(data: Any, index: int, floor: int, backslash: Any) -> int | None:
    """How many backslashes stand right before ``index`` (not before ``floor``); None past the bound."""
    window = data[max(floor + 1, index - _MAX_BACKSLASHES - 1) : index]
    run = len(window) - len(window.rstrip(backslash))
    return None if run > _MAX_BACKSLASHES else run


def _skeleton(data: bytes | str, spans: list[tuple[int, int]]) -> bytes | str:
    """``data`` with each span replaced by a short marked string naming its place in ``spans``."""
    pieces: list[Any] = []
    at = 0
    for index, (start, end) in enumerate(spans):
        mark = f'"{_MARK}{index}"'
        pieces += [data[at:start], mark if isinstance(data, str) else mark.encode()]
        at = end
    pieces.append(data[at:])
    return "".join(pieces) if isinstance(data, str) else b"".join(pieces)


def is_answer(message: Any) -> bool:
    """Whether a message is shaped as an answer (``id`` with ``result`` or ``error``, no ``method``): the rule
    :func:`~openab_browser.core.jsonrpc.protocol.classify` reads answers by, kept here once because this module needs it
    before anything is classified."""
    return isinstance(message, dict) and "id" in message and "method" not in message and (
        "result" in message or "error" in message
    )


def _plain(literal: bytes | str) -> bool:
    """Whether a string literal (quotes included, no backslash) is JSON orjson would read as written: ASCII and
    no control character. The check copies a piece at a time, never the whole literal."""
    if not literal.isascii():
        return False
    for at in range(0, len(literal), _CHECK_PIECE):
        piece = literal[at : at + _CHECK_PIECE]
        raw = piece.encode("ascii") if isinstance(piece, str) else piece
        if len(raw.translate(None, _CONTROL)) != len(raw):
            return False
    return True


def _restore(message: Any, fragments: list[orjson.Fragment], keys: frozenset[str]) -> bool:
    """Put each fragment where its mark is; False when a mark is not one of ours or stands twice (the peer wrote
    one: it would have to know this process's random part). Marks stand only as values of ``keys``, or were
    dropped with a repeated key."""
    placed: set[int] = set()
    level: list[Any] = [message]
    while level:
        following: list[Any] = []
        for node in level:
            if isinstance(node, dict):
                for key in keys:
                    value = node.get(key)
                    if isinstance(value, str) and value.startswith(_MARK):
                        index = value[len(_MARK) :]
                        if not index.isdigit() or int(index) >= len(fragments) or int(index) in placed:
                            return False
                        placed.add(int(index))
                        node[key] = fragments[int(index)]
                following.extend(child for child in node.values() if isinstance(child, (dict, list)))
            else:
                following.extend(child for child in node if isinstance(child, (dict, list)))
        level = following
    return True
