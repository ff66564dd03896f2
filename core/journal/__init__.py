"""The action journal (issue 25, docs/journal.md), sans-I/O: every state-changing step of a session, its state and
the de-duplication of re-issued calls. The asyncio side (running a step, joining it, telling the panel) is
:mod:`openab_browser.core.mcp.journal`; the records on disk are the audit log's
(:mod:`openab_browser.core.mcp.audit`)."""

from typing import Final

from .. import METHOD_PREFIX
from .steps import (
    ACTION_PREFIX,
    Answer,
    Join,
    Journal,
    JournalLimits,
    Run,
    State,
    Step,
    new_action,
    site_of,
)
from .words import printable, untrusted

JOURNAL_METHOD: Final = METHOD_PREFIX + "journal"
"""The pod's notification to the panel: ``{"sessionId", "steps": [STEP, ...]}`` (docs/journal.md)."""

__all__ = [
    "ACTION_PREFIX",
    "JOURNAL_METHOD",
    "Answer",
    "Join",
    "Journal",
    "JournalLimits",
    "Run",
    "State",
    "Step",
    "new_action",
    "printable",
    "site_of",
    "untrusted",
]
