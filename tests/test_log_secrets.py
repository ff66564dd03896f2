"""A whole flow at an operator's deepest log levels, debug and trace, with every log record scanned for secrets.

The suite scans its own log at `openab run`'s default level (tests/conftest.py, tests/log_scan.py); this runs
one flow that touches every credential at debug and at trace: the pairing key made on first start and presented
as a subprotocol, the session's proxy bearer token and MCP session, the session naming secret, session ids, and
a browser tool call that types a password. No credential may appear at either level; page content (the frames'
text, the typed password) only at trace, which logs frames on purpose, and never at debug.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest
from agents.fake_model import Call, FakeModel, Script, serving
from log_scan import scanning
from test_runtime_pod import first_run, prompt

from openab.core.mcp.proxy import BrowserProxy
from openab.core.settings import Settings

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
