"""`openab run` as a person starts it in a terminal: its stderr a pty, so it prints what it prints only to a
terminal (the pairing block and link)."""

from __future__ import annotations

import contextlib
import os
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from ports import free_port

__all__ = ["terminal_run"]

START_TIMEOUT = 60.0


@contextlib.contextmanager
def terminal_run(state: Path) -> Iterator[str]:
    """`openab run` on ``state`` with no key or public URL from this environment, serving; yields what the
    terminal showed until it said it was running. Stopped (SIGTERM) on the way out."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAB_ACP_AUTH_KEY", "OPENAB_PUBLIC_URL"))}
    reader, writer = os.openpty()
    process = subprocess.Popen([sys.executable, "-m", "openab_browser.gateway.cli", "run", "--port", str(free_port()),
                                "--state-dir", str(state)], env=env, stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=writer, start_new_session=True)
    os.close(writer)
    shown = b""
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while b"running on" not in shown.lower():
            assert time.monotonic() < deadline, shown.decode()
            if select.select([reader], [], [], deadline - time.monotonic())[0]:
                chunk = os.read(reader, 65536)
                assert chunk, "openab run exited while starting:\n" + shown.decode()
                shown += chunk
        yield shown.decode().replace("\r\n", "\n")
    finally:
        process.terminate()
        process.wait(timeout=30)
        os.close(reader)
