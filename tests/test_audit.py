"""The audit log end to end: the official `mcp` client calls browser tools through a real gateway (the proxy and
the bridge) to a fake extension, and every call lands as one JSONL record in the state dir, named by its
session's tag, with its outcome and the guard's decision, and a digest of its arguments, never their values.
`openab audit` reads it back as a table.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import os
import stat
import subprocess
import sys
from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson
import pytest
from bridge_harness import bridge_pod, browser_session, relay_params, text_of
from fake_extension import FakeExtension, RemoteError, ToolFunction, text_result
from gateway_harness import RunningGateway, run_gateway
from mcp import Client
from mcp.shared.exceptions import MCPError
from test_proxy import endpoint, extension, first_text, mcp_client, open_session
from waits import eventually

from openab_browser.core.mcp.audit import AUDIT_FILE, AuditLog, call_record
from openab_browser.core.mcp.audit_read import read_records
from openab_browser.core.mcp.proxy import BrowserProxy
from openab_browser.core.session_naming import SessionNaming
from openab_browser.core.statedir import naming_secret
from openab_browser.gateway.cli import main

pytestmark = pytest.mark.anyio

GUARD = "dev.openab/guard"
RULE = "dev.openab/guard_rule"
PASSWORD = "hunter2-correct-horse-battery"  # what must never reach the log
OPENAB = str(Path(sys.executable).parent / "openab")
LONG = bool(os.environ.get("OPENAB_LONG"))


def digest(arguments: dict[str, Any]) -> str:
    """The argument digest, computed here independently: sha256 of the canonical JSON, 16 hex digits."""
    canonical = json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def ends(state_dir: Path) -> list[dict[str, Any]]:
    """The records of calls that ended: a state-changing step's ``running`` record (the journal's) left out."""
    return [r for r in read_records(state_dir) if r.get("state") != "running"]


def audit_names(state_dir: Path) -> list[str]:
    return sorted(path.name for path in state_dir.glob(AUDIT_FILE + "*"))


def audit_bytes(state_dir: Path) -> bytes:
    return b"".join(path.read_bytes() for path in sorted(state_dir.glob(AUDIT_FILE + "*")))


def tag_of(state_dir: Path, session_id: str) -> str:
    return SessionNaming(naming_secret(state_dir)).tag(session_id)


@contextlib.asynccontextmanager
async def proxied_session(
    state_dir: Path, tools: dict[str, ToolFunction], **settings: Any
) -> AsyncIterator[tuple[RunningGateway, FakeExtension, str]]:
    """A gateway keeping its state in ``state_dir``, and a session whose browser has ``tools``."""
    async with run_gateway(state_dir=state_dir, **settings) as gateway, extension(gateway) as ext:
        for name, function in tools.items():
            ext.add_tool(name, function)
        yield gateway, ext, await open_session(gateway, ext)


async def typed(_arguments: dict[str, Any]) -> dict[str, Any]:
    # What the extension answers once the person allowed typing into a password field.
    return {**text_result("typed into [ref=e1]"), "_meta": {GUARD: "asked-allowed", RULE: "secret-always-asks"}}


class EveryOutcome:
    """One call ending each way a call can end, in this order: ok (asked), tool-error (denied), ok (no guard),
    error, cancelled, outcome-unknown (the extension's socket drops mid-call)."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.tools: dict[str, ToolFunction] = {
            "browser_type": typed, "browser_click": denied, "browser_snapshot": lambda _a: _text("- page"),
            "browser_select_option": failing, "browser_wait_for": self.hang, "browser_navigate": self.hang,
        }

    async def hang(self, _arguments: dict[str, Any]) -> dict[str, Any]:
        self.started.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    async def run(self, gateway: RunningGateway, ext: FakeExtension, session_id: str) -> None:
        started = self.started
        assert isinstance(gateway.pod.browser, BrowserProxy)
        url, token = await endpoint(gateway, gateway.pod.browser, session_id)
        state_dir = gateway.pod.settings.state_dir
        async with mcp_client(url, token) as client:
            result = await client.call_tool("browser_type", {"ref": "e1", "text": PASSWORD})
            assert first_text(result) == "typed into [ref=e1]"
            assert (await client.call_tool("browser_click", {"ref": "e2"})).is_error
            await client.call_tool("browser_snapshot", {})
            with pytest.raises(MCPError, match="no option"):
                await client.call_tool("browser_select_option", {"ref": "e3", "value": PASSWORD})
            call = asyncio.create_task(client.call_tool("browser_wait_for", {"text": "never"}))
            async with asyncio.timeout(10):
                await started.wait()
            call.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await call
            await eventually(lambda: len(ends(state_dir)) == 5, 10)
            started.clear()
            call = asyncio.create_task(client.call_tool("browser_navigate", {"url": "https://example.org/"}))
            async with asyncio.timeout(10):
                await started.wait()
            await ext.ws.close()
            lost = await asyncio.wait_for(call, 10)
        assert lost.is_error and "outcome is unknown" in first_text(lost)


async def denied(_arguments: dict[str, Any]) -> dict[str, Any]:
    return {**text_result("not allowed by the user"), "isError": True,
            "_meta": {GUARD: "denied", RULE: "risky-word:payment"}}


async def failing(arguments: dict[str, Any]) -> dict[str, Any]:
    raise RemoteError({"code": -32602, "message": f"no option {arguments['value']}"})


async def _text(text: str) -> dict[str, Any]:
    return text_result(text)


# -- what is recorded -----------------------------------------------------------------------------------------


async def test_every_tool_call_is_one_record_with_its_outcome_and_no_argument_value(tmp_path: Path) -> None:
    calls = EveryOutcome()
    async with proxied_session(tmp_path, calls.tools) as (gateway, ext, session_id):
        await calls.run(gateway, ext, session_id)
        await eventually(lambda: len(ends(tmp_path)) == 6, 10)
    records = ends(tmp_path)
    assert [(r["tool"], r["outcome"], r.get("reason"), r["guard"], r.get("guard_rule")) for r in records] == [
        ("browser_type", "ok", None, "asked-allowed", "secret-always-asks"),
        ("browser_click", "tool-error", None, "denied", "risky-word:payment"),
        ("browser_snapshot", "ok", None, "none", None),
        ("browser_select_option", "error", "-32602 invalid params", "none", None),
        ("browser_wait_for", "cancelled", None, "none", None),
        ("browser_navigate", "outcome-unknown", "browser disconnected", "none", None),
    ]
    tag = tag_of(tmp_path, session_id)
    assert {r["session"] for r in records} == {tag}
    assert records[0]["args"] == digest({"ref": "e1", "text": PASSWORD})
    assert records[2]["args"] == digest({})
    assert records[0]["args"] != records[3]["args"]
    for record in records:
        assert set(record) <= {"time", "session", "tool", "outcome", "ms", "guard", "guard_rule", "args", "reason",
                               "action", "state"}
        assert record["ms"] >= 0
        assert datetime.fromisoformat(record["time"]).tzinfo is not None
    raw = audit_bytes(tmp_path)
    # Neither the typed password (nor the browser's error quoting it) nor the session's id, its resume capability.
    assert PASSWORD.encode() not in raw
    assert session_id.encode() not in raw
    assert stat.S_IMODE((tmp_path / AUDIT_FILE).stat().st_mode) == 0o600


async def test_the_audit_log_can_be_turned_off(tmp_path: Path) -> None:
    async with proxied_session(tmp_path, {"browser_type": typed}, audit_log=False) as (gateway, _ext, session_id):
        assert isinstance(gateway.pod.browser, BrowserProxy)
        async with mcp_client(*await endpoint(gateway, gateway.pod.browser, session_id)) as client:
            await client.call_tool("browser_type", {"ref": "e1", "text": "x"})
    assert not (tmp_path / AUDIT_FILE).exists()


async def test_a_bridge_call_is_recorded_too() -> None:
    async with bridge_pod() as pod, browser_session(pod, "alice") as (session_id, _extension):
        state_dir = pod.gateway.pod.settings.state_dir
        async with Client(relay_params(pod.channel(session_id), pod.socket), mode="legacy") as client:
            result = await client.call_tool("browser_navigate", {"url": "https://example.org/"})
            assert text_of(result) == "alice navigated to https://example.org/"
        await eventually(lambda: len(ends(state_dir)) == 1, 10)
        (record,) = ends(state_dir)
        assert (record["tool"], record["outcome"], record["session"]) == (
            "browser_navigate", "ok", tag_of(state_dir, session_id)
        )
        assert record["args"] == digest({"url": "https://example.org/"})


# -- the file ---------------------------------------------------------------------------------------------------


async def test_a_link_planted_at_the_log_is_not_followed_and_calls_still_work(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    target = tmp_path / "elsewhere"
    target.write_bytes(b"")
    (tmp_path / AUDIT_FILE).symlink_to(target)
    caplog.set_level(logging.ERROR, logger="openab_browser.core.mcp.audit")
    async with proxied_session(tmp_path, {"browser_type": typed}) as (gateway, _ext, session_id):
        assert isinstance(gateway.pod.browser, BrowserProxy)
        async with mcp_client(*await endpoint(gateway, gateway.pod.browser, session_id)) as client:
            for n in range(2):  # the second on purpose: the same call again is answered from the journal otherwise
                result = await client.call_tool("browser_type", {"ref": "e1", "text": PASSWORD, "repeat": n > 0})
                assert first_text(result) == "typed into [ref=e1]"  # the call is never failed by its record
            assert target.read_bytes() == b""
            assert (tmp_path / AUDIT_FILE).is_symlink()
            # Said once, with what to do, not once per call.
            said = [r.getMessage() for r in caplog.records if r.name == "openab_browser.core.mcp.audit"]
            assert len(said) == 1 and "symbolic link" in said[0] and "remove it" in said[0], said
            # Once the operator removes the link, the next call is recorded, in a file of its own.
            (tmp_path / AUDIT_FILE).unlink()
            await client.call_tool("browser_type", {"ref": "e1", "text": PASSWORD, "repeat": True})
    assert len(ends(tmp_path)) == 1
    assert not (tmp_path / AUDIT_FILE).is_symlink()


@pytest.mark.parametrize("backups", [3, 0])
def test_rotation_at_the_size_bound_keeps_the_count_of_files(tmp_path: Path, backups: int) -> None:
    log = AuditLog(tmp_path, tag=SessionNaming().tag, max_bytes=4096, backups=backups)
    for n in range(200):  # about 40 KiB of records: the bound is crossed ten times
        log.tool_call("sess_x", {"name": "browser_click", "arguments": {"n": n}}, {"content": []}, 0.001)
    assert audit_names(tmp_path) == [AUDIT_FILE, *(f"{AUDIT_FILE}.{n}" for n in range(1, backups + 1))]
    for path in tmp_path.glob(AUDIT_FILE + "*"):
        assert path.stat().st_size <= 4096
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    # What is kept is the newest records, in order, none torn.
    kept = [record["args"] for record in read_records(tmp_path)]
    newest = [digest({"n": n}) for n in range(200)]
    assert kept == newest[len(newest) - len(kept):]
    assert len(kept) > (backups + 1) * 10


def test_a_torn_line_costs_only_its_own_record(tmp_path: Path) -> None:
    log = AuditLog(tmp_path, tag=SessionNaming().tag)
    log.tool_call("sess_x", {"name": "browser_back"}, {"content": []}, 0.001)
    with open(tmp_path / AUDIT_FILE, "ab") as f:
        f.write(b'{"time": "2026-')  # a writer that died mid-record
    # The next record starts a line of its own: only the torn one is lost.
    log.tool_call("sess_x", {"name": "browser_tabs"}, {"content": []}, 0.001)
    assert [record["tool"] for record in read_records(tmp_path)] == ["browser_back", "browser_tabs"]


def test_the_open_log_moved_removed_or_replaced_by_a_link_is_never_written_through(tmp_path: Path) -> None:
    """The file stays open between records: what an operator or an attacker does to its name meanwhile must
    still count. A moved log is not written behind its new name; a removed one is started afresh; a link planted
    in its place is not followed; a copy made readable by others is not written."""
    log = AuditLog(tmp_path, tag=SessionNaming().tag)
    path = tmp_path / AUDIT_FILE

    def call(name: str) -> None:
        log.tool_call("sess_x", {"name": name}, {"content": []}, 0.001)

    call("browser_back")
    moved = tmp_path / "audit-kept.jsonl"
    path.rename(moved)
    call("browser_snapshot")
    assert [r["tool"] for r in map(json.loads, moved.read_text().splitlines())] == ["browser_back"]
    assert [r["tool"] for r in read_records(tmp_path)] == ["browser_snapshot"]

    path.unlink()
    call("browser_tabs")
    assert [r["tool"] for r in read_records(tmp_path)] == ["browser_tabs"]

    target = tmp_path / "elsewhere"
    target.write_bytes(b"")
    path.unlink()
    path.symlink_to(target)
    call("browser_back")
    assert target.read_bytes() == b"" and path.is_symlink()

    path.unlink()
    path.write_bytes(b"")
    path.chmod(0o644)
    call("browser_back")
    assert path.read_bytes() == b""
    log.close()


def test_records_keep_their_order_and_count_across_a_close(tmp_path: Path) -> None:
    log = AuditLog(tmp_path, tag=SessionNaming().tag)
    for n in range(50):
        log.tool_call("sess_x", {"name": "browser_back" if n % 2 else "browser_tabs"}, {"content": []}, 0.001)
        if n == 25:
            log.close()  # as a pod's shutdown does; a later record opens it again
    assert len(list(read_records(tmp_path))) == 50
    log.close()


# -- `openab audit` ---------------------------------------------------------------------------------------------


async def test_openab_audit_shows_the_sessions_and_a_sessions_calls(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    calls = EveryOutcome()
    async with proxied_session(tmp_path, calls.tools) as (gateway, ext, session_id):
        await calls.run(gateway, ext, session_id)
        await eventually(lambda: len(ends(tmp_path)) == 6, 10)
    tag = tag_of(tmp_path, session_id)
    capsys.readouterr()

    assert main(["audit", "--state-dir", str(tmp_path)]) == 0
    header, row = capsys.readouterr().out.splitlines()
    assert header.split() == ["SESSION", "FIRST", "LAST", "CALLS", "ERRORS"]
    assert row.split()[0] == tag and row.split()[-2:] == ["6", "4"]

    # By its id (turned into the tag with the pod's kept secret) or by its tag: the same calls.
    assert main(["audit", session_id, "--state-dir", str(tmp_path)]) == 0
    by_id = capsys.readouterr().out
    assert main(["audit", tag, "--state-dir", str(tmp_path)]) == 0
    assert capsys.readouterr().out == by_id
    lines = by_id.splitlines()
    assert lines[0].split() == ["TIME", "TOOL", "STATE", "SITE", "OUTCOME", "MS", "GUARD", "RULE", "ARGS"]
    assert len(lines) == 7  # one row a call: a step's running record and its end are one row
    assert lines[1].split()[2:6] == ["browser_type", "committed", "-", "ok"] and lines[1].split()[-3:] == [
        "asked-allowed", "secret-always-asks", digest({"ref": "e1", "text": PASSWORD})
    ]
    assert lines[2].split()[-3:-1] == ["denied", "risky-word:payment"]
    assert lines[3].split()[-3:-1] == ["none", "-"]  # a read the guard did not judge: no rule
    states = [line.split()[3] for line in lines[1:]]
    assert states == ["committed", "failed", "read", "failed", "read", "effect_unknown"]
    assert "outcome-unknown (browser disconnected)" in lines[6]
    assert len({line.index("TOOL") if i == 0 else None for i, line in enumerate(lines)} - {None}) == 1
    assert {line.find("browser_") for line in lines[1:]} == {lines[0].index("TOOL")}  # aligned
    assert PASSWORD not in by_id

    assert main(["audit", tag, "--json", "--state-dir", str(tmp_path)]) == 0
    as_json = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert as_json == list(read_records(tmp_path))

    assert main(["audit", "s-0000000000", "--state-dir", str(tmp_path)]) == 1
    assert "openab audit" in capsys.readouterr().err


def test_openab_audit_orders_calls_by_when_they_started(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    now = [1_800_000_000.0]
    log = AuditLog(tmp_path, tag=SessionNaming(naming_secret(tmp_path)).tag, clock=lambda: now[0])
    # A long wait written when it ended, after a short click that started later.
    log.tool_call("sess_x", {"name": "browser_click"}, {"content": []}, 0.5)
    now[0] += 10
    log.tool_call("sess_x", {"name": "browser_wait_for"}, {"content": []}, 30.0)
    assert main(["audit", "sess_x", "--state-dir", str(tmp_path)]) == 0
    assert [line.split()[2] for line in capsys.readouterr().out.splitlines()[1:]] == ["browser_wait_for",
                                                                                      "browser_click"]
    assert main(["audit", "--state-dir", str(tmp_path)]) == 0
    row = capsys.readouterr().out.splitlines()[1].split()
    assert (row[2], row[4]) == ("07:59:40.000", "07:59:59.500")  # first and last, whatever the order written


def test_a_log_other_users_can_read_is_not_written(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    log = AuditLog(tmp_path, tag=SessionNaming().tag)
    (tmp_path / AUDIT_FILE).write_bytes(b"")
    (tmp_path / AUDIT_FILE).chmod(0o644)
    log.tool_call("sess_x", {"name": "browser_back"}, {"content": []}, 0.001)
    assert (tmp_path / AUDIT_FILE).read_bytes() == b""
    assert any("chmod 600" in record.getMessage() for record in caplog.records)


def test_openab_audit_without_a_log_says_where_it_looked(tmp_path: Path) -> None:
    done = subprocess.run(
        [OPENAB, "audit"], env={**os.environ, "OPENAB_STATE_DIR": str(tmp_path)},
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert done.returncode == 1
    assert f"no audit log in {tmp_path}" in done.stderr


# What a hostile agent or extension names a tool: a forged second row, terminal commands, a bidi override.
FORGED_ROW = "browser_click\n2026-12-01 00:00:00.000  browser_type  ok  1.0  allowed  0000000000000000"
HOSTILE_NAMES = (FORGED_ROW, "\x1b[2K\x1b]0;pwned\x07browser_back", "\u009b31mbrowser_\u202eevil\x7f")


async def openab_audit(*args: str, env: dict[str, str] | None = None) -> bytes:
    """`openab audit ARGS` as a person runs it; its output, once it exited 0."""
    done = await asyncio.to_thread(subprocess.run, [OPENAB, "audit", *args], capture_output=True, timeout=60,
                                   env=env, check=False)
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout


def _controls(output: bytes) -> list[str]:
    """Every control character (C0 but the newline ending a row, DEL, C1) or bidi override in ``output``."""
    return [f"U+{ord(c):04X}" for c in output.decode("utf-8")
            if (ord(c) < 0x20 and c != "\n") or 0x7F <= ord(c) <= 0x9F or c in "\u202a\u202b\u202c\u202d\u202e"]


async def test_a_hostile_tool_name_is_recorded_as_other_and_never_forges_a_row(tmp_path: Path) -> None:
    async with proxied_session(tmp_path, {"browser_snapshot": lambda _a: _text("- page")}) as (
        gateway, _ext, session_id
    ):
        assert isinstance(gateway.pod.browser, BrowserProxy)
        async with mcp_client(*await endpoint(gateway, gateway.pod.browser, session_id)) as client:
            await client.call_tool("browser_snapshot", {})
            for name in HOSTILE_NAMES:  # sent to the session's real MCP endpoint: refused, and recorded
                with pytest.raises(MCPError, match="Unknown tool"):
                    await client.call_tool(name, {})
        await eventually(lambda: len(list(read_records(tmp_path))) == 1 + len(HOSTILE_NAMES), 10)
    records = list(read_records(tmp_path))
    digests = [hashlib.sha256(json.dumps(name, ensure_ascii=False).encode()).hexdigest()[:12] for name in HOSTILE_NAMES]
    assert [r["tool"] for r in records] == ["browser_snapshot", *(f"other:{d}" for d in digests)]
    # A record an earlier openab wrote with the raw name: `openab audit` shows it escaped all the same.
    raw = orjson.dumps({**records[1], "tool": FORGED_ROW, "guard": "\x1b[2K\u0085none"}) + b"\n"
    await asyncio.to_thread(lambda: (tmp_path / AUDIT_FILE).write_bytes(audit_bytes(tmp_path) + raw))
    tag = tag_of(tmp_path, session_id)
    table = await openab_audit(tag, "--state-dir", str(tmp_path))
    rows = table.decode().splitlines()
    assert len(rows) == 1 + len(records) + 1, table.decode()  # the header, and one row a record
    assert _controls(table) == [], table
    (forged,) = [row for row in rows if "browser_click\\n2026-12-01" in row]
    assert "\\x1b[2K\\x85none" in forged
    listing = await openab_audit("--state-dir", str(tmp_path))
    assert len(listing.decode().splitlines()) == 2 and _controls(listing) == []
    as_json = await openab_audit(tag, "--json", "--state-dir", str(tmp_path))
    assert _controls(as_json) == []
    assert FORGED_ROW in [json.loads(line)["tool"] for line in as_json.decode().splitlines()]


# What a browser (or a page through it) could send as the guard's rule: never a word of the vocabulary.
ODD_RULES: list[Any] = [
    "", "x" * 65, "x" * 1_000_000, "Routine", "site rule",
    "routine\nopenab: the person approved uploading keys/acp.key",
    "risky-word:pay\u202e", "routine\x1b[2K", "<b>routine</b>", "routine ", "r\u00e9gle", 7, True, None, ["routine"],
    {"rule": "routine"},
]


def test_a_guard_rule_is_kept_only_as_a_word_of_the_vocabulary() -> None:
    def rule_of(rule: Any) -> Any:
        ended = {"content": [], "_meta": {GUARD: "allowed", RULE: rule}}
        record = call_record(started=1_800_000_000.0, session="s-0123456789", tool="browser_click", arguments={},
                             ended=ended, seconds=0.01)
        assert record["guard"] == "allowed"  # the decision stands without its rule
        return record.get("guard_rule", "(none)")

    assert [rule_of(rule) for rule in ODD_RULES] == ["(none)"] * len(ODD_RULES)
    for rule in ("routine", "site-rule-never", "risky-word:payment", "person_timeout", "x" * 64):
        assert rule_of(rule) == rule


def test_only_an_error_that_names_the_journals_word_is_an_unknown_outcome() -> None:
    """The browser's word that a step may have happened (lib/stages/page-left.js) counts on an isError result with
    exactly "effect_unknown"; anything else a browser sends there leaves the record as the result says."""
    def outcome_of(result: dict[str, Any]) -> tuple[str, str | None, str]:
        record = call_record(started=1_800_000_000.0, session="s-0123456789", tool="browser_click", arguments={},
                             ended=result, seconds=0.01, action="act-" + "a" * 22)
        return record["outcome"], record.get("reason"), record["state"]

    unknown = {"dev.openab/outcome": "effect_unknown"}
    assert outcome_of({"content": [], "isError": True, "_meta": unknown}) == (
        "outcome-unknown", "page left mid-step", "effect_unknown")
    assert outcome_of({"content": [], "_meta": unknown}) == ("ok", None, "committed")  # a success is one
    for odd in ("Effect_unknown", "effect_unknown ", "committed", "x" * 100_000, ["effect_unknown"],
                {"state": "effect_unknown"}, None, 1):
        assert outcome_of({"content": [], "isError": True, "_meta": {"dev.openab/outcome": odd}}) == (
            "tool-error", None, "failed"), odd
    assert outcome_of({"content": [], "isError": True, "_meta": "effect_unknown"}) == ("tool-error", None, "failed")


async def test_an_odd_guard_rule_from_the_browser_is_left_out_of_the_record_and_the_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rules = iter(["key-shortcut", "x" * 100_000, "routine\nopenab: the person approved", "risky-word:pay\u202e"])

    async def click(_arguments: dict[str, Any]) -> dict[str, Any]:
        return {**text_result("clicked"), "_meta": {GUARD: "asked-allowed", RULE: next(rules)}}

    async with proxied_session(tmp_path, {"browser_click": click}) as (gateway, _ext, session_id):
        assert isinstance(gateway.pod.browser, BrowserProxy)
        async with mcp_client(*await endpoint(gateway, gateway.pod.browser, session_id)) as client:
            for n in range(4):
                await client.call_tool("browser_click", {"ref": f"e{n}"})
        await eventually(lambda: len(ends(tmp_path)) == 4, 10)
    assert [r.get("guard_rule") for r in ends(tmp_path)] == ["key-shortcut", None, None, None]
    capsys.readouterr()
    assert main(["audit", session_id, "--state-dir", str(tmp_path)]) == 0
    rows = capsys.readouterr().out.splitlines()
    assert len(rows) == 5 and [row.split()[-3:-1] for row in rows[1:]] == [
        ["asked-allowed", "key-shortcut"], *[["asked-allowed", "-"]] * 3]


# -- long ----------------------------------------------------------------------------------------------------------


@pytest.mark.long
@pytest.mark.skipif(not LONG, reason="the full-size run: OPENAB_LONG=1")
async def test_many_calls_through_the_proxy_rotate_and_keep_the_newest(tmp_path: Path) -> None:
    async with proxied_session(
        tmp_path, {"browser_type": typed}, audit_max_bytes=4096, audit_backups=2
    ) as (gateway, _ext, session_id):
        assert isinstance(gateway.pod.browser, BrowserProxy)
        async with mcp_client(*await endpoint(gateway, gateway.pod.browser, session_id)) as client:
            for n in range(1000):
                await client.call_tool("browser_type", {"ref": "e1", "text": f"{PASSWORD}-{n}"})
    assert audit_names(tmp_path) == [AUDIT_FILE, f"{AUDIT_FILE}.1", f"{AUDIT_FILE}.2"]
    kept = [record["args"] for record in read_records(tmp_path)]
    assert kept[-1] == digest({"ref": "e1", "text": f"{PASSWORD}-999"})
    assert PASSWORD.encode() not in audit_bytes(tmp_path)
