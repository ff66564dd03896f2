"""A whole flow at an operator's deepest log levels, debug and trace, with every log record scanned for secrets.

The suite scans its own log at `openab run`'s default level (tests/conftest.py, tests/log_scan.py); this runs
one flow that touches every credential at debug and at trace: the pairing key made on first start and presented
as a subprotocol, the session's proxy bearer token and MCP session, the session naming secret, session ids, and
a browser tool call that types a password. No credential may appear at either level; page content (the frames'
text, the typed password) only at trace, which logs frames on purpose, and never at debug.
"""

from __future__ import annotations

import logging
import os
import secrets
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from agents.fake_model import Call, FakeModel, Script, serving
from log_scan import scanning
from test_runtime_pod import first_run, prompt
from uvicorn.logging import AccessFormatter

from openab_browser.core.mcp.proxy import BrowserProxy
from openab_browser.core.settings import Settings
from openab_browser.gateway.logs import add_secret

pytestmark = pytest.mark.anyio

# A websockets frame line with its content ("< TEXT '{...}' [114 bytes]"); below trace it is "< TEXT [114 bytes]".
FRAME_CONTENT = "TEXT '"


@pytest.mark.parametrize("level", ["debug", "trace"])
async def test_no_credential_reaches_the_log_at_debug_or_trace(level: str, state: Path) -> None:
    # Not from `secrets`: at trace the password is in the frames on purpose, and the scan is for credentials.
    password = f"hunter2-{uuid.uuid4().hex}"
    with scanning(level) as scan, serving(FakeModel()) as model:
        scan.watched[password] = 0
        scan.watched[FRAME_CONTENT] = 0
        model.set_script(Script(calls=[Call("browser_type", {"ref": "e2", "text": password}),
                                       Call("browser_click", {"ref": "e3"})]))
        settings = Settings(port=0, state_dir=state, model_url=f"{model.url}/v1")
        base_env = {"PATH": os.environ["PATH"], "HOME": str(state.parent)}
        async with first_run(settings, base_env=base_env) as (pod, ext, browser, session_id):
            turn = await prompt(ext, session_id, "Sign in with my password, please.")
            assert isinstance(pod.browser, BrowserProxy)
            bearer = pod.browser.endpoint(session_id)
            assert bearer is not None and bearer.app.sessions, "the agent reached the browser with its bearer"
            await ext.request("session/close", {"sessionId": session_id})
    assert turn.result == {"stopReason": "end_turn"}, turn
    assert browser.typed == {"Name": password} and browser.clicked == ["Sign in"]
    assert scan.lines > 50 and scan.secrets > 3, scan.summary()
    assert scan.leak_count == 0, "\n".join([scan.summary(), *scan.leaks])
    if level == "trace":
        assert scan.watched[FRAME_CONTENT] > 0, "trace logs the frames' content: the scan saw it"
    else:
        assert scan.watched[FRAME_CONTENT] == 0 and scan.watched[password] == 0, \
            "page content stays out of the log below trace"


def test_an_access_line_keeps_its_arguments_shape_and_no_credential() -> None:
    """uvicorn's access formatter unpacks the record's five arguments: they stay five, each redacted, and where
    only the whole line reads as a credential (a word in one argument, its value in the next), all words go."""
    key = secrets.token_hex(32)
    formatter = AccessFormatter('%(client_addr)s - "%(request_line)s" %(status_code)s', use_colors=False)
    with scanning("info") as scan:
        add_secret(key)
        factory = logging.getLogRecordFactory()

        def access(path: str, status: int) -> str:
            args = ("127.0.0.1:1", "GET", path, "1.1", status)
            record = factory("uvicorn.access", logging.INFO, __file__, 1, '%s - "%s %s HTTP/%s" %d', args, None)
            assert key not in record.getMessage()
            return formatter.format(record)

        assert access("/healthz", 200) == '127.0.0.1:1 - "GET /healthz HTTP/1.1" 200 OK'
        assert access(f"/acp?token={key}", 401) == '127.0.0.1:1 - "GET /acp?[redacted] HTTP/1.1" 401 Unauthorized'
        assert access(f"/{key}", 404) == '127.0.0.1:1 - "GET /[redacted] HTTP/1.1" 404 Not Found'
        assert access("/x authorization:", 404) == '[redacted] - "[redacted] [redacted] HTTP/[redacted]" 404 Not Found'
    assert scan.leak_count == 0, scan.leaks


@pytest.mark.parametrize("workers", ["0", "2"])
def test_a_leak_in_any_worker_fails_the_run(tmp_path: Path, workers: str) -> None:
    """scripts/test runs the suite's files side by side (pytest-xdist): a secret one worker logged still fails the
    whole run and is named, as in one process."""

    for n in range(2):  # two files, so with two workers each gets one
        (tmp_path / f"test_planted_{n}.py").write_text(
            "import logging, secrets\n\n\ndef test_logs() -> None:\n"
            f"    logging.getLogger('openab_browser.planted').warning('key %s', secrets.token_urlsafe(32) * {n})\n")
    tests = Path(__file__).parent
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "conftest", "-n", workers, "--dist", "loadfile", "-q",
         "-p", "no:cacheprovider", "--rootdir", str(tmp_path), str(tmp_path)],
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": os.pathsep.join([str(tests), os.environ.get("PYTHONPATH", "")]),
                           "OPENAB_LOG_SCAN": "info"},
        capture_output=True, text=True, timeout=120, check=False)
    out = run.stdout + run.stderr
    assert "2 passed" in out, out
    assert run.returncode == 1, out
    assert "minted secrets and session ids: 1 found" in out, out
    assert "leaked: openab_browser.planted: a minted secret" in out, out
