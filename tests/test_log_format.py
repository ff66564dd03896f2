"""`--log-format json`: one JSON object a line, with the session's tag and the request's id, and no credential.

The whole flow test_log_secrets.py runs (the pairing key, the session's proxy bearer, a typed password) goes
through a real gateway while the pod's JSON formatter writes every record; each line must parse, carry its
fields, and pass the same secrets scan. Then `openab run --log-format json` itself: uvicorn's own lines are
JSON too, and the key given in the environment appears in none.
"""

from __future__ import annotations

import io
import json
import logging
import os
import secrets
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from agents.fake_model import Call, FakeModel, Script, serving
from log_scan import scanning
from ports import free_port
from test_runtime_pod import first_run, prompt
from waits import eventually_sync

from openab_browser.core.settings import Settings
from openab_browser.gateway.logs import JsonFormatter

pytestmark = pytest.mark.anyio


@pytest.fixture
def json_lines() -> Iterator[io.StringIO]:
    """The pod's JSON formatter on the root logger, writing to a buffer (not configure_logging's force=True,
    which would take pytest's own handlers away)."""
    buffer = io.StringIO()
    handler = logging.StreamHandler(buffer)
    handler.setFormatter(JsonFormatter())
    logging.getLogger().addHandler(handler)
    try:
        yield buffer
    finally:
        logging.getLogger().removeHandler(handler)


async def test_a_whole_flow_logs_json_lines_with_session_tags_and_no_credential(
    state: Path, json_lines: io.StringIO
) -> None:
    password = f"hunter2-{uuid.uuid4().hex}"
    with scanning("debug") as scan, serving(FakeModel()) as model:
        model.set_script(Script(calls=[Call("browser_type", {"ref": "e2", "text": password})]))
        settings = Settings(port=0, state_dir=state, model_url=f"{model.url}/v1")
        base_env = {"PATH": os.environ["PATH"], "HOME": str(state.parent)}
        async with first_run(settings, base_env=base_env) as (pod, ext, _browser, session_id):
            turn = await prompt(ext, session_id, "Sign in with my password, please.")
            tag = pod.sessions.naming.tag(session_id)
            key = pod.settings.token.get_secret_value() if pod.settings.token else ""
        lines = json_lines.getvalue().splitlines()
        for line in lines:
            scan.scan(line, "json")
    assert turn.result == {"stopReason": "end_turn"}, turn
    assert len(lines) > 20
    records = [json.loads(line) for line in lines]  # every line is one whole object
    for record in records:
        assert {"time", "level", "logger", "message"} <= record.keys(), record
        assert record["time"].endswith("Z") and record["level"] in ("DEBUG", "INFO", "WARNING", "ERROR")
    assert scan.leak_count == 0, "\n".join([scan.summary(), *scan.leaks])
    text = "\n".join(lines)
    assert key not in text and password not in text and session_id not in text
    created = [r for r in records if r["message"].startswith(f"session {tag} created")]
    assert created and created[0]["session"] == tag and created[0].get("request"), created
    # The agent's turn runs in its own task: what it logs still names the session and the prompt's request.
    in_turn = [r for r in records if "turn ended" in r["message"]]
    assert in_turn and in_turn[0]["session"] == tag and in_turn[0].get("request"), in_turn
    assert {r.get("session") for r in records} <= {tag, None}


def test_a_message_cannot_forge_a_second_record() -> None:
    record = logging.LogRecord("openab.test", logging.WARNING, __file__, 1, 'page said "x"\n{"level": "ERROR"}',
                               None, None)
    line = JsonFormatter().format(record)
    assert "\n" not in line
    assert json.loads(line)["message"] == 'page said "x"\n{"level": "ERROR"}'


def test_openab_run_writes_json_lines_and_refuses_an_unknown_format(state: Path) -> None:
    key = secrets.token_hex(32)
    env = {**os.environ, "OPENAB_ACP_AUTH_KEY": key, "OPENAB_LOG_FORMAT": "json", "OPENAB_STATE_DIR": str(state)}
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "openab_browser.gateway.cli", "run", "--port", str(port), "--insecure-no-tls"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )

    def ready() -> bool:
        try:
            return httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200
        except httpx.TransportError:
            return False

    try:
        eventually_sync(ready, 30, what="`openab run` to answer /readyz", interval=0.1)
        wrong = httpx.get(f"http://127.0.0.1:{port}/metrics", headers={"Authorization": f"Bearer {key[::-1]}"})
        right = httpx.get(f"http://127.0.0.1:{port}/metrics", headers={"Authorization": f"Bearer {key}"})
    finally:
        process.terminate()
        _out, err = process.communicate(timeout=30)
    assert wrong.status_code == 401 and right.status_code == 200
    lines = [line for line in err.splitlines() if line.strip()]
    records = [json.loads(line) for line in lines]
    loggers = {r["logger"] for r in records}
    assert "uvicorn.error" in loggers and "openab_browser.run" in loggers, loggers
    assert key not in err and key[::-1] not in err
    bad = subprocess.run([sys.executable, "-m", "openab_browser.gateway.cli", "run", "--log-format", "xml"],
                         env=env, capture_output=True, text=True, timeout=60, check=False)
    assert bad.returncode == 2 and "invalid choice: 'xml'" in bad.stderr
    unknown_env = subprocess.run([sys.executable, "-m", "openab_browser.gateway.cli", "run"],
                                 env={**env, "OPENAB_LOG_FORMAT": "xml"}, capture_output=True, text=True, timeout=60,
                                 check=False)
    assert unknown_env.returncode == 2 and "give text or json" in unknown_env.stderr
