"""`openab audit`: read the pod's audit log of browser tool calls (docs/runtime.md, "Audit log").

With no session, one line per session: its tag, its first and last call, how many calls and how many did not
end ``ok``. With a session (its tag as listed, or its id, which is turned into the tag with the pod's kept
naming secret), its calls in order, a state-changing step's records (``running``, then its end) folded into one
row with its journal state and site (docs/journal.md). ``--json`` prints the records as JSON lines, for scripts.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from openab_browser.core.journal import printable

__all__ = ["fold_steps", "printable", "register", "render_table"]

_TAG = re.compile(r"s-[0-9a-f]{10}")
_CALL_COLUMNS = ("time", "tool", "state", "site", "outcome", "ms", "guard", "rule", "args")
_SESSION_COLUMNS = ("session", "first", "last", "calls", "errors")


def register(commands: Any) -> None:
    audit = commands.add_parser(
        "audit",
        help="show the audit log of browser tool calls: the sessions, or one session's calls",
        description=(
            "Show the pod's audit log (<state dir>/audit.jsonl and its rotated files). With no SESSION, one line "
            "per session; with SESSION (a tag such as s-3f9a0c12be, or a session id), that session's calls: time "
            "(UTC), tool, the journal's state (read, running, committed, failed, effect_unknown, deduplicated), the "
            "site, outcome, duration, the guard's decision and the rule that made it, and a digest of the arguments "
            "(never their values)."
        ),
    )
    audit.add_argument("session", nargs="?", metavar="SESSION", help="a session's tag (s-...) or its id (sess_...)")
    audit.add_argument("--state-dir", type=Path,
                       help="the pod's state dir (default: the one `openab run` uses: $OPENAB_STATE_DIR, else "
                            "$XDG_STATE_HOME/openab, else ~/.local/state/openab)")
    audit.add_argument("--json", action="store_true", help="print JSON lines instead of a table")
    audit.set_defaults(handler=_audit)


def _audit(args: argparse.Namespace) -> int:
    from openab_browser.core.errors import ConfigurationError
    from openab_browser.core.mcp.audit_read import audit_files, read_records
    from openab_browser.core.settings import Settings

    out = sys.stdout
    try:
        # The state dir `openab run` chooses: the flag, else OPENAB_STATE_DIR, else $XDG_STATE_HOME/openab.
        state_dir = Settings.from_env(state_dir=args.state_dir).state_dir
    except ValueError as exc:
        print(f"openab audit: {exc}", file=sys.stderr)
        return 2
    if not audit_files(state_dir):
        print(f"openab audit: no audit log in {state_dir} (is it the pod's --state-dir?)", file=sys.stderr)
        return 1
    records = read_records(state_dir)
    if args.session is None:
        rows = _sessions(records)
        _print(rows, _SESSION_COLUMNS, args.json, out)
        return 0
    try:
        tag = _tag_of(args.session, state_dir)
    except ConfigurationError as exc:
        print(f"openab audit: {exc}", file=sys.stderr)
        return 2
    # Written as each call ended: in the order they started, a long call comes before those it overlapped.
    calls = sorted((record for record in records if record.get("session") == tag), key=lambda r: str(r.get("time")))
    if not calls:
        print(f"openab audit: no calls of session {tag} in {state_dir}; `openab audit` lists the sessions",
              file=sys.stderr)
        return 1
    if args.json:
        _print(calls, (), True, out)
    else:
        # A file call's record names its file (docs/files.md): the column is there when one of them does.
        columns = (*_CALL_COLUMNS, "file") if any(isinstance(r.get("file"), dict) for r in calls) else _CALL_COLUMNS
        _print([_call_row(record) for record in fold_steps(calls)], columns, False, out)
    return 0


def _tag_of(session: str, state_dir: Path) -> str:
    """The tag the records name ``session`` by: as given if it is one, else derived with the pod's secret."""
    if _TAG.fullmatch(session):
        return session
    from openab_browser.core.errors import ConfigurationError
    from openab_browser.core.session_naming import SessionNaming
    from openab_browser.core.statedir import NAMING_SECRET_FILE, kept_secret_path, naming_secret

    if not (kept := kept_secret_path(state_dir, NAMING_SECRET_FILE)).exists():  # never make one: it names nothing
        raise ConfigurationError(
            f"{kept} is missing, so a session id cannot be turned into its tag; give the "
            "tag (s-...) as `openab audit` lists it"
        )
    return SessionNaming(naming_secret(state_dir)).tag(session)


def fold_steps(records: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """One record per call: a journalled step's ``running`` records and its end become one (the end's fields,
    the start's time, and the guard's decision the browser told while it ran when the end has none); a step with no
    end stays ``running`` (the pod stopped, or it still runs)."""
    rows: list[Mapping[str, Any]] = []
    steps: dict[str, int] = {}  # action -> its row
    for record in records:
        action = record.get("action")
        if not isinstance(action, str):
            rows.append(record)
            continue
        at = steps.get(action)
        if at is None:
            steps[action] = len(rows)
            rows.append(record)
            continue
        # The guard's decision as the browser told it while the step ran stands where the end has none (its answer
        # was lost, or the pod died).
        prev = rows[at]
        if record.get("state") == "running":
            rows[at] = {**prev, **{k: record[k] for k in ("guard", "guard_rule") if k in record}}
            continue
        told = {k: prev[k] for k in ("guard", "guard_rule") if k in prev} if prev.get("guard", "none") != "none" else {}
        kept = told if record.get("guard", "none") == "none" else {}
        rows[at] = {**record, **kept, "time": prev.get("time", record.get("time"))}
    return rows


def _sessions(records: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One row per session, in the order their first record was written."""
    rows: dict[str, dict[str, Any]] = {}
    for record in records:
        if record.get("state") == "running":
            continue  # the start of a step: its end (if it has one) counts it
        tag, when = str(record.get("session", "?")), str(record.get("time", ""))
        row = rows.setdefault(tag, {"session": tag, "first": when, "last": when, "calls": 0, "errors": 0})
        # Records are written as calls end; their times are when they started (ISO strings order as times).
        row["first"], row["last"] = min(row["first"], when), max(row["last"], when)
        row["calls"] += 1
        row["errors"] += record.get("outcome") != "ok"
    return [{**row, "first": _when(row["first"]), "last": _when(row["last"])} for row in rows.values()]


def _call_row(record: Mapping[str, Any]) -> dict[str, Any]:
    outcome = str(record.get("outcome", "-"))  # a step that never ended has none
    reason = record.get("reason")
    state = record.get("state", "read")
    if record.get("deduplicated"):
        state = "deduplicated"  # answered from the journal: not done a second time
    return {
        "time": _when(str(record.get("time", ""))),
        "tool": record.get("tool", "?"),
        "state": state,
        "site": record.get("site") or "-",
        "outcome": f"{outcome} ({reason})" if reason else outcome,
        "ms": record.get("ms", "-"),
        "guard": record.get("guard", "none"),
        "rule": record.get("guard_rule") or "-",
        "args": record.get("args", ""),
        "file": _file_cell(record.get("file")),
    }


def _file_cell(file: Any) -> str:
    """A file call's file as one cell: its name (relative to the working folder), size and digest's start."""
    if not isinstance(file, dict):
        return ""
    digest = file.get("sha256")
    return f"{file.get('name', '?')} {file.get('size', '?')} B sha256:{str(digest)[:16] if digest else '?'}"


def _when(iso: str) -> str:
    return iso.replace("T", " ").removesuffix("Z")


def _print(rows: Sequence[Mapping[str, Any]], columns: Sequence[str], as_json: bool, out: TextIO) -> None:
    if as_json:
        import orjson

        for row in rows:
            # JSON escapes C0 controls, not C1 nor format characters: those are escaped here (only strings hold them).
            line = orjson.dumps(row).decode()
            out.write((_json_safe(line) if not line.isprintable() else line) + "\n")
        return
    out.write(render_table(rows, columns))


def render_table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str]) -> str:
    """``rows`` as left-aligned columns under a header, numbers aligned right."""
    cells = [[printable(str(row.get(column, ""))) for column in columns] for row in rows]
    widths = [max([len(column), *(len(line[i]) for line in cells)]) for i, column in enumerate(columns)]
    numeric = [all(_is_number(row.get(column)) for row in rows) and bool(rows) for column in columns]

    def line(values: Sequence[str]) -> str:
        padded = (v.rjust(w) if right else v.ljust(w) for v, w, right in zip(values, widths, numeric, strict=True))
        return "  ".join(padded).rstrip() + "\n"

    return line([c.upper() for c in columns]) + "".join(line(values) for values in cells)


def _json_safe(line: str) -> str:
    """A JSON line with what :func:`printable` escapes written as JSON escapes instead (a string's only place)."""
    return "".join(c if c == "\\" or printable(c) == c else _json_escape(c) for c in line)


def _json_escape(char: str) -> str:
    """``char`` as a JSON string escape (a pair of surrogates past the first plane)."""
    code = ord(char)
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
