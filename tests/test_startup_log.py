"""Each line `openab run` logs as it starts is logged once (issue 36, item 9).

Before, the journal's line about an earlier run ("journal: N step(s) of an earlier run never ended ...") came twice:
`openab run` starts the pod before uvicorn (so a socket the bridge cannot serve is a one-line error) and the app's
lifespan starts it again, and each start read the audit files again. The pod's start is idempotent now: the journal
reads what an earlier run left once. The state dir here holds an audit file with a line that is no record, which
the journal counts and says at start-up.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import httpx
from ports import free_port
from waits import eventually_sync


def test_each_start_up_line_is_logged_once(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    audit = state / "audit.jsonl"
    audit.write_text("not a record of ours\n")
    audit.chmod(0o600)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAB_ACP_AUTH_KEY", "OPENAB_PUBLIC_URL"))}
    env.update(OPENAB_LOG_FORMAT="json", OPENAB_STATE_DIR=str(state))
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "openab_browser.gateway.cli", "run", "--port", str(port), "--insecure-no-key"],
        env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )

    def ready() -> bool:
        try:
            return httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200
        except httpx.TransportError:
            return False

    try:
        eventually_sync(ready, 30, what="`openab run` to answer /readyz", interval=0.1)
    finally:
        process.terminate()
        _out, err = process.communicate(timeout=30)
    messages = [json.loads(line)["message"] for line in err.splitlines() if line.strip()]
    started = messages[: next(i for i, m in enumerate(messages) if m.startswith("Uvicorn running on")) + 1]
    journal = [m for m in started if m.startswith("journal: ")]
    assert len(journal) == 1 and "1 line(s) skipped" in journal[0], started
    twice = [m for m, n in Counter(started).items() if n > 1]
    assert not twice, f"logged more than once at start-up: {twice}"
