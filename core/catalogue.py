"""The browser tools and MCP revisions, as the pod reads them from the extension's own ``catalogue.json``.

One data file says what a browser tool is (name, description, argument schema, MCP ``annotations``) and which
MCP revisions both ends speak; the extension fetches it as its worker starts (``extension/lib/catalogue.js``) and the
pod reads it here, so the two languages cannot drift apart. The file ships inside the package: the wheel installs
``extension/`` as ``openab_browser/extension`` beside ``openab_browser/core``, and a checkout (or the ``.dev`` link
farm, whose
links resolve into the checkout) has it beside ``core/``. ``importlib.resources`` is not used:
``openab_browser.extension``
is a namespace package, which it cannot read in an editable install on Python 3.11.

Read once, on first use: ``openab browser-bridge`` imports ``openab_browser.core`` at every agent start and never needs
it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Final, Literal, cast

from .errors import InstallationError

__all__ = ["CATALOGUE_PATH", "GUARD_FACETS", "Catalogue", "Picked", "ToolFacts", "catalogue", "parse"]

CATALOGUE_PATH: Final = Path(__file__).resolve().parent.parent / "extension" / "catalogue.json"


# The values each fact can have; extension/lib/catalogue.js (checkFacts) holds the same, and
# tests/test_tool_catalogue.py holds the two readers to refusing the same files.
GUARD_FACETS: Final = frozenset({"activates", "submits", "types", "presses", "chooses", "drops", "transfers",
                                 "runs_code", "navigates", "answers", "person", "routine"})
Receipt = Literal["element", "page", "none"]
RECEIPTS: Final[tuple[Receipt, ...]] = ("element", "page", "none")
DialogWay = Literal["meets", "free", "answers", "person"]
DIALOG_WAYS: Final[tuple[DialogWay, ...]] = ("meets", "free", "answers", "person")

Picked = Mapping[str, tuple[str | int | float | bool, ...]]
"""Argument values that pick out some calls of a tool: ``{"action": ("list",)}`` is a call whose action is list."""


@dataclass(frozen=True)
class ToolFacts:
    """A tool's ``facts``: openab's own, never advertised (docs/extension.md, The catalogue's facts). The pod acts
    on ``guard`` and ``journal_reads``; the rest is the extension's, checked here so both readers refuse alike."""

    guard: tuple[str, ...]  # the facets the guard judges an input of the tool by; empty for a read
    receipt: Receipt
    journal_reads: Picked  # the calls of an acting tool that only read: never journalled, never held back
    plan_step: str  # the plan card's words for the step ("click {target}"); empty for a read
    plan_no_site: Picked  # the calls that act on no site (the plan does not wait for them)
    row: Mapping[str, Any]  # the panel row's verbs and object (extension/panel/steps.js)
    dialogs: DialogWay
    exclusive: bool  # nothing else runs while it is queued or runs (the person has the tab)
    look: bool  # a read whose answer is the page as it is now: read again when the page was on its way out

    def picks(self, picked: Picked, arguments: object) -> bool:
        """Whether ``arguments`` has one of the values ``picked`` lists."""
        if not isinstance(arguments, Mapping):
            return False
        return any(arguments.get(name) in values for name, values in picked.items())


@dataclass(frozen=True)
class Catalogue:
    """What ``catalogue.json`` says, checked for the shape the pod relies on (the suite checks the rest)."""

    tools: tuple[dict[str, Any], ...]  # as advertised: without openab's own ``facts``
    facts: Mapping[str, ToolFacts]  # each tool's ``facts`` by its name (docs/extension.md)
    handshake_versions: tuple[str, ...]  # oldest first
    requested_handshake_version: str
    stateless_version: str
    # The tools by what they do, looked up on every call (a set, not a scan of the list).
    reading: frozenset[str]  # MCP's ``readOnlyHint``
    acting: frozenset[str]  # the rest

    def read_only(self, name: str) -> bool:
        """Whether the tool only reads (MCP's ``readOnlyHint``), so that calling it again changes nothing."""
        return name in self.reading

    def changes_state(self, name: str) -> bool:
        """Whether the tool is one of ours that acts on the page (not ``readOnlyHint``): what the journal keeps."""
        return name in self.acting

    def only_reads(self, name: str, arguments: object) -> bool:
        """Whether this call only reads: a ``readOnlyHint`` tool, or a call of an acting one that its
        ``facts.journal.reads`` names (listing the tabs)."""
        facts = self.facts.get(name)
        return self.read_only(name) or (facts is not None and facts.picks(facts.journal_reads, arguments))

    def only_navigates(self, name: str) -> bool:
        """Whether all an input of the tool can do is load a page (its guard rule is ``navigates`` alone)."""
        facts = self.facts.get(name)
        return facts is not None and facts.guard == ("navigates",)


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


def _picked(value: object, what: str) -> Picked:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(
        isinstance(values, list) and values and all(isinstance(v, str | int | float | bool) for v in values)
        for values in value.values()
    ):
        raise ValueError(f"{what} must be an object of argument names to non-empty lists of values")
    return {name: tuple(values) for name, values in value.items()}


def _verbs_and_object(value: object, what: str) -> None:
    if not isinstance(value, dict):
        raise ValueError(f"{what} must be an object")
    verbs = value.get("verbs")
    if not isinstance(verbs, list) or len(verbs) != 3 or not all(isinstance(v, str) and v for v in verbs):
        raise ValueError(f"{what}.verbs must be three non-empty strings: imperative, past, progressive")
    if sum(isinstance(value.get(key), str) and bool(value[key]) for key in ("object", "says")) != 1:
        raise ValueError(f"{what} must have either an object kind or the words it says")


def _facts(tool: dict[str, Any]) -> ToolFacts:
    """The tool's ``facts``; a ``ValueError`` names the tool and what is wrong."""
    name, facts = tool["name"], tool["facts"]
    where = f"{name}: facts"
    acts = tool["annotations"].get("readOnlyHint") is not True
    guard = facts.get("guard")
    if not isinstance(guard, list) or not all(isinstance(f, str) for f in guard):
        raise ValueError(f"{where}.guard must be a list of facets")
    if unknown := sorted(set(guard) - GUARD_FACETS):
        raise ValueError(f"{where}.guard has an unknown facet {unknown[0]}")
    if acts and not guard:
        raise ValueError(f"{name} acts on the page and has no guard rule (facts.guard)")
    if not acts and guard:
        raise ValueError(f"{name} only reads and has a guard rule")
    receipt = facts.get("receipt")
    if receipt not in RECEIPTS or (not acts and receipt != "none"):
        raise ValueError(f"{where}.receipt must be one of {', '.join(RECEIPTS)} ('none' for a read)")
    dialogs = facts.get("dialogs")
    if dialogs not in DIALOG_WAYS:
        raise ValueError(f"{where}.dialogs must be one of {', '.join(DIALOG_WAYS)}")
    if not isinstance(facts.get("exclusive"), bool):
        raise ValueError(f"{where}.exclusive must be true or false")
    look = facts.get("look")
    if not isinstance(look, bool) or (acts and look):
        raise ValueError(f"{where}.look must be true or false (false for an acting tool)")
    journal, plan, row = facts.get("journal"), facts.get("plan"), facts.get("row")
    if not isinstance(journal, dict):
        raise ValueError(f"{where}.journal must be an object")
    if not isinstance(plan, dict):
        raise ValueError(f"{where}.plan must be an object")
    step = plan.get("step", "")
    if not isinstance(step, str) or (acts and not step):
        raise ValueError(f"{where}.plan.step must say the step in the plan card's words, e.g. \"click {{target}}\"")
    _verbs_and_object(row, f"{where}.row")
    when = row.get("when", [])
    if not isinstance(when, list):
        raise ValueError(f"{where}.row.when must be a list")
    for index, case in enumerate(when):
        _verbs_and_object(case, f"{where}.row.when[{index}]")
        if not _picked(case.get("args"), f"{where}.row.when[{index}].args"):
            raise ValueError(f"{where}.row.when[{index}].args must name the argument values it is for")
    return ToolFacts(
        guard=tuple(guard), receipt=cast(Receipt, receipt),
        journal_reads=_picked(journal.get("reads"), f"{where}.journal.reads"), plan_step=step,
        plan_no_site=_picked(plan.get("noSite"), f"{where}.plan.noSite"), row=row,
        dialogs=cast(DialogWay, dialogs), exclusive=facts["exclusive"], look=look,
    )


def _advertised(tool: dict[str, Any]) -> dict[str, Any]:
    """A tool as agents see it: ``facts`` are openab's own and never leave the pod or the extension."""
    return {key: value for key, value in tool.items() if key != "facts"}


def parse(data: object) -> Catalogue:
    """The catalogue in ``data`` (the file's JSON); a ``ValueError`` says what is wrong in it."""
    if not isinstance(data, dict) or not isinstance(data.get("tools"), list) or not isinstance(data.get("mcp"), dict):
        raise ValueError("the catalogue must be an object with a list `tools` and an object `mcp`")
    mcp = data["mcp"]
    tools = tuple(_tool(tool, index) for index, tool in enumerate(data["tools"]))
    reading = frozenset(tool["name"] for tool in tools if tool["annotations"].get("readOnlyHint") is True)
    return Catalogue(
        tools=tuple(_advertised(tool) for tool in tools),
        facts={tool["name"]: _facts(tool) for tool in tools},
        handshake_versions=_strings(mcp.get("handshakeVersions"), "mcp.handshakeVersions"),
        requested_handshake_version=_string(mcp.get("requestedHandshakeVersion"), "mcp.requestedHandshakeVersion"),
        stateless_version=_string(mcp.get("statelessVersion"), "mcp.statelessVersion"),
        reading=reading,
        acting=frozenset(tool["name"] for tool in tools) - reading,
    )


@cache
def catalogue() -> Catalogue:
    """The installed extension's catalogue, read on first use. An installation without it is broken: the error
    says so and what to do."""
    try:
        return parse(json.loads(CATALOGUE_PATH.read_bytes()))
    except (OSError, ValueError) as exc:  # json.JSONDecodeError is a ValueError
        raise InstallationError(f"openab cannot read the browser tool catalogue {CATALOGUE_PATH}: {exc}; "
                           "reinstall openab (`pip install --force-reinstall openab-browser`)") from exc
