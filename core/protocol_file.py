"""What the pod and the extension agree on beside the tools: the JSON object in the extension's
``lib/protocol.js`` (between its two ``/* JSON */`` markers), read here and by the extension itself, so each fact
is written once for both languages.

It holds the waits both sides bound (how long the panel waits for a prompt's answer, how long a card waits for the
person) and the ``_meta`` keys both read and write. Read once, at import: the file is a few hundred bytes, beside
``catalogue.json`` in the installed package (a module and not a JSON file: Chrome does not load a JSON module again
when it restarts the extension's service worker). A file that is missing or not what the pod relies on means a broken
installation (:class:`~openab_browser.core.errors.InstallationError`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from . import META_PREFIX
from .catalogue import CATALOGUE_PATH
from .errors import InstallationError

__all__ = ["CARD_WAIT", "META", "PROMPT_WAIT", "PROTOCOL_PATH", "read_protocol"]

PROTOCOL_PATH: Final = CATALOGUE_PATH.parent / "lib" / "protocol.js"
_MARK: Final = "/* JSON */"


def read_protocol(text: str) -> dict[str, Any]:
    """The JSON object between the two markers of ``lib/protocol.js``'s text; a ``ValueError`` says what is wrong."""
    parts = text.split(_MARK)
    if len(parts) != 3:
        raise ValueError(f"expected one object between two {_MARK} markers")
    data = json.loads(parts[1])
    if not isinstance(data, dict):
        raise ValueError("the object between the markers is not a JSON object")
    return data


def _read() -> tuple[float, float, Mapping[str, str]]:
    try:
        data = read_protocol(PROTOCOL_PATH.read_text(encoding="utf-8"))
        waits, meta = data["waits"], data["meta"]
        prompt, card = float(waits["promptSeconds"]), float(waits["cardSeconds"])
        if not (0 < card < prompt):
            raise ValueError("a card's wait must be positive and shorter than the prompt's")
        if not isinstance(meta, dict) or not all(
                isinstance(v, str) and v.startswith(META_PREFIX) and len(v) > len(META_PREFIX) for v in meta.values()):
            raise ValueError(f"every `meta` value must be a key under {META_PREFIX}")
    except (OSError, ValueError, KeyError, TypeError) as exc:  # json.JSONDecodeError is a ValueError
        raise InstallationError(f"openab cannot read {PROTOCOL_PATH}: {exc}; reinstall openab "
                                "(`pip install --force-reinstall openab-browser`)") from exc
    return prompt, card, dict(meta)


_PROMPT, _CARD, _META = _read()
# How long the side panel waits for a prompt's answer: the pod keeps a person's wait and a turn's idle time under it.
PROMPT_WAIT: Final = _PROMPT
# How long a card waits for the person, in the panel and in the pod's permission relay.
CARD_WAIT: Final = _CARD
# The ``_meta`` keys both sides use, by their names in lib/protocol.js (``META["guard"]`` is ``dev.openab/guard``).
META: Final = _META
