"""The browser tools and MCP revisions, as the pod reads them from the extension's own ``catalogue.json``.

One data file says what a browser tool is (name, description, argument schema, MCP ``annotations``) and which
MCP revisions both ends speak; the extension fetches it as its worker starts (``extension/lib/catalogue.js``) and the
pod reads it here, so the two languages cannot drift apart. The file ships inside the package: the wheel installs
``extension/`` as ``openab/extension`` beside ``openab/core``, and a checkout (or the ``.dev`` link farm, whose
links resolve into the checkout) has it beside ``core/``. ``importlib.resources`` is not used: ``openab.extension``
is a namespace package, which it cannot read in an editable install on Python 3.11.

Read once, on first use: ``openab browser-bridge`` imports ``openab.core`` at every agent start and never needs it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Final

from .errors import InstallationError

__all__ = ["CATALOGUE_PATH", "Catalogue", "catalogue", "parse"]

CATALOGUE_PATH: Final = Path(__file__).resolve().parent.parent / "extension" / "catalogue.json"


@dataclass(frozen=True)
class Catalogue:
    """What ``catalogue.json`` says, checked for the shape the pod relies on (the suite checks the rest)."""

    tools: tuple[dict[str, Any], ...]  # as advertised: without openab's own ``facts``
    facts: Mapping[str, Mapping[str, Any]]  # each tool's ``facts`` by its name (docs/extension.md)
    handshake_versions: tuple[str, ...]  # oldest first
    requested_handshake_version: str
    stateless_version: str

    def read_only(self, name: str) -> bool:
        """Whether the tool only reads (MCP's ``readOnlyHint``), so that calling it again changes nothing."""
        return any(tool["name"] == name and tool["annotations"].get("readOnlyHint") is True for tool in self.tools)

    def changes_state(self, name: str) -> bool:
        """Whether the tool is one of ours that acts on the page (not ``readOnlyHint``): what the journal keeps."""
        return any(tool["name"] == name and tool["annotations"].get("readOnlyHint") is not True for tool in self.tools)


def _strings(value: object, what: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{what} must be a non-empty list of strings")
    return tuple(value)


def _string(value: object, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"{what} must be a non-empty string")
    return value


def _tool(value: object, index: int) -> dict[str, Any]:
    if not isinstance(value, dict) or not isinstance(value.get("name"), str):
        raise ValueError(f"tools[{index}] must be an object with a string name")
    for key in ("inputSchema", "annotations", "facts"):
        if not isinstance(value.get(key), Mapping):
            raise ValueError(f"tools[{index}] ({value['name']}) must have an object {key}")
    return value


def _advertised(tool: dict[str, Any]) -> dict[str, Any]:
    """A tool as agents see it: ``facts`` are openab's own and never leave the pod or the extension."""
    return {key: value for key, value in tool.items() if key != "facts"}


def parse(data: object) -> Catalogue:
    """The catalogue in ``data`` (the file's JSON); a ``ValueError`` says what is wrong in it."""
    if not isinstance(data, dict) or not isinstance(data.get("tools"), list) or not isinstance(data.get("mcp"), dict):
        raise ValueError("the catalogue must be an object with a list `tools` and an object `mcp`")
    mcp = data["mcp"]
    tools = tuple(_tool(tool, index) for index, tool in enumerate(data["tools"]))
    return Catalogue(
        tools=tuple(_advertised(tool) for tool in tools),
        facts={tool["name"]: tool["facts"] for tool in tools},
        handshake_versions=_strings(mcp.get("handshakeVersions"), "mcp.handshakeVersions"),
        requested_handshake_version=_string(mcp.get("requestedHandshakeVersion"), "mcp.requestedHandshakeVersion"),
        stateless_version=_string(mcp.get("statelessVersion"), "mcp.statelessVersion"),
    )


@cache
def catalogue() -> Catalogue:
    """The installed extension's catalogue, read on first use. An installation without it is broken: the error
    says so and what to do."""
    try:
        return parse(json.loads(CATALOGUE_PATH.read_bytes()))
    except (OSError, ValueError) as exc:  # json.JSONDecodeError is a ValueError
        raise InstallationError(f"openab cannot read the browser tool catalogue {CATALOGUE_PATH}: {exc}; "
                           "reinstall openab (`pip install --force-reinstall openab`)") from exc
