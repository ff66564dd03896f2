"""Reading a snapshot as the agent does: the ref of the element a line names."""

from __future__ import annotations

import re

__all__ = ["ref_of"]

_REF = re.compile(r"\[ref=(e\d+)\]")


def ref_of(snapshot: str, contains: str) -> str:
    """The ref on the first snapshot line that contains ``contains``."""
    for line in snapshot.splitlines():
        if contains in line and (m := _REF.search(line)):
            return m.group(1)
    raise AssertionError(f"no ref for {contains!r} in:\n{snapshot}")
