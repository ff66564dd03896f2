"""How the pod is reached off loopback: its own TLS (reloaded on SIGHUP), or a proxy in front whose forwarded
headers are believed only from its own addresses; and a clear-text bind off loopback refused.

Real handshakes only: a throwaway CA is made per test with ``cryptography``, the pod is the real `openab run`
(or the real app under uvicorn), and the client is ``websockets`` over ``wss://`` with that CA as its only root.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import ipaddress
import json
import logging
import os
import re
import resource
import secrets
import signal
import ssl
import sys
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import websockets
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from fake_extension import FakeExtension, connect_extension
from pydantic import SecretStr
from test_doctor import clean_env, doctor, private_state

from openab_browser.core.acp.backend import NoAgentBackend
from openab_browser.core.settings import Settings
from openab_browser.gateway.app import create_app, drainer
from openab_browser.gateway.assemble import assemble
from openab_browser.gateway.certificates import CertificateError, Validity, read_validity
from openab_browser.gateway.server import ConnectionGuard, ReloadingTls, guard_for, running_server

pytestmark = pytest.mark.anyio

OPENAB = [sys.executable, "-m", "openab_browser.gateway.cli"]


# -- a throwaway CA ---------------------------------------------------------------------------------------------

@dataclass
class Ca:
    key: ec.EllipticCurvePrivateKey
    cert: x509.Certificate

    @classmethod
    def make(cls, name: str = "openab test CA") -> Ca:
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = datetime.datetime.now(datetime.UTC)
        cert = (
            x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(
                digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                key_encipherment=False, data_encipherment=False, key_agreement=False, encipher_only=False,
                decipher_only=False), critical=True)
            .sign(key, hashes.SHA256())
        )
        return cls(key, cert)

    def issue(
        self, cert_path: Path, key_path: Path, *, not_before: datetime.datetime | None = None,
        not_after: datetime.datetime | None = None,
    ) -> int:
        """A server certificate for 127.0.0.1 and localhost, written as PEM; returns its serial number. Valid from
        five minutes ago for a day unless the dates are given."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        cert = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "openab pod")]))
            .issuer_name(self.cert.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(not_before or now - datetime.timedelta(minutes=5))
            .not_valid_after(not_after or now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .sign(self.key, hashes.SHA256())
        )
        key_path.write_bytes(key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
        key_path.chmod(0o600)
        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        return cert.serial_number

    def client_context(self) -> ssl.SSLContext:
        """What the extension's Chrome does: verify the pod's certificate, here against this CA alone."""
        context = ssl.create_default_context(cadata=self.cert.public_bytes(serialization.Encoding.PEM).decode())
        return context


def connect_wss(
    url: str, token: str, context: ssl.SSLContext, headers: dict[str, str] | None = None,
) -> contextlib.AbstractAsyncContextManager[FakeExtension]:
    """The extension's connection (key in the subprotocol, as a browser sends it) over TLS verified by ``context``."""
    return connect_extension(url, token, extra_headers=headers, ssl=context)


def served_serial(ws: websockets.ClientConnection) -> int:
    ssl_object = ws.transport.get_extra_info("ssl_object")
    assert ssl_object is not None, "the connection is not TLS"
    der = ssl_object.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der).serial_number


# -- the real `openab run` --------------------------------------------------------------------------------------

@dataclass
class Pod:
    process: asyncio.subprocess.Process
    url: str
    token: str
    log: list[str]

    async def wait_for_log(self, pattern: str, timeout: float = 15.0) -> str:
        """The next log line matching ``pattern`` (lines before it are kept in ``log``)."""
        assert self.process.stderr is not None
        async with asyncio.timeout(timeout):
            while True:
                line = (await self.process.stderr.readline()).decode()
                if not line:
                    raise AssertionError(f"openab run exited before logging {pattern!r}:\n" + "".join(self.log))
                self.log.append(line)
                if re.search(pattern, line):
                    return line


def pod_certificate(tmp_path: Path) -> tuple[Ca, Path, Path]:
    """A fresh CA and the pod's certificate and key it signed, in ``tmp_path``."""
    ca = Ca.make()
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    ca.issue(cert, key)
    return ca, cert, key


@contextlib.asynccontextmanager
async def openab_run(
    tmp_path: Path, *args: str, env: dict[str, str] | None = None, open_files: int | None = None,
) -> AsyncIterator[Pod]:
    """The real `openab run`; ``open_files``: its RLIMIT_NOFILE, as a container runtime would set it."""
    token = secrets.token_hex(32)

    def limit_files() -> None:
        if open_files is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (open_files, open_files))

    process = await asyncio.create_subprocess_exec(
        *OPENAB, "run", "--port", "0", "--state-dir", str(tmp_path / "state"), *args,
        env={**os.environ, "OPENAB_ACP_AUTH_KEY": token, **(env or {})}, stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE, start_new_session=True, preexec_fn=limit_files if open_files else None,
    )
    pod = Pod(process, "", token, [])
    try:
        line = await pod.wait_for_log(r"running on https?://", timeout=30)
        match = re.search(r"running on (https?://\S+)", line)
        assert match is not None
        pod.url = match.group(1)
        yield pod
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
            try:
                async with asyncio.timeout(20):
                    await process.communicate()
            except TimeoutError:
                process.kill()
                await process.wait()


async def refused_to_start(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> str:
    process = await asyncio.create_subprocess_exec(
        *OPENAB, "run", "--port", "0", "--state-dir", str(tmp_path / "state"), *args,
        env={**os.environ, "OPENAB_ACP_AUTH_KEY": secrets.token_hex(32), **(env or {})},
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )
    async with asyncio.timeout(30):
        _, err = await process.communicate()
    assert process.returncode == 2, err.decode()
    return err.decode()


def wss(url: str) -> str:
    return "wss" + url.removeprefix("https") + "/acp"


async def test_the_pod_serves_wss_and_sighup_serves_the_renewed_certificate_to_the_next_connection(
    tmp_path: Path,
) -> None:
    ca = Ca.make()
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    first = ca.issue(cert, key)
    async with openab_run(tmp_path, "--tls-cert", str(cert), "--tls-key", str(key)) as pod:
        assert pod.url.startswith("https://")
        trusted = ca.client_context()
        async with connect_wss(wss(pod.url), pod.token, trusted) as old:
            assert (await old.request("initialize", {"protocolVersion": 1}))["protocolVersion"] == 1
            assert served_serial(old.ws) == first

            # cert-manager renews: new files in place, then `kill -HUP`.
            second = ca.issue(cert, key)
            pod.process.send_signal(signal.SIGHUP)
            await pod.wait_for_log(r"TLS certificate reloaded")
            async with connect_wss(wss(pod.url), pod.token, trusted) as new:
                assert served_serial(new.ws) == second
                await new.request("initialize", {"protocolVersion": 1})
            # The connection opened before the reload carries on with its session.
            await old.request("session/new", {"cwd": "/", "mcpServers": []})

            # A half-written renewal is refused and the last good certificate kept.
            cert.write_text("-----BEGIN CERTIFICATE-----\nnot one\n")
            pod.process.send_signal(signal.SIGHUP)
            await pod.wait_for_log(r"TLS reload refused, still serving the previous certificate")
            async with connect_wss(wss(pod.url), pod.token, trusted) as after:
                assert served_serial(after.ws) == second

        # A client that does not trust the CA (a pod impersonated, or a mis-issued certificate) gets no session.
        with pytest.raises(ssl.SSLCertVerificationError):
            async with connect_wss(wss(pod.url), pod.token, ssl.create_default_context()):
                pass
        # Nothing is served in clear on the TLS port: a plain ws:// never completes its handshake.
        with pytest.raises((websockets.InvalidMessage, ConnectionError, EOFError, TimeoutError)):
            async with asyncio.timeout(10), connect_extension("ws" + pod.url.removeprefix("https") + "/acp",
                                                              pod.token):
                pass
        # The probes answer over TLS too (the kubelet's httpGet with scheme HTTPS).
        async with httpx.AsyncClient(verify=trusted, timeout=10) as client:
            ready = await client.get(pod.url + "/readyz")
            assert ready.status_code == 200 and ready.json() == {"ready": True, "state": "ready"}
    assert not any(pod.token in line for line in pod.log)


async def test_a_clear_text_bind_off_loopback_is_refused_unless_tls_a_proxy_or_the_force_flag(tmp_path: Path) -> None:
    err = await refused_to_start(tmp_path, "--host", "0.0.0.0")
    assert "in clear text" in err and "--tls-cert" in err and "--behind-proxy" in err
    # The environment says the same as the flags.
    err = await refused_to_start(tmp_path, env={"OPENAB_HOST": "0.0.0.0"})
    assert "in clear text" in err

    # Each way out starts the pod (port 0, so nothing collides).
    for args in (["--behind-proxy", "127.0.0.1"], ["--insecure-no-tls"]):
        async with openab_run(tmp_path, "--host", "0.0.0.0", *args) as pod, httpx.AsyncClient(timeout=10) as client:
            port = pod.url.rsplit(":", 1)[1]
            assert (await client.get(f"http://127.0.0.1:{port}/healthz")).json() == {"ok": True}


async def test_tls_and_proxy_settings_that_cannot_work_are_refused_with_what_to_do(tmp_path: Path) -> None:
    _ca, cert, key = pod_certificate(tmp_path)
    assert "both --tls-cert and --tls-key" in await refused_to_start(tmp_path, "--tls-cert", str(cert))
    assert "both --tls-cert and --tls-key" in await refused_to_start(tmp_path, "--tls-key", str(key))
    other = tmp_path / "other.key"
    Ca.make().issue(tmp_path / "other.crt", other)
    err = await refused_to_start(tmp_path, "--tls-cert", str(cert), "--tls-key", str(other))
    assert "cannot load the TLS certificate" in err and "PEM" in err
    err = await refused_to_start(tmp_path, "--tls-cert", str(tmp_path / "missing.crt"), "--tls-key", str(key))
    assert "cannot load the TLS certificate" in err
    # Names and wildcards would believe headers from whoever resolves or connects.
    for proxies in ("ingress.example", "*"):
        err = await refused_to_start(tmp_path, "--host", "0.0.0.0", "--behind-proxy", proxies)
        assert "is not an IP address or network" in err


# -- behind a proxy: whose forwarded headers are believed --------------------------------------------------------

@contextlib.asynccontextmanager
async def gateway(
    proxies: list[str], *, tls: ReloadingTls | None = None, **settings: object,
) -> AsyncIterator[tuple[str, str, ConnectionGuard]]:
    token = secrets.token_hex(32)
    with tempfile.TemporaryDirectory(prefix="oab-state-") as state:
        pod = assemble(Settings(token=SecretStr(token), behind_proxy=proxies, state_dir=Path(state),
                                **settings),
                       backend=NoAgentBackend())
        guard = guard_for(pod.settings)
        async with running_server(create_app(pod), guard=guard, tls=tls, proxies=pod.settings.behind_proxy) as url:
            yield url, token, guard


async def opened_from(caplog: pytest.LogCaptureFixture, url: str, token: str, forwarded_for: str) -> str:
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="openab_browser.gateway.acp_endpoint"):
        async with connect_extension("ws" + url.removeprefix("http") + "/acp", token,
                                     extra_headers={"X-Forwarded-For": forwarded_for}) as ext:
            await ext.request("initialize", {"protocolVersion": 1})
    found = [m for r in caplog.records if (m := re.search(r"opened from (\S+)", r.getMessage()))]
    assert found, "the endpoint logs whom a connection came from"
    return found[-1].group(1)


async def test_forwarded_for_is_believed_only_from_the_configured_proxy(caplog: pytest.LogCaptureFixture) -> None:
    # The test's client is 127.0.0.1: once the proxy itself, once a peer that merely claims to be behind one.
    async with gateway(["127.0.0.1"]) as (url, token, _guard):
        assert await opened_from(caplog, url, token, "203.0.113.7") == "203.0.113.7"
        # The proxy appends the peer it saw: a client's own forged entry further left is not the client.
        assert await opened_from(caplog, url, token, "198.51.100.9, 203.0.113.7") == "203.0.113.7"
    async with gateway(["10.0.0.0/8"]) as (url, token, _guard):
        assert await opened_from(caplog, url, token, "203.0.113.7") == "127.0.0.1"
    async with gateway([]) as (url, token, _guard):
        assert await opened_from(caplog, url, token, "203.0.113.7") == "127.0.0.1"


async def raw_healthz(port: int) -> bool:
    """One socket asking /healthz and kept open; False when the pod closed it at once (refused)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /healthz HTTP/1.1\r\nHost: pod\r\n\r\n")
    try:
        async with asyncio.timeout(5):
            head = await reader.readuntil(b"\r\n\r\n")
        return head.startswith(b"HTTP/1.1 200")
    except (asyncio.IncompleteReadError, ConnectionError):
        return False
    finally:
        held.append(writer)


held: list[asyncio.StreamWriter] = []


async def test_the_per_address_socket_cap_does_not_cap_everyone_behind_the_proxy() -> None:
    try:
        async with gateway([], max_connections_per_peer=2) as (url, _token, guard):
            port = int(url.rsplit(":", 1)[1])
            assert [await raw_healthz(port) for _ in range(3)] == [True, True, False]
            assert any("per address" in reason for reason in guard.refused.counts)
        for writer in held:
            writer.close()
        held.clear()
        # Through an ingress, every person's socket comes from its address: only the total cap holds it.
        async with gateway(["127.0.0.1"], max_connections_per_peer=2, max_connections=4) as (url, _token, guard):
            port = int(url.rsplit(":", 1)[1])
            assert [await raw_healthz(port) for _ in range(5)] == [True, True, True, True, False]
    finally:
        for writer in held:
            writer.close()
        held.clear()


# -- readiness -------------------------------------------------------------------------------------------------

async def test_readyz_is_ready_while_serving_and_fails_from_the_first_moment_of_a_drain() -> None:
    with tempfile.TemporaryDirectory(prefix="oab-state-") as state:
        pod = assemble(Settings(token=SecretStr(secrets.token_hex(32)), state_dir=Path(state)),
                       backend=NoAgentBackend())
        app = create_app(pod)
        async with running_server(app) as url, httpx.AsyncClient(timeout=10) as client:
            ready = await client.get(url + "/readyz")
            assert ready.status_code == 200 and ready.json() == {"ready": True, "state": "ready"}
            # The drain a SIGTERM runs (DrainingServer's), seen on a socket kept alive as a proxy keeps it.
            await drainer(app)()
            draining = await client.get(url + "/readyz")
            assert draining.status_code == 503 and draining.json() == {"ready": False, "state": "draining"}
            # Alive still: a liveness probe must not restart a pod that is finishing its tool calls.
            assert (await client.get(url + "/healthz")).status_code == 200
            # Nothing about the pod's sessions, to anyone, without a key.
            assert set(json.loads(draining.text)) == {"ready", "state"}


async def test_tls_and_the_proxy_rules_together_an_ingress_that_re_encrypts(
    tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    ca, cert, key = pod_certificate(tmp_path)
    async with gateway(["127.0.0.1"], tls=ReloadingTls(cert, key)) as (url, token, _guard):
        assert url.startswith("https://")
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="openab_browser.gateway.acp_endpoint"):
            async with connect_wss(wss(url), token, ca.client_context(), {"X-Forwarded-For": "203.0.113.7"}) as ext:
                await ext.request("initialize", {"protocolVersion": 1})
        assert any("opened from 203.0.113.7" in r.getMessage() for r in caplog.records)


# -- the certificate's dates, as `openab doctor` reads them ----------------------------------------------------

def test_the_dates_read_are_the_certificates_own_in_utc_time_and_generalized_time(tmp_path: Path) -> None:
    ca = Ca.make()
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    # Before 2050 X.509 writes UTCTime (two-digit years), from 2050 on GeneralizedTime.
    for not_after in (datetime.datetime(2049, 12, 31, 23, 59, 59, tzinfo=datetime.UTC),
                      datetime.datetime(2061, 3, 4, 5, 6, 7, tzinfo=datetime.UTC)):
        ca.issue(cert, key, not_after=not_after)
        # The pod's certificate first, then its chain: the first one's dates.
        cert.write_bytes(cert.read_bytes() + ca.cert.public_bytes(serialization.Encoding.PEM))
        validity = read_validity(cert)
        issued = x509.load_pem_x509_certificate(cert.read_bytes())
        assert validity == Validity(issued.not_valid_before_utc, issued.not_valid_after_utc)
        assert validity.not_after == not_after


@pytest.mark.parametrize("text", [
    "", "not a certificate", "-----BEGIN CERTIFICATE-----\n!!!\n-----END CERTIFICATE-----\n",
    "-----BEGIN CERTIFICATE-----\nMAA=\n-----END CERTIFICATE-----\n",  # an empty SEQUENCE
    "-----BEGIN CERTIFICATE-----\nMIQAAAAA\n-----END CERTIFICATE-----\n",  # a length past the end
    "-----BEGIN CERTIFICATE-----\nMIH/////\n-----END CERTIFICATE-----\n",
])
def test_a_file_that_is_no_certificate_is_a_certificate_error_not_a_crash(tmp_path: Path, text: str) -> None:
    path = tmp_path / "tls.crt"
    path.write_text(text)
    with pytest.raises(CertificateError):
        read_validity(path)


@pytest.mark.parametrize(("starts", "ends", "code", "says"), [
    (-1, 90, 0, "ok    TLS: {cert} loads with its key, valid until"),
    (-1, 3, 0, "warn  TLS: {cert} loads with its key and expires on"),
    (-30, -1, 1, "FAIL  TLS: {cert} expired on"),
    (2, 30, 1, "FAIL  TLS: {cert} is valid only from"),
])
async def test_doctor_reads_when_the_pods_certificate_ends(
    tmp_path: Path, starts: int, ends: int, code: int, says: str,
) -> None:
    ca = Ca.make()
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    now = datetime.datetime.now(datetime.UTC)
    ca.issue(cert, key, not_before=now + datetime.timedelta(days=starts), not_after=now + datetime.timedelta(days=ends))
    state, _ = private_state(tmp_path)
    exit_code, output = await doctor("--state-dir", str(state), "--url", "none", "--tls-cert", str(cert),
                                     "--tls-key", str(key), env=clean_env(OPENAB_HOST="0.0.0.0"))
    assert says.format(cert=cert) in output, output
    assert exit_code == code, output
    if code:
        assert "fix:" in output.split(says.format(cert=cert))[1].splitlines()[1], output


# -- sockets that never finish a TLS handshake ------------------------------------------------------------------

def client_hello() -> bytes:
    """The first flight of a real TLS client: its ClientHello record, as a browser would send it."""
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    client = context.wrap_bio(incoming, outgoing)
    with contextlib.suppress(ssl.SSLWantReadError):
        client.do_handshake()
    return outgoing.read()


async def closed_by_the_pod(reader: asyncio.StreamReader, timeout: float) -> bool:
    """Whether the pod closes this socket within ``timeout`` (it sends nothing on a refused or expired socket)."""
    try:
        async with asyncio.timeout(timeout):
            return await reader.read() == b""
    except ConnectionError:
        return True
    except TimeoutError:
        return False


async def test_tls_sockets_count_from_accept_per_address_and_in_all_and_go_at_the_handshake_timeout(
    tmp_path: Path,
) -> None:
    ca, cert, key = pod_certificate(tmp_path)
    async with gateway([], tls=ReloadingTls(cert, key), handshake_timeout=4.0,
                       max_connections_per_peer=20) as (url, token, guard):
        port = int(url.rsplit(":", 1)[1])
        hello = client_hello()
        # From 127.0.0.2, another address than the person's below: 25 sockets that say nothing at all and
        # 5 that send half a ClientHello and stop.
        attackers = []
        for number in range(30):
            reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=("127.0.0.2", 0))
            if number >= 25:
                writer.write(hello[: len(hello) // 2])
            attackers.append((reader, writer))
        try:
            # Counted from accept, TLS or not: the 21st to the 30th are closed as soon as they are accepted.
            refused = await asyncio.gather(*(closed_by_the_pod(reader, 2.0) for reader, _ in attackers[20:]))
            assert refused == [True] * 10
            assert guard.refused_by_kind["address-cap"] == 10
            assert len(guard) == 20, "the first 20 of that address are held, in their handshake"
            # The person's own wss:// from another address gets in while the attacker holds its share.
            async with connect_wss(wss(url), token, ca.client_context()) as ext:
                assert (await ext.request("initialize", {"protocolVersion": 1}))["protocolVersion"] == 1
                # No finished handshake within the handshake timeout (4 s here): each socket held is closed,
                # the silent ones and the half-sent ClientHellos alike, not after asyncio's 60 s.
                held = await asyncio.gather(*(closed_by_the_pod(reader, 30.0) for reader, _ in attackers[:20]))
                assert held == [True] * 20
                assert guard.refused_by_kind["head-timeout"] == 20
                assert len(guard) == 1, "only the person's socket is left"
                await ext.request("session/new", {"cwd": "/", "mcpServers": []})
        finally:
            for _, writer in attackers:
                writer.close()


async def test_the_pods_total_socket_cap_holds_tls_sockets_in_their_handshake(tmp_path: Path) -> None:
    _ca, cert, key = pod_certificate(tmp_path)
    async with gateway([], tls=ReloadingTls(cert, key), handshake_timeout=30.0, max_connections=10,
                       max_connections_per_peer=100) as (url, _token, guard):
        port = int(url.rsplit(":", 1)[1])
        held = [await asyncio.open_connection("127.0.0.1", port) for _ in range(10)]
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            assert await closed_by_the_pod(reader, 5.0), "the 11th socket is closed at once"
            assert guard.refused_by_kind["connection-cap"] == 1 and len(guard) == 10
        finally:
            writer.close()
            for _, other in held:
                other.close()


async def test_silent_tls_sockets_from_one_address_cannot_use_up_a_1024_file_limit(tmp_path: Path) -> None:
    ca, cert, key = pod_certificate(tmp_path)
    # The reported flood: 1,100 sockets that never send a ClientHello, against a pod limited to 1,024 files.
    async with openab_run(tmp_path, "--tls-cert", str(cert), "--tls-key", str(key), open_files=1024,
                          env={"OPENAB_HANDSHAKE_TIMEOUT": "120"}) as pod:
        port = int(pod.url.rsplit(":", 1)[1])
        # The flood lands while the pod is busy (stopped here), so the kernel queues all it can for one accept: a
        # pod that accepted its whole queue at once held 1,100 files before any was refused.
        os.kill(pod.process.pid, signal.SIGSTOP)
        try:
            dials = [asyncio.ensure_future(asyncio.open_connection("127.0.0.1", port, local_addr=("127.0.0.2", 0)))
                     for _ in range(1100)]
            # The first to be queued, then a moment for the rest (on a loaded machine the dials alone take seconds).
            queued, _ = await asyncio.wait(dials, timeout=30, return_when=asyncio.FIRST_COMPLETED)
            if queued:
                queued, _ = await asyncio.wait(dials, timeout=2)
        finally:
            os.kill(pod.process.pid, signal.SIGCONT)
        assert queued, "the kernel queued none of the flood while the pod was stopped"
        async with asyncio.timeout(120):  # the rest retry their SYN until the pod has drained its queue
            flood = await asyncio.gather(*dials)
        # With the queue full the kernel may have answered some with SYN cookies and dropped their last ACK: those
        # are open on our side only, and a silent socket never tells. These, dialled one by one, reach the pod.
        flood += [await asyncio.open_connection("127.0.0.1", port, local_addr=("127.0.0.2", 0)) for _ in range(300)]
        try:
            # Past that address's 256 each is closed at accept: the pod keeps its files, and the person gets in.
            await pod.wait_for_log(r"over the cap of 256 connections per address")
            async with connect_wss(wss(pod.url), pod.token, ca.client_context()) as ext:
                assert (await ext.request("initialize", {"protocolVersion": 1}))["protocolVersion"] == 1
                await ext.request("session/new", {"cwd": "/", "mcpServers": []})
        finally:
            for _, writer in flood:
                writer.close()
    log = "".join(pod.log)
    assert "Too many open files" not in log and "out of system resource" not in log
