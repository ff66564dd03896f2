"""Goose's YAML config, read and written as far as our one entry needs and no further.

Goose keeps everything in one YAML file. We add no YAML library for one writer: our entry is written as a
block under a block-style top-level ``extensions:``; the rest of the file is kept line for line. Anything
else (flow style, anchors) is refused, and the caller says which entry to paste by hand.

Named ``goose_yaml`` so it can never shadow a ``yaml`` package.
"""

from __future__ import annotations

import json
from collections.abc import MutableMapping
from dataclasses import dataclass
from typing import Any

from ...mcp_vocabulary import SERVER_NAME
from .formats import Json

__all__ = ["dump", "load"]


def load(text: str) -> MutableMapping[str, Any]:
    """Goose's config as a mapping whose ``extensions`` we may change. Raises ``ValueError`` for a file
    whose ``extensions`` is not a block mapping."""
    return _Document(text)


def dump(doc: MutableMapping[str, Any]) -> str:
    """The text of a document from :func:`load`: the user's lines as they were, our entry as we wrote it."""
    assert isinstance(doc, _Document)
    return doc.dump()


class _Document(dict[str, Any]):
    """The top level of a Goose config: ``extensions`` parsed as far as we need, other text kept."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.lines = text.splitlines()
        heads = ("extensions:", "extensions: {}")
        self.ext_line = next((i for i, ln in enumerate(self.lines) if ln.rstrip() in heads), -1)
        if self.ext_line < 0 and any(ln.startswith("extensions") for ln in self.lines):
            raise ValueError("`extensions` is not a block mapping")
        self["extensions"] = _Extensions(self._blocks())

    def _blocks(self) -> dict[str, list[str]]:
        # "" holds the comments between `extensions:` and the first extension.
        blocks: dict[str, list[str]] = {"": []}
        if self.ext_line < 0:
            return blocks
        name = ""
        for ln in self.lines[self.ext_line + 1 : self._ext_end()]:
            if ln.startswith("  ") and not ln.startswith("   ") and ln.rstrip().endswith(":"):
                name = ln.strip()[:-1]
                blocks[name] = []
            else:
                blocks[name].append(ln)
        return blocks

    def _ext_end(self) -> int:
        for i in range(self.ext_line + 1, len(self.lines)):
            ln = self.lines[i]
            if ln and not ln.startswith((" ", "#")):
                return i
        return len(self.lines)

    def dump(self) -> str:
        ext = self["extensions"]
        assert isinstance(ext, _Extensions)
        body = ["extensions:", *ext.render()]
        if self.ext_line < 0:
            lines = [*self.lines, *body]
        else:
            lines = self.lines[: self.ext_line] + body + self.lines[self._ext_end() :]
        return "\n".join(lines) + "\n"


class _Extensions(dict[str, Any]):
    """Extension blocks by name: our entry as a dict, the user's as their original lines."""

    def __init__(self, blocks: dict[str, list[str]]) -> None:
        super().__init__()
        for name, lines in blocks.items():
            self[name] = _parse_block(lines) if name == SERVER_NAME else _Verbatim(lines)

    def render(self) -> list[str]:
        out: list[str] = []
        for name, value in self.items():
            if name:
                out.append(f"  {name}:")
            out += value.lines if isinstance(value, _Verbatim) else _block(value, 4)
        return out


@dataclass
class _Verbatim:
    # Another extension's block, kept as its lines: what is not ours is never parsed, so never changed.
    lines: list[str]


def _scalar(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    return json.dumps(value)  # a JSON string is a valid YAML double-quoted scalar


def _block(value: Json, indent: int) -> list[str]:
    pad = " " * indent
    out: list[str] = []
    for k, v in value.items():
        if isinstance(v, dict):
            out.append(f"{pad}{k}:" + (" {}" if not v else ""))
            out += [f"{pad}  {ik}: {_scalar(iv)}" for ik, iv in v.items()]
        elif isinstance(v, list):
            out.append(f"{pad}{k}: [{', '.join(_scalar(x) for x in v)}]")
        else:
            out.append(f"{pad}{k}: {_scalar(v)}")
    return out


def _parse_block(lines: list[str]) -> Json:
    """Read back a block written by ``_block`` (scalars, flow lists, one level of maps)."""
    out: Json = {}
    current: Json | None = None
    for ln in lines:
        if not ln.strip() or ln.lstrip().startswith("#"):
            continue
        depth = len(ln) - len(ln.lstrip())
        key, _, raw = ln.strip().partition(":")
        raw = raw.strip()
        if depth > 4 and current is not None:
            current[key] = _value(raw)
        elif raw in ("", "{}"):
            current = out[key] = {}
        else:
            current = None
            out[key] = _value(raw)
    return out


def _value(raw: str) -> Any:
    if raw in ("true", "false"):
        return raw == "true"
    if raw.startswith("["):
        inner = raw[1:-1].strip()
        return [_value(x.strip()) for x in inner.split(",")] if inner else []
    if raw.startswith('"'):
        return json.loads(raw)
    if raw.lstrip("-").isascii() and raw.lstrip("-").isdigit():  # int() refuses "²", which isdigit() accepts
        return int(raw)
    return raw.strip("'")
