"""Coverage-guided fuzzing of the sans-I/O JSON-RPC peer every hop uses (``core/jsonrpc/protocol.py``).

Per input: a fresh :class:`Peer` takes the bytes as one message. Nothing may raise; whatever it sends on its own
is a well-formed error; a request it hands up is answered once and then nothing is left open; and the text of
the same bytes (as a WebSocket delivers it) gets the very same answers.
"""

from __future__ import annotations

import sys
from pathlib import Path

import atheris

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fuzz.atheris_support import check_answer, run

with atheris.instrument_imports(include=["openab_browser.core.jsonrpc"]):
    from openab_browser.core.jsonrpc import LocalRpcError, Peer, Request


def answers(data: bytes | str) -> list[bytes]:
    peer = Peer(max_method_bytes=4096, max_open_requests=8)
    events = peer.receive(data)
    out = peer.data_to_send()
    assert len(events) <= 1 and len(out) <= 1, (events, out)
    for event in events:
        if isinstance(event, Request):
            assert not out, out  # answered by the peer itself, and handed up too: two answers
            peer.send_error(event.id, LocalRpcError.method_not_found(event.method))
            out = peer.data_to_send()
    assert peer.open_requests == 0
    for raw in out:
        check_answer(raw)
    return out


def test_one_input(data: bytes) -> None:
    from_bytes = answers(data)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return
    assert answers(text) == from_bytes, (data[:200], from_bytes)


if __name__ == "__main__":
    run(test_one_input)
