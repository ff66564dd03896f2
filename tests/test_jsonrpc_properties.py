"""Arbitrary frames thrown at the peer: nothing escapes, and every request gets exactly one answer."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from openab_browser.core.jsonrpc import LocalRpcError, Notification, Peer, Request

json_scalars = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20)
)
json_values = st.recursive(
    json_scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)
ids = (
    st.none()
    | st.integers(-(2**53), 2**53)
    | st.text(max_size=10)
    | st.floats(allow_nan=False, allow_infinity=False)
    | json_values
)
messages = st.fixed_dictionaries(
    {},
    optional={
        "jsonrpc": st.sampled_from(["2.0", "1.0", 2]),
        "id": ids,
        "method": st.sampled_from(["initialize", "session/new", "mcp/message", "x"]) | json_values,
        "params": json_values,
        "result": json_values,
        "error": json_values,
    },
)
frames = messages.map(json.dumps) | json_values.map(json.dumps) | st.text(max_size=60) | st.binary(max_size=60)


def answers(peer: Peer) -> list[dict[str, Any]]:
    return [json.loads(m) for m in peer.data_to_send()]


@settings(max_examples=400, deadline=None)
@given(st.lists(frames, max_size=12))
def test_arbitrary_frames_never_raise_and_requests_get_one_answer(batch: list[str | bytes]) -> None:
    peer = Peer(max_method_bytes=2000, max_open_requests=64)
    for frame in batch:
        events = peer.receive(frame)
        auto_answers = answers(peer)
        assert len(events) <= 1
        for answer in auto_answers:
            # Whatever the peer says on its own is a well-formed error response.
            assert answer["jsonrpc"] == "2.0"
            assert set(answer) == {"jsonrpc", "id", "error"}
            assert isinstance(answer["error"]["code"], int)
        if events and isinstance(events[0], Request):
            # The application answers: together with the peer's own words that is exactly one answer.
            assert auto_answers == []
            peer.send_error(events[0].id, LocalRpcError.method_not_found(events[0].method))
            [reply] = answers(peer)
            assert reply["id"] == events[0].id
        elif events and isinstance(events[0], Notification):
            assert auto_answers == []
        else:
            assert len(auto_answers) <= 1
    assert peer.open_requests == 0


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(ids, json_values), max_size=10))
def test_responses_to_anything_but_our_pending_ids_are_silently_dropped(replies: list[tuple[Any, Any]]) -> None:
    peer = Peer()
    for request_id, result in replies:
        frame = json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result})
        assert peer.receive(frame) == []
        usable_id = request_id is None or (
            isinstance(request_id, int | float | str) and not isinstance(request_id, bool)
        )
        if usable_id:
            assert answers(peer) == []  # a response is never answered
        else:
            [refusal] = answers(peer)
            assert refusal["error"]["code"] == -32600 and refusal["id"] is None


# A path of containers: each step is an object key or an array, each with a little noise beside it.
steps = st.lists(st.sampled_from(["list", "dict"]), min_size=0, max_size=400)
noise = st.text(alphabet='[]{}",:\\ ab', max_size=6)


def wrap(path: list[str], text: str) -> Any:
    value: Any = text
    for step in reversed(path):
        value = [value, "[{"] if step == "list" else {"k": value, "s": text}
    return value


@settings(max_examples=300, deadline=None)
@given(steps, noise, st.booleans())
@example(["list"] * 127, "]", False)
@example(["dict"] * 127, "{", True)
@example(["list", "dict"] * 64, "", False)
@example(["dict"] * 128, '"[', True)
@example(["list"] * 299, "", False)
def test_nesting_is_refused_exactly_past_the_bound_with_one_answer(path: list[str], text: str, as_bytes: bool) -> None:
    peer = Peer()
    frame = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "m", "params": wrap(path, text)})
    depth = 1 + len(path)  # the envelope, then one level per container; the string leaf is none
    events = peer.receive(frame.encode() if as_bytes else frame)
    auto_answers = answers(peer)
    if depth <= 128:
        assert len(events) == 1 and auto_answers == []
    else:
        assert events == []
        [refusal] = auto_answers
        assert refusal["id"] == 1 and refusal["error"]["code"] == -32600
        assert "128 levels" in refusal["error"]["message"]
