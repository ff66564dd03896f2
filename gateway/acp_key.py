"""The `/acp` key the pod makes itself, kept on disk only as a verifier: a salted hash to compare against.

A copy of the state dir (a backup, a prompt-injected agent of an earlier openab, another local user who got a
read) must not open `/acp`, so the key itself is never written: ``keys/acp.verifier`` holds one JSON line, 0600 in
the 0700 ``keys/``, with a PBKDF2-SHA256 hash of the key under a random salt and its parameters. The key is 256
random bits, so what keeps it from being found from the hash is its entropy, not the hash's cost: the cost is kept
low (:data:`ITERATIONS`, about 0.2 ms on the project's machines) because every upgrade with a wrong key pays it on
the event loop. A presented key is compared with the hash in constant time (``hmac.compare_digest``).

The key is known to the pod only on the start that made it (or in `openab key rotate`, which prints it once);
later starts hold the verifier alone, so they print no key and offer no pairing link. A plain ``acp.key`` an
earlier openab kept is upgraded in place at start: its verifier is written beside it, read back and checked
against it, moved into place atomically, and only then is the plain file removed. A verifier that is not ours,
is a link, or cannot be read makes the pod refuse to start with what to do: never a pod that admits everyone.

The running pod reads the verifier again when its file changes (:class:`KeptVerifier`), so `openab key rotate`
takes effect at the next connection without a restart; a verifier that turns unreadable while the pod runs
refuses every key until it is fixed.
"""

from __future__ import annotations

import base64
import errno
import hashlib
import hmac
import json
import logging
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from openab_browser.core.errors import ConfigurationError
from openab_browser.core.statedir import KEYS_DIR, make_private_dir, move_kept_secret, read_private_file, unwritable

__all__ = [
    "FORMAT", "ITERATIONS", "LEGACY_KEY_FILE", "VERIFIER_FILE", "KeptVerifier", "KeyVerifier", "Settled", "make_key",
    "read_verifier", "rotate_key", "settle_kept_key", "verifier_path", "write_verifier",
]

log = logging.getLogger(__name__)

VERIFIER_FILE: Final = "acp.verifier"
# What an earlier openab kept: the key itself. Read once, to upgrade it, then removed.
LEGACY_KEY_FILE: Final = "acp.key"
FORMAT: Final = "openab-acp-key-verifier"
VERSION: Final = 1
KDF: Final = "pbkdf2-sha256"
# The key is 256 random bits: no iteration count adds to that. Low, for a wrong key costs the pod this much.
ITERATIONS: Final = 1000
SALT_BYTES: Final = 16
# A verifier read from disk is refused past these: a planted one must not make every admit slow.
MAX_ITERATIONS: Final = 100_000
# No key of ours is longer; a longer presented one is refused without hashing it.
MAX_PRESENTED: Final = 1024
REMEDY: Final = ("`openab key rotate` writes a new one and prints its key once (then pair the side panel with "
                 "that key)")


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass(frozen=True, slots=True)
class KeyVerifier:
    """A salted PBKDF2-SHA256 hash of a key: what :meth:`matches` a presented key against, never the key."""

    salt: bytes
    digest: bytes
    iterations: int = ITERATIONS

    @classmethod
    def of(cls, key: str) -> KeyVerifier:
        salt = secrets.token_bytes(SALT_BYTES)
        return cls(salt, hashlib.pbkdf2_hmac("sha256", key.encode(), salt, ITERATIONS), ITERATIONS)

    def matches(self, presented: str | None) -> bool:
        if presented is None or len(presented) > MAX_PRESENTED:
            return False
        derived = hashlib.pbkdf2_hmac("sha256", presented.encode(), self.salt, self.iterations)
        return hmac.compare_digest(derived, self.digest)

    def text(self) -> str:
        return json.dumps({"format": FORMAT, "version": VERSION, "kdf": KDF, "iterations": self.iterations,
                           "salt": _b64(self.salt), "hash": _b64(self.digest)})

    @classmethod
    def parse(cls, text: str, path: Path) -> KeyVerifier:
        """The verifier in ``text`` (the file ``path``'s), or a :class:`ConfigurationError` saying what to do."""
        def garbled(why: str) -> ConfigurationError:
            return ConfigurationError(f"{path} is not a key verifier openab can use ({why}); the pod serves no "
                                      f"/acp without one: {REMEDY}")
        try:
            fields = json.loads(text)
        except ValueError:
            raise garbled("not JSON: truncated or overwritten?") from None
        if not isinstance(fields, dict) or fields.get("format") != FORMAT:
            raise garbled("no format line of ours")
        if fields.get("version") != VERSION or fields.get("kdf") != KDF:
            raise garbled(f"version {fields.get('version')!r} with {fields.get('kdf')!r}; this openab reads "
                          f"version {VERSION} with {KDF}")
        iterations = fields.get("iterations")
        if type(iterations) is not int or not 1 <= iterations <= MAX_ITERATIONS:
            raise garbled(f"iterations must be a whole number from 1 to {MAX_ITERATIONS}")
        try:
            salt, digest = _unb64(str(fields.get("salt", ""))), _unb64(str(fields.get("hash", "")))
        except ValueError:
            raise garbled("its salt or hash is not base64") from None
        if len(salt) < SALT_BYTES or len(digest) != hashlib.sha256().digest_size:
            raise garbled("its salt or hash has the wrong length")
        return cls(salt, digest, iterations)


def verifier_path(state_dir: Path) -> Path:
    """Where the pod keeps its key's verifier: ``<state dir>/keys/acp.verifier``."""
    return state_dir / KEYS_DIR / VERIFIER_FILE


def make_key() -> str:
    """A new key: 256 bits, 43 characters a browser can send in the ``openab.bearer.<key>`` subprotocol."""
    return secrets.token_urlsafe(32)


def read_verifier(path: Path) -> KeyVerifier:
    """The verifier in ``path``: a plain 0600 file of ours (not a link, not a fifo), in our format."""
    return KeyVerifier.parse(read_private_file(path, what="the key verifier"), path)


def write_verifier(path: Path, verifier: KeyVerifier, *, replace: bool) -> bool:
    """Write ``verifier`` to ``path`` atomically, 0600: a reader sees the old file or the new, never half of one.
    Without ``replace`` an existing file (another start's, made meanwhile) is kept and ``False`` returned. A link
    planted at ``path`` is replaced as a name, never written through."""
    make_private_dir(path.parent)
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(8)}")
    try:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise unwritable(path, exc) from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            os.fchmod(f.fileno(), 0o600)  # exactly, whatever the umask
            f.write(verifier.text() + "\n")
            f.flush()
            os.fsync(f.fileno())
        if replace:
            os.replace(temporary, path)
        else:
            try:
                os.link(temporary, path)  # fails if any file or link is there: no start overwrites another's
            except FileExistsError:
                return False
    except OSError as exc:
        raise unwritable(path, exc) from None
    finally:
        if os.path.lexists(temporary):
            os.unlink(temporary)
    _sync_dir(path.parent)
    return True


def _sync_dir(path: Path) -> None:
    # The rename and the removal of the plain key reach the disk in that order: a crash never leaves neither.
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@dataclass(frozen=True, slots=True)
class Settled:
    """What the start settled about the kept key: the verifier's file, the key when this start made it (shown
    once, never kept), and whether a plain ``acp.key`` of an earlier openab was upgraded now."""

    path: Path
    key: str | None
    upgraded: bool = False


def settle_kept_key(state_dir: Path, *, strong: int) -> Settled:
    """The pod's kept key at start: its verifier, a plain key of an earlier openab upgraded to one, or a new key
    made now (only its verifier written). ``strong`` is the fewest characters a kept plain key may have."""
    path = verifier_path(state_dir)
    make_private_dir(path.parent)
    legacy = move_kept_secret(state_dir, LEGACY_KEY_FILE)
    if os.path.lexists(path):
        verifier = read_verifier(path)
        if os.path.lexists(legacy):  # a start that stopped between writing the verifier and removing the key
            _remove_upgraded(legacy, verifier, strong)
        return Settled(path, None)
    if os.path.lexists(legacy):
        key = _plain_key(legacy, strong)
        write_verifier(path, KeyVerifier.of(key), replace=True)
        _remove_upgraded(legacy, read_verifier(path), strong)
        log.info("the /acp key an earlier openab kept in %s is now kept as a verifier in %s (the key itself is no "
                 "longer on disk; the side panel stays paired)", legacy, path)
        return Settled(path, None, upgraded=True)
    key = make_key()
    if not write_verifier(path, KeyVerifier.of(key), replace=False):
        read_verifier(path)  # another start made one meanwhile: its key, not ours, is the pod's
        return Settled(path, None)
    return Settled(path, key)


def _plain_key(path: Path, strong: int) -> str:
    key = read_private_file(path, what="the key file")
    if len(key) < strong:
        raise ConfigurationError(f"the key in {path} is {len(key)} characters; it needs at least {strong}: remove "
                                 f"it and `openab key rotate` makes a new one")
    return key


def _remove_upgraded(legacy: Path, verifier: KeyVerifier, strong: int) -> None:
    if not verifier.matches(_plain_key(legacy, strong)):
        raise ConfigurationError(
            f"{legacy} holds a key that its verifier {legacy.parent / VERIFIER_FILE} does not match: remove the one "
            f"that is not the pod's key (`openab key rotate` then makes a new key if you do not know which)")
    try:
        os.unlink(legacy)
    except OSError as exc:
        raise unwritable(legacy, exc) from None
    _sync_dir(legacy.parent)


def rotate_key(state_dir: Path) -> tuple[Path, str]:
    """A new key for the pod: its verifier replaces the kept one (and any plain ``acp.key``); returns the
    verifier's file and the key, which nothing keeps."""
    path = verifier_path(state_dir)
    key = make_key()
    write_verifier(path, KeyVerifier.of(key), replace=True)
    legacy = move_kept_secret(state_dir, LEGACY_KEY_FILE)
    try:
        os.unlink(legacy)
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise unwritable(legacy, exc) from None
    return path, key


class KeptVerifier:
    """The running pod's door for its kept key: the verifier in ``path``, read again whenever the file changes
    (its inode, size, time or mode), so `openab key rotate` needs no restart. Only an unreadable verifier's
    reason is logged, once per change of the file, and then every key is refused: it fails closed."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._signature: tuple[int, ...] | None = None
        self._verifier: KeyVerifier | None = None
        self._current()

    def matches(self, presented: str | None) -> bool:
        verifier = self._current()
        return verifier is not None and verifier.matches(presented)

    def _current(self) -> KeyVerifier | None:
        try:
            st = os.stat(self.path, follow_symlinks=False)
            signature: tuple[int, ...] | None = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_mode, st.st_uid)
        except OSError as exc:
            signature = (-1, exc.errno or errno.ENOENT)
        if signature != self._signature:
            first = self._signature is None
            self._signature = signature
            try:
                self._verifier = read_verifier(self.path)
            except ConfigurationError as exc:
                self._verifier = None
                log.error("refusing every /acp key: %s", exc)
            else:
                if not first:
                    log.info("the /acp key's verifier %s changed (`openab key rotate`?): new connections take the "
                             "new key; connections open now stay until they close", self.path)
        return self._verifier
