"""The JSON-RPC peer on its own: bytes in, events and bytes out, no socket anywhere."""

from __future__ import annotations

import json
from typing import Any

import pytest

from openab_browser.core.jsonrpc import (
    Notification,
    Peer,
    Request,
    RequestFailed,
    Response,
    RpcError,
    TooManyPendingRequests,
)
from openab_browser.core.jsonrpc.protocol import too_deep


def sent(peer: Peer) -> list[dict[str, Any]]:
    return [json.loads(m) for m in peer.data_to_send()]


def test_a_message_without_an_id_key_is_a_notification_and_null_id_is_a_request() -> None:
    peer = Peer()
    [note] = peer.receive('{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}}')
    assert isinstance(note, Notification) and note.params == {"sessionId": "s"}
    [request] = peer.receive('{"jsonrpc":"2.0","id":null,"method":"initialize"}')
    assert isinstance(request, Request) and request.id is None
    assert sent(peer) == []


@pytest.mark.parametrize(
    ("frame", "code", "message_start"),
    [
        ("{not json", -32700, "Parse error"),
        ("[1, 2]", -32600, "Invalid Request: batches are not supported"),
        ('"text"', -32600, "Invalid Request: expected a JSON object"),
        ('{"jsonrpc":"2.0","id":{},"method":"x"}', -32600, "Invalid Request: id must be a string, number, or null"),
        ('{"jsonrpc":"2.0","id":true,"method":"x"}', -32600, "Invalid Request: id must be"),
    ],
)
def test_unusable_frames_get_an_error_with_a_null_id(frame: str, code: int, message_start: str) -> None:
    peer = Peer()
    assert peer.receive(frame) == []
    [answer] = sent(peer)
    assert answer["id"] is None
    assert answer["error"]["code"] == code
    assert answer["error"]["message"].startswith(message_start)


def test_a_wrong_jsonrpc_version_is_refused_for_requests_and_ignored_for_notifications() -> None:
    peer = Peer()
    assert peer.receive('{"jsonrpc":"1.0","id":7,"method":"initialize"}') == []
    [answer] = sent(peer)
    assert answer == {
        "jsonrpc": "2.0",
        "id": 7,
        "error": {"code": -32600, "message": 'Invalid Request: jsonrpc must be "2.0"'},
    }
    assert peer.receive('{"jsonrpc":"1.0","method":"session/cancel"}') == []
    assert sent(peer) == []


def test_a_request_without_a_method_is_invalid() -> None:
    peer = Peer()
    assert peer.receive('{"jsonrpc":"2.0","id":3,"params":{}}') == []
    [answer] = sent(peer)
    assert answer["id"] == 3 and answer["error"]["code"] == -32600


def test_method_bearing_frames_over_the_limit_get_32000_naming_the_method() -> None:
    peer = Peer(max_method_bytes=100)
    frame = json.dumps({"jsonrpc": "2.0", "id": 8, "method": "initialize", "params": {"pad": "x" * 200}})
    assert peer.receive(frame) == []
    [answer] = sent(peer)
    assert answer["id"] == 8
    assert answer["error"]["code"] == -32000
    assert answer["error"]["message"] == (f"Frame too large: {len(frame)} exceeds the 100-byte limit for `initialize`")
    # An oversize notification is dropped, and a large *response* is still delivered.
    assert peer.receive(json.dumps({"jsonrpc": "2.0", "method": "x", "params": {"pad": "x" * 200}})) == []
    request_id = peer.send_request("tools/call")
    peer.data_to_send()
    [response] = peer.receive(json.dumps({"jsonrpc": "2.0", "id": request_id, "result": {"pad": "y" * 500}}))
    assert isinstance(response, Response) and response.result == {"pad": "y" * 500}


def test_the_frame_limit_counts_utf8_bytes_not_characters() -> None:
    # An ASCII frame is measured by its length without being encoded; a frame of wider characters must still be
    # measured in bytes: 20 three-byte characters make this frame 132 bytes, over a 100-byte limit at 92 characters.
    peer = Peer(max_method_bytes=100)
    wide = json.dumps({"jsonrpc": "2.0", "id": 9, "method": "initialize", "params": {"p": "\u20ac" * 20}},
                      ensure_ascii=False)
    assert len(wide) < 100 < len(wide.encode())
    assert peer.receive(wide) == []
    [answer] = sent(peer)
    assert answer["error"]["message"].startswith(f"Frame too large: {len(wide.encode())} exceeds the 100-byte")
    narrow = json.dumps({"jsonrpc": "2.0", "id": 10, "method": "initialize", "params": {"p": "x" * 10}})
    assert [event.id for event in peer.receive(narrow)] == [10]  # type: ignore[union-attr]


def test_our_requests_get_their_own_ids_and_route_answers_back() -> None:
    peer = Peer()
    first = peer.send_request("mcp/connect", {"acpId": "a"}, context="ctx-1")
    second = peer.send_request("mcp/connect", {"acpId": "b"})
    assert (first, second) == (1, 2)
    wire = sent(peer)
    assert [m["id"] for m in wire] == [1, 2]
    assert wire[0] == {"jsonrpc": "2.0", "id": 1, "method": "mcp/connect", "params": {"acpId": "a"}}
    [answer] = peer.receive('{"jsonrpc":"2.0","id":"2","result":{"connectionId":"c2"}}')  # ids echoed as strings
    assert isinstance(answer, Response) and answer.id == 2 and answer.result == {"connectionId": "c2"}
    [failed] = peer.receive('{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"Method not found"}}')
    assert isinstance(failed, Response) and failed.context == "ctx-1"
    assert isinstance(failed.error, RpcError) and failed.error.code == -32601
    assert peer.pending_requests == 0


def test_a_malformed_error_object_becomes_an_internal_error_not_a_crash() -> None:
    peer = Peer()
    request_id = peer.send_request("x")
    [answer] = peer.receive(json.dumps({"jsonrpc": "2.0", "id": request_id, "error": "boom"}))
    assert isinstance(answer, Response) and answer.error is not None and answer.error.code == -32603


def test_late_answers_for_abandoned_or_unknown_ids_are_dropped() -> None:
    peer = Peer()
    request_id = peer.send_request("tools/call")
    assert peer.abandon(request_id)
    assert peer.receive(json.dumps({"jsonrpc": "2.0", "id": request_id, "result": {}})) == []
    assert peer.receive('{"jsonrpc":"2.0","id":999,"result":{}}') == []
    assert peer.discarded_responses == 2
    assert [m for m in sent(peer) if "method" not in m] == []  # never answers a response


def test_a_pending_requests_deadline_can_move_later_or_sooner() -> None:
    peer = Peer()
    call = peer.send_request("mcp/message", deadline=5.0)
    assert peer.set_deadline(call, 300.0)  # a person is asked: the call's clock stops
    assert peer.expire(5.0) == [] and peer.next_deadline() == 300.0
    assert peer.set_deadline(call, 7.0)  # answered: one whole limit from then
    assert [f.id for f in peer.expire(7.0)] == [call]
    assert not peer.set_deadline(call, 9.0), "no longer pending"
    assert peer.next_deadline() is None


def test_deadlines_expire_on_the_callers_clock() -> None:
    peer = Peer()
    slow = peer.send_request("tools/call", deadline=10.0)
    fast = peer.send_request("tools/list", deadline=5.0)
    peer.send_request("no/deadline")
    assert peer.next_deadline() == 5.0
    assert peer.expire(4.9) == []
    [failure] = peer.expire(5.0)
    assert failure == RequestFailed(fast, "tools/list", True, "timed out", None)
    assert peer.next_deadline() == 10.0
    assert [f.id for f in peer.expire(100.0)] == [slow]
    assert peer.next_deadline() is None
    # The answer that comes after the timeout goes nowhere.
    assert peer.receive(json.dumps({"jsonrpc": "2.0", "id": fast, "result": {}})) == []


def test_fail_all_ends_every_pending_request_at_once() -> None:
    peer = Peer()
    ids = [peer.send_request("tools/call", deadline=1e9) for _ in range(3)]
    failures = peer.fail_all("socket closed")
    assert [f.id for f in failures] == ids
    assert {(f.timed_out, f.detail) for f in failures} == {(False, "socket closed")}
    assert peer.pending_requests == 0


def test_pending_requests_are_bounded() -> None:
    peer = Peer(max_pending=2)
    peer.send_request("a")
    peer.send_request("b")
    with pytest.raises(TooManyPendingRequests):
        peer.send_request("c")


def test_each_request_is_answered_exactly_once() -> None:
    peer = Peer()
    [request] = peer.receive('{"jsonrpc":"2.0","id":"x","method":"initialize"}')
    assert isinstance(request, Request)
    assert peer.open_requests == 1
    peer.send_result("x", {"ok": True})
    with pytest.raises(ValueError, match="exactly one answer"):
        peer.send_result("x", {"again": True})
    assert sent(peer) == [{"jsonrpc": "2.0", "id": "x", "result": {"ok": True}}]


def test_a_reused_open_id_is_refused_and_the_first_request_keeps_it() -> None:
    peer = Peer()
    peer.receive('{"jsonrpc":"2.0","id":1,"method":"session/prompt"}')
    assert peer.receive('{"jsonrpc":"2.0","id":1,"method":"session/prompt"}') == []
    [answer] = sent(peer)
    assert answer["id"] is None and "already in use" in answer["error"]["message"]
    # 1 and "1" are different ids.
    assert len(peer.receive('{"jsonrpc":"2.0","id":"1","method":"session/prompt"}')) == 1


def test_open_requests_are_bounded_with_an_overload_error() -> None:
    peer = Peer(max_open_requests=1)
    peer.receive('{"jsonrpc":"2.0","id":1,"method":"a"}')
    assert peer.receive('{"jsonrpc":"2.0","id":2,"method":"b"}') == []
    [answer] = sent(peer)
    assert answer["id"] == 2 and answer["error"]["code"] == -32000


def test_messages_are_single_lines_so_stdio_framing_is_safe() -> None:
    peer = Peer()
    peer.send_notification("session/update", {"text": "line one\nline two"})
    [message] = peer.data_to_send()
    assert b"\n" not in message


def test_utf8_text_survives_intact() -> None:
    peer = Peer()
    text = "你好 🎉 👨‍👩‍👧‍👦 ❤️"
    [request] = peer.receive(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "echo", "params": {"t": text}}))
    assert isinstance(request, Request) and request.params == {"t": text}
    peer.send_result(1, {"t": text})
    assert sent(peer)[0]["result"]["t"] == text


# -- nesting and ids: bounded on the way in -------------------------------------------------------------------


def deep(depth: int, *, request_id: Any = 1, method: str | None = "m", result: bool = False) -> str:
    """A message ``depth`` levels deep in all: the envelope object is level 1, its params (or result) the rest."""
    value = "[" * (depth - 1) + "]" * (depth - 1)
    envelope = '{"jsonrpc":"2.0"'
    if request_id is not None:
        envelope += f',"id":{json.dumps(request_id)}'
    if method is not None:
        envelope += f',"method":"{method}"'
    return envelope + f',"{"result" if result else "params"}":{value}}}'


@pytest.mark.parametrize("as_bytes", [False, True])
def test_requests_nested_past_128_levels_get_32600_naming_the_bound_and_the_peer_goes_on(as_bytes: bool) -> None:
    peer = Peer()
    for depth, request_id in [(127, 1), (128, 2)]:
        frame = deep(depth, request_id=request_id)
        [request] = peer.receive(frame.encode() if as_bytes else frame)
        assert isinstance(request, Request) and request.id == request_id
    for depth, request_id in [(129, 3), (300, 4), (1025, 5), (100_000, 6)]:
        frame = deep(depth, request_id=request_id)
        assert peer.receive(frame.encode() if as_bytes else frame) == []
        [answer] = sent(peer)
        # Past orjson's own 1024 levels the id cannot be read: the answer says so with null.
        assert answer["id"] == (request_id if depth <= 1024 else None)
        assert answer["error"]["code"] == -32600
        assert "nested more than 128 levels deep" in answer["error"]["message"]
    assert peer.open_requests == 2  # only the two it took
    [request] = peer.receive('{"jsonrpc":"2.0","id":7,"method":"after"}')
    assert isinstance(request, Request)


def test_a_deep_notification_is_dropped_and_a_deep_answer_fails_its_request_at_once() -> None:
    peer = Peer()
    assert peer.receive(deep(129, request_id=None)) == []
    assert sent(peer) == []  # notifications are never answered
    request_id = peer.send_request("tools/call", context="ctx")
    peer.data_to_send()
    [answer] = peer.receive(deep(129, request_id=request_id, method=None, result=True))
    assert isinstance(answer, Response) and answer.context == "ctx" and answer.error is not None
    assert answer.error.code == -32603
    assert "tools/call" in answer.error.message and "nested more than 128 levels deep" in answer.error.message
    assert peer.pending_requests == 0 and sent(peer) == []


def test_brackets_inside_strings_do_not_count_as_nesting() -> None:
    peer = Peer()
    text = "[{" * 5000 + '\\"[' * 100
    [request] = peer.receive('{"jsonrpc":"2.0","id":1,"method":"m","params":{"t":"' + text + '"}}')
    assert isinstance(request, Request) and request.params["t"].startswith("[{[{")
    # A broken document is still a parse error, whatever brackets its strings hold.
    assert peer.receive('{"jsonrpc":"2.0","id":2,"params":"' + "[" * 500 + '",}') == []
    assert sent(peer)[0]["error"]["code"] == -32700


def test_too_deep_counts_levels_without_recursion() -> None:
    assert not too_deep(None) and not too_deep("[[[[") and not too_deep([])
    assert not too_deep([[[]]], limit=3) and too_deep([[[]]], limit=2)
    assert too_deep({"a": [{"b": {}}]}, limit=3) and not too_deep({"a": [{"b": {}}]}, limit=4)
    wide: list[list[list[Any]]] = [[[] for _ in range(1000)] for _ in range(100)]
    assert not too_deep(wide, limit=3) and too_deep(wide, limit=2)
    chain: Any = []
    for _ in range(50_000):  # deeper than Python's recursion limit: only a loop can look at it
        chain = [chain]
    assert too_deep(chain) and not too_deep(chain, limit=50_001)


def test_string_ids_past_1024_characters_are_refused_with_a_null_id() -> None:
    peer = Peer()
    [request] = peer.receive(json.dumps({"jsonrpc": "2.0", "id": "i" * 1024, "method": "m"}))
    assert isinstance(request, Request) and request.id == "i" * 1024
    assert peer.receive(json.dumps({"jsonrpc": "2.0", "id": "i" * 1025, "method": "m"})) == []
    [answer] = sent(peer)
    assert answer == {"jsonrpc": "2.0", "id": None,
                      "error": {"code": -32600, "message": "Invalid Request: id longer than 1024 characters"}}


@pytest.mark.parametrize("echoed", ["²", "١", "1²", "¹"])
def test_answers_whose_id_only_looks_numeric_are_dropped_not_a_crash(echoed: str) -> None:
    peer = Peer()
    request_id = peer.send_request("tools/call")
    assert request_id == 1
    # "١" is an Arabic-Indic one: int() would read it as our id 1.
    assert peer.receive(json.dumps({"jsonrpc": "2.0", "id": echoed, "result": {}})) == []
    assert peer.pending_requests == 1 and peer.discarded_responses == 1
