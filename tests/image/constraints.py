"""constraints.txt, read: the exact pins the image and the suite's venv install with."""

from __future__ import annotations

import re
from pathlib import Path

CONSTRAINTS = Path(__file__).resolve().parents[2] / "constraints.txt"


def canonical(name: str) -> str:
    """A distribution's name as pip compares them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def pins(path: Path = CONSTRAINTS) -> dict[str, str]:
    """Each pinned distribution's version, by canonical name; a line that is not an exact pin is an error."""
    found: dict[str, str] = {}
    for line in path.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, equals, version = line.partition("==")
            assert equals and re.fullmatch(r"[\w.+!-]+", version), f"{path.name}: {line!r} is not an exact pin"
            found[canonical(name)] = version
    return found


def unpinned(installed: dict[str, str]) -> dict[str, str]:
    """What of `installed` (name: version) constraints.txt does not pin at that version. The venv's installers
    (pip, setuptools, from Python's ensurepip) and openab itself are not dependencies."""
    pinned = pins()
    return {name: version for name, version in ((canonical(n), v) for n, v in installed.items())
            if name not in {"openab-browser", "pip", "setuptools"} and pinned.get(name) != version}
