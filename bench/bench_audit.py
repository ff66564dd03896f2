"""Issue 39: what one audit record costs the pod, the file kept open (as shipped) against a file opened for every
record (as before issue 39), same run.

Each path appends the same record a click's end writes (``call_record`` of a ``browser_click`` with its guard,
action, state and receipt) to its own fresh ``audit.jsonl`` in a temporary state dir, in alternating rounds:

- ``kept open``: :meth:`AuditLog.write` as shipped: one ``lstat`` of the name (still this file?) and one
  ``write``;
- ``opened per record``: the same bytes with the syscalls the earlier ``write`` made for each record: ``open``
  (``O_NOFOLLOW``, ``O_APPEND``), ``fstat`` (a private plain file of ours?), ``pread`` of the last byte (did the
  last line end?), ``write``, ``close``.

Both keep the same promises (never through a link, never into a file others can read, a torn line ended): the
kept-open file checks its name before each record instead of opening it (tests/test_audit.py).

Run: ``python bench/bench_audit.py [--quick] [--out DIR]``.
"""

from __future__ import annotations

import asyncio
import errno
import os
import stat
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import orjson

from bench.common import arguments, interleaved, summary, timed_sync, write_result
from openab_browser.core.mcp.audit import AUDIT_FILE, AuditLog, call_record
from openab_browser.core.session_naming import SessionNaming

CLICK_END: Any = {"content": [{"type": "text", "text": "clicked"}],
                  "_meta": {"dev.openab/guard": "allowed", "dev.openab/guard_rule": "routine"}}


def _record() -> dict[str, Any]:
    return call_record(started=time.time(), session=SessionNaming(b"k" * 32).tag("sess_bench"), tool="browser_click",
                       arguments={"ref": "e12"}, ended=CLICK_END, seconds=0.0123, file=None, action="act_1",
                       state=None, deduplicated=None)


def _opened_per_record(path: Path, line: bytes) -> None:
    """The earlier write's syscalls for one record."""
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or stat.S_IMODE(st.st_mode) & 0o077:
            raise OSError(errno.EPERM, "not a private plain file of ours")
        if st.st_size and os.pread(fd, 1, st.st_size - 1) != b"\n":
            line = b"\n" + line
        os.write(fd, line)
    finally:
        os.close(fd)


def main(argv: Sequence[str] | None = None) -> Path:
    args = arguments(__doc__ or "", argv)
    rounds, records = (4, 200) if args.quick else (20, 2000)
    with tempfile.TemporaryDirectory() as folder:
        kept_dir, opened_dir = Path(folder) / "kept", Path(folder) / "opened"
        log = AuditLog(kept_dir, tag=str, max_bytes=1 << 30)
        opened_dir.mkdir(mode=0o700)
        record = _record()
        samples = asyncio.run(interleaved(rounds, {
            "kept open": timed_sync(records, lambda: log.write(record)),
            "opened per record": timed_sync(records, lambda: _opened_per_record(opened_dir / AUDIT_FILE,
                                                                            orjson.dumps(record) + b"\n")),
        }))
        log.close()
        assert (kept_dir / AUDIT_FILE).stat().st_size == (opened_dir / AUDIT_FILE).stat().st_size
    stats = {name: summary(values) for name, values in samples.items()}
    return write_result("audit", {
        "quick": args.quick, "rounds": rounds, "records_per_round": records, "paths": stats,
        "saved_per_record_us": round((stats["opened per record"]["p50_ms"] - stats["kept open"]["p50_ms"]) * 1000, 2),
    }, args.out)


if __name__ == "__main__":
    main()
