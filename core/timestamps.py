"""The time a record carries: ISO 8601 in UTC to the millisecond, ``2026-12-07T10:45:03.127Z``.

The audit log, the journal's steps, the JSON log lines and ``pod.json`` all write it, several times per tool call;
the seconds' part is made once a second (a ``datetime`` per record was a noticeable part of an audit record).
The digits are the ones ``datetime.fromtimestamp(t, UTC).isoformat(timespec="milliseconds")`` gives.
"""

from __future__ import annotations

import math
import time

__all__ = ["iso_utc"]

_last: tuple[int, str] = (-1, "")  # the second last written and its text: one tuple, replaced whole


def iso_utc(epoch: float) -> str:
    """``epoch`` (seconds since 1970, as ``time.time()``) as the records' time."""
    global _last
    # As datetime.fromtimestamp: the fraction rounded to the microsecond (half to even), a carry into the second.
    fraction, whole = math.modf(epoch)
    second, micro = int(whole), round(fraction * 1e6)
    if micro >= 1_000_000:
        second, micro = second + 1, micro - 1_000_000
    elif micro < 0:
        second, micro = second - 1, micro + 1_000_000
    last_second, text = _last
    if second != last_second:
        text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
        _last = (second, text)
    return f"{text}.{micro // 1000:03d}Z"
