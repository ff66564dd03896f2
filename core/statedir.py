"""The pod's state dir and what it keeps there, each made private to this uid.

The state dir holds the pod's key, the secret its sessions are named with, each session's working folder and
the audit log: whatever another local user could read there would hand them a person's browser. So every
directory openab creates is 0700, every file 0600, opened without following links and checked to be ours; a
directory that already exists is never loosened nor tightened behind the operator's back (it may be someone's
home), and one that other users can enter is refused with what to do.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Final

from .errors import ConfigurationError

__all__ = [
    "NAMING_SECRET_FILE",
    "load_or_create_secret",
    "make_private_dir",
    "naming_secret",
    "read_private_file",
    "session_workdir",
    "sessions_dir",
]

NAMING_SECRET_FILE: Final = "session-names.key"  # noqa: S105 (a file name, not a secret)
_MAX_SECRET_FILE: Final = 4096


def make_private_dir(path: Path) -> Path:
    """Create ``path`` (and missing parents) 0700 and refuse one another user can enter."""
    missing = [p for p in (path, *path.parents) if not p.exists()]
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    for made in missing:  # parents too: mkdir(parents=True) makes them with the umask's mode
        os.chmod(made, 0o700)
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode):
        raise ConfigurationError(f"{path} is not a directory; choose another --state-dir")
    if path in missing:
        return path
    if st.st_uid != os.geteuid():
        raise ConfigurationError(f"{path} belongs to uid {st.st_uid}, not to us; choose another --state-dir")
    if stat.S_IMODE(st.st_mode) & 0o077:
        raise ConfigurationError(
            f"{path} can be entered by other users (mode {stat.S_IMODE(st.st_mode):04o}) and holds the pod's key "
            f"and sessions: `chmod 700 {path}`, or choose a --state-dir that does not exist yet"
        )
    return path


def read_private_file(path: Path, *, what: str = "the file") -> str:
    """The text of ``path``, stripped: a regular file of ours that no other user can read, not a link."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ConfigurationError(f"{path} is a symbolic link; {what} must be a plain file") from None
        raise ConfigurationError(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    with os.fdopen(fd, encoding="utf-8") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
            raise ConfigurationError(f"{path} is not a plain file of ours; {what} must be")
        if stat.S_IMODE(st.st_mode) & 0o077:
            raise ConfigurationError(f"{path} can be read by other users: `chmod 600 {path}`")
        return f.read(_MAX_SECRET_FILE).strip()


def load_or_create_secret(path: Path, make: Callable[[], str], *, what: str) -> tuple[str, bool]:
    """The secret kept in ``path``, written now (0600) from ``make()`` if there is none; and whether it is new."""
    make_private_dir(path.parent)
    secret = make()
    try:
        # O_EXCL: a file planted in the meantime (or a link) is never written through.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except FileExistsError:
        return read_private_file(path, what=what), False
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        os.fchmod(f.fileno(), 0o600)  # exactly, whatever the umask
        f.write(secret + "\n")
    return secret, True


def naming_secret(state_dir: Path) -> bytes:
    """The pod's kept secret for naming its sessions (see :mod:`openab.core.acp.naming`), made on first use."""
    text, _new = load_or_create_secret(
        state_dir / NAMING_SECRET_FILE, lambda: secrets.token_hex(32), what="the session naming secret"
    )
    try:
        secret = bytes.fromhex(text)
    except ValueError:
        secret = b""
    if len(secret) < 16:
        raise ConfigurationError(
            f"{state_dir / NAMING_SECRET_FILE} does not hold a session naming secret (64 hex digits); remove it "
            "and a new one is made (sessions of the pod's earlier runs then get new working folders)"
        )
    return secret


def sessions_dir(state_dir: Path) -> Path:
    """Where each session's working folder lives: 0700, in the 0700 state dir.

    Our own folder is tightened if an earlier openab left it loose (they made it with the umask's mode).
    """
    make_private_dir(state_dir)
    path = state_dir / "sessions"
    path.mkdir(mode=0o700, exist_ok=True)
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
        raise ConfigurationError(f"{path} is not a directory of ours; remove it, openab makes it anew")
    if stat.S_IMODE(st.st_mode) != 0o700:
        os.chmod(path, 0o700)
    return path


def session_workdir(state_dir: Path, channel: str, *, create: bool = False) -> Path:
    """A session's working folder, ``sessions/<channel>/work``; with ``create``, made 0700 all the way down."""
    if not create:
        return state_dir / "sessions" / channel / "work"
    return make_private_dir(sessions_dir(state_dir) / channel / "work")
