"""A running pod's setting changed for a block of a test and put back after it, so a pod a fixture shares between
tests never carries one test's change into the next (settings validate each assignment, as the pod's would)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from openab_browser.core.settings import Settings

__all__ = ["changed"]


@contextlib.contextmanager
def changed(settings: Settings, **values: Any) -> Iterator[Settings]:
    """``settings`` with ``values`` set until the block ends, then each one's earlier value again."""
    earlier = {name: getattr(settings, name) for name in values}
    try:
        for name, value in values.items():
            setattr(settings, name, value)
        yield settings
    finally:
        for name, value in earlier.items():
            setattr(settings, name, value)
