"""The browser tool catalogue: what the extension serves, as an agent sees it before the browser attaches.

While no browser is attached an agent still lists these tools (calls then answer "browser not connected"), so
an agent started before the person opened the side panel knows what it will be able to do.
``tests/test_tool_catalogue.py`` holds this list equal to what ``extension/lib/catalogue.js`` serves.
"""

from __future__ import annotations

import re
from typing import Final

from ..jsonrpc import JsonObject

__all__ = ["BROWSER_TOOLS", "INSTRUCTIONS", "STATIC_NAMES", "TOOL_NAME", "exposed_name"]

TOOL_NAME: Final = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_INVALID_NAME_CHARS: Final = re.compile(r"[^a-zA-Z0-9_-]")

INSTRUCTIONS: Final = (
    "These tools act in the user's own Chrome, in the tab group of the openab side panel. "
    "Use browser_snapshot for refs, then act by ref. A JavaScript dialog blocks its page: answer it with "
    "browser_handle_dialog. Sign-ins, CAPTCHAs, one-time codes and payments are the user's: use browser_handoff. "
    "If a tool says the browser is not connected, ask the user to open the openab side panel."
)


def _tool(name: str, description: str, properties: JsonObject, required: list[str] | None = None) -> JsonObject:
    schema: JsonObject = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return {"name": name, "description": description, "inputSchema": schema}


_TARGET: Final[JsonObject] = {
    "ref": {"type": "string", "description": 'element ref from browser_snapshot, e.g. "e6"'},
    "selector": {"type": "string", "description": "CSS selector (first match in the top frame)"},
}
_PAGING: Final[JsonObject] = {
    "max_chars": {"type": "integer", "minimum": 100, "description": "characters to return"},
    "offset": {"type": "integer", "minimum": 0, "description": "character offset to continue from (paging)"},
}

# What the openab extension serves (extension/lib/catalogue.js), advertised while no browser is attached.
BROWSER_TOOLS: Final[tuple[JsonObject, ...]] = (
    _tool(
        "browser_snapshot",
        "Outline of the agent tab as accessibility-style lines with refs, e.g. `- button \"Sign in\" [ref=e6]`; "
        "the page's text and `## headings` read as lines without the dash. A link inside a sentence reads "
        "`[its words](e7)`, e7 its ref, with its address when it leads to another site (`[its words](e7 "
        "https://...)`); interactive_only lists every link with its address. Use the refs with browser_click, "
        "browser_type and friends. Take a new snapshot after the page changes; since=true shows only what changed.",
        {
            "interactive_only": {
                "type": "boolean",
                "description": "only elements with refs, and headings (much shorter); a link inside a sentence "
                "with its address",
            },
            "since": {
                "type": "boolean",
                "description": "only the lines that changed since the last snapshot of this tab, as a diff",
            },
            **_PAGING,
        },
    ),
    _tool(
        "browser_read_dom",
        "Read the HTML of the agent tab's page, or of the first element matching a CSS selector.",
        {"selector": {"type": "string", "description": "optional CSS selector to scope the read"}, **_PAGING},
    ),
    _tool(
        "browser_screenshot",
        "JPEG screenshot of the visible part of the agent tab (downscaled unless full_size is true).",
        {"full_size": {"type": "boolean", "description": "keep the captured pixel size"}},
    ),
    _tool(
        "browser_navigate",
        "Load an http(s) URL in the agent tab (opens an agent tab if there is none) and wait for it.",
        {"url": {"type": "string", "description": "an absolute http(s) URL, or a path (/...) on the agent tab's site, "
                                                  "as snapshots show same-site links"}},
        ["url"],
    ),
    _tool("browser_click", "Click an element, by ref (preferred) or CSS selector.", dict(_TARGET)),
    _tool(
        "browser_type",
        "Type text into a field, by ref (preferred) or CSS selector. Replaces the value unless clear is false.",
        {
            **_TARGET,
            "text": {"type": "string", "description": "text to type"},
            "clear": {"type": "boolean", "description": "replace the current value (default true)"},
        },
        ["text"],
    ),
    _tool(
        "browser_press_key",
        'Press a key (e.g. "Enter", "Tab", "Escape", "a", "Control+Enter") in an element, which takes the keyboard '
        "focus for it, or in the focused element.",
        {"key": {"type": "string", "description": "key name"}, **_TARGET},
        ["key"],
    ),
    _tool(
        "browser_select_option",
        "Choose an option of a <select>, by its value or its visible label.",
        {**_TARGET, "value": {"type": "string", "description": "option value or visible label"}},
        ["value"],
    ),
    _tool(
        "browser_scroll",
        "Scroll the page (direction up/down/top/bottom, optional pixels) or scroll an element into view by ref.",
        {
            "direction": {"type": "string", "enum": ["up", "down", "top", "bottom"]},
            "pixels": {"type": "integer", "minimum": 1},
            "ref": _TARGET["ref"],
        },
    ),
    _tool("browser_back", "Go back one page in the agent tab history.", {}),
    _tool(
        "browser_wait_for",
        "Wait until text appears, a selector matches a visible element, the URL contains a string, or the page "
        "has loaded.",
        {
            "text": {"type": "string", "description": "text to wait for"},
            "selector": {"type": "string", "description": "CSS selector to wait for"},
            "url": {"type": "string", "description": "substring of the URL"},
            "load": {"type": "boolean", "description": "wait for the page load"},
            "timeout_ms": {"type": "integer", "minimum": 100, "maximum": 60000, "description": "default 10000"},
        },
    ),
    _tool(
        "browser_tabs",
        "Agent tabs only: list them, open a new one at a URL, switch the agent to one, or close one it opened.",
        {
            "action": {"type": "string", "enum": ["list", "open", "switch", "close"]},
            "url": {"type": "string", "description": "URL for action open"},
            "tab_id": {"type": "integer", "description": "tab for switch and close"},
        },
        ["action"],
    ),
    _tool(
        "browser_handle_dialog",
        'Answer the JavaScript dialog (alert, confirm, prompt, or "leave this page?") open in the agent tab: '
        "accept (OK / Leave) or dismiss (Cancel / Stay). prompt_text is what a prompt dialog gets typed into it.",
        {
            "accept": {"type": "boolean", "description": "true for OK (or Leave), false for Cancel (or Stay)"},
            "prompt_text": {"type": "string", "description": "the answer to a prompt dialog (when accepting it)"},
        },
        ["accept"],
    ),
    _tool(
        "browser_handoff",
        "Hand the agent tab to the person for a step only they should do: signing in, a CAPTCHA, a one-time code, "
        'a payment. The side panel shows them a "your turn" card with your reason; the call returns when they press '
        "Done or Cancel (or after timeout_s), with a fresh snapshot. What they type is never shown to you.",
        {
            "reason": {"type": "string", "description": 'what the person should do, e.g. "Sign in to example.com"'},
            "timeout_s": {
                "type": "integer",
                "minimum": 5,
                "maximum": 160,
                "description": "seconds to wait for the person (default 150)",
            },
        },
        ["reason"],
    ),
)
STATIC_NAMES: Final = frozenset(t["name"] for t in BROWSER_TOOLS)


def exposed_name(name: str) -> str | None:
    """The name an agent sees for a browser tool name, or ``None`` when no valid name can stand for it."""
    if TOOL_NAME.fullmatch(name):
        return name
    candidate = _INVALID_NAME_CHARS.sub("_", name)
    return candidate if TOOL_NAME.fullmatch(candidate) else None
