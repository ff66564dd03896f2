"""The browser tool catalogue: what the extension serves, as an agent sees it before the browser attaches.

While no browser is attached an agent still lists these tools (calls then answer "browser not connected"), so
an agent started before the person opened the side panel knows what it will be able to do. They are the
extension's own ``catalogue.json`` (read by :mod:`openab_browser.core.catalogue`), annotations included: a tool is added
there and in the extension, never here.
"""

from __future__ import annotations

import re
from typing import Final

from ..catalogue import catalogue
from ..jsonrpc import JsonObject

__all__ = ["BROWSER_TOOLS", "INSTRUCTIONS", "STATIC_NAMES", "TOOL_NAME", "exposed_name"]

TOOL_NAME: Final = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_INVALID_NAME_CHARS: Final = re.compile(r"[^a-zA-Z0-9_-]")

INSTRUCTIONS: Final = (
    "These tools act in the user's own Chrome, in the tab group of the openab side panel. "
    "Use browser_snapshot for refs, then act by ref. A JavaScript dialog blocks its page: answer it with "
    "browser_handle_dialog. Sign-ins, CAPTCHAs, one-time codes and payments are the user's: use browser_handoff. "
    "For the app the user is building, browser_console and browser_network show the page's console and requests. "
    "browser_fill_form fills a form's fields in one call; browser_batch takes several steps in one. "
    "If a tool says the browser is not connected, ask the user to open the openab side panel."
)


# What the openab extension serves, advertised while no browser is attached.
BROWSER_TOOLS: Final[tuple[JsonObject, ...]] = catalogue().tools
STATIC_NAMES: Final = frozenset(t["name"] for t in BROWSER_TOOLS)


def exposed_name(name: str) -> str | None:
    """The name an agent sees for a browser tool name, or ``None`` when no valid name can stand for it."""
    if TOOL_NAME.fullmatch(name):
        return name
    candidate = _INVALID_NAME_CHARS.sub("_", name)
    return candidate if TOOL_NAME.fullmatch(candidate) else None
