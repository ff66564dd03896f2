"""Arbitrary ACP-shaped frames fed to a whole server connection, in memory: no crash, one answer per request."""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scripted_agent import ScriptedAgent
from waits import eventually

from openab_browser.core.settings import Settings
from openab_browser.gateway.assemble import assemble

scalars = st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=8)
values = st.recursive(
    scalars, lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=6), c, max_size=3), max_leaves=8
)
methods = st.sampled_from(
    ["initialize", "session/new", "session/resume", "session/prompt", "session/cancel", "mcp/message", "x/y"]
)
params = st.one_of(
    values,
    st.fixed_dictionaries({"protocolVersion": st.integers(-1, 3) | st.text(max_size=3)}),
    st.fixed_dictionaries(
        {
            "cwd": st.just("/"),
            "mcpServers": st.lists(
                st.fixed_dictionaries({"type": st.just("acp"), "name": st.text(max_size=4), "id": st.text(max_size=4)}),
                max_size=10,
            )
            | values,
        }
    ),
    st.fixed_dictionaries(
        {
            "sessionId": st.text(max_size=10),
            "prompt": st.lists(
                st.fixed_dictionaries(
                    {"type": st.sampled_from(["text", "image", "resource_link"]), "text": st.text(max_size=5)}
                ),
                max_size=2,
            )
            | values,
        }
    ),
)
frames = st.one_of(
    st.builds(
        lambda i, m, p, with_id: json.dumps(
            {"jsonrpc": "2.0", "method": m, "params": p, **({"id": i} if with_id else {})}
        ),
        st.integers(0, 1000) | st.text(max_size=4),
        methods,
        params,
        st.booleans(),
    ),
    st.text(max_size=40),
    st.just("[]"),
)


# The id of the round-trip request sent after a batch: longer than any id the strategies make.
MARKER_ID = "openab-test-marker"


def expected_answer_count(batch: list[str]) -> int:
    """Each request gets one answer; so does each frame that is not a JSON object; notifications get none."""
    count = 0
    for frame in batch:
        try:
            decoded = json.loads(frame)
        except ValueError:
            count += 1
            continue
        count += 1 if not isinstance(decoded, dict) or "id" in decoded else 0
    return count


async def exchange(batch: list[str]) -> tuple[list[dict[str, Any]], list[Any]]:
    expected = expected_answer_count(batch)
    pod = assemble(Settings(prompt_idle_timeout=0.2, cancel_grace=0.1, tunnel_connect_timeout=0.2),
                   backend=ScriptedAgent(), browser=False)
    server = pod.accept()
    out: list[dict[str, Any]] = []

    async def send(message: bytes) -> None:
        out.append(json.loads(message))

    writer = asyncio.create_task(server.rpc.run(send))
    sent_ids = []
    for frame in batch:
        try:
            decoded = json.loads(frame)
        except ValueError:
            decoded = None
        if isinstance(decoded, dict) and "id" in decoded:
            sent_ids.append(decoded["id"])
        server.rpc.feed(frame)

    def answers() -> list[dict[str, Any]]:
        return [m for m in out if "method" not in m]

    # Prompts finish by script or by the idle timeout. Too few answers in time: the caller's count says so.
    with contextlib.suppress(TimeoutError):
        await eventually(lambda: len(answers()) >= expected, 3)
    # Then one more request, answered at once: the connection's writer sends in order, so once its answer is
    # out, so is every answer queued before it, a second answer to an earlier request included.
    server.rpc.feed(json.dumps({"jsonrpc": "2.0", "id": MARKER_ID, "method": "x/marker"}))
    await eventually(lambda: any(m.get("id") == MARKER_ID for m in answers()), 3)
    server.connection_lost("test over")
    writer.cancel()
    await pod.aclose()
    markers = [m for m in answers() if m.get("id") == MARKER_ID]
    assert len(markers) == 1 and "error" in markers[0], markers
    return [m for m in out if m.get("id") != MARKER_ID or "method" in m], sent_ids


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(frames, max_size=8))
def test_every_request_gets_exactly_one_answer_and_nothing_crashes(batch: list[str]) -> None:
    out, sent_ids = asyncio.run(exchange(batch))
    answers = [m for m in out if "method" not in m]
    for message in answers:
        assert message["jsonrpc"] == "2.0"
        assert ("result" in message) != ("error" in message)
        assert message["id"] is None or message["id"] in sent_ids
    assert len(answers) == expected_answer_count(batch)
