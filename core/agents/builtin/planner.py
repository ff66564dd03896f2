"""The built-in agent's planner for when it has no model: plain instructions, one per line or separated by
``;`` / ``then``, read by patterns (``open URL``, ``click TEXT``, ``type TEXT into FIELD``, ``read``,
``screenshot``), and the snapshot reading that turns a label into an element ref.

Scripted, not clever: a sentence that fits no pattern becomes an ``unknown`` step the agent says it cannot do.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final

__all__ = ["HELP", "Step", "find_ref", "plan_steps", "result_text"]

HELP: Final = (
    "Without a model I follow simple instructions, one per line: `open URL`, `click TEXT`, "
    "`type TEXT into FIELD`, `read`, `screenshot`."
)


@dataclass(frozen=True)
class Step:
    """One instruction: what to do, in the planner's words.

    ``target`` is a URL (open) or an element's label (click, type); ``text`` what to type; ``said`` the
    instruction as the person wrote it, for messages.
    """

    action: str  # open, click, type, read, screenshot, unknown
    target: str = ""
    text: str = ""
    said: str = ""


_SPLIT = re.compile(r"\s*(?:\n|;|\.\s+|\band then\b|\bthen\b)\s*", re.IGNORECASE)
_QUOTES = "\"'“”‘’`"
_OPEN = re.compile(r"^(?:please\s+)?(?:open|go to|goto|navigate to|visit|load)\s+(\S+)", re.IGNORECASE)
_CLICK = re.compile(r"^(?:please\s+)?(?:click|press|tap)\s+(?:on\s+)?(?:the\s+)?(.+?)$", re.IGNORECASE)
_TYPE = re.compile(r"^(?:please\s+)?(?:type|enter|fill in|write)\s+(.+?)\s+(?:into|in)\s+(?:the\s+)?(.+?)$",
                   re.IGNORECASE)
_READ = re.compile(r"^(?:please\s+)?(?:read|snapshot|look)\b", re.IGNORECASE)
_SHOT = re.compile(r"^(?:please\s+)?(?:take\s+a\s+)?screen\s*shot\b", re.IGNORECASE)


def _unquote(text: str) -> str:
    text = text.strip().rstrip(".")
    if len(text) >= 2 and text[0] in _QUOTES and text[-1] in _QUOTES:
        return text[1:-1]
    return text


def plan_steps(prompt: str) -> list[Step]:
    """The instructions in ``prompt``, in order; anything unrecognised becomes an ``unknown`` step."""
    steps: list[Step] = []
    for part in _SPLIT.split(prompt):
        said = part.strip().rstrip(".")
        if not said:
            continue
        if match := _OPEN.match(said):
            url = _unquote(match.group(1))
            if not re.match(r"^[a-z][a-z0-9+.-]*://", url, re.IGNORECASE):
                url = "https://" + url
            steps.append(Step("open", target=url, said=said))
        elif match := _TYPE.match(said):
            field_name = re.sub(r"\s+(?:field|box|input)$", "", _unquote(match.group(2)), flags=re.IGNORECASE)
            steps.append(Step("type", target=_unquote(field_name), text=_unquote(match.group(1)), said=said))
        elif match := _CLICK.match(said):
            target = re.sub(r"\s+(?:button|link)$", "", _unquote(match.group(1)), flags=re.IGNORECASE)
            steps.append(Step("click", target=_unquote(target), said=said))
        elif _SHOT.match(said):
            steps.append(Step("screenshot", said=said))
        elif _READ.match(said):
            steps.append(Step("read", said=said))
        else:
            steps.append(Step("unknown", said=said))
    return steps


_REF_LINE = re.compile(r'^\s*-\s*(?P<role>[\w-]+)(?:\s+"(?P<name>(?:[^"\\]|\\.)*)")?.*?\[ref=(?P<ref>[\w-]+)\]')
_FIELD_ROLES: Final = frozenset({"textbox", "searchbox", "combobox", "textarea", "input", "spinbutton"})


def find_ref(snapshot: str, label: str, *, fields: bool = False) -> str | None:
    """The ref of the element whose name is ``label`` (exactly, else containing it), from a snapshot outline."""
    wanted = label.strip().lower()
    exact: str | None = None
    partial: str | None = None
    for line in snapshot.splitlines():
        match = _REF_LINE.match(line)
        if match is None:
            continue
        role, name = match.group("role").lower(), (match.group("name") or "").lower()
        if fields and role not in _FIELD_ROLES:
            continue
        if name == wanted and exact is None:
            exact = match.group("ref")
        elif wanted and wanted in name and partial is None:
            partial = match.group("ref")
    return exact or partial


def result_text(result: Any) -> str:
    """The text blocks of an MCP tool result, joined; ``""`` for anything else."""
    if not isinstance(result, dict):
        return ""
    return "\n".join(
        str(block.get("text", "")) for block in result.get("content") or []
        if isinstance(block, dict) and block.get("type") == "text"
    )
