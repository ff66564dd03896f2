"""`/metrics` against a real gateway: what an operator's Prometheus scrapes, and what it must never get.

One whole flow (the built-in agent driven by the scripted model, a scripted browser over a real `/acp`
socket) fills every series; the scrape is parsed with prometheus-client's own parser, as Prometheus reads it.
The attacks: no key, a wrong key, a key in the URL, a page of another origin on a keyless pod, and a hostile
extension offering hundreds of tool names the agent then calls.
"""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
import websockets
from agents.fake_model import Call, FakeModel, Script, serving
from fake_extension import FakeExtension, ToolFunction, connect_extension, text_result
from gateway_harness import run_gateway
from log_scan import scanning
from prometheus_client.parser import text_string_to_metric_families
from test_key_files import secret_volume
from test_request_log import openab_run
from test_runtime_pod import first_run, prompt
from waits import eventually

from openab_browser.core.mcp.tools import STATIC_NAMES
from openab_browser.core.settings import Settings

pytestmark = pytest.mark.anyio

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]
HOSTILE_TOOLS = 300


def samples(text: str) -> Samples:
    """Every sample of a scrape by name and labels."""
    found: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def value(found: Samples, name: str, **labels: str) -> float:
    return found[(name, tuple(sorted(labels.items())))]


async def scrape(base_url: str, key: str | None, **headers: str) -> httpx.Response:
    sent = {"Authorization": f"Bearer {key}"} if key is not None else {}
    async with httpx.AsyncClient(timeout=10) as client:
        return await client.get(f"{base_url}/metrics", headers={**sent, **headers})


async def test_a_whole_flow_shows_in_every_series_and_nothing_of_the_session_leaks(state: Path) -> None:
    password = f"hunter2-{uuid.uuid4().hex}"
    hostile = [f"evil_{i}_{uuid.uuid4().hex[:8]}" for i in range(HOSTILE_TOOLS)]
    with serving(FakeModel()) as model:
        model.set_script(Script(calls=[
            Call("browser_type", {"ref": "e2", "text": password}),
            Call("browser_click", {"ref": "e3"}),
            *(Call(name, {}) for name in hostile[:12]),
        ]))
        settings = Settings(port=0, state_dir=state, model_url=f"{model.url}/v1")
        base_env = {"PATH": os.environ["PATH"], "HOME": str(state.parent)}
        async with first_run(settings, base_env=base_env) as (pod, ext, browser, session_id):
            for name in hostile:  # a hostile extension: a new tool name for every call an agent might make
                ext.add_tool(name, _answer_with(password))
            await ext.tools_changed()
            await eventually(lambda: len(pod.tunnels.tunnels(session_id)[0].tools or ()) > HOSTILE_TOOLS, timeout=10)
            turn = await prompt(ext, session_id, "Sign in with my password, please.")
            assert turn.result == {"stopReason": "end_turn"}, turn
            assert browser.typed == {"Name": password}
            base_url = _base_url(ext)
            assert pod.settings.token is not None
            key = pod.settings.token.get_secret_value()
            response = await scrape(base_url, key)
            openmetrics = await scrape(base_url, key, Accept="application/openmetrics-text; version=1.0.0")
            tag = pod.sessions.naming.tag(session_id)
    assert response.status_code == 200, response.text
    # What a scraper that names no format reads.
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    body = response.text
    for secret in (session_id, tag, key, password, "hunter2", "e2"):
        assert secret not in body, f"{secret[:12]}... is in /metrics"
    found = samples(body)
    assert value(found, "openab_sessions") == 1
    assert value(found, "openab_sessions_connected") == 1
    assert value(found, "openab_sessions_with_browser") == 1
    assert value(found, "openab_tunnels_attached") == 1
    assert value(found, "openab_acp_connections") == 1
    assert value(found, "openab_agent_processes") == 1
    assert value(found, "openab_tool_calls_total", tool="browser_type", outcome="ok") == 1
    assert value(found, "openab_tool_calls_total", tool="browser_click", outcome="ok") == 1
    # Twelve distinct hostile names: one series between them, whatever the names.
    assert value(found, "openab_tool_calls_total", tool="other", outcome="ok") == 12
    tools = {dict(labels).get("tool") for (name, labels) in found if name.startswith("openab_tool_call")}
    assert tools <= {*STATIC_NAMES, "other", None}, tools
    assert value(found, "openab_tool_call_seconds_count", tool="other") == 12
    assert value(found, "openab_tool_call_seconds_bucket", tool="browser_click", le="+Inf") == 1
    assert value(found, "openab_tool_call_seconds_sum", tool="browser_type") > 0
    assert value(found, "openab_websocket_bytes_total", direction="received") > 1000
    assert value(found, "openab_websocket_bytes_total", direction="sent") > 1000
    assert value(found, "process_resident_memory_bytes") > 0
    assert len(body) < 64 * 1024, "the scrape grew with the hostile tool names"
    assert openmetrics.headers["content-type"].startswith("application/openmetrics-text")
    assert openmetrics.text.rstrip().endswith("# EOF")


def _answer_with(text: str) -> ToolFunction:
    async def tool(_arguments: dict[str, Any]) -> dict[str, Any]:
        return text_result(f"page text {text}")  # page content: must never become a label

    return tool


def _base_url(ext: FakeExtension) -> str:
    # first_run serves on port 0: the socket the extension holds says which port it got.
    return f"http://127.0.0.1:{ext.ws.remote_address[1]}"


async def test_metrics_need_the_key_and_each_refusal_is_counted() -> None:
    async with run_gateway() as gateway:
        assert gateway.token is not None
        nothing = await scrape(gateway.base_url, None)
        wrong = await scrape(gateway.base_url, secrets.token_urlsafe(24))
        async with httpx.AsyncClient(timeout=10) as client:
            in_url = await client.get(f"{gateway.base_url}/metrics", params={"token": gateway.token})
            as_basic = await client.get(f"{gateway.base_url}/metrics", auth=("openab", gateway.token))
        # The subprotocol form a browser uses on /acp is a WebSocket header: a scrape presents the key as a bearer.
        for refused in (nothing, wrong, in_url, as_basic):
            assert refused.status_code == 401, refused.text
            assert refused.headers["www-authenticate"] == "Bearer"
            assert "Authorization: Bearer <key>" in refused.text and "# TYPE" not in refused.text
        # /acp's refusals count in the same series: a plain request and a WebSocket upgrade, each with a wrong key.
        async with httpx.AsyncClient(timeout=10) as client:
            assert (await client.get(f"{gateway.base_url}/acp")).status_code == 401
        with pytest.raises(websockets.InvalidStatus) as upgrade:
            offered = [f"openab.bearer.{secrets.token_urlsafe(24)}", "acp.v1"]
            await websockets.connect(gateway.ws_url, subprotocols=offered, open_timeout=10)  # type: ignore[arg-type]
        assert upgrade.value.response.status_code == 401
        found = samples((await scrape(gateway.base_url, gateway.token)).text)
    assert value(found, "openab_refused_connections_total", reason="key") == 6
    assert value(found, "openab_refused_connections_total", reason="host") == 0
    assert value(found, "openab_sessions") == 0


async def test_a_keyless_pod_serves_metrics_to_loopback_names_and_allowed_origins_only() -> None:
    async with run_gateway(keyless=True, allowed_origins=["chrome-extension://ours"]) as gateway:
        assert (await scrape(gateway.base_url, None)).status_code == 200
        assert (await scrape(gateway.base_url, None, Origin="chrome-extension://ours")).status_code == 200
        # A page of another site (its fetch carries its Origin), and a rebound name (its Host is the page's).
        other = await scrape(gateway.base_url, None, Origin="https://evil.example")
        rebound = await scrape(gateway.base_url, None, Host="evil.example")
        found = samples((await scrape(gateway.base_url, None)).text)
    assert other.status_code == 403 and "Origin" in other.text
    assert rebound.status_code == 403 and "Host" in rebound.text
    assert value(found, "openab_refused_connections_total", reason="origin") == 1
    assert value(found, "openab_refused_connections_total", reason="host") == 1


async def test_the_socket_guards_refusals_are_counted_by_reason() -> None:
    async with run_gateway(max_connections_per_peer=3, handshake_timeout=0.3) as gateway:
        port = int(gateway.base_url.rsplit(":", 1)[1])
        held = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(3)]
        try:
            # All three send nothing: each is closed when its head is late, and a fourth over the cap at once.
            extra = socket.create_connection(("127.0.0.1", port), timeout=5)
            extra.close()
            await eventually(lambda: gateway.guard.refused_by_kind["address-cap"] >= 1)
            await eventually(lambda: gateway.guard.refused_by_kind["head-timeout"] >= 3)
        finally:
            for sock in held:
                sock.close()
        await eventually(lambda: len(gateway.guard) == 0)
        found = samples((await scrape(gateway.base_url, gateway.token)).text)
    assert value(found, "openab_refused_connections_total", reason="address-cap") >= 1
    assert value(found, "openab_refused_connections_total", reason="head-timeout") >= 3
    assert value(found, "openab_refused_connections_total", reason="connection-cap") == 0


async def test_the_audit_file_off_still_counts_the_calls(state: Path) -> None:
    with serving(FakeModel()) as model:
        model.set_script(Script(calls=[Call("browser_snapshot", {})]))
        settings = Settings(port=0, state_dir=state, model_url=f"{model.url}/v1", audit_log=False)
        base_env = {"PATH": os.environ["PATH"], "HOME": str(state.parent)}
        async with first_run(settings, base_env=base_env) as (pod, ext, _browser, session_id):
            await prompt(ext, session_id, "What is on the page?")
            assert pod.settings.token is not None
            found = samples((await scrape(_base_url(ext), pod.settings.token.get_secret_value()))
                            .text)
    assert value(found, "openab_tool_calls_total", tool="browser_snapshot", outcome="ok") == 1
    assert not (state / "audit.jsonl").exists()



# -- a metrics key of its own ---------------------------------------------------------------------------------


async def test_a_metrics_key_of_its_own_opens_metrics_only_and_the_persons_key_no_longer_does() -> None:
    metrics_key = secrets.token_hex(32)
    near = metrics_key[:-1] + ("1" if metrics_key[-1] == "0" else "0")  # as long, one character off
    with scanning("debug") as scan:
        async with run_gateway(metrics_token=metrics_key) as gateway:
            assert gateway.token is not None
            scraped = await scrape(gateway.base_url, metrics_key)
            refused = {
                "the person's key": await scrape(gateway.base_url, gateway.token),
                "no key": await scrape(gateway.base_url, None),
                "a key one character off": await scrape(gateway.base_url, near),
                "the key as a subprotocol": await scrape(gateway.base_url, None, **{
                    "Sec-WebSocket-Protocol": f"openab.bearer.{metrics_key}"}),
            }
            # The metrics key on /acp, both ways a client presents a key: it never opens a browser.
            upgrades = []
            for offered, headers in (([f"openab.bearer.{metrics_key}", "acp.v1"], {}),
                                     (["acp.v1"], {"Authorization": f"Bearer {metrics_key}"})):
                with pytest.raises(websockets.InvalidStatus) as upgrade:
                    await websockets.connect(gateway.ws_url, subprotocols=offered,  # type: ignore[arg-type]
                                             additional_headers=headers, open_timeout=10)
                upgrades.append(upgrade.value.response.status_code)
            async with connect_extension(gateway.ws_url, gateway.token) as ext:  # the person's key still does
                assert (await ext.initialize())["protocolVersion"] == 1
            found = samples((await scrape(gateway.base_url, metrics_key)).text)
    assert scraped.status_code == 200 and "openab_sessions" in scraped.text
    for what, response in refused.items():
        assert response.status_code == 401, what
        assert response.headers["www-authenticate"] == "Bearer" and "metrics key" in response.text, what
        assert "# TYPE" not in response.text, what
    assert upgrades == [401, 401]
    assert value(found, "openab_refused_connections_total", reason="key") == len(refused) + len(upgrades)
    assert scan.leak_count == 0, "\n".join([scan.summary(), *scan.leaks])


@pytest.mark.skipif(os.geteuid() != 0, reason="builds root-owned files as the kubelet does")
def test_openab_run_reads_the_metrics_key_from_a_secret_volume_and_refuses_the_acp_key_as_one(
    tmp_path: Path
) -> None:
    acp_key, metrics_key = secrets.token_hex(32), secrets.token_hex(32)
    volume = secret_volume(tmp_path, {"metrics-key": metrics_key + "\n"})
    env = {"OPENAB_ACP_AUTH_KEY": acp_key, "OPENAB_METRICS_KEY_FILE": str(volume / "metrics-key")}
    with openab_run(tmp_path / "state", env) as (address, output):
        with httpx.Client(timeout=10, trust_env=False) as http:
            by_metrics_key = http.get(f"http://{address}/metrics", headers={"Authorization": f"Bearer {metrics_key}"})
            by_acp_key = http.get(f"http://{address}/metrics", headers={"Authorization": f"Bearer {acp_key}"})
            http.get(f"http://{address}/marker")
        output.wait_for("/marker")
    assert by_metrics_key.status_code == 200 and by_acp_key.status_code == 401
    text = "\n".join(output.lines)
    assert metrics_key not in text and acp_key not in text
    # The /acp key given as the metrics key would open /acp for the scraper: refused at start, in one line.
    same = subprocess.run(
        [sys.executable, "-m", "openab_browser.gateway.cli", "run", "--port", "0"],
        env={**os.environ, "OPENAB_STATE_DIR": str(tmp_path / "state"), "OPENAB_ACP_AUTH_KEY": acp_key,
             "OPENAB_METRICS_KEY": acp_key}, capture_output=True, text=True, timeout=60, check=False)
    assert same.returncode == 2 and "give /metrics a key of its own" in same.stderr and acp_key not in same.stderr
    # A link out of the volume, planted where the key was: refused by the same reader as the /acp key's file.
    (volume / "metrics-key").unlink()
    (volume / "metrics-key").symlink_to(tmp_path / "elsewhere")
    planted = subprocess.run(
        [sys.executable, "-m", "openab_browser.gateway.cli", "run", "--port", "0", "--metrics-key-file",
         str(volume / "metrics-key")],
        env={**os.environ, "OPENAB_STATE_DIR": str(tmp_path / "state"), "OPENAB_ACP_AUTH_KEY": acp_key},
        capture_output=True, text=True, timeout=60, check=False)
    assert planted.returncode == 2 and "leading out of" in planted.stderr, planted.stderr
