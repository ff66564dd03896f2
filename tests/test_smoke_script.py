"""scripts/acp-ws-smoke.py, the operator's smoke test, run as an operator runs it (a subprocess) against a real
gateway: it passes against a correct one and fails, check by check, against one that misbehaves."""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import os
import re
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from gateway_harness import RunningGateway, run_gateway
from pydantic import SecretStr
from scripted_agent import ScriptedAgent, chunk

from openab_browser.core.acp.backend import PromptTurn
from openab_browser.core.settings import Settings
from openab_browser.gateway.app import create_app
from openab_browser.gateway.assemble import assemble
from openab_browser.gateway.server import ReloadingTls, guard_for, running_server

pytestmark = pytest.mark.anyio

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "acp-ws-smoke.py"


def instructed_agent(*, truncate: bool = False, mute: bool = False) -> ScriptedAgent:
    """An agent that does what the smoke test's prompts ask (keyed by their first word), as a model would; or,
    with ``truncate`` (a reply cut short) or ``mute`` (turns that end without a word), a broken one."""
    agent = ScriptedAgent()

    async def pong(turn: PromptTurn, _text: str) -> str:
        if not mute:
            turn.send_update(chunk("PONG"))
        return "end_turn"

    async def lines(turn: PromptTurn, _text: str) -> str:
        for n in range(1, 41 if truncate else 601):
            turn.send_update(chunk(f"LINE {n:04d}\n"))
        return "end_turn"

    async def repeat(turn: PromptTurn, text: str) -> str:
        turn.send_update(chunk(text.partition(": ")[2]))
        return "end_turn"

    async def count(turn: PromptTurn, _text: str) -> str:
        for n in range(1, 401):
            if mute:
                continue
            turn.send_update(chunk(f"{n}\n"))
            try:
                async with asyncio.timeout(0.05):
                    await agent.until_cancelled(turn.session.id)
                return "cancelled"
            except TimeoutError:
                pass
        return "end_turn"

    agent.scripts.update({"Reply": pong, "Output": lines, "Repeat": repeat, "Count": count})
    return agent


async def smoke(url: str, token: str | None, *args: str, timeout: float = 240) -> tuple[int, str]:
    env = {k: v for k, v in os.environ.items() if k != "OPENAB_ACP_TOKEN"}
    if token is not None:
        env["OPENAB_ACP_TOKEN"] = token
    process = await asyncio.create_subprocess_exec(
        sys.executable, str(SCRIPT), url, "--prompt-timeout", "20", "--long-timeout", "30", *args,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
    )
    try:
        async with asyncio.timeout(timeout):
            output, _ = await process.communicate()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode is not None
    return process.returncode, output.decode()


def lines_with(output: str, status: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith(status + "  ")]


async def test_every_check_passes_against_a_correct_gateway() -> None:
    async with run_gateway(backend=instructed_agent()) as gw:
        assert gw.token is not None
        code, output = await smoke(gw.ws_url, gw.token)
    assert lines_with(output, "FAIL") == [], output
    assert code == 0, output
    total = re.search(r"RESULT: (\d+)/(\d+) checks passed", output)
    assert total is not None and total[1] == total[2] and int(total[2]) >= 40, output
    assert "PASS  [Transport / Auth] wrong key (subprotocol): refused with HTTP 401" in output
    assert "PASS  [MCP-over-ACP tunnel] inner MCP handshake" in output
    assert "Lifecycle" in output and "Limits" in output
    # The operator's terminal and CI logs keep this output: the key is never in it.
    assert gw.token not in output


async def test_a_gateway_that_takes_any_key_fails_the_auth_checks() -> None:
    # A keyless gateway (a development one) accepts no key and a wrong key alike: deployed, that is the fault the
    # auth checks exist to catch.
    async with run_gateway(keyless=True) as gw:
        code, output = await smoke(gw.ws_url, "what-the-operator-thinks-the-key-is", "--only", "transport")
    assert code == 2, output
    failed = lines_with(output, "FAIL")
    assert any("no key: the gateway accepted the connection" in line for line in failed), output
    assert any("wrong key (subprotocol): the gateway accepted" in line for line in failed), output
    assert "RESULT: 2/6 checks passed" in output or re.search(r"RESULT: \d/6", output), output


async def test_an_agent_that_truncates_or_says_nothing_fails_those_checks() -> None:
    async with run_gateway(backend=instructed_agent(truncate=True, mute=True)) as gw:
        code, output = await smoke(gw.ws_url, gw.token, "--only", "protocol", "--only", "edge", "--only", "lifecycle")
    assert code == 2, output
    failed = "\n".join(lines_with(output, "FAIL"))
    assert "a 600-line reply arrives whole: the reply is 400 chars" in failed, output
    assert "session/prompt streams and ends: no agent_message_chunk text arrived" in failed, output
    assert "session/cancel ends a running prompt: the prompt ended before any session/update" in failed, output
    assert "PASS  [Edge cases] unicode round trip" in output


async def test_model_checks_are_skipped_only_when_asked() -> None:
    async with run_gateway(backend=instructed_agent()) as gw:
        code, output = await smoke(gw.ws_url, gw.token, "--only", "edge", "--skip-model-checks")
    assert code == 0, output
    assert len(lines_with(output, "SKIP")) == 2, output
    assert "(2 skipped)" in output


async def test_without_a_key_it_refuses_to_start(gateway: RunningGateway) -> None:
    code, output = await smoke(gateway.ws_url, None)
    assert code == 3
    assert "OPENAB_ACP_TOKEN" in output


async def test_an_unreachable_gateway_fails_every_check() -> None:
    async with run_gateway() as gw:
        url, token = gw.ws_url, gw.token
    code, output = await smoke(url, token, "--only", "protocol")
    assert code == 2
    assert "RESULT: 0/6 checks passed" in output
    assert "cannot connect" in output


async def test_over_tls_with_the_pods_own_certificate(tmp_path: Path) -> None:
    ca_file, cert_file, key_file = tmp_path / "ca.pem", tmp_path / "pod.pem", tmp_path / "pod.key"
    throwaway_ca(ca_file, cert_file, key_file)
    token = secrets.token_urlsafe(24)
    pod = assemble(Settings(token=SecretStr(token), port=0, state_dir=tmp_path / "state", tls_cert=cert_file,
                            tls_key=key_file), backend=instructed_agent())
    tls = ReloadingTls(cert_file, key_file)
    async with running_server(create_app(pod), max_frame_bytes=pod.settings.max_frame_bytes,
                              guard=guard_for(pod.settings), tls=tls) as base_url:
        url = "wss" + base_url.removeprefix("https") + "/acp"
        code, output = await smoke(url, token, "--ca-file", str(ca_file), "--only", "transport", "--only", "tunnel")
        assert code == 0, output
        assert "RESULT: 11/11 checks passed" in output
        # Without the pod's CA the certificate is not trusted, and every check says it could not connect.
        code, output = await smoke(url, token, "--only", "protocol")
    assert code == 2
    assert "CERTIFICATE_VERIFY_FAILED" in output, output


def throwaway_ca(ca_file: Path, cert_file: Path, key_file: Path) -> None:
    """A CA made for this test alone, and a certificate it issues for 127.0.0.1."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "acp-ws-smoke test CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
          .not_valid_after(now + datetime.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "openab pod")]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .sign(ca_key, hashes.SHA256()))
    ca_file.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    key_file.chmod(0o600)


async def test_against_a_default_pod_the_model_checks_say_skip(tmp_path: Path) -> None:
    # The pod as `openab run` makes it with no flags: the built-in agent, run as a child, and no model behind it.
    token = secrets.token_urlsafe(24)
    pod = assemble(Settings(token=SecretStr(token), port=0, state_dir=tmp_path / "state"))
    async with run_gateway(pod=pod) as gw:
        code, output = await smoke(gw.ws_url, token, "--only", "protocol", "--only", "edge", "--only", "lifecycle")
    assert lines_with(output, "FAIL") == [], output
    assert code == 0, output
    skipped = "\n".join(lines_with(output, "SKIP"))
    for check in ("a 600-line reply arrives whole", "session/cancel ends a running prompt"):
        assert f"{check}: the pod's agent is the built-in one without a model" in skipped, output
    assert "--skip-model-checks" in skipped
    assert "PASS  [Edge cases] unicode round trip" in output  # it quotes what it cannot follow: UTF-8 still checked
    assert "PASS  [Protocol] session/prompt streams and ends" in output  # the agent itself ran and answered
    assert token not in output
