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
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Final

from .errors import ConfigurationError

__all__ = [
    "KEYS_DIR",
    "NAMING_SECRET_FILE",
    "kept_secret_path",
    "load_or_create_secret",
    "make_private_dir",
    "move_kept_secret",
    "naming_secret",
    "read_private_file",
    "read_secret_file",
    "session_workdir",
    "sessions_dir",
    "unwritable",
]

NAMING_SECRET_FILE: Final = "session-names.key"  # noqa: S105 (a file name, not a secret)
# The pod's own secrets live in keys/, a sibling of sessions/ and never above an agent's working folder.
KEYS_DIR: Final = "keys"
_MAX_SECRET_FILE: Final = 4096
# The kubelet's Secret layout takes two links (`key -> ..data/key`, `..data -> ..<timestamp>`); a few more
# leave room for a hand-made one, and a loop ends here.
_MAX_LINKS: Final = 8


def make_private_dir(path: Path) -> Path:
    """Create ``path`` (and missing parents) 0700 and refuse one another user can enter."""
    missing = [p for p in (path, *path.parents) if not p.exists()]
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        for made in missing:  # parents too: mkdir(parents=True) makes them with the umask's mode
            os.chmod(made, 0o700)
    except FileExistsError:
        pass  # not a directory: said below
    except OSError as exc:
        raise unwritable(path, exc) from None
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


def unwritable(path: Path, exc: OSError) -> ConfigurationError:
    """What to mount or set when the state dir cannot be written (a read-only root with no volume on HOME)."""
    try:
        home: Path | None = Path.home()
    except (RuntimeError, KeyError):
        home = None
    where = f"HOME ({home})" if home is not None and path.is_relative_to(home) else str(path)
    return ConfigurationError(
        f"cannot write {path} ({exc.strerror or exc}): the pod keeps its key and sessions there; mount a writable "
        f"volume on {where}, or set OPENAB_STATE_DIR (--state-dir) to a writable folder"
    )


def read_private_file(path: Path, *, what: str = "the file") -> str:
    """The text of ``path``, stripped: a regular file of ours that no other user can read, not a link."""
    try:
        # O_NONBLOCK: a fifo planted in its place is refused below, not waited on.
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ConfigurationError(f"{path} is a symbolic link; {what} must be a plain file") from None
        raise ConfigurationError(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
            raise ConfigurationError(f"{path} is not a plain file of ours; {what} must be")
        if stat.S_IMODE(st.st_mode) & 0o077:
            raise ConfigurationError(f"{path} can be read by other users: `chmod 600 {path}`")
        return _read_bounded(fd, path, what)
    finally:
        os.close(fd)


def read_secret_file(path: Path, *, what: str = "the key file") -> str:
    """The text of a secret file the operator points at, stripped: a plain file, or a Kubernetes Secret's.

    A Secret volume gives ``key -> ..data/key`` and ``..data -> ..<timestamp>/``, all owned by root with the
    pod's ``fsGroup`` as group. So links are followed, but only relative ones that stay inside the file's own
    directory (the mounted volume), at most a few; every link and directory on the way and the file itself
    must belong to root or to us and be writable by nobody else (a world-writable directory only with the
    sticky bit, as the volume's tmpfs is); the file must be a regular one that only its owner and a group of
    ours can read, and small. ``OPENAB_ACP_AUTH_KEY`` remains the way to give a key without a file.
    """
    ours = {0, os.geteuid()}
    groups = {os.getegid(), *os.getgroups()}
    fds: list[int] = []  # the directories walked into, the volume's own first; ".." pops one

    def refuse(why: str) -> ConfigurationError:
        return ConfigurationError(f"{what} {path} {why}")

    def check_owner(st: os.stat_result, name: str) -> None:
        if st.st_uid not in ours:
            raise refuse(f"{name} belongs to uid {st.st_uid}: only files, links and directories of root's or "
                         "ours are trusted")

    def check_dir(fd: int, name: str) -> None:
        st = os.fstat(fd)
        check_owner(st, f"is in {name}, which")
        mode = stat.S_IMODE(st.st_mode)
        sticky = bool(mode & stat.S_ISVTX)
        if not sticky and mode & (0o002 if st.st_gid in groups else 0o022):
            raise refuse(f"is in {name}, which other users can write to (mode {mode:04o}): `chmod go-w` it")

    try:
        try:
            fds.append(os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC))
        except OSError as exc:
            raise refuse(f"cannot be read: {exc.strerror or exc}") from None
        check_dir(fds[0], str(path.parent))
        pending: deque[str] = deque([path.name])
        links = 0
        while pending:
            part = pending.popleft()
            if part in ("", "."):
                continue
            if part == "..":
                if len(fds) == 1:
                    raise refuse(f"is a link leading out of {path.parent}; links must stay in that directory")
                os.close(fds.pop())
                continue
            try:
                st = os.stat(part, dir_fd=fds[-1], follow_symlinks=False)
            except OSError as exc:
                raise refuse(f"cannot be read: {exc.strerror or exc}") from None
            if stat.S_ISLNK(st.st_mode):
                links += 1
                if links > _MAX_LINKS:
                    raise refuse(f"goes through more than {_MAX_LINKS} symbolic links (a loop?)")
                check_owner(st, f"is reached through the link {part}, which")
                target = os.readlink(part, dir_fd=fds[-1])
                if target.startswith("/"):
                    raise refuse(f"is a link leading out of {path.parent} (to {target}); links must stay in that "
                                 "directory")
                pending.extendleft(reversed(target.split("/")))
                continue
            if pending:  # a directory on the way
                try:
                    fds.append(os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                                       dir_fd=fds[-1]))
                except OSError as exc:
                    raise refuse(f"cannot be read: {part}: {exc.strerror or exc}") from None
                check_dir(fds[-1], part)
                continue
            try:
                fds.append(os.open(part, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                                   dir_fd=fds[-1]))
            except OSError as exc:  # ELOOP: swapped for a link since the stat
                # The kubelet makes a Secret's files root's: this uid reads them through the pod's fsGroup.
                hint = (" (a Kubernetes Secret volume is readable by the pod's uid only with "
                        "securityContext.fsGroup set)" if exc.errno == errno.EACCES and st.st_uid == 0 else "")
                raise refuse(f"cannot be read: {exc.strerror or exc}{hint}") from None
            st = os.fstat(fds[-1])
            if not stat.S_ISREG(st.st_mode):
                raise refuse("is not a regular file")
            check_owner(st, "is a file that")
            # Our own file is 0600 as ever; root's (the kubelet's) reaches us through its group, the fsGroup.
            foreign = 0o077 if st.st_uid == os.geteuid() != 0 or st.st_gid not in groups else 0o007
            mode = stat.S_IMODE(st.st_mode)
            if mode & foreign & 0o022:
                raise refuse(f"can be written by other users (mode {mode:04o}): `chmod 600` it")
            if mode & foreign:
                raise refuse(f"can be read by other users (mode {mode:04o}): `chmod 600` it, or give the "
                             "Kubernetes Secret volume `defaultMode: 0400`")
            return _read_bounded(fds[-1], path, what)
        raise refuse("names a directory, not a file")
    finally:
        for fd in fds:
            os.close(fd)


def _read_bounded(fd: int, path: Path, what: str) -> str:
    data = b""
    while len(data) <= _MAX_SECRET_FILE and (chunk := os.read(fd, _MAX_SECRET_FILE + 1 - len(data))):
        data += chunk
    if len(data) > _MAX_SECRET_FILE:
        raise ConfigurationError(f"{what} {path} is larger than {_MAX_SECRET_FILE} bytes: it holds no key")
    try:
        return data.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise ConfigurationError(f"{what} {path} is not UTF-8 text") from None


def load_or_create_secret(path: Path, make: Callable[[], str], *, what: str) -> tuple[str, bool]:
    """The secret kept in ``path``, written now (0600) from ``make()`` if there is none; and whether it is new."""
    make_private_dir(path.parent)
    secret = make()
    try:
        # O_EXCL: a file planted in the meantime (or a link) is never written through.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except FileExistsError:
        return read_private_file(path, what=what), False
    except OSError as exc:
        raise unwritable(path, exc) from None
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        os.fchmod(f.fileno(), 0o600)  # exactly, whatever the umask
        f.write(secret + "\n")
    return secret, True


def kept_secret_path(state_dir: Path, name: str) -> Path:
    """Where the pod keeps its secret file ``name``: ``<state dir>/keys/<name>``.

    An agent works in ``<state dir>/sessions/<channel>/work`` as the pod's own uid, so it could read any file
    of ours it names; what this placement does is keep the secrets out of every folder on its way up, so
    ``../../../acp.key`` and tools that search parent folders meet none (docs/security.md). An earlier
    openab kept them in the state dir itself: until :func:`move_kept_secret` has run, that file is named.
    """
    path = state_dir / KEYS_DIR / name
    earlier = state_dir / name
    return earlier if os.path.lexists(earlier) and not os.path.lexists(path) else path


def move_kept_secret(state_dir: Path, name: str) -> Path:
    """:func:`kept_secret_path`, with a file an earlier openab kept in the state dir moved into ``keys/`` (as it
    is: a link stays a link, which the reader then refuses)."""
    path = state_dir / KEYS_DIR / name
    earlier = state_dir / name
    if os.path.lexists(earlier) and not os.path.lexists(path):
        make_private_dir(path.parent)
        try:
            os.rename(earlier, path)
        except OSError as exc:
            raise unwritable(earlier, exc) from None
    return path


def naming_secret(state_dir: Path) -> bytes:
    """The pod's kept secret for naming its sessions (see :mod:`openab_browser.core.session_naming`), made on first
    use."""
    path = move_kept_secret(state_dir, NAMING_SECRET_FILE)
    text, _new = load_or_create_secret(path, lambda: secrets.token_hex(32), what="the session naming secret")
    try:
        secret = bytes.fromhex(text)
    except ValueError:
        secret = b""
    if len(secret) < 16:
        raise ConfigurationError(
            f"{path} does not hold a session naming secret (64 hex digits); remove it "
            "and a new one is made (sessions of the pod's earlier runs then get new working folders)"
        )
    return secret


def sessions_dir(state_dir: Path) -> Path:
    """Where each session's working folder lives: 0700, in the 0700 state dir.

    Our own folder is tightened if an earlier openab left it loose (they made it with the umask's mode).
    """
    make_private_dir(state_dir)
    path = state_dir / "sessions"
    try:
        path.mkdir(mode=0o700, exist_ok=True)
    except FileExistsError:
        pass  # not a directory: said below
    except OSError as exc:
        raise unwritable(path, exc) from None
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
