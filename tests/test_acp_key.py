"""The pod's own `/acp` key is on no disk (issue 35, item 3): what a copy of the state dir gives an attacker on the
same host, played against a real `openab run` (real uvicorn, real websockets).

The pod keeps only a verifier (gateway/acp_key.py). Every file of a copied state dir, whole and in pieces, is
presented as the key and refused, while the key the terminal showed opens `/acp`; a session id needs the key too,
and `conversations.json` holds none. A verifier that is planted as a link, garbled or truncated stops the pod with
what to do, never a pod that admits everyone; a plain `acp.key` of an earlier openab is upgraded in place, and the
panel stays paired.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_extension import connect_extension
from ports import free_port
from test_pairing import start_output
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus
from websockets.typing import Subprotocol

from openab_browser.core.errors import ConfigurationError
from openab_browser.core.statedir import KEYS_DIR
from openab_browser.gateway.acp_key import (
    ITERATIONS,
    LEGACY_KEY_FILE,
    KeptVerifier,
    KeyVerifier,
    read_verifier,
    rotate_key,
    settle_kept_key,
    verifier_path,
)

OPENAB = [sys.executable, "-m", "openab_browser.gateway.cli"]


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("OPENAB_ACP_AUTH_KEY", "OPENAB_PUBLIC_URL"))}


class Pod:
    """`openab run` on ``state``, serving on ``port``, stderr a pipe (what it logged is read at the end)."""

    def __init__(self, state: Path) -> None:
        self.port = free_port()
        self.url = f"ws://127.0.0.1:{self.port}/acp"
        self.process = subprocess.Popen(
            [*OPENAB, "run", "--port", str(self.port), "--state-dir", str(state), "--log-level", "debug"],
            env=_env(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            start_new_session=True)
        assert self.process.stderr is not None
        self.lines: list[str] = []
        while not any("running on" in line.lower() for line in self.lines):
            line = self.process.stderr.readline().decode()
            assert line, "openab run exited while starting:\n" + "".join(self.lines)
            self.lines.append(line)

    def stop(self) -> str:
        self.process.terminate()
        _, rest = self.process.communicate(timeout=30)
        return "".join(self.lines) + rest.decode()


@pytest.fixture
def made(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """A state dir whose key a terminal start made, and that key as the terminal showed it."""
    state = tmp_path / "state"
    shown = start_output("--port", str(free_port()), "--state-dir", str(state), env=_env(), terminal=True)
    key = re.search(r"Key: {9}(\S+)\n", shown)
    assert key is not None, shown
    yield state, key.group(1)


async def _status(url: str, key: str | None) -> int:
    """The HTTP status of an `/acp` upgrade presenting ``key`` as the browser does (101: admitted)."""
    offered = [Subprotocol(f"openab.bearer.{key}")] if key is not None else []
    try:
        async with connect(url, subprotocols=[*offered, Subprotocol("acp.v1")], open_timeout=10):
            return 101
    except InvalidStatus as exc:
        return exc.response.status_code


def _candidates(root: Path) -> set[str]:
    """Everything in a copied state dir an attacker might try as the key: each file whole, each line, each word,
    each JSON string; each subprotocol-safe one, since the browser's way of sending a key takes only those."""
    found: set[str] = set()
    for path in root.rglob("*"):
        if not path.is_file() or path.stat().st_size > 1 << 20:
            continue
        text = path.read_text(errors="replace")
        found.update({text.strip(), *text.splitlines(), *re.split(r"[\s\"',:{}\[\]]+", text)})
        with contextlib.suppress(ValueError):  # not JSON: its words are in already
            found.update(_strings(json.loads(text)))
    return {c for c in found if c and re.fullmatch(r"[A-Za-z0-9._~-]+", c)}


def _strings(value: object) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield str(k)
            yield from _strings(v)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


@pytest.mark.anyio
async def test_a_copy_of_the_state_dir_opens_nothing_the_shown_key_does(made: tuple[Path, str],
                                                                        tmp_path: Path) -> None:
    state, key = made
    assert sorted(p.name for p in (state / KEYS_DIR).iterdir()) == ["acp.verifier", "session-names.key"]
    verifier = verifier_path(state)
    assert stat.S_IMODE(verifier.stat().st_mode) == 0o600 and stat.S_IMODE(verifier.parent.stat().st_mode) == 0o700
    pod = Pod(state)
    try:
        async with connect_extension(pod.url, key) as ext:  # a session, so conversations and names exist too
            await ext.initialize()
            session = await ext.new_session()
        copy = tmp_path / "copied"
        shutil.copytree(state, copy, symlinks=True)
        tried = _candidates(copy)
        assert key not in tried, "the key is in no file of the state dir"
        assert len(tried) >= 5, tried  # the verifier's salt and hash, the naming secret, the file names
        for candidate in sorted(tried):
            assert await _status(pod.url, candidate) == 401, f"{candidate!r} from the copy opened /acp"
        assert await _status(pod.url, None) == 401
        assert await _status(pod.url, key) == 101
        # A session id alone is no way in: without the key the upgrade is refused before any frame is read.
        for wrong in (None, secrets.token_urlsafe(32)):
            with pytest.raises(InvalidStatus, match="401"):
                async with connect_extension(pod.url, wrong) as ext:
                    await ext.request("session/resume", {"sessionId": session, "cwd": "/", "mcpServers": []})
    finally:
        logged = pod.stop()
    assert key not in logged and session not in logged


@pytest.mark.anyio
async def test_conversations_json_names_no_session_id(tmp_path: Path) -> None:
    """What `conversations.json` keeps is keyed by each session's channel (an HMAC under the naming secret), so a
    copy of it hands out no id to resume; an agent's own conversation id in it opens nothing at `/acp` either."""
    from openab_browser.core.agents.conversations import Conversations
    from openab_browser.core.session_naming import SessionNaming
    from openab_browser.core.sessions import new_session_id

    session = new_session_id()
    naming = SessionNaming(secrets.token_bytes(32))
    kept = Conversations(tmp_path / "conversations.json", ttl=3600)
    kept.remember(naming.channel(session), "claude", "conv-" + secrets.token_hex(8))
    text = (tmp_path / "conversations.json").read_text()
    assert session not in text and session.removeprefix("sess_") not in text
    assert stat.S_IMODE((tmp_path / "conversations.json").stat().st_mode) == 0o600


@pytest.mark.parametrize("plant", ["link", "truncated", "garbled", "other's format", "huge iterations", "loose"])
def test_a_planted_or_broken_verifier_stops_the_pod_with_what_to_do(made: tuple[Path, str], tmp_path: Path,
                                                                    plant: str) -> None:
    state, key = made
    verifier = verifier_path(state)
    text = verifier.read_text()
    if plant == "link":
        target = tmp_path / "elsewhere"
        target.write_text(KeyVerifier.of("attacker-" + secrets.token_hex(16)).text())
        target.chmod(0o600)
        verifier.unlink()
        verifier.symlink_to(target)
    elif plant == "loose":
        verifier.chmod(0o644)
    else:
        fields = json.loads(text)
        broken = {"truncated": text[: len(text) // 2], "garbled": "\x00" + text[1:],
                  "other's format": json.dumps({**fields, "kdf": "md5"}),
                  "huge iterations": json.dumps({**fields, "iterations": 10**12})}[plant]
        verifier.write_text(broken)
    run = subprocess.run([*OPENAB, "run", "--port", str(free_port()), "--state-dir", str(state)], env=_env(),
                         stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert run.returncode == 2, run.stderr
    said = run.stderr.strip().splitlines()[-1]
    assert str(verifier) in said and key not in run.stderr
    assert ("symbolic link" in said if plant == "link" else "chmod 600" in said if plant == "loose"
            else "openab key rotate" in said), said


def test_a_plain_key_an_earlier_openab_kept_is_upgraded_in_place_and_still_pairs(tmp_path: Path) -> None:
    state = tmp_path / "state"
    (state / KEYS_DIR).mkdir(parents=True, mode=0o700)
    state.chmod(0o700)
    key = secrets.token_urlsafe(32)
    legacy = state / KEYS_DIR / LEGACY_KEY_FILE
    legacy.write_text(key + "\n")
    legacy.chmod(0o600)
    pod = Pod(state)
    try:
        assert not legacy.exists(), "the plain key is gone once its verifier is in place"
        assert read_verifier(verifier_path(state)).matches(key)
        import anyio

        assert anyio.run(_status, pod.url, key) == 101, "the panel paired with it stays paired"
    finally:
        logged = pod.stop()
    assert key not in logged and "now kept as a verifier" in logged


def test_a_stop_between_verifier_and_removal_is_finished_and_a_mismatch_refused(tmp_path: Path) -> None:
    state = tmp_path / "state"
    settled = settle_kept_key(state, strong=32)
    assert settled.key is not None
    legacy = state / KEYS_DIR / LEGACY_KEY_FILE
    legacy.write_text(settled.key)
    legacy.chmod(0o600)
    assert settle_kept_key(state, strong=32).key is None and not legacy.exists()
    legacy.write_text(secrets.token_urlsafe(32))
    legacy.chmod(0o600)
    with pytest.raises(ConfigurationError, match="does not match"):
        settle_kept_key(state, strong=32)


def test_the_running_door_follows_a_rotation_and_fails_closed(tmp_path: Path) -> None:
    state = tmp_path / "state"
    first = settle_kept_key(state, strong=32).key
    door = KeptVerifier(verifier_path(state))
    assert door.matches(first) and not door.matches(None) and not door.matches("x" * 5000)
    _, second = rotate_key(state)
    assert door.matches(second) and not door.matches(first)
    verifier_path(state).write_text("{")
    assert not door.matches(second), "an unreadable verifier refuses every key"
    verifier_path(state).unlink()
    assert not door.matches(second) and not door.matches("")
    assert KeyVerifier.of("k" * 43).iterations == ITERATIONS


def test_the_journal_audit_and_keys_are_where_no_confined_agent_reaches(tmp_path: Path) -> None:
    """The audit file (the journal on disk, read back after a restart) and the key's verifier are written under the
    state dir, and a session's Landlock policy allows of the state dir only that session's own two folders: no
    rule reaches the files the pod alone writes (the kernel's refusal itself: tests/test_confinement.py; what a
    record read back cannot say: tests/test_recorded_words.py)."""
    from openab_browser.core.agents.confinement import READ_WRITE, agent_policy
    from openab_browser.core.mcp.audit import AuditLog
    from openab_browser.core.session_naming import SessionNaming

    state = tmp_path / "state"
    settle_kept_key(state, strong=32)
    audit = AuditLog(state, tag=SessionNaming(b"k" * 32).tag)
    audit.step_started("sess_a", "browser_click", {"ref": "e1"}, "act-0000000000000000000000")
    assert audit.path == state / "audit.jsonl" and audit.path.stat().st_size > 0
    assert stat.S_IMODE(audit.path.stat().st_mode) == 0o600
    work, tmp = state / "sessions" / "c1" / "work", state / "sessions" / "c1" / "tmp"
    policy = agent_policy(7, workdir=str(work), tmpdir=str(tmp), state_dir=str(state),
                          home_dirs=[str(tmp_path / "home" / ".codex")], runtimes=[sys.prefix],
                          path=os.environ.get("PATH", ""))
    pods_own = [audit.path, verifier_path(state), state / KEYS_DIR / "session-names.key", state / "conversations.json",
                state / "sessions" / "c2" / "work"]
    for rule in policy.rules:
        for own in pods_own:
            assert not own.is_relative_to(rule.path), f"{rule.path} reaches {own}"
    assert {r.path for r in policy.rules if r.access & READ_WRITE == READ_WRITE} >= {str(work), str(tmp)}


def test_key_rotate_refuses_a_key_the_operator_gives_and_prints_a_new_one_once(tmp_path: Path) -> None:
    state = tmp_path / "state"
    given = secrets.token_hex(32)
    refused = subprocess.run([*OPENAB, "key", "rotate", "--state-dir", str(state)],
                             env={**_env(), "OPENAB_ACP_AUTH_KEY": given}, capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2 and "OPENAB_ACP_AUTH_KEY" in refused.stderr and given not in refused.stderr
    assert not verifier_path(state).exists()
    made = subprocess.run([*OPENAB, "key", "rotate", "--state-dir", str(state)], env=_env(), capture_output=True,
                          text=True, timeout=60)
    key = re.search(r"Key: +(\S+)\n", made.stdout)
    assert made.returncode == 0 and key is not None, made.stdout + made.stderr
    assert made.stdout.count(key.group(1)) == 1 and key.group(1) not in made.stderr
    assert "No pod runs on this state dir now" in made.stdout
    assert read_verifier(verifier_path(state)).matches(key.group(1))
    assert stat.S_IMODE(verifier_path(state).stat().st_mode) == 0o600
