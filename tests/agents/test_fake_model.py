"""The fake model speaks each wire format the way the agent CLIs parse it, without any CLI installed."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from .fake_model import Call, FakeModel, Script

Json = dict[str, Any]
NAVIGATE = Call("browser_navigate", {"url": "https://example.org/"})


@pytest.fixture
def http(fake_model: FakeModel) -> Iterator[httpx.Client]:
    fake_model.set_script(Script(calls=[NAVIGATE]))
    with httpx.Client(base_url=fake_model.url, timeout=30) as client:
        yield client


def events(response: httpx.Response) -> list[Any]:
    out = []
    for line in response.text.splitlines():
        if line.startswith("data: ") and line != "data: [DONE]":
            out.append(json.loads(line[6:]))
    return out


def chat_tools(*names: str) -> list[Json]:
    return [{"type": "function", "function": {"name": n, "parameters": {"type": "object"}}} for n in names]


def test_chat_streams_the_call_of_the_tool_ending_in_the_scripted_name(http: httpx.Client) -> None:
    body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "go"}],
            "tools": chat_tools("bash", "openab_browser_browser_navigate")}
    chunks = events(http.post("/v1/chat/completions", json=body))

    calls = [tc for c in chunks for tc in c["choices"][0]["delta"].get("tool_calls", [])] if chunks else []
    assert calls[0]["function"]["name"] == "openab_browser_browser_navigate"
    assert json.loads("".join(tc["function"]["arguments"] for tc in calls)) == NAVIGATE.arguments
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"


def test_chat_answers_with_the_tool_result_once_it_is_in_the_conversation(http: httpx.Client) -> None:
    body = {"model": "m", "stream": False, "tools": chat_tools("openab_browser_browser_navigate"), "messages": [
        {"role": "user", "content": "go"},
        {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
                                              "function": {"name": "x", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "navigated"},
    ]}
    reply = http.post("/v1/chat/completions", json=body).json()
    assert reply["choices"][0]["message"]["content"] == "FINAL ANSWER: tool returned <<navigated>>"


def test_side_requests_without_the_tool_get_plain_text(http: httpx.Client, fake_model: FakeModel) -> None:
    body = {"model": "m", "stream": False, "messages": [{"role": "user", "content": "title this"}]}
    reply = http.post("/v1/chat/completions", json=body).json()
    assert reply["choices"][0]["message"]["content"] == "Fake title"
    assert [r.decision for r in fake_model.log] == ["text"]


def test_responses_calls_a_namespaced_tool_with_its_namespace(http: httpx.Client) -> None:
    body = {"model": "m", "stream": True, "input": [{"type": "message", "role": "user", "content": "go"}],
            "tools": [{"type": "namespace", "name": "mcp__openab_browser",
                       "tools": [{"type": "function", "name": "browser_navigate"}]}]}
    done = [e for e in events(http.post("/v1/responses", json=body)) if e["type"] == "response.output_item.done"]
    item = done[0]["item"]
    assert (item["namespace"], item["name"]) == ("mcp__openab_browser", "browser_navigate")
    assert json.loads(item["arguments"]) == NAVIGATE.arguments


def test_anthropic_streams_tool_use_then_answers_from_the_tool_result(http: httpx.Client) -> None:
    tools = [{"name": "mcp__openab_browser__browser_navigate", "input_schema": {"type": "object"}}]
    first = events(http.post("/v1/messages", json={"model": "m", "stream": True, "tools": tools,
                                                   "messages": [{"role": "user", "content": "go"}]}))
    start = next(e for e in first if e["type"] == "content_block_start")
    partial = "".join(e["delta"]["partial_json"] for e in first if e["type"] == "content_block_delta")
    assert start["content_block"]["name"] == "mcp__openab_browser__browser_navigate"
    assert json.loads(partial) == NAVIGATE.arguments

    result = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": start["content_block"]["id"],
                                           "content": [{"type": "text", "text": "navigated"}]}]}
    second = http.post("/v1/messages", json={"model": "m", "stream": False, "tools": tools, "messages": [
        {"role": "user", "content": "go"}, {"role": "assistant", "content": [start["content_block"]]}, result]})
    assert second.json()["content"][0]["text"] == "FINAL ANSWER: tool returned <<navigated>>"


def test_gemini_calls_the_function_declaration(http: httpx.Client) -> None:
    body = {"contents": [{"role": "user", "parts": [{"text": "go"}]}],
            "tools": [{"functionDeclarations": [{"name": "mcp_openab_browser_browser_navigate"}]}]}
    reply = events(http.post("/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", json=body))
    assert reply[0]["candidates"][0]["content"]["parts"][0]["functionCall"] == {
        "name": "mcp_openab_browser_browser_navigate", "args": NAVIGATE.arguments}


def test_scripted_calls_follow_one_another(http: httpx.Client, fake_model: FakeModel) -> None:
    fake_model.set_script(Script(calls=[NAVIGATE, Call("browser_read_dom", {"max_chars": 100})]))
    tools = chat_tools("openab_browser_browser_navigate", "openab_browser_browser_read_dom")
    messages: list[Json] = [{"role": "user", "content": "go"}]
    for expected in ("openab_browser_browser_navigate", "openab_browser_browser_read_dom"):
        reply = http.post("/v1/chat/completions", json={"messages": messages, "tools": tools}).json()
        call = reply["choices"][0]["message"]["tool_calls"][0]
        assert call["function"]["name"] == expected
        messages += [{"role": "assistant", "tool_calls": [call]},
                     {"role": "tool", "tool_call_id": call["id"], "content": "ok"}]
    assert [r.tool for r in fake_model.calls()] == ["openab_browser_browser_navigate",
                                                    "openab_browser_browser_read_dom"]


def test_hang_holds_the_main_turn_until_released(http: httpx.Client, fake_model: FakeModel) -> None:
    fake_model.set_script(Script(calls=[NAVIGATE], hang=True))
    body = {"messages": [{"role": "user", "content": "go"}], "tools": chat_tools("browser_navigate")}
    replies: list[httpx.Response] = []
    caller = threading.Thread(target=lambda: replies.append(http.post("/v1/chat/completions", json=body)))
    caller.start()

    assert fake_model.hanging.wait(30)
    assert replies == [] and not fake_model.log[-1].finished
    fake_model.release()
    caller.join(30)

    assert replies[0].status_code == 200 and fake_model.log[-1].finished


def test_every_request_is_logged_with_its_headers(http: httpx.Client, fake_model: FakeModel) -> None:
    http.get("/v1/models")
    http.post("/v1/messages/count_tokens", json={"messages": []}, headers={"x-api-key": "sk-ant-fake"})
    http.post("/v1/nope", json={})
    assert [(r.kind, r.path) for r in fake_model.log] == [
        ("models", "/v1/models"), ("count_tokens", "/v1/messages/count_tokens"), ("unknown", "/v1/nope")]
    assert fake_model.log[1].headers["x-api-key"] == "sk-ant-fake"
