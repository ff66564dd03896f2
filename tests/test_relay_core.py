"""The relay's logic with no I/O (``bridge/relay.py``): fed lines, socket events and times, it says what to write.

The whole relay, as a process between a real agent's pipes and a real pod, is in test_bridge.py; these tests
drive the states a real socket reaches only by luck (a pod refusing, a greeting that never comes, a replay
refused, 1,024 calls in flight) directly and at exact times.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from openab_browser.bridge.framing import BRIDGE_REFUSED, READY_METHOD, TOO_LARGE, LineSplitter
from openab_browser.bridge.relay import Relay

PATH = "/run/pod/browser.sock"


def line(message: dict[str, Any]) -> bytes:
    return json.dumps(message).encode()


def request(request_id: Any, method: str, params: dict[str, Any] | None = None) -> bytes:
    return line({"jsonrpc": "2.0", "id": request_id, "method": method, **({"params": params} if params else {})})


def call(request_id: Any, tool: str) -> bytes:
    return request(request_id, "tools/call", {"name": tool, "arguments": {}})


READY = line({"jsonrpc": "2.0", "method": READY_METHOD, "params": {"channel": "acp_c1", "version": 1}})


def answer(request_id: Any) -> bytes:
    return line({"jsonrpc": "2.0", "id": request_id, "result": {}})


def decoded(lines: list[bytes]) -> list[dict[str, Any]]:
    assert all(item.endswith(b"\n") for item in lines)
    return [json.loads(item) for item in lines]


def ready_relay(now: float = 0.0, **options: Any) -> Relay:
    relay = Relay(PATH, say=lambda _text: None, **options)
    assert relay.should_connect(now)
    relay.connecting(now)
    relay.connected(now)
    relay.pod_frames([READY], now)
    assert relay.state == "ready" and relay.channel == "acp_c1"
    return relay


def test_requests_written_before_the_pod_is_up_go_once_it_is_in_the_order_written() -> None:
    relay = Relay(PATH, say=lambda _text: None)
    relay.agent_frames([request(1, "initialize"), b"{not json", b"   ", request(2, "tools/list")], 0.0)
    # The parse error is for a line after the waiting request: it waits its turn too.
    assert relay.data_to_agent() == [] and relay.data_to_pod() == []
    relay.connecting(0.1)
    relay.connected(0.1)
    relay.pod_frames([READY], 0.2)
    assert decoded(relay.data_to_pod()) == [json.loads(request(1, "initialize")), json.loads(request(2, "tools/list"))]
    assert [m["error"]["code"] for m in decoded(relay.data_to_agent())] == [-32700]


def test_a_request_waits_for_the_pod_at_most_wait_seconds_then_hears_why() -> None:
    relay = Relay(PATH, wait=10.0, say=lambda _text: None)
    relay.connecting(0.0)
    relay.connect_failed("No such file or directory", 0.0)
    relay.agent_frames([call(7, "browser_click")], 1.0)
    assert relay.next_deadline() == pytest.approx(0.05)  # the next try to connect comes first
    relay.tick(10.9)
    assert relay.data_to_agent() == []
    relay.tick(11.0)
    [error] = decoded(relay.data_to_agent())
    assert error["id"] == 7 and error["error"]["code"] == -32603
    said = error["error"]["message"]
    assert f"not reachable at {PATH} (cannot connect: No such file or directory); waited 10 s" in said


def test_retries_back_off_to_a_second_and_start_over_after_a_usable_connection() -> None:
    relay = Relay(PATH, say=lambda _text: None)
    now, gaps = 0.0, []
    for _ in range(7):
        relay.connecting(now)
        relay.connect_failed("Connection refused", now)
        deadline = relay.next_deadline()
        assert deadline is not None and not relay.should_connect(now)
        gaps.append(round(deadline - now, 3))
        now = deadline
    assert gaps == [0.05, 0.1, 0.2, 0.4, 0.8, 1.0, 1.0]
    assert relay.should_connect(now)
    relay.connecting(now)
    relay.connected(now)
    relay.pod_frames([READY], now)
    relay.pod_closed(now)
    assert relay.next_deadline() == pytest.approx(now + 0.05)


def test_a_refusing_pod_answers_every_request_with_its_refusal_and_is_not_dialled_again() -> None:
    relay = Relay(PATH, say=lambda _text: None)
    relay.agent_frames([request(1, "initialize"), line({"jsonrpc": "2.0", "method": "notifications/initialized"})],
                       0.0)
    relay.connecting(0.0)
    relay.connected(0.0)
    refusal = {"code": BRIDGE_REFUSED, "message": "refused: no session of this pod is an ancestor of pid 42"}
    relay.pod_frames([line({"jsonrpc": "2.0", "id": None, "error": refusal})], 0.1)
    assert relay.state == "refused" and not relay.wants_socket
    relay.agent_frames([call("c", "browser_snapshot")], 0.2)
    answers = decoded(relay.data_to_agent())
    assert [(a["id"], a["error"]) for a in answers] == [(1, refusal), ("c", refusal)]  # the notification: nothing
    assert relay.data_to_pod() == []
    relay.pod_closed(0.3)
    assert not relay.should_connect(100.0)


@pytest.mark.parametrize("greeting", [b"hello", line({"jsonrpc": "2.0", "method": "something/else"}), TOO_LARGE])
def test_a_socket_that_does_not_greet_as_a_pod_is_dropped_and_dialled_again(greeting: Any) -> None:
    relay = Relay(PATH, say=lambda _text: None)
    relay.connecting(0.0)
    relay.connected(0.0)
    relay.pod_frames([greeting, READY], 0.1)  # what follows a bad greeting is not believed either
    assert relay.state == "down" and not relay.wants_socket
    relay.pod_closed(0.1)
    assert relay.should_connect(0.2)


def test_a_greeting_that_never_comes_gives_up_on_the_socket_after_the_connect_timeout() -> None:
    relay = Relay(PATH, connect_timeout=5.0, say=lambda _text: None)
    relay.connecting(0.0)
    relay.connected(0.0)
    relay.tick(4.9)
    assert relay.wants_socket
    assert relay.next_deadline() == 5.0
    relay.tick(5.0)
    assert not relay.wants_socket


def test_after_a_reconnect_the_agents_initialize_is_replayed_privately_before_its_next_request() -> None:
    relay = ready_relay()
    initialize = request(0, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {}})
    relay.agent_frames([initialize, line({"jsonrpc": "2.0", "method": "notifications/initialized"})], 0.0)
    relay.pod_frames([answer(0)], 0.0)
    relay.data_to_pod(), relay.data_to_agent()
    relay.pod_closed(1.0)
    relay.agent_frames([request(1, "tools/list")], 1.01)
    relay.connecting(1.1)
    relay.connected(1.1)
    relay.pod_frames([READY], 1.1)
    assert relay.state == "reinitializing"
    [replay] = decoded(relay.data_to_pod())
    assert replay["method"] == "initialize" and replay["params"] == json.loads(initialize)["params"]
    assert str(replay["id"]).startswith("openab-relay/")
    relay.pod_frames([answer(replay["id"])], 1.2)
    sent = decoded(relay.data_to_pod())
    assert [(m.get("id"), m["method"]) for m in sent] == [(None, "notifications/initialized"), (1, "tools/list")]
    # The agent hears that the tools may have changed, never the private answer.
    assert decoded(relay.data_to_agent()) == [
        {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}]


def test_a_replay_the_new_pod_refuses_drops_the_socket_and_keeps_backing_off() -> None:
    relay = ready_relay()
    relay.agent_frames([request(0, "initialize")], 0.0)
    relay.pod_frames([answer(0)], 0.0)
    relay.pod_closed(1.0)
    relay.connecting(1.05)
    relay.connected(1.05)
    relay.pod_frames([READY], 1.05)
    [replay] = decoded(relay.data_to_pod())
    relay.pod_frames([line({"jsonrpc": "2.0", "id": replay["id"], "error": {"code": -32602, "message": "no"}})], 1.1)
    assert relay.state == "down"
    relay.pod_closed(1.1)
    assert relay.next_deadline() == pytest.approx(1.1 + 0.1)


def test_calls_lost_with_the_socket_are_answered_as_outcome_unknown_and_never_sent_again() -> None:
    relay = ready_relay()
    relay.agent_frames([call(1, "browser_click"), request(2, "tools/list"), request(3, "subscriptions/listen"),
                        call(4, "browser_type"), line({"jsonrpc": "2.0", "method": "notifications/cancelled",
                                                       "params": {"requestId": 4}})], 0.0)
    assert len(relay.data_to_pod()) == 5
    relay.pod_closed(0.5)
    lost = {m["id"]: m["error"]["message"] for m in decoded(relay.data_to_agent())}
    assert set(lost) == {1, 2, 3}  # 4 was cancelled: no answer is owed for it
    assert "the outcome of browser_click is unknown" in lost[1] and "Call browser_snapshot" in lost[1]
    assert "the outcome of tools/list is unknown" in lost[2]
    assert "listen again" in lost[3]
    relay.connecting(0.6)
    relay.connected(0.6)
    relay.pod_frames([READY], 0.6)
    assert relay.data_to_pod() == []


def test_a_line_not_yet_sent_when_the_socket_closed_is_not_sent_on_the_next_one() -> None:
    relay = ready_relay()
    relay.agent_frames([call(1, "browser_click")], 0.0)
    relay.pod_closed(0.0)  # before the driver took the line
    relay.connecting(0.1)
    relay.connected(0.1)
    relay.pod_frames([READY], 0.1)
    assert relay.data_to_pod() == []
    assert "the outcome of browser_click is unknown" in decoded(relay.data_to_agent())[0]["error"]["message"]


def test_more_than_1024_requests_in_flight_are_refused_one_by_one() -> None:
    relay = ready_relay()
    relay.agent_frames([request(n, "ping") for n in range(1025)], 0.0)
    assert len(relay.data_to_pod()) == 1024
    [refused] = decoded(relay.data_to_agent())
    assert refused["id"] == 1024 and "Too many requests in flight (max 1024)" in refused["error"]["message"]
    relay.pod_frames([answer(0)], 0.1)
    relay.agent_frames([request("again", "ping")], 0.1)
    assert len(relay.data_to_pod()) == 1


def test_stdin_is_not_read_past_256_lines_waiting_for_the_pod() -> None:
    relay = Relay(PATH, say=lambda _text: None)
    relay.agent_frames([request(n, "ping") for n in range(255)], 0.0)
    assert relay.wants_agent_input
    relay.agent_frames([request(255, "ping")], 0.0)
    assert not relay.wants_agent_input


def test_at_end_of_input_the_relay_stays_for_its_answers_boundedly_then_answers_what_still_waits() -> None:
    relay = ready_relay(drain_timeout=2.0)
    relay.agent_frames([call(1, "browser_snapshot"), request(2, "subscriptions/listen")], 0.0)
    relay.agent_ended(0.0)
    assert not relay.finished(0.0, unsent=False)  # the lines are not even taken for the socket yet
    assert len(relay.data_to_pod()) == 2
    assert not relay.finished(1.0, unsent=False)
    relay.pod_frames([answer(1)], 1.0)
    assert relay.finished(1.0, unsent=False)  # the listen stream is not waited for
    assert not relay.finished(1.0, unsent=True)  # nor is a line the socket has not taken yet left behind

    down = Relay(PATH, drain_timeout=2.0, say=lambda _text: None)
    down.agent_frames([request(9, "tools/list")], 0.0)
    down.agent_ended(0.0)
    assert not down.finished(1.9, unsent=False) and down.finished(2.0, unsent=False)
    down.close()
    [error] = decoded(down.data_to_agent())
    assert error["id"] == 9 and "not reachable" in error["error"]["message"]


def test_an_oversized_line_from_the_agent_is_answered_and_one_from_the_pod_dropped() -> None:
    relay = ready_relay(max_frame_bytes=100)
    relay.agent_frames([TOO_LARGE], 0.0)
    [error] = decoded(relay.data_to_agent())
    assert error["id"] is None and "at most 100 bytes" in error["error"]["message"]
    relay.pod_frames([TOO_LARGE, answer(5)], 0.0)
    assert decoded(relay.data_to_agent()) == [json.loads(answer(5))]


# -- the line splitter -------------------------------------------------------------------------------------------

def test_lines_split_across_reads_come_out_whole() -> None:
    splitter = LineSplitter(max_frame_bytes=10)
    assert splitter.feed(b"ab") == []
    assert splitter.feed(b"c\nde\n\nf") == [b"abc", b"de", b""]
    assert splitter.end() == b"f"  # a last line without its newline still counts
    assert splitter.end() is None


def test_a_line_over_the_bound_is_one_too_large_and_never_held_whole() -> None:
    splitter = LineSplitter(max_frame_bytes=10)
    assert splitter.feed(b"0123456789\n") == [b"0123456789"]  # exactly the bound passes
    assert splitter.feed(b"0123456789A\nok\n") == [TOO_LARGE, b"ok"]
    for _ in range(1000):  # a megabyte with no newline
        assert splitter.feed(b"x" * 1000) == []
        assert len(splitter._partial) <= 10
    assert splitter.feed(b"tail\nnext\n") == [TOO_LARGE, b"next"]
    splitter.feed(b"y" * 11)
    assert splitter.end() is TOO_LARGE
