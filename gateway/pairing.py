"""The `/acp` key when the operator gave none: made once, kept 0600 in the state dir, shown as a pairing line.

A pod never runs keyless by default: any local process could otherwise take a person's live session. Like
Jupyter's token, the key is printed once at start (to the terminal, never to the log) for the person to
paste into the side panel; it is kept so a restarted pod pairs with the same panel.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from pathlib import Path

from openab.core.errors import ConfigurationError

__all__ = ["KEY_FILE", "MIN_KEY_CHARS", "load_or_create_key", "make_private_dir", "pairing_lines", "read_key_file"]

KEY_FILE = "acp.key"
# 128 bits as hex; a token_urlsafe(32) key (what we make) is 43 characters, 256 bits.
MIN_KEY_CHARS = 32


def make_private_dir(path: Path) -> Path:
    """Create ``path`` (and missing parents) 0700 and refuse one another user can enter.

    A directory that already exists is never loosened nor tightened behind the operator's back (it may be
    someone's home): one group- or world-accessible is refused with what to do.
    """
    created = not path.exists()
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode):
        raise ConfigurationError(f"{path} is not a directory; choose another --state-dir")
    if created:
        os.chmod(path, 0o700)  # exactly, whatever the umask
    elif st.st_uid != os.geteuid():
        raise ConfigurationError(f"{path} belongs to uid {st.st_uid}, not to us; choose another --state-dir")
    elif stat.S_IMODE(st.st_mode) & 0o077:
        raise ConfigurationError(
            f"{path} can be entered by other users (mode {stat.S_IMODE(st.st_mode):04o}) and holds the pod's key "
            f"and sessions: `chmod 700 {path}`, or choose a --state-dir that does not exist yet"
        )
    return path


def read_key_file(path: Path) -> str:
    """The key in ``path``: a regular file of ours that no other user can read, not a link."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ConfigurationError(f"{path} is a symbolic link; the key file must be a plain file") from None
        raise ConfigurationError(f"cannot read the key file {path}: {exc.strerror or exc}") from None
    with os.fdopen(fd, encoding="utf-8") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
            raise ConfigurationError(f"{path} is not a plain file of ours; the key file must be")
        if stat.S_IMODE(st.st_mode) & 0o077:
            raise ConfigurationError(f"{path} can be read by other users: `chmod 600 {path}`")
        key = f.read(4096).strip()
    if len(key) < MIN_KEY_CHARS:
        raise ConfigurationError(
            f"the key in {path} is {len(key)} characters; it needs at least {MIN_KEY_CHARS} "
            "(e.g. `openssl rand -hex 32`)"
        )
    return key


def load_or_create_key(state_dir: Path) -> tuple[str, bool]:
    """The pod's kept key, made now (256 bits) if there is none; returns it and whether it is new."""
    make_private_dir(state_dir)
    path = state_dir / KEY_FILE
    key = secrets.token_urlsafe(32)
    try:
        # O_EXCL: a file planted in the meantime (or a link) is never written through.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except FileExistsError:
        return read_key_file(path), False
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(key + "\n")
    return key, True


def pairing_lines(ws_url: str, key: str, *, key_file: Path | None) -> str:
    """What the person pastes into the side panel's settings, printed to the terminal only."""
    where = f" (kept in {key_file})" if key_file is not None else ""
    return (
        "\n  Pair the openab side panel with this pod (Settings):\n"
        f"    Gateway URL: {ws_url}\n"
        f"    Key:         {key}\n"
        f"  Treat the key like a password{where}.\n"
    )
