"""How many inputs a fuzz run sends: ``OPENAB_FUZZ_EXAMPLES`` overrides the size a test asks for."""

from __future__ import annotations

import os

BATCH = 10  # frames per hypothesis example: one round trip checks ten inputs


def inputs(default: int) -> int:
    """The inputs per surface for a run whose own size is ``default``."""
    return int(os.environ.get("OPENAB_FUZZ_EXAMPLES", default))


def examples_for(default: int) -> int:
    """Hypothesis examples for ``inputs(default)`` inputs sent :data:`BATCH` at a time."""
    return max(1, inputs(default) // BATCH)
