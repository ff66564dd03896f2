"""The pairing text `openab run` writes at start: the key only to a terminal and only on the start that made it
(in a container stderr is the collected log), and the URL a person must enter in the side panel, off loopback
too (wss:// with the pod's TLS, the ingress's address with --public-url).

`openab run` runs for real, its stderr a pseudo-terminal (python's ``os.openpty``, as an operator's shell
gives it) or a pipe (as a container runtime's log collector does), in both log formats.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import select
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from ports import free_port
from pydantic import ValidationError
from test_tls import Ca

from openab_browser.core.settings import Settings
from openab_browser.gateway.acp_key import read_verifier, verifier_path
from openab_browser.gateway.pairing import INGRESS_URL, gateway_url

OPENAB = [sys.executable, "-m", "openab_browser.gateway.cli"]


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAB_ACP_AUTH_KEY", "OPENAB_PUBLIC_URL"))}
    return {**env, **extra}


def start_output(*args: str, env: dict[str, str], terminal: bool) -> str:
    """What `openab run ARGS` writes to stderr until it serves (then it is stopped), stderr a pty or a pipe."""
    reader, writer = os.openpty() if terminal else os.pipe()
    process = subprocess.Popen([*OPENAB, "run", *args], env=env, stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=writer, start_new_session=True)
    os.close(writer)
    out = b""

    def read(timeout: float) -> bytes:
        if not select.select([reader], [], [], timeout)[0]:
            return b""
        try:
            return os.read(reader, 65536) or b"\0"  # EOF
        except OSError:  # EIO: the pty's last writer is gone
            return b"\0"

    try:
        deadline = time.monotonic() + 60
        while b"running on" not in out.lower():
            assert time.monotonic() < deadline, "openab run did not serve within 60 s:\n" + out.decode()
            chunk = read(deadline - time.monotonic())
            assert chunk != b"\0", "openab run exited while starting:\n" + out.decode()
            out += chunk
    finally:
        process.terminate()
        process.wait(timeout=30)
        while (chunk := read(5)) not in (b"", b"\0"):
            out += chunk
        os.close(reader)
    return out.decode().replace("\r\n", "\n")  # a pty writes \r\n


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_the_key_is_shown_once_to_a_terminal_and_never_to_a_log(state: Path, log_format: str) -> None:
    args = ("--port", str(free_port()), "--state-dir", str(state), "--log-format", log_format)
    made = start_output(*args, env=_env(), terminal=True)
    shown = re.search(r"Key: {9}(\S+)\n", made)
    assert shown is not None, made
    key = shown.group(1)
    assert made.count(key) == 1, "the start that made it shows it, once"
    assert read_verifier(verifier_path(state)).matches(key) and key not in verifier_path(state).read_text()
    assert "/pair#code=" in made, "and a link that claims it"
    assert f"Gateway URL: ws://127.0.0.1:{args[1]}/acp" in made

    again = start_output(*args, env=_env(), terminal=True)
    assert key not in again, "a later start does not show the key again"
    assert "made at an earlier start" in again and f"openab key rotate --state-dir {state}" in again
    assert "/pair#code=" not in again, "nor a link: the pod knows only the verifier, a link would claim nothing"

    fresh = state.parent / "fresh"
    args = ("--port", str(free_port()), "--state-dir", str(fresh), "--log-format", log_format)
    logged = start_output(*args, env=_env(), terminal=False)
    assert verifier_path(fresh).exists() and "Key:         " not in logged
    assert "stderr is not a terminal" in logged and "openab key rotate" in logged
    if log_format == "json":
        records = [json.loads(line) for line in logged.splitlines() if line.strip()]  # no raw block among them
        assert any(r["message"].startswith("pair the side panel: Gateway URL: ws://127.0.0.1:") for r in records)


def test_the_pairing_names_the_wss_url_with_tls_and_the_ingress_address_behind_one(tmp_path: Path) -> None:
    key = secrets.token_hex(32)
    cert, cert_key = tmp_path / "tls.crt", tmp_path / "tls.key"
    Ca.make().issue(cert, cert_key)
    port = str(free_port())
    base = ("--port", port, "--state-dir", str(tmp_path / "state"))
    served = start_output(*base, "--tls-cert", str(cert), "--tls-key", str(cert_key),
                          env=_env(OPENAB_ACP_AUTH_KEY=key), terminal=False)
    assert f"Gateway URL: wss://127.0.0.1:{port}/acp" in served
    assert "Key: the one in OPENAB_ACP_AUTH_KEY" in served and key not in served

    proxied = ("--host", "0.0.0.0", "--behind-proxy", "10.0.0.0/8")
    unknown = start_output(*base, *proxied, env=_env(OPENAB_ACP_AUTH_KEY=key), terminal=False)
    assert f"Gateway URL: {INGRESS_URL}" in unknown and "--public-url" in unknown
    assert "ws://127.0.0.1" not in unknown, "not a URL the panel would refuse"

    named = start_output(*base, *proxied, "--public-url", "https://openab.example.com",
                         env=_env(OPENAB_ACP_AUTH_KEY=key), terminal=False)
    assert "Gateway URL: wss://openab.example.com/acp" in named
    from_env = start_output(*base, *proxied, env=_env(OPENAB_ACP_AUTH_KEY=key,
                                                      OPENAB_PUBLIC_URL="wss://pods.example.com/alice/acp"),
                            terminal=False)
    assert "Gateway URL: wss://pods.example.com/alice/acp" in from_env


def test_the_url_for_each_way_a_pod_is_reached() -> None:
    tls = {"tls_cert": Path("c.pem"), "tls_key": Path("k.pem")}
    assert gateway_url(Settings(host="0.0.0.0", port=8443, **tls))[0] == f"wss://{socket.gethostname()}:8443/acp"
    assert gateway_url(Settings(host="::1", port=8443, **tls)) == ("wss://[::1]:8443/acp", "")
    assert gateway_url(Settings(host="10.1.2.3", port=8443, **tls)) == ("wss://10.1.2.3:8443/acp", "")
    # A container's port published on the host's loopback (docs/deploy.md's compose file).
    url, note = gateway_url(Settings(host="0.0.0.0", insecure_no_tls=True))
    assert url == "ws://127.0.0.1:8080/acp" and "loopback" in note
    url, note = gateway_url(Settings(host="10.1.2.3", insecure_no_tls=True))
    assert url == "ws://10.1.2.3:8080/acp" and "loopback only" in note, "said plainly: the panel refuses it"
    assert gateway_url(Settings()) == ("ws://127.0.0.1:8080/acp", "")


@pytest.mark.parametrize(("given", "taken"), [
    ("wss://openab.example.com/acp", "wss://openab.example.com/acp"),
    ("  wss://openab.example.com:8443/acp ", "wss://openab.example.com:8443/acp"),
    ("https://openab.example.com", "wss://openab.example.com/acp"),
    ("https://openab.example.com/", "wss://openab.example.com/acp"),
    ("wss://pods.example.com/alice/acp", "wss://pods.example.com/alice/acp"),
    ("ws://127.0.0.1:9000/acp", "ws://127.0.0.1:9000/acp"),
])
def test_a_public_url_is_taken_as_the_panel_dials_it(given: str, taken: str) -> None:
    assert Settings.from_env({"OPENAB_PUBLIC_URL": given}).public_url == taken


@pytest.mark.parametrize("given", [
    "http://openab.example.com/acp",  # clear text
    "ws://openab.example.com/acp",  # the panel refuses ws:// off loopback
    "wss://openab.example.com/",  # no /acp
    "https://openab.example.com/other",
    "wss://openab.example.com/acp?token=x",
    "wss://openab.example.com/acp#x",
    "wss://user:pass@openab.example.com/acp",
    "wss://openab.example.com:99999/acp",
    "wss://open ab.example.com/acp",
    "wss://openab.example.com/acp\nKey: x",
    "openab.example.com/acp",
])
def test_a_public_url_the_panel_cannot_dial_is_refused_with_what_to_give(given: str) -> None:
    with pytest.raises(ValidationError, match="ending /acp"):
        Settings(public_url=given)


def test_the_pairing_names_the_port_the_pod_bound_when_told_port_0(tmp_path: Path) -> None:
    served = start_output("--port", "0", "--state-dir", str(tmp_path / "state"),
                          env=_env(OPENAB_ACP_AUTH_KEY=secrets.token_hex(32)), terminal=False)
    named = [line for line in served.splitlines() if "Gateway URL: ws://127.0.0.1:" in line]
    assert named, served
    port = int(named[0].split("Gateway URL: ws://127.0.0.1:")[1].split("/acp")[0])
    assert port != 0, "the URL names a port the panel can dial"
    assert f"127.0.0.1:{port}" in served.split("Gateway URL")[1], "the one uvicorn says it listens on"
