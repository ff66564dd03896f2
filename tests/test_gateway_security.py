"""What a local attacker meets at the gateway's door: no keyless default, a kept 0600 verifier of the key (never the
key), private dirs, no key on the command line or in the log, and a health probe that says nothing."""

from __future__ import annotations

import asyncio
import os
import re
import secrets
import stat
import sys
import threading
from pathlib import Path

import httpx
import pytest
from fake_extension import connect_extension
from gateway_harness import run_gateway
from pydantic import SecretStr
from waits import eventually

from openab_browser.core.acp.backend import NoAgentBackend
from openab_browser.core.errors import ConfigurationError
from openab_browser.core.session_naming import CHANNEL_PATTERN, NAMES_KEPT, SessionNaming
from openab_browser.core.sessions import new_session_id
from openab_browser.core.settings import Settings
from openab_browser.core.statedir import KEYS_DIR, NAMING_SECRET_FILE, naming_secret, session_workdir
from openab_browser.gateway.acp_key import LEGACY_KEY_FILE, VERIFIER_FILE, read_verifier
from openab_browser.gateway.app import create_app
from openab_browser.gateway.assemble import assemble
from openab_browser.gateway.pairing import keep_key, make_private_dir, read_key_file

pytestmark = pytest.mark.anyio

OPENAB = [sys.executable, "-m", "openab_browser.gateway.cli"]


def _env_without_key() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("OPENAB_ACP_AUTH_KEY")}


async def _start(*args: str, env: dict[str, str]) -> tuple[asyncio.subprocess.Process, list[str]]:
    """`openab run` until it serves; returns the process and what it wrote to stderr so far."""
    process = await asyncio.create_subprocess_exec(
        *OPENAB, "run", "--port", "0", *args, env=env, stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE, start_new_session=True,
    )
    assert process.stderr is not None
    lines: list[str] = []
    async with asyncio.timeout(30):
        while not any(re.search(r"running on http://", line, re.IGNORECASE) for line in lines):
            line = (await process.stderr.readline()).decode()
            if not line:
                raise AssertionError("openab run exited while starting:\n" + "".join(lines))
            lines.append(line)
    return process, lines


async def _stop(process: asyncio.subprocess.Process) -> None:
    if process.returncode is None:
        process.terminate()
        async with asyncio.timeout(30):
            await process.wait()


def _port(lines: list[str]) -> int:
    for line in lines:
        if found := re.search(r"running on http://[^:]+:(\d+)", line, re.IGNORECASE):
            return int(found.group(1))
    raise AssertionError("no port in " + "".join(lines))


# -- no keyless default --------------------------------------------------------------------------------------


async def test_openab_run_without_a_key_makes_one_keeps_its_verifier_0600_and_a_rotated_key_pairs(
        tmp_path: Path) -> None:
    state = tmp_path / "state"
    process, lines = await _start("--state-dir", str(state), "--log-level", "debug", env=_env_without_key())
    try:
        verifier_file = state / KEYS_DIR / VERIFIER_FILE
        assert stat.S_IMODE(verifier_file.stat().st_mode) == 0o600
        assert stat.S_IMODE((state / KEYS_DIR).stat().st_mode) == 0o700
        assert stat.S_IMODE(state.stat().st_mode) == 0o700
        assert not (state / KEYS_DIR / LEGACY_KEY_FILE).exists(), "the key itself is on no disk"
        printed = "".join(lines)
        # stderr is a pipe here, as in a container, where it is the log (tests/test_pairing.py: a terminal).
        assert "stderr is not a terminal" in printed and "openab key rotate" in printed
        url = f"ws://127.0.0.1:{_port(lines)}/acp"
        with pytest.raises(Exception, match="401"):
            async with connect_extension(url, None):
                pass
        # The key this start made was shown to no one: the operator makes one for the person, and the running
        # pod takes it at the next connection, no restart.
        rotate = await asyncio.create_subprocess_exec(*OPENAB, "key", "rotate", "--state-dir", str(state),
                                                      env=_env_without_key(), stdout=asyncio.subprocess.PIPE)
        async with asyncio.timeout(60):
            said = (await rotate.communicate())[0].decode()
        key = re.search(r"Key: +(\S+)", said)
        assert rotate.returncode == 0 and key is not None and url in said, said
        assert read_verifier(verifier_file).matches(key.group(1))
        async with connect_extension(url, key.group(1)) as ext:
            assert (await ext.initialize())["protocolVersion"] == 1
    finally:
        await _stop(process)
    assert process.stderr is not None
    rest = (await process.stderr.read()).decode()
    assert key.group(1) not in printed + rest, "the key is in no log line, at debug level either"
    assert "verifier" in rest and "changed" in rest, "the pod says it took a new verifier"

    # A restarted pod pairs with the same panel: the same verifier, the same key.
    again, lines = await _start("--state-dir", str(state), env=_env_without_key())
    try:
        assert "made at an earlier start" in "".join(lines) and key.group(1) not in "".join(lines)
        async with connect_extension(f"ws://127.0.0.1:{_port(lines)}/acp", key.group(1)) as ext:
            assert (await ext.initialize())["protocolVersion"] == 1
    finally:
        await _stop(again)


async def test_a_key_on_the_command_line_is_refused_and_a_key_file_is_read(tmp_path: Path) -> None:
    key = secrets.token_hex(32)
    refused = await asyncio.create_subprocess_exec(
        *OPENAB, "run", "--token", key, "--state-dir", str(tmp_path / "s1"), env=_env_without_key(),
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await refused.communicate()
    assert refused.returncode == 2 and b"OPENAB_ACP_AUTH_KEY" in err and key.encode() not in err

    key_file = tmp_path / "key"
    key_file.write_text(key + "\n")
    key_file.chmod(0o644)
    loose = await asyncio.create_subprocess_exec(
        *OPENAB, "run", "--key-file", str(key_file), "--state-dir", str(tmp_path / "s2"), env=_env_without_key(),
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await loose.communicate()
    assert loose.returncode == 2 and b"chmod 600" in err

    key_file.chmod(0o600)
    process, lines = await _start("--key-file", str(key_file), "--state-dir", str(tmp_path / "s2"),
                                  env=_env_without_key())
    try:
        assert key not in "".join(lines) and f"Key: the one in {key_file}" in "".join(lines), \
            "an operator's own key is not printed, only where it is"
        async with connect_extension(f"ws://127.0.0.1:{_port(lines)}/acp", key) as ext:
            assert (await ext.initialize())["protocolVersion"] == 1
    finally:
        await _stop(process)


def test_keyless_serving_takes_the_explicit_flag_and_loopback() -> None:
    with pytest.raises(ConfigurationError, match="without a key"):
        create_app(assemble(Settings(), backend=NoAgentBackend()))
    with pytest.raises(ConfigurationError, match="without a key"):
        create_app(assemble(Settings(host="0.0.0.0", insecure_no_key=True), backend=NoAgentBackend()))
    create_app(assemble(Settings(insecure_no_key=True), backend=NoAgentBackend()))


def test_a_short_key_is_refused_off_loopback() -> None:
    for weak in ("k", " ", "0123456789abcdef0123456789abcde"):
        with pytest.raises(ConfigurationError, match="at least 32"):
            create_app(assemble(Settings(host="0.0.0.0", token=SecretStr(weak)), backend=NoAgentBackend()))
    create_app(assemble(Settings(host="0.0.0.0", token=SecretStr(secrets.token_hex(16))), backend=NoAgentBackend()))


# -- files and folders ---------------------------------------------------------------------------------------


def test_the_state_dir_is_made_0700_and_a_loose_one_is_refused_not_changed(tmp_path: Path) -> None:
    made = make_private_dir(tmp_path / "new" / "state")
    assert stat.S_IMODE(made.stat().st_mode) == 0o700
    loose = tmp_path / "loose"
    loose.mkdir(mode=0o755)
    loose.chmod(0o755)
    with pytest.raises(ConfigurationError, match="chmod 700"):
        make_private_dir(loose)
    assert stat.S_IMODE(loose.stat().st_mode) == 0o755, "a folder we did not make is never changed"


def test_a_planted_key_file_is_not_trusted(tmp_path: Path) -> None:
    state = make_private_dir(tmp_path / "state")
    make_private_dir(state / KEYS_DIR)
    target = tmp_path / "elsewhere"
    target.write_text(secrets.token_hex(32))
    target.chmod(0o600)
    (state / KEYS_DIR / LEGACY_KEY_FILE).symlink_to(target)
    with pytest.raises(ConfigurationError, match="symbolic link"):
        keep_key(state)
    (state / KEYS_DIR / LEGACY_KEY_FILE).unlink()
    (state / KEYS_DIR / LEGACY_KEY_FILE).write_text(secrets.token_hex(32))
    os.chown(state / KEYS_DIR / LEGACY_KEY_FILE, 65534, 65534)  # another user's file in our folder
    (state / KEYS_DIR / LEGACY_KEY_FILE).chmod(0o600)
    with pytest.raises(ConfigurationError, match="belongs to uid 65534"):
        read_key_file(state / KEYS_DIR / LEGACY_KEY_FILE)


def test_no_walk_up_from_a_sessions_working_folder_meets_a_secret(tmp_path: Path) -> None:
    state = tmp_path / "state"
    made = keep_key(state).key
    assert made is not None
    workdir = session_workdir(state, SessionNaming(naming_secret(state)).channel(new_session_id()), create=True)
    secrets_kept = {VERIFIER_FILE: made.get_secret_value(), LEGACY_KEY_FILE: made.get_secret_value(),
                    NAMING_SECRET_FILE: (state / KEYS_DIR / NAMING_SECRET_FILE).read_text()}
    # What an agent in its working folder tries: ../NAME at every depth, and every file in every folder above it.
    for depth in range(len(workdir.parts)):
        folder = workdir.joinpath(*[".."] * depth)
        for name in secrets_kept:
            assert not (folder / name).exists(), f"{'../' * depth}{name} reaches a secret"
        for entry in folder.iterdir():
            if entry.is_file() and entry.stat().st_size < 1 << 20:
                text = entry.read_bytes()
                assert not any(secret.strip().encode() in text for secret in secrets_kept.values()), entry
    assert (state / KEYS_DIR) not in workdir.parents, "the secrets' folder is above no working folder"


def test_secrets_an_earlier_openab_kept_in_the_state_dir_move_into_keys(tmp_path: Path) -> None:
    state = make_private_dir(tmp_path / "state")
    key, naming = secrets.token_urlsafe(32), "ab" * 32
    for name, text in ((LEGACY_KEY_FILE, key), (NAMING_SECRET_FILE, naming)):
        (state / name).write_text(text + "\n")
        (state / name).chmod(0o600)
    kept = keep_key(state)
    assert kept.key is None and kept.upgraded and kept.verifier.matches(key), "the same key: the panel stays paired"
    assert naming_secret(state) == bytes.fromhex(naming), "the same names: sessions keep their folders"
    assert sorted(p.name for p in state.iterdir()) == [KEYS_DIR]
    assert sorted(p.name for p in (state / KEYS_DIR).iterdir()) == [VERIFIER_FILE, NAMING_SECRET_FILE]
    assert stat.S_IMODE((state / KEYS_DIR).stat().st_mode) == 0o700


def test_session_names_reveal_no_id_and_are_stable_across_restarts_of_one_pod(tmp_path: Path) -> None:
    state = tmp_path / "state"
    session_id = new_session_id()
    first = SessionNaming(naming_secret(state))
    assert stat.S_IMODE((state / KEYS_DIR / NAMING_SECRET_FILE).stat().st_mode) == 0o600
    channel = first.channel(session_id)
    assert CHANNEL_PATTERN.fullmatch(channel)
    uuid_hex = session_id.removeprefix("sess_").replace("-", "")
    assert not any(uuid_hex[i:i + 8] in channel for i in range(0, 32, 8)), "no part of the id shows"
    assert first.tag(session_id) not in channel
    # The restarted pod names the session's folder the same (its agent CLI finds its conversation there) ...
    assert SessionNaming(naming_secret(state)).channel(session_id) == channel
    # ... and another pod, or someone without the pod's secret, cannot compute it from the id.
    assert SessionNaming(naming_secret(tmp_path / "other")).channel(session_id) != channel
    assert SessionNaming().channel(session_id) != channel


def test_a_flood_of_session_ids_keeps_the_names_made_bounded_and_every_name_right(tmp_path: Path) -> None:
    # A peer chooses the ids the pod is sent (and logs the tag of): the names kept once made are bounded, and a
    # name is the same made afresh or kept, for its own purpose only.
    naming = SessionNaming(naming_secret(tmp_path / "state"))
    fresh = SessionNaming(naming_secret(tmp_path / "state"))
    first = new_session_id()
    tag, channel = naming.tag(first), naming.channel(first)

    failed: list[BaseException] = []

    def flood(start: int) -> None:  # log lines name sessions from any thread
        try:
            for n in range(start, 3 * NAMES_KEPT, 8):
                naming.tag(f"sess_{n:032x}")
        except BaseException as exc:
            failed.append(exc)

    switching = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads taking turns as often as they can: the making of room is where they meet
    try:
        threads = [threading.Thread(target=flood, args=(start,)) for start in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
    finally:
        sys.setswitchinterval(switching)
    assert failed == []
    assert len(naming._made) == NAMES_KEPT  # the bound itself is what is tested
    assert (naming.tag(first), naming.channel(first)) == (tag, channel) == (fresh.tag(first), fresh.channel(first))
    assert naming.tag(f"sess_{1:032x}") == fresh.tag(f"sess_{1:032x}") != fresh.tag(f"sess_{2:032x}")
    assert tag.removeprefix("s-") not in channel


def test_a_planted_naming_secret_is_not_trusted_and_an_old_loose_sessions_dir_is_tightened(tmp_path: Path) -> None:
    state = make_private_dir(tmp_path / "state")
    make_private_dir(state / KEYS_DIR)
    chosen = tmp_path / "chosen"
    chosen.write_text("00" * 32)  # an attacker's secret would let them compute every session's folder
    chosen.chmod(0o600)
    (state / KEYS_DIR / NAMING_SECRET_FILE).symlink_to(chosen)
    with pytest.raises(ConfigurationError, match="symbolic link"):
        naming_secret(state)
    (state / KEYS_DIR / NAMING_SECRET_FILE).unlink()
    (state / KEYS_DIR / NAMING_SECRET_FILE).write_text("not hex")
    (state / KEYS_DIR / NAMING_SECRET_FILE).chmod(0o600)
    with pytest.raises(ConfigurationError, match="64 hex digits"):
        naming_secret(state)
    # Earlier openab made sessions/ with the umask's mode: it is ours, inside our 0700 state dir, so tightened.
    (state / "sessions").mkdir(mode=0o755)
    (state / "sessions").chmod(0o755)
    workdir = session_workdir(state, SessionNaming().channel(new_session_id()), create=True)
    assert stat.S_IMODE((state / "sessions").stat().st_mode) == 0o700
    assert stat.S_IMODE(workdir.stat().st_mode) == stat.S_IMODE(workdir.parent.stat().st_mode) == 0o700


# -- what the door says ----------------------------------------------------------------------------------------


async def test_healthz_says_alive_and_nothing_else() -> None:
    async with run_gateway() as gw, connect_extension(gw.ws_url, gw.token) as ext:
        await ext.initialize()
        await ext.new_session([])
        async with httpx.AsyncClient() as http:
            answer = await http.get(gw.base_url + "/healthz")
    assert answer.status_code == 200 and answer.json() == {"ok": True}


async def test_debug_logs_show_no_key_no_page_text_and_refusals_are_no_errors(tmp_path: Path) -> None:
    key = secrets.token_hex(32)
    env = {**_env_without_key(), "OPENAB_ACP_AUTH_KEY": key}
    process, lines = await _start("--state-dir", str(tmp_path / "state"), "--log-level", "debug", env=env)
    secret_page_text = "hunter2-" + secrets.token_hex(4)
    try:
        url = f"ws://127.0.0.1:{_port(lines)}/acp"
        for header in (False, True):
            async with connect_extension(url, key, use_header=header) as ext:
                await ext.initialize()
                session_id = await ext.new_session([])
                await ext.request("session/prompt", {"sessionId": session_id,
                                                     "prompt": [{"type": "text", "text": secret_page_text}]})
        for _ in range(5):
            with pytest.raises(Exception, match="401"):
                async with connect_extension(url, "wrong-" + secrets.token_hex(16)):
                    pass
    finally:
        await _stop(process)
    assert process.stderr is not None
    logged = "".join(lines) + (await process.stderr.read()).decode()
    assert "< GET /acp" in logged, "this is the debug level that used to show headers and frames"
    assert key not in logged
    # A session id resumes its session from any socket: the log names each session by its tag.
    assert "sess_" not in logged
    tag = SessionNaming(naming_secret(tmp_path / "state")).tag(session_id)
    assert tag in logged
    assert "openab.bearer.[redacted]" in logged
    assert secret_page_text not in logged, "page and prompt text stay out of the log below trace"
    assert "wrong-" not in logged, "a wrong key is a credential too"
    assert "without completing handshake" not in logged and "ERROR" not in logged


async def test_half_sent_requests_are_closed_and_bounded_per_address() -> None:
    async with run_gateway(handshake_timeout=3.0, max_connections_per_peer=20) as gw:
        port = int(gw.base_url.rsplit(":", 1)[1])
        attackers: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
        for _ in range(60):  # from 127.0.0.2: another address than the real client below
            reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=("127.0.0.2", 0))
            writer.write(b"GET /acp HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # never finished
            attackers.append((reader, writer))

        async def closed_soon(reader: asyncio.StreamReader) -> bool:
            try:
                async with asyncio.timeout(1.0):
                    return await reader.read() == b""
            except (TimeoutError, ConnectionError):
                return False

        closed = await asyncio.gather(*(closed_soon(reader) for reader, _ in attackers))
        assert sum(closed) == 40, "from the 21st socket of one address on, each is closed as soon as it is accepted"
        assert len(gw.guard) == 20
        # The person's own client, from another address, is served while the attacker holds its share.
        async with connect_extension(gw.ws_url, gw.token) as ext:
            assert (await ext.initialize())["protocolVersion"] == 1
        # Sockets that never finish their request head are closed after the handshake timeout.
        await eventually(lambda: len(gw.guard) == 0, 10)
        assert gw.guard.refused["no whole request head within 3 s"] == 20
        for _, writer in attackers:
            writer.close()


async def test_the_global_cap_closes_new_sockets_until_old_ones_go() -> None:
    async with run_gateway(handshake_timeout=30, max_connections=10, max_connections_per_peer=100) as gw:
        port = int(gw.base_url.rsplit(":", 1)[1])
        held = [await asyncio.open_connection("127.0.0.1", port) for _ in range(10)]
        reader, _writer = await asyncio.open_connection("127.0.0.1", port)
        async with asyncio.timeout(5):
            assert await reader.read() == b"", "the 11th socket is closed at once"
        for _, writer in held:
            writer.close()
        await eventually(lambda: len(gw.guard) == 0, 10)
        async with connect_extension(gw.ws_url, gw.token) as ext:
            assert (await ext.initialize())["protocolVersion"] == 1
