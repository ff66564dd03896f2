"""Put the ``openab_browser`` MCP server into each agent CLI's own config file, and take it out again.

One set of writers serves both ways of reaching the browser tools:

* proxy: ``HttpEndpoint(url, token)``, the per-session loopback Streamable HTTP server;
* bridge: ``StdioCommand()``, the static ``openab browser-bridge`` stdio relay.

Every write merges into the existing file (the user's other servers and keys stay), is atomic
(temp file in the same folder, then ``os.replace``) and leaves the file mode 0600, because proxy
entries carry a bearer token. A file we cannot parse is backed up next to itself and the write is
refused: we never guess at a user's file.

A config path may be a symbolic link (dotfile managers make them), and it is written through, but only
through links the user (or root) made, and only into the user's own regular file: a link another user
planted in a folder we write to (a shared project, a loosened home) would otherwise have us rewrite and
chmod a file of their choosing. After that check nothing follows a link any more: the file's folder is
opened one component at a time with ``O_NOFOLLOW``, and the file, its temporary copy and its backup are
opened inside it with ``O_NOFOLLOW`` (and ``O_EXCL`` for what we create), so a link swapped in after the
check is refused rather than followed.

This module owns the disk: reading, locking, backing up and writing. Which files and what entry come from
:mod:`.formats`; how the entry is merged, from :mod:`.merge`.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import secrets
import stat
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import tomlkit
import tomlkit.exceptions

from ...errors import ConfigError
from ...mcp.access import Entry as Endpoint
from ...mcp_vocabulary import SERVER_NAME
from . import goose_yaml, merge
from .formats import (
    ConfigFile,
    Format,
    Json,
    agent_name,
    config_files,
    document,
    entry,
)

__all__ = ["remove_flag_file", "strip", "update_record", "write", "write_flag_file", "write_private"]

# A config file past this is not one a person keeps by hand; reading it whole could exhaust memory.
MAX_FILE_BYTES: Final = 64 * 1024 * 1024
# As many links as the kernel follows in one path lookup (MAXSYMLINKS) before it gives up with ELOOP.
_MAX_LINKS: Final = 40
_NOFOLLOW: Final = os.O_NOFOLLOW | os.O_CLOEXEC


def write(
    agent: str,
    endpoint: Endpoint,
    *,
    dir: Path | None = None,
    home: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> list[Path]:
    """Merge the ``openab_browser`` entry into every config file of ``agent``; returns the paths really written
    (where the user's own links led).

    All files are read and checked before any is written, so a refusal leaves every file as it was. A link
    another user made, or a file that is not the user's own regular file, is refused (:class:`ConfigError`).
    """
    ours, files = _targets(agent, endpoint, dir, home, env)
    with _opened(files) as targets:
        docs = [(t, _load(t)) for t in targets]
        for t, doc in docs:
            merge.servers(doc, t.spec)  # refuse a wrong shape before anything is written
        for t, doc in docs:
            merge.put(doc, t.spec, ours)
            _save(t, doc)
    return [t.real for t in targets]


def strip(
    agent: str,
    endpoint: Endpoint,
    *,
    dir: Path | None = None,
    home: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> list[Path]:
    """Remove the ``openab_browser`` entry where it is still ours (same url, or same command).

    Another session may have written its own url into a shared file since; that entry is left
    alone, and so are the approvals that go with it. Returns the paths that changed.
    """
    ours, files = _targets(agent, endpoint, dir, home, env)
    changed: list[Path] = []
    with _opened(files) as targets:
        docs = [(t, _parse_doc(t, text)) for t in targets if (text := _read(t)) is not None]
        main = next((doc for t, doc in docs if t.spec.kind == "servers"), None)
        if main is None or not merge.is_ours(merge.servers(main, files[0]).get(SERVER_NAME), ours):
            return changed
        for t, doc in docs:
            if merge.remove(doc, t.spec, ours):
                _save(t, doc)
                changed.append(t.real)
    return changed


def update_record(path: Path, change: Callable[[MutableMapping[str, Any]], None], *, check_only: bool = False
                  ) -> Path:
    """Apply ``change`` to the JSON object in ``path`` (an agent CLI's own state file, such as its record of
    trusted folders) and write it back as every config file is: the rest of the file kept, through the user's
    own links only, atomically, 0600 in 0700 folders it makes. ``change`` raises :class:`ConfigError` to refuse.
    ``check_only`` does all of it but the write, to refuse before anything else is written. Returns the path
    really written."""
    spec = ConfigFile(path, "json", "", "record")
    with _opened([spec]) as (target,):
        doc = _load(target)
        change(doc)
        if not check_only:
            _save(target, doc)
    return target.real


def _targets(
    agent: str, endpoint: Endpoint, dir: Path | None, home: Path | None, env: Mapping[str, str] | None
) -> tuple[Json, list[ConfigFile]]:
    name = agent_name(agent)
    return entry(name, endpoint), config_files(name, dir=dir, home=home, env=env)


def _load(t: _Target) -> MutableMapping[str, Any]:
    """The file's document; an empty one when there is no file yet."""
    return _parse_doc(t, _read(t) or "")


def _parse_doc(t: _Target, text: str) -> MutableMapping[str, Any]:
    if not text.strip() and t.spec.format == "json":
        return {}
    try:
        doc: object = _parse(text, t.spec.format)
    except (ValueError, tomlkit.exceptions.ParseError) as exc:
        backup = _backup(t, text)
        raise ConfigError(
            f"{t.real} could not be read as {t.spec.format.upper()} ({exc}); left it as it is and kept a copy at "
            f"{backup}. Fix or remove it, then write again"
        ) from exc
    if not isinstance(doc, MutableMapping):
        raise ConfigError(f"{t.real}: the top level is not an object; fix it by hand and try again")
    return doc


def _parse(text: str, fmt: Format) -> object:
    if fmt == "toml":
        return tomlkit.parse(text)
    if fmt == "yaml":
        return goose_yaml.load(text)
    return json.loads(text)


def _dump(doc: MutableMapping[str, Any], fmt: Format) -> str:
    if fmt == "toml":
        return tomlkit.dumps(doc)
    if fmt == "yaml":
        return goose_yaml.dump(doc)
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def write_private(path: Path, text: str) -> None:
    """Atomically replace ``path`` with ``text``, mode 0600 from the first byte."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")  # mode 0600
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def write_flag_file(agent: str, endpoint: Endpoint, path: Path) -> None:
    """Put a file at ``path`` holding only ``agent``'s ``openab_browser`` entry, for a CLI that is pointed at it on
    its command line (Copilot's ``--additional-mcp-config @FILE``), so the bearer token is never in an argv.

    The folder must exist, be ours and be closed to other users: someone who can write there could swap the
    file for one naming their server. It is opened one component at a time without following a link, and the
    file is put in place by a rename from a new 0600 file, which replaces whatever is at ``path`` (a link
    included) and never writes through it. Raises :class:`ConfigError` saying what to fix.
    """
    doc, fmt = document(agent, endpoint)
    data = _dump(doc, fmt).encode("utf-8")
    with _private_folder(path.parent) as folder:
        _replace(folder, path, data)


def remove_flag_file(path: Path) -> bool:
    """Remove what :func:`write_flag_file` put at ``path`` (a link there is removed, never followed); returns
    whether there was anything to remove. Raises :class:`ConfigError` when its folder is not what it was (a link
    on the way)."""
    folder = _open_folder(path.parent, create=False)
    if folder is None:
        return False
    try:
        os.unlink(path.name, dir_fd=folder)
    except FileNotFoundError:
        return False
    finally:
        os.close(folder)
    return True


@contextlib.contextmanager
def _private_folder(folder: Path) -> Iterator[int]:
    fd = _open_folder(folder, create=False)
    if fd is None:
        raise ConfigError(f"{folder} does not exist; the session's working folder is made before its agent starts")
    try:
        st = os.fstat(fd)
        mode = stat.S_IMODE(st.st_mode)
        if st.st_uid != os.geteuid() or mode & 0o077:
            raise ConfigError(
                f"{folder} (uid {st.st_uid}, mode {mode:04o}) is not a folder only this user can enter, and the file "
                f"for the agent would hold its browser's bearer token there: `chmod 700 {folder}`, or choose a "
                "--state-dir of your own"
            )
        yield fd
    finally:
        os.close(fd)


# -- the disk, without following links nobody vouched for -----------------------------------------------------


def _resolve(path: Path) -> Path:
    """Where ``path`` leads, following only symbolic links the user (or root, who could write anywhere anyway)
    owns, like ``realpath``; refuses any other link, and a file at the end that is not the user's own regular
    file. Components that do not exist yet are kept as they are."""
    me = os.geteuid()
    given = path.absolute()
    resolved = Path(given.anchor)
    todo = list(reversed(given.parts[1:]))
    links = 0
    exists = True
    while todo:
        part = todo.pop()
        if part in ("", "."):
            continue
        if part == "..":
            resolved = resolved.parent
            continue
        candidate = resolved / part
        if not exists:
            resolved = candidate
            continue
        try:
            st = os.lstat(candidate)
        except FileNotFoundError:
            exists = False
            resolved = candidate
            continue
        except OSError as exc:
            raise ConfigError(f"cannot write {path}: {candidate}: {exc.strerror or exc}") from exc
        if not stat.S_ISLNK(st.st_mode):
            resolved = candidate
            continue
        if st.st_uid not in (me, 0):
            raise ConfigError(
                f"{candidate} is a symbolic link owned by uid {st.st_uid}, not by you (uid {me}) or root, and "
                f"writing {path} would follow it; openab never writes through a link another user made (it could "
                f"point at any file of yours). Remove it if you did not make it, then write again"
            )
        links += 1
        if links > _MAX_LINKS:
            raise ConfigError(f"cannot write {path}: more than {_MAX_LINKS} symbolic links on the way (a loop?)")
        target = Path(os.readlink(candidate))
        if target.is_absolute():
            resolved = Path(target.anchor)
        todo.extend(reversed(target.parts[1:] if target.is_absolute() else target.parts))
    if exists:
        with contextlib.suppress(FileNotFoundError):
            _check_file(os.lstat(resolved), resolved)
    return resolved


def _check_file(st: os.stat_result, real: Path) -> None:
    me = os.geteuid()
    if not stat.S_ISREG(st.st_mode):
        raise ConfigError(
            f"{real} is not a regular file; openab puts its entry only into a plain file. Move it away, then "
            "write again"
        )
    if st.st_uid != me:
        raise ConfigError(
            f"{real} belongs to uid {st.st_uid}, not to you (uid {me}); openab rewrites only your own files. Run "
            "it as that user, or, if the file is yours to change, copy it to a file of your own in its place"
        )


@dataclass(frozen=True)
class _Target:
    """One config file: ``real``, where the user's links led, in a folder of ``folders``."""

    spec: ConfigFile
    real: Path
    folders: _Folders

    @property
    def folder_fd(self) -> int | None:
        return self.folders.get(self.real.parent)


class _Folders:
    """The folders of one write, each opened once (two descriptors of one folder would flock against each
    other) without following any link, and closed together."""

    def __init__(self, stack: contextlib.ExitStack) -> None:
        self._stack = stack
        self._fds: dict[Path, int] = {}

    def get(self, folder: Path) -> int | None:
        return self._fds.get(folder)

    def open(self, folder: Path, *, create: bool) -> int | None:
        fd = self._fds.get(folder)
        if fd is None:
            fd = _open_folder(folder, create=create)
            if fd is not None:
                self._stack.callback(os.close, fd)
                self._fds[folder] = fd
        return fd


def _open_folder(folder: Path, *, create: bool) -> int | None:
    """``folder`` (already resolved: no links in it) opened one component at a time with ``O_NOFOLLOW``, so
    a link swapped in since :func:`_resolve` looked is refused, not followed; ``None`` when it does not exist
    and ``create`` is false."""
    flags = os.O_RDONLY | os.O_DIRECTORY | _NOFOLLOW
    fd = os.open(folder.anchor, flags)
    try:
        for part in folder.parts[1:]:
            try:
                inner = os.open(part, flags, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    os.close(fd)
                    return None
                with contextlib.suppress(FileExistsError):
                    # 0700, not the umask's mode: a folder others can write lets them swap the file for theirs.
                    os.mkdir(part, 0o700, dir_fd=fd)
                inner = os.open(part, flags, dir_fd=fd)
            os.close(fd)
            fd = inner
    except OSError as exc:
        os.close(fd)
        raise _changed_or(exc, folder, "open the folder") from exc
    return fd


def _changed_or(exc: OSError, real: Path, doing: str) -> ConfigError:
    if exc.errno in (errno.ELOOP, errno.ENOTDIR):
        return ConfigError(
            f"{real} changed while openab was writing it (a symbolic link appeared on the way after it was "
            "checked); nothing was written through it. Find out who else writes there, then try again"
        )
    return ConfigError(f"cannot {doing} {real}: {exc.strerror or exc}")


@contextlib.contextmanager
def _opened(files: list[ConfigFile]) -> Iterator[list[_Target]]:
    """Every file's real path, checked before any is touched, with its folder opened and under an exclusive
    flock, so two openab processes (two sessions in one pod) cannot interleave their read-modify-write of one
    file. Folders that do not exist yet are created, unlocked, when a file is saved into them."""
    reals = [_resolve(f.path) for f in files]
    with contextlib.ExitStack() as stack:
        folders = _Folders(stack)
        for folder in sorted({real.parent for real in reals}):
            fd = folders.open(folder, create=False)
            if fd is not None:
                fcntl.flock(fd, fcntl.LOCK_EX)
        yield [_Target(f, real, folders) for f, real in zip(files, reals, strict=True)]


def _read(t: _Target) -> str | None:
    """The file's text, or ``None`` when there is no file."""
    folder = t.folder_fd
    if folder is None:
        return None
    try:
        # O_NONBLOCK: a FIFO put there must not hold us up; its fstat refuses it.
        fd = os.open(t.real.name, os.O_RDONLY | os.O_NONBLOCK | _NOFOLLOW, dir_fd=folder)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise _changed_or(exc, t.real, "read") from exc
    with open(fd, "rb") as f:
        st = os.fstat(f.fileno())
        _check_file(st, t.real)
        # Bounded even when the size said less: the file may grow while it is read.
        data = f.read(MAX_FILE_BYTES + 1) if st.st_size <= MAX_FILE_BYTES else None
    if data is None or len(data) > MAX_FILE_BYTES:
        raise ConfigError(
            f"{t.real} is {max(st.st_size, len(data or b'')) / 2**20:.0f} MiB, more than the "
            f"{MAX_FILE_BYTES // 2**20} MiB openab reads of a config file; left it as it is. Find out what filled it "
            "(or move it away), then write again"
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"cannot read {t.real}: {exc}") from exc


def _save(t: _Target, doc: MutableMapping[str, Any]) -> None:
    data = _dump(doc, t.spec.format).encode("utf-8")
    folder = t.folders.open(t.real.parent, create=True)
    assert folder is not None
    try:
        fd = os.open(t.real.name, os.O_RDONLY | os.O_NONBLOCK | _NOFOLLOW, dir_fd=folder)
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise _changed_or(exc, t.real, "write") from exc
    else:
        with open(fd, "rb") as f:
            _check_file(os.fstat(f.fileno()), t.real)
            if f.read() == data:
                os.fchmod(f.fileno(), 0o600)  # unchanged, but a token may be in it
                return
    _replace(folder, t.real, data)


def _replace(folder: int, real: Path, data: bytes) -> None:
    """Atomically put ``data`` at ``real`` (in the open ``folder``), mode 0600 from the first byte. The rename
    replaces whatever entry is there, a link included, and never writes through it."""
    tmp, fd = _create(folder, real, (f".{real.name}.{secrets.token_hex(6)}.tmp" for _ in range(100)))
    try:
        with open(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, real.name, src_dir_fd=folder, dst_dir_fd=folder)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp, dir_fd=folder)
        raise


def _create(folder: int, real: Path, names: Iterable[str]) -> tuple[str, int]:
    """A new file (``O_EXCL``: never an existing one, nor a link's target) in ``folder`` under the first free
    name of ``names``, mode 0600 whatever the umask."""
    for candidate in names:
        try:
            fd = os.open(candidate, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o600, dir_fd=folder)
        except FileExistsError:
            continue
        except OSError as exc:
            raise _changed_or(exc, real, "write next to") from exc
        os.fchmod(fd, 0o600)
        return candidate, fd
    raise ConfigError(f"no free name next to {real} to write to; clean up its old backups and temporary files")


def _backup(t: _Target, text: str) -> Path:
    """A 0600 copy of ``text`` (the file as we read it) next to it, under a name nothing occupied, link or not."""
    folder = t.folder_fd
    assert folder is not None  # the file was read, so its folder is open
    stamp = time.strftime("%Y%m%d-%H%M%S")
    names = (f"{t.real.name}.{stamp}{f'-{n}' if n else ''}.bak" for n in range(1000))
    backup, fd = _create(folder, t.real, names)
    with open(fd, "wb") as out:
        out.write(text.encode("utf-8"))
    return t.real.parent / backup
