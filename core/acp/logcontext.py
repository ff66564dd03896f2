"""Which session and which request a log line belongs to, for the pod's structured (JSON) log.

The ACP server sets these where a request is handled and where a session's turn runs; every log record made
in that work (and in the tasks it starts, which copy the context) carries them. The session is its tag
(:meth:`~openab_browser.core.session_naming.SessionNaming.tag`), never its id: the id resumes the session.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar, Token
from typing import Final

__all__ = ["REQUEST_ID", "SESSION_TAG", "log_context"]

SESSION_TAG: Final[ContextVar[str | None]] = ContextVar("openab_session_tag", default=None)
REQUEST_ID: Final[ContextVar[str | None]] = ContextVar("openab_request_id", default=None)
# A request id is the client's to choose: a log line keeps a bounded piece of it.
_MAX_REQUEST_ID_CHARS: Final = 64


@contextlib.contextmanager
def log_context(*, session_tag: str | None = None, request_id: object = None) -> Iterator[None]:
    """Log records made inside the block carry ``session_tag`` and ``request_id``. Both are set (``None`` too)
    and both put back after, so work inside may name the session it just opened (:data:`SESSION_TAG`
    ``.set``) without it outliving the block."""
    request = None if request_id is None else str(request_id)[:_MAX_REQUEST_ID_CHARS]
    tokens: list[tuple[ContextVar[str | None], Token[str | None]]] = [
        (SESSION_TAG, SESSION_TAG.set(session_tag)), (REQUEST_ID, REQUEST_ID.set(request)),
    ]
    try:
        yield
    finally:
        for var, token in reversed(tokens):
            var.reset(token)
