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

Where a download lands, and under what name (docs/files.md, "Where downloads land"): an agent CLI reads files of
the folder it runs in as its instructions and config (``AGENTS.md``, ``.mcp.json``, ``conftest.py``...), and a
page chooses a download's name. So a download the agent gave no ``path`` lands in :data:`DOWNLOADS_FOLDER`, never
the working folder's root, and no download ever lands under a name of :data:`READ_AS_INSTRUCTIONS` or one that
starts with a dot or a space, however it is spelled: a page's name is renamed (:func:`safe_name`), an agent's
``path`` refused with the name it could use instead (:func:`download_target`).
"""

from __future__ import annotations

import contextlib
import errno
import fnmatch
import os
import secrets
import stat
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from ..errors import FileRefused

__all__ = [
    "DOWNLOADS_FOLDER",
    "MAX_NAME_BYTES",
    "READ_AS_INSTRUCTIONS",
    "TEMP_PREFIX",
    "Folder",
    "Opened",
    "create_temp",
    "download_target",
    "inert_name",
    "open_download_folder",
    "open_folder",
    "open_upload",
    "place",
    "read_as_instructions",
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

DOWNLOADS_FOLDER: Final = "downloads"
"""Where a download lands when the agent gave no ``path``: a folder of its own in the working folder, made 0700."""

READ_AS_INSTRUCTIONS: Final[tuple[str, ...]] = (
    # Agent CLIs' instructions: read from the folder they run in (and its subfolders), obeyed as the person's.
    "AGENTS.md", "AGENT.md", "CLAUDE.md", "CLAUDE.local.md", "GEMINI.md", "QWEN.md", "CRUSH.md",
    "copilot-instructions.md", ".cursorrules", ".windsurfrules", ".clinerules", ".roorules", ".goosehints",
    # Their config: an MCP server entry is a command the CLI runs; a settings file can allow every tool.
    ".mcp.json", "mcp.json", "opencode.json", "opencode.jsonc", "crush.json", ".aider*", ".cursor", ".codex",
    ".claude", ".gemini", ".qwen", ".vscode", ".github", ".continue", ".roo", ".kiro", ".amazonq", ".windsurf",
    ".opencode", ".crush", ".idea", ".zed",
    # Test runners and Python's own start: code they import, or settings they obey, in the folder they run in.
    "conftest.py", "pytest.ini", ".pytest.ini", "pyproject.toml", "setup.py", "setup.cfg", "tox.ini", "noxfile.py",
    "sitecustomize.py", "usercustomize.py", "*.pth", ".coveragerc", ".pdbrc",
    # Builds and package managers: scripts they run, registries and tokens they use.
    "package.json", "Makefile", "GNUmakefile", "justfile", ".npmrc", ".yarnrc", ".yarnrc.yml", "bunfig.toml",
    ".pypirc", "pip.conf",
    # Environments (dotenv, direnv's .envrc runs), git (hooks, config, CI workflows) and shells' start files.
    ".env*", ".git*", ".bashrc", ".bash_profile", ".bash_login", ".bash_logout", ".profile", ".zshrc", ".zshenv",
    ".zprofile", ".zlogin", ".inputrc", ".netrc",
)
"""Names (``*`` patterns) a download never lands under: agent CLIs, test runners, build tools or shells read them
as instructions, config or code to run. Matched by :func:`read_as_instructions`, whatever the case, the Unicode
form, and the dots, spaces and invisible characters around them; an entry with a leading dot matches a name that
had one, however many dots and spaces came first (``". .mcp.json"``, ``"\\u200b.env"``)."""

_PATTERNS: Final = tuple((entry, entry.casefold()) for entry in READ_AS_INSTRUCTIONS)
INERT_PREFIX: Final = "download-"
# Characters no font shows that NFKC keeps: Hangul fillers, the braille blank, the combining grapheme joiner, the
# Khmer inherent vowels, the Mongolian vowel separator (Cf in newer Unicode, Mn or Zs in some older ones).
_BLANKS: Final = frozenset("\u115f\u1160\u3164\uffa0\u2800\u034f\u17b4\u17b5\u180e")
# Removed from a name: controls, format characters (zero-width, bidi), surrogates, private and unassigned code
# points, line and paragraph separators.
_REMOVED: Final = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})


def _has_control(text: str) -> bool:
    # Cc: C0 and C1 controls, DEL. Cf: format characters (a right-to-left override makes "fdp.exe" read "exe.pdf").
    return any(unicodedata.category(c) in ("Cc", "Cf") for c in text)


def _visible(name: str) -> str:
    """``name`` as a reader may see it: NFKC (a fullwidth dot is a dot, a ligature its letters), with nothing that
    shows no glyph, every space-like character a plain space. Repeated, as a removal can make a new composition."""
    for _ in range(4):
        folded = "".join(" " if unicodedata.category(c) == "Zs" or c.isspace() else c
                         for c in unicodedata.normalize("NFKC", name)
                         if unicodedata.category(c) not in _REMOVED and c not in _BLANKS)
        if folded == name:
            break
        name = folded
    return name


def read_as_instructions(name: str) -> str | None:
    """The entry of :data:`READ_AS_INSTRUCTIONS` that ``name`` (one part of a path) is, or ``None``: compared in
    its :func:`_visible` form, casefolded, without the dots and spaces at either end (a file system or a reader
    may drop a trailing one); an entry with a leading dot also matches when ``name`` began with a dot."""
    visible = _visible(name).casefold()
    bare = visible.strip(" .")
    forms = [bare]
    if "." in visible[: len(visible) - len(visible.lstrip(" ."))]:
        forms.append("." + bare)
    for entry, pattern in _PATTERNS:
        if any(fnmatch.fnmatchcase(form, pattern) for form in forms):
            return entry
    return None


def inert_name(name: str) -> str:
    """``name``, renamed so that nothing reads it as instructions: :data:`INERT_PREFIX` before it, and ``.txt``
    after when its extension alone is what is read (``*.pth``). The result is never refused."""
    inert = INERT_PREFIX + name.strip(" .")
    if read_as_instructions(inert) is not None:
        inert += ".txt"
    return inert


def download_target(path: str) -> tuple[tuple[str, ...], str]:
    """The folder parts and the name of the agent's ``path`` for a download, or :class:`FileRefused`: the rules
    of :func:`split_path`, and no part starting with a dot or a space, showing nothing, or read as instructions
    (:data:`READ_AS_INSTRUCTIONS`), in any spelling. Refused, not renamed: the agent chose the name, and picks
    another with the one the error suggests."""
    parts, name = split_path(path)
    for part in parts:
        _check_part(part, path, "folder")
    _check_part(name, path, "file")
    return parts, name


def _check_part(part: str, path: str, what: str) -> None:
    visible = _visible(part)
    bare = visible.strip(" .")
    if not bare:
        raise FileRefused(f"the {what} name {part!r} in {path!r} shows nothing once its dots, spaces and invisible "
                          "characters are read: give a name with letters, e.g. report.pdf")
    entry = read_as_instructions(part)
    if entry is not None:
        where = "under that name" if what == "file" else "in or under that folder"
        raise FileRefused(f"{part!r} in {path!r} is a {what} name agent CLIs, test runners or shells read as "
                          f"instructions or config ({entry}), so a download never lands {where}: give another "
                          f"name, e.g. {inert_name(bare)!r}, or leave `path` out (the file then lands in "
                          f"{DOWNLOADS_FOLDER}/ under a safe name)")
    if visible[0] in " .":
        raise FileRefused(f"the {what} name {part!r} in {path!r} starts with a dot or a space: a download never "
                          "lands hidden (agent CLIs and other tools keep their config in such names): give one "
                          f"without, e.g. {bare!r}")


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


def _open_root(workdir: Path) -> int:
    try:
        return os.open(workdir, _DIR_FLAGS)
    except FileNotFoundError:
        raise FileRefused("your working folder does not exist yet: nothing can be uploaded from it or downloaded "
                          "into it") from None


def open_folder(workdir: Path, parts: tuple[str, ...]) -> Folder:
    """The folder ``parts`` name inside ``workdir``, opened without following a link at any step.

    A link among the folder parts is allowed when it resolves inside ``workdir`` (agents' trees have them); it
    is resolved first, then every real folder on the way is opened ``O_NOFOLLOW`` from the one above, so a link
    put there after the resolution makes the open fail rather than leave the folder.
    """
    root_fd = _open_root(workdir)
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


def open_download_folder(workdir: Path, parts: tuple[str, ...] | None) -> Folder:
    """The folder a download is written in: the one the agent's ``path`` names (``parts``, from
    :func:`download_target`), else :data:`DOWNLOADS_FOLDER`, made 0700 when missing. Neither is ever reached
    through a link to a folder :func:`download_target` would refuse (``docs -> .github``); the downloads folder is
    never a link at all (one planted there is refused, not followed), nor a file."""
    if parts is None or parts[:1] == (DOWNLOADS_FOLDER,):
        downloads = _open_downloads(workdir)
        if parts is None or len(parts) == 1:
            return downloads
        downloads.close()  # made if it was missing; the folders under it are the agent's to make
    folder = open_folder(workdir, parts)
    try:
        for part in folder.relative:  # where its links led: the rules hold for the real folders too
            _check_part(part, "/".join(folder.relative), "folder")
    except BaseException:
        folder.close()
        raise
    return folder


def _open_downloads(workdir: Path) -> Folder:
    root_fd = _open_root(workdir)
    made = False
    shown = f"{DOWNLOADS_FOLDER}/ in your working folder"
    try:
        try:
            # mkdirat never follows a link at its last part: one planted there makes it fail (EEXIST), and the
            # O_NOFOLLOW open below refuses it.
            os.mkdir(DOWNLOADS_FOLDER, 0o700, dir_fd=root_fd)
            made = True
        except FileExistsError:
            pass
        except OSError as exc:
            raise FileRefused(f"{shown} cannot be made: {exc.strerror}; give a `path` in an existing folder") from None
        try:
            fd = os.open(DOWNLOADS_FOLDER, _DIR_FLAGS, dir_fd=root_fd)
        except OSError as exc:
            if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                raise FileRefused(f"{shown} cannot be opened: {exc.strerror}") from None
            # A link fails O_NOFOLLOW | O_DIRECTORY with either error; which it is only changes the words.
            try:
                link = stat.S_ISLNK(os.stat(DOWNLOADS_FOLDER, dir_fd=root_fd, follow_symlinks=False).st_mode)
            except OSError:
                link = False
            if link:
                raise FileRefused(f"{shown} is a symbolic link, which is never followed: remove the link (downloads "
                                  "land in a real folder of that name), or give a `path`") from None
            raise FileRefused(f"{shown} is a file, not a folder: move it away (downloads land in that folder), or "
                              "give a `path`") from None
    finally:
        os.close(root_fd)
    if made:
        os.fchmod(fd, 0o700)  # whatever the umask let through
    return Folder(fd, (DOWNLOADS_FOLDER,))


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
    """A page's name for a file, made fit to land in a folder an agent works in: in its :func:`_visible` form
    (NFKC, nothing invisible), its last part only (no ``/`` or ``\\``, fullwidth ones included), no dot or space at
    either end however many there were, at most :data:`MAX_NAME_BYTES` bytes (the extension kept), and renamed by
    :func:`inert_name` when it is, or was before its dots went, a name of :data:`READ_AS_INSTRUCTIONS`."""
    last = _visible(suggested).replace("\\", "/").rsplit("/", 1)[-1]
    if not last.strip(" ."):
        last = _visible(default).replace("\\", "/").rsplit("/", 1)[-1]
    name = last.strip(" .") or "download"
    encoded = name.encode("utf-8")
    if len(encoded) > MAX_NAME_BYTES:
        stem, dot, ext = name.rpartition(".")
        ext_bytes = (dot + ext).encode("utf-8") if stem and len(ext) <= 16 else b""
        keep = encoded[: MAX_NAME_BYTES - len(ext_bytes)].decode("utf-8", "ignore")
        name = keep.rstrip(" .") + ext_bytes.decode("utf-8")
    # The name as given (". .mcp.json": dotted) and as cut (its last characters may make one: "x.pth.zzz...").
    if read_as_instructions(last) is not None or read_as_instructions(name) is not None:
        name = inert_name(name)
    return name


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
