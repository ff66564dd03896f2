#!/usr/bin/env python3
"""The operator's smoke test of a deployed openab gateway's `/acp` endpoint.

    OPENAB_ACP_TOKEN=<key> scripts/acp-ws-smoke.py wss://host/acp

It connects as a client would (and, for the tunnel checks, as a mock side-panel extension would), prints one
PASS/FAIL/SKIP line per check, a summary per section and ``RESULT: p/t checks passed``. Exit code: 0 when every
check that ran passed, 2 when any failed, 3 when it could not start (no key, a bad URL or CA file).

It needs only what ``pip install openab-browser`` brings (``websockets``) and imports nothing of openab's own, so it
judges the gateway against the wire contract (docs/mcp-over-acp-tunnel-contract.md, docs/architecture.md) and not
against the code it tests. Prompts reach the pod's agent: a few checks need an agent that follows simple
instructions (a long reply, an exact echo, a long count to cancel): they say SKIP by themselves when the pod's
agent is the built-in one without a model (session/new names it ``builtin`` and it answers a one-word PONG request
with other words, its help), and ``--skip-model-checks`` skips them for any agent. No line it prints contains the
key.

The checks live beside this file in acp_ws_smoke/ (a plain package, see its __init__); this launcher puts its own
folder first on sys.path, so the command works from any working directory and through a symlink.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from acp_ws_smoke.cli import main  # importable only once the folder is on sys.path

if __name__ == "__main__":
    sys.exit(main())
