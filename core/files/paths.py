"""Paths inside a session's working folder, opened so that nothing can lead them out of it.

An agent names a file by a path relative to its working folder; a page names a download by whatever it likes.
Neither is trusted. The rules (docs/files.md, "Paths"):

* a path is relative, has no ``..`` part and no control character (a NUL would cut it, a newline forge a line
  of whatever shows it, an escape reach a terminal);
* its folder part is resolved, and must stay inside the working folder; then each folder is opened from the one
  above it without following a link (``O_NOFOLLOW``), so a link swapped in after the check fails the open
  instead of leading out;
* its last part is opened with ``O_NOFOLLOW`` too: a link there is refused, whatever it points at;
* an upload must be a regular file (not a FIFO that would block a read forever, not a device); its size is
  the opened file's, taken before any byte is read, and it is read through that descriptor only.

Downloads are written to a temporary file made ``O_EXCL``, 0600, in the folder they will end in, then renamed
into a name that never replaces an existing file (``name (1).ext``).
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from ..errors import FileRefused

__all__ = [
    "MAX_NAME_BYTES",
    "TEMP_PREFIX",
    "Folder",
    "Opened",
    "create_temp",
    "open_folder",
    "open_upload",
    "place",
    "remove",
    "safe_name",
    "split_path",
]

# Linux's NAME_MAX is 255 bytes; a name made safe stays well under it, so " (99)" still fits.
MAX_NAME_BYTES: Final = 200
MAX_PATH_CHARS: Final = 4096
# Temporary downloads: a leading dot keeps them out of a plain `ls`, the random part from each other.
TEMP_PREFIX: Final = ".openab-download-"
_MAX_COPIES: Final = 1000
_DIR_FLAGS: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _has_control(text: str) -> bool:
    # Cc: C0 and C1 controls, DEL. Cf: format characters (a right-to-left override makes "fdp.exe" read "exe.pdf").
    return any(unicodedata.category(c) in ("Cc", "Cf") for c in text)


def split_path(path: str) -> tuple[tuple[str, ...], str]:
    """``path``'s folder parts and its last part, or :class:`FileRefused` naming the rule it breaks."""
    if not path:
        raise FileRefused("the path is empty: give a file's path relative to your working folder")
    if len(path) > MAX_PATH_CHARS:
        raise FileRefused(f"the path is over {MAX_PATH_CHARS} characters: give a shorter one")
    if _has_control(path):
        raise FileRefused("the path has a control character (a NUL, a newline, an escape...): paths with them are "
                          "refused; rename the file")
    if path.startswith("/"):
        raise FileRefused(f"the path {path!r} is absolute: give it relative to your working folder (your current "
                          "directory), e.g. report.pdf or out/report.pdf")
    parts = [part for part in path.split("/") if part not in ("", ".")]
    if ".." in parts:
        raise FileRefused(f"the path {path!r} has a '..' part: only files inside your working folder can be used; "
                          "copy the file into it first")
    if not parts:
        raise FileRefused(f"the path {path!r} names the working folder itself: give a file in it")
    for part in parts:
        if len(part.encode("utf-8", "surrogatepass")) > 255:
            raise FileRefused("a part of the path is over 255 bytes, longer than any file name can be")
    return tuple(parts[:-1]), parts[-1]


@dataclass(frozen=True, slots=True)
class Folder:
    """An open folder inside a working folder: its descriptor and its path relative to the working folder."""

    fd: int
    relative: tuple[str, ...]

    def shown(self, name: str) -> str:
        """``name`` in this folder, as the agent would write it (relative to its working folder)."""
        return "/".join((*self.relative, name))

    def close(self) -> None:
        os.close(self.fd)


def open_folder(workdir: Path, parts: tuple[str, ...]) -> Folder:
    """The folder ``parts`` name inside ``workdir``, opened without following a link at any step.

    A link among the folder parts is allowed when it resolves inside ``workdir`` (agents' trees have them); it
    is resolved first, then every real folder on the way is opened ``O_NOFOLLOW`` from the one above, so a link
    put there after the resolution makes the open fail rather than leave the folder.
    """
    try:
        root_fd = os.open(workdir, _DIR_FLAGS)
    except FileNotFoundError:
        raise FileRefused("your working folder does not exist yet: nothing can be uploaded from it or downloaded "
                          "into it") from None
    try:
        relative: tuple[str, ...] = ()
        if parts:
            real_root = os.path.realpath(f"/proc/self/fd/{root_fd}")
            real = os.path.realpath(os.path.join(real_root, *parts))
            if real != real_root and not real.startswith(real_root + "/"):
                raise FileRefused(f"the folder {'/'.join(parts)!r} is a link that leads out of your working folder: "
                                  "only files inside it can be used; copy the file into it first")
            relative = tuple(p for p in os.path.relpath(real, real_root).split("/") if p not in ("", "."))
        fd = root_fd
        for part in relative:
            try:
                inner = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                raise FileRefused(f"there is no folder {'/'.join(parts)!r} in your working folder: create it "
                                  "first, or give a path in an existing one") from None
            except NotADirectoryError:
                raise FileRefused(f"{'/'.join(parts)!r} is not a folder") from None
            except OSError as exc:
                if exc.errno == errno.ELOOP:  # a link appeared after the resolution: refuse, never follow it
                    raise FileRefused(f"the folder {'/'.join(parts)!r} changed into a link while it was opened: "
                                      "try again once it is a folder") from None
                raise FileRefused(f"the folder {'/'.join(parts)!r} cannot be opened: {exc.strerror}") from None
            finally:
                if fd != root_fd:
                    os.close(fd)
            fd = inner
        if fd != root_fd:
            os.close(root_fd)
        return Folder(fd, relative)
    except BaseException:
        with contextlib.suppress(OSError):
            os.close(root_fd)
        raise


@dataclass(frozen=True, slots=True)
class Opened:
    """A file opened for upload: its descriptor (read through it only), its name and its size when opened."""

    fd: int
    name: str
    size: int


def open_upload(workdir: Path, path: str, max_bytes: int) -> Opened:
    """The regular file ``path`` names in ``workdir``, opened for reading, at most ``max_bytes`` long.

    The size is the opened file's (``fstat``), checked before a byte is read: a 2 GiB file, sparse or not,
    costs one ``fstat``. Raises :class:`FileRefused` naming the rule.
    """
    parts, name = split_path(path)
    folder = open_folder(workdir, parts)
    try:
        try:
            # O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused just below.
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC,
                         dir_fd=folder.fd)
        except FileNotFoundError:
            raise FileRefused(f"there is no file {path!r} in your working folder: check the name (ls), paths are "
                              "relative to your current directory") from None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise FileRefused(f"{path!r} is a symbolic link, which is never followed: give the path of the "
                                  "file itself, inside your working folder") from None
            raise FileRefused(f"{path!r} cannot be opened: {exc.strerror}") from None
    finally:
        folder.close()
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise FileRefused(f"{path!r} is a folder: upload one file at a time (zip a folder first)")
        if not stat.S_ISREG(st.st_mode):
            raise FileRefused(f"{path!r} is not a regular file (a pipe, a socket or a device): only regular files "
                              "can be uploaded")
        if st.st_size > max_bytes:
            raise FileRefused(f"{path!r} is {st.st_size} bytes, over the cap of {max_bytes} bytes for one file: "
                              "upload a smaller file (compress or split it)")
    except BaseException:
        os.close(fd)
        raise
    return Opened(fd, name, st.st_size)


def safe_name(suggested: str, *, default: str = "download") -> str:
    """A page's name for a file, made fit for a folder: its last part only (no ``/`` or ``\\``), no control or
    format characters, no leading dot or space, at most :data:`MAX_NAME_BYTES` bytes (the extension kept)."""
    name = suggested.replace("\\", "/").rsplit("/", 1)[-1]
    name = "".join(c for c in name if unicodedata.category(c) not in ("Cc", "Cf"))
    name = name.strip().lstrip(".").strip()
    if not name or name in (".", ".."):
        return default
    encoded = name.encode("utf-8", "replace")
    if len(encoded) <= MAX_NAME_BYTES:
        return encoded.decode("utf-8")
    stem, dot, ext = name.rpartition(".")
    ext_bytes = (dot + ext).encode("utf-8", "replace") if stem and len(ext) <= 16 else b""
    keep = encoded[: MAX_NAME_BYTES - len(ext_bytes)].decode("utf-8", "ignore")
    return keep.rstrip() + ext_bytes.decode("utf-8")


def create_temp(folder: Folder) -> tuple[int, str]:
    """A new, empty temporary file in ``folder``, made ``O_EXCL`` and 0600: its descriptor and name."""
    for _ in range(8):
        name = TEMP_PREFIX + secrets.token_hex(8)
        try:
            fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
                         dir_fd=folder.fd)
        except FileExistsError:
            continue
        except OSError as exc:
            raise FileRefused(f"no file can be written in your working folder: {exc.strerror}") from None
        os.fchmod(fd, 0o600)  # whatever the umask let through
        return fd, name
    raise FileRefused("no temporary file could be made in your working folder: try again")


def _copy_name(name: str, n: int) -> str:
    if n == 0:
        return name
    stem, dot, ext = name.rpartition(".")
    if not stem:  # no extension (or the dot was the first character, which a safe name never has)
        return f"{name} ({n})"
    return f"{stem} ({n}){dot}{ext}"


def place(folder: Folder, temp: str, name: str) -> str:
    """Move the temporary file ``temp`` to ``name`` in ``folder``, or ``name (1).ext``... if ``name`` is taken;
    returns the name used. An existing file (or link, or folder) is never replaced: the name is first claimed
    with an ``O_EXCL`` create, then the temporary file renamed over that claim."""
    for n in range(_MAX_COPIES):
        candidate = _copy_name(name, n)
        try:
            claim = os.open(candidate, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
                            dir_fd=folder.fd)
        except FileExistsError:
            continue
        except OSError as exc:
            if exc.errno == errno.ENAMETOOLONG:
                raise FileRefused(f"the name {name!r} is too long for this folder: give a shorter path") from None
            raise FileRefused(f"{folder.shown(candidate)!r} cannot be written: {exc.strerror}") from None
        os.close(claim)
        try:
            os.replace(temp, candidate, src_dir_fd=folder.fd, dst_dir_fd=folder.fd)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.unlink(candidate, dir_fd=folder.fd)
            raise FileRefused(f"{folder.shown(candidate)!r} cannot be written: {exc.strerror}") from None
        return candidate
    raise FileRefused(f"{name!r} and {_MAX_COPIES - 1} numbered copies of it already exist: give another path")


def remove(folder: Folder, name: str) -> None:
    """Remove ``name`` from ``folder`` if it is there (a partial download); never raises."""
    with contextlib.suppress(OSError):
        os.unlink(name, dir_fd=folder.fd)
