"""Long strings of an answer relayed as the JSON they came in: same meaning as a whole parse, whatever the frame."""

# ruff: noqa: UP031 -- frames are written with %, which leaves the JSON's own braces as they read on the wire
from __future__ import annotations

import base64
import random
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from openab_browser.core.jsonrpc import PassThrough, Peer, Response
from openab_browser.core.jsonrpc import passthrough as passthrough_module
from openab_browser.core.jsonrpc.passthrough import loads

RULE = PassThrough(min_chars=1024)
IMAGE = base64.b64encode(random.Random(5).randbytes(48 << 10)).decode()  # 64 KiB of base64


def answer(result: Any, request_id: Any = 1) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def screenshot(data: Any = IMAGE, *, text: str = "Screenshot of the tab") -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}, {"type": "image", "data": data, "mimeType": "image/png"}]}


def fragments(value: Any) -> int:
    if isinstance(value, orjson.Fragment):
        return 1
    if isinstance(value, dict):
        return sum(fragments(v) for v in value.values())
    if isinstance(value, list):
        return sum(fragments(v) for v in value)
    return 0


def same_as_whole_parse(frame: str | bytes) -> Any:
    """What ``loads`` made of ``frame``, checked against orjson: the same error, or the same JSON written out."""
    try:
        whole = orjson.loads(frame)
    except orjson.JSONDecodeError as exc:
        with pytest.raises(orjson.JSONDecodeError) as raised:
            loads(frame, RULE)
        assert str(raised.value) == str(exc)
        return None
    parsed = loads(frame, RULE)
    assert orjson.dumps(parsed) == orjson.dumps(whole)
    return parsed


@pytest.mark.parametrize("as_bytes", [False, True])
def test_a_screenshot_answer_keeps_its_image_as_the_json_it_came_in(as_bytes: bool) -> None:
    frame = orjson.dumps(answer(screenshot(text='He said "look" \\ here')))
    parsed = same_as_whole_parse(frame if as_bytes else frame.decode())
    image = parsed["result"]["content"][1]
    assert isinstance(image["data"], orjson.Fragment)
    assert image["mimeType"] == "image/png" and parsed["result"]["content"][0]["text"] == 'He said "look" \\ here'
    assert orjson.dumps(parsed) == frame  # relayed byte for byte


def test_only_answers_get_fragments_so_requests_stay_strings_for_validation() -> None:
    for message in (
        {"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": {"prompt": [{"type": "image",
                                                                                        "data": IMAGE}]}},
        {"jsonrpc": "2.0", "method": "session/update", "params": {"data": IMAGE}},
    ):
        parsed = same_as_whole_parse(orjson.dumps(message).decode())
        assert fragments(parsed) == 0


@pytest.mark.parametrize(
    "data",
    [
        IMAGE[:500] + "\u00e9" + IMAGE[500:],  # not ASCII
        IMAGE[:500] + "\\/" + IMAGE[500:],  # an escape: other serializers write \/
        IMAGE[:500] + '\\"' + IMAGE[500:],  # an escaped quote inside
        IMAGE[:100],  # short
    ],
)
def test_strings_that_are_not_plain_long_base64_are_parsed_as_ever(data: str) -> None:
    frame = orjson.dumps(answer(screenshot(data))).decode().replace("\\\\/", "\\/").replace('\\\\\\"', '\\"')
    parsed = same_as_whole_parse(frame)
    assert fragments(parsed) == 0
    assert isinstance(parsed["result"]["content"][1]["data"], str)


@pytest.mark.parametrize("control", ["\x00", "\x01", "\n", "\x1f"])
def test_a_raw_control_character_in_the_image_is_the_parse_error_it_always_was(control: str) -> None:
    frame = '{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"image","data":"%s%s%s"}]}}' % (
        IMAGE[:700], control, IMAGE[700:])
    assert same_as_whole_parse(frame) is None


def test_repeated_keys_mean_what_they_mean_to_orjson() -> None:
    last_wins = '{"jsonrpc":"2.0","id":1,"result":{"content":[{"data":"%s","data":"small"}]}}' % IMAGE
    assert same_as_whole_parse(last_wins)["result"]["content"][0]["data"] == "small"
    big_last = '{"jsonrpc":"2.0","id":1,"result":{"content":[{"data":"small","data":"%s"}]}}' % IMAGE
    assert fragments(same_as_whole_parse(big_last)) == 1
    two = '{"jsonrpc":"2.0","id":1,"result":{"data":"%s"},"result":{"data":"%s"}}' % (IMAGE, IMAGE[::-1])
    parsed = same_as_whole_parse(two)
    assert orjson.loads(orjson.dumps(parsed))["result"]["data"] == IMAGE[::-1]


def test_what_only_looks_like_a_key_is_not_lifted() -> None:
    for frame in (
        '{"jsonrpc":"2.0","id":1,"result":["data","%s"]}' % IMAGE,  # a value after a comma, not a key
        '{"jsonrpc":"2.0","id":1,"result":{"text":"data\\":\\"x","more":"%s"}}' % IMAGE,  # "data" inside a string
        '{"jsonrpc":"2.0","id":1,"result":{"metadata":"%s"}}' % IMAGE,
    ):
        assert fragments(same_as_whole_parse(frame)) == 0


def test_a_mark_written_by_the_peer_is_an_ordinary_string() -> None:
    # The marks carry a random number of this process; a peer guessing their form still writes a plain string.
    guessed = "openab-lifted-" + "0" * 32 + ":0"
    frame = '{"jsonrpc":"2.0","id":1,"result":{"data":"%s","other":{"data":"%s"}}}' % (IMAGE, guessed)
    parsed = same_as_whole_parse(frame)
    assert parsed["result"]["other"]["data"] == guessed and fragments(parsed) == 1


def test_a_second_use_of_one_mark_falls_back_to_the_whole_parse() -> None:
    forged = passthrough_module._MARK + "0"  # as if the process's random part were known
    frame = '{"jsonrpc":"2.0","id":1,"result":{"data":"%s","b":{"data":"%s"}}}' % (IMAGE, forged)
    parsed = loads(frame, RULE)
    assert parsed["result"]["b"]["data"] == forged and fragments(parsed) == 0


def test_the_scan_gives_up_within_its_steps_and_the_frame_is_still_read_whole() -> None:
    many = ",".join(f'"k{i}":"v"' for i in range(5000))
    frame = '{"jsonrpc":"2.0","id":1,"result":{%s,"data":"%s"}}' % (many, IMAGE)
    parsed = same_as_whole_parse(frame)
    assert fragments(parsed) == 0 and len(parsed["result"]) == 5001


def test_a_long_run_of_backslashes_ends_the_scan_but_not_the_meaning() -> None:
    frame = '{"jsonrpc":"2.0","id":1,"result":{"text":"%s","data":"%s"}}' % ("\\\\" * 200, IMAGE)
    parsed = same_as_whole_parse(frame)
    assert parsed["result"]["text"] == "\\" * 200 and fragments(parsed) == 0
    even = '{"jsonrpc":"2.0","id":1,"result":{"text":"%s","data":"%s"}}' % ("\\\\" * 10, IMAGE)
    assert fragments(same_as_whole_parse(even)) == 1


def test_broken_frames_get_orjsons_own_error() -> None:
    for frame in (
        '{"jsonrpc":"2.0","id":1,"result":{"data":"%s"' % IMAGE,  # cut short
        '{"jsonrpc":"2.0","id":1,"result":{"data":"%s"}}}' % IMAGE,  # one brace too many
        '{"jsonrpc":"2.0","id":1,"result":{"data" "%s"}}' % IMAGE,  # no colon
        '{"jsonrpc":"2.0","id":1,"result":{"data":"%s}}' % IMAGE,  # the string never ends
    ):
        assert same_as_whole_parse(frame) is None


def test_the_peer_hands_the_fragment_to_the_request_it_answers() -> None:
    peer = Peer(pass_through=RULE)
    request_id = peer.send_request("mcp/message", {})
    events = peer.receive(orjson.dumps(answer(screenshot(), request_id)).decode())
    assert len(events) == 1 and isinstance(events[0], Response)
    assert fragments(events[0].result) == 1
    plain = Peer()
    request_id = plain.send_request("mcp/message", {})
    events = plain.receive(orjson.dumps(answer(screenshot(), request_id)).decode())
    assert isinstance(events[0], Response) and events[0].result == screenshot()


def test_an_answer_nested_past_the_bound_is_still_refused() -> None:
    peer = Peer(pass_through=RULE)
    request_id = peer.send_request("tools/call", {})
    deep: Any = {"data": IMAGE}
    for _ in range(200):
        deep = [deep]
    (event,) = peer.receive(orjson.dumps(answer(deep, request_id)).decode())
    assert isinstance(event, Response) and event.error is not None and "nested" in event.error.message


json_scalars = st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=12)
big_strings = st.sampled_from([IMAGE, IMAGE[:3000], IMAGE[:1023] + '"', IMAGE + "\\", IMAGE[:900] + "\x07"])
values = st.recursive(
    json_scalars | big_strings,
    lambda children: st.lists(children, max_size=3)
    | st.dictionaries(st.sampled_from(["data", "blob", "text", "x", "data "]), children, max_size=3),
    max_leaves=8,
)


@settings(max_examples=300, deadline=None)
@given(result=values, request_id=st.integers(0, 9) | st.text(max_size=4), method=st.booleans(),
       spaced=st.booleans(), as_bytes=st.booleans())
def test_any_message_means_the_same_as_when_parsed_whole(
    result: Any, request_id: Any, method: bool, spaced: bool, as_bytes: bool
) -> None:
    message: dict[str, Any] = answer(result, request_id)
    if method:
        message["method"] = "x"
    text = orjson.dumps(message).decode()
    if spaced:  # whitespace around colons, as a pretty printer writes
        text = text.replace('":"', '" : "')
    same_as_whole_parse(text.encode() if as_bytes else text)
