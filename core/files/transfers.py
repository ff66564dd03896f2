"""The pod's file transfers: which are open, whose they are, what they may still move.

A transfer is made for one ``browser_upload`` or ``browser_download`` call, just before the call goes down the
tunnel, and forgotten when the call ends, however it ends. Its id (128 random bits) is what the extension
names in ``_openab/file/read`` and ``write``; with it goes the session it belongs to, and the socket's own check
that it holds that session: an id alone opens nothing of another session's.

:class:`Ledger` is the arithmetic (sans-I/O): transfers running per session and per pod, and the bytes a
session has moved over its life, in both directions, against the caps. :class:`Transfers` holds the open
transfers and does their I/O: reads of an upload through the descriptor opened when the call was checked,
sequential writes of a download into its 0600 temporary file, the final move into place, and the removal of a
partial file on any failure. Every chunk is at most :data:`CHUNK` bytes; a transfer that goes
``idle_timeout`` seconds without one (once its first came) is failed by :meth:`Transfers.check_idle`, read with
an injected clock.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import enum
import hashlib
import logging
import mimetypes
import os
import secrets
import time
import unicodedata
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from ..errors import FileRefused, TransferInvalid
from .paths import (
    Folder,
    create_temp,
    download_target,
    open_download_folder,
    open_upload,
    place,
    remove,
    safe_name,
    split_path,
)

if TYPE_CHECKING:
    from ..settings import Settings

__all__ = ["CHUNK", "FRAME_VERSION", "WINDOW", "Direction", "FileLimits", "Ledger", "Placed", "Transfer", "Transfers"]

log = logging.getLogger(__name__)

CHUNK: Final = 512 * 1024
"""The most bytes one read or write carries: its base64 (about 700 KB) fits the 1 MiB bound of a request."""
FRAME_VERSION: Final = 1
"""The binary file frames the pod reads and answers (docs/files.md; core/acp/file_methods.py), offered to the
extension in each call's ``file`` object as ``"frames"``."""
WINDOW: Final = 8
"""The chunks an extension may have in flight on one transfer (docs/files.md): the pod offers it in the call's
``file`` object, and refuses a read further ahead of the bytes served in order than this many chunks. With at most
:attr:`FileLimits.per_session` transfers, a session has at most 16 chunks (8 MiB) in flight."""
_WRITE_BACK: Final = 16 << 20
"""A download's bytes between two write-backs started while it is written (``fdatasync`` in a thread): the fsync
before the file is placed then waits for the last stretch only (measured on 100 MiB: 38-46 ms whole, 3 ms after)."""
_HASH_BLOCK: Final = 1 << 20
_MAX_SHOWN: Final = 2048


class Direction(enum.Enum):
    UPLOAD = "upload"  # the pod's file into a page: the extension reads
    DOWNLOAD = "download"  # the browser's download into the working folder: the extension writes


@dataclass(frozen=True, slots=True)
class FileLimits:
    """The caps of file transfers (docs/files.md, "Limits")."""

    max_file_bytes: int = 100 << 20
    max_session_bytes: int = 1 << 30
    idle_timeout: float = 30.0
    per_session: int = 2
    per_pod: int = 16

    @classmethod
    def from_settings(cls, settings: Settings) -> FileLimits:
        return cls(settings.max_file_bytes, settings.max_session_file_bytes, settings.file_idle_timeout)


class Ledger:
    """How many transfers run (per session, in the pod) and the bytes each session moved or holds reserved.

    A transfer reserves its most bytes when it opens (an upload its size, a download its cap) and settles with
    what it really moved when it ends; a session may move ``max_session_bytes`` over its life, both ways.
    """

    def __init__(self, limits: FileLimits) -> None:
        self.limits = limits
        self.running: Counter[str] = Counter()
        self.used: Counter[str] = Counter()
        self.reserved: Counter[str] = Counter()

    @property
    def running_in_pod(self) -> int:
        return sum(self.running.values())

    def left(self, session_id: str) -> int:
        """Bytes the session may still reserve."""
        return max(0, self.limits.max_session_bytes - self.used[session_id] - self.reserved[session_id])

    def admit(self, session_id: str) -> None:
        """Take a running slot for the session, or :class:`FileRefused` saying which bound is reached."""
        limits = self.limits
        if self.running[session_id] >= limits.per_session:
            raise FileRefused(f"{limits.per_session} files are already being transferred in this session, the most "
                              "at once: wait for one to finish, then call again")
        if self.running_in_pod >= limits.per_pod:
            raise FileRefused(f"{limits.per_pod} files are being transferred in this pod, the most at once: try "
                              "again in a moment")
        self.running[session_id] += 1

    def reserve(self, session_id: str, size: int) -> None:
        if size > self.left(session_id):
            raise FileRefused(
                f"this session may move {self.limits.max_session_bytes} bytes of files in all (both ways) and has "
                f"{self.left(session_id)} left, less than {size}: start a new chat for more files"
            )
        self.reserved[session_id] += size

    def settle(self, session_id: str, *, reserved: int, moved: int) -> None:
        """A transfer ended: its slot and reservation go, what it moved stays counted."""
        self.running[session_id] -= 1
        if self.running[session_id] <= 0:
            del self.running[session_id]
        self.reserved[session_id] -= reserved
        if self.reserved[session_id] <= 0:
            del self.reserved[session_id]
        if moved:
            self.used[session_id] += moved

    def forget(self, session_id: str) -> None:
        """The session is gone: its life's count goes with it (a session resumed afresh starts again)."""
        self.used.pop(session_id, None)


@dataclass(frozen=True, slots=True)
class Placed:
    """A finished download: where it is (relative to the working folder) and what the browser said of it;
    ``renamed_from``: the server's name for it, when that name could not land as given (docs/files.md)."""

    path: str
    size: int
    sha256: str
    type: str
    url: str
    renamed_from: str | None = None


def _shown(text: object, default: str = "") -> str:
    """A page's word (a type, an address) fit to quote to the agent: no control characters, bounded."""
    if not isinstance(text, str):
        return default
    clean = "".join(c for c in text if unicodedata.category(c) not in ("Cc", "Cf"))
    return clean[:_MAX_SHOWN] or default


class Transfer:
    """One open transfer of one call. ``failed`` is set when it fails on the extension's side of the call (a write
    past its cap, a gap past the idle timeout, a file that changed): the call then ends with ``failure``."""

    def __init__(self, session_id: str, direction: Direction, *, size: int, name: str, now: float) -> None:
        self.id = secrets.token_urlsafe(16)
        self.session_id = session_id
        self.direction = direction
        self.size = size  # an upload's size; a download's cap (``max_bytes``)
        self.name = name  # an upload's file name; a download's name the agent asked for ("" for the page's)
        self.sha256 = ""  # an upload's digest, taken when it opened
        self.chunk_sha256: list[str] = []  # and each of its chunks', taken with it
        self.type = mimetypes.guess_type(name)[0] or "application/octet-stream" if name else ""
        self.moved = 0  # bytes read (upload, the furthest served) or written (download)
        self.failure: str | None = None
        self.failed = asyncio.Event()
        self.ended = False
        self.opened_at = now
        self.last_chunk: float | None = None
        self.served_end = False  # an upload's last chunk was read: no idle clock any more
        # An upload's every byte left in order, once each, and they hash to ``sha256``: what the last binary read
        # answer vouches for (docs/files.md), beside each chunk's own digest.
        self.served_whole = False
        self.fd = -1
        self.written_back = 0  # a download's bytes whose write-back to disk was started
        self.writing_back: concurrent.futures.Future[None] | None = None
        self.writing_back_fd = -1  # the descriptor that write-back closes when it runs
        self.folder: Folder | None = None  # a download's folder, where its temporary file is
        self.temp: str | None = None
        self.hasher = hashlib.sha256()  # a download's written bytes; an upload's bytes served in order
        # A download's every write came with the sha256 of its chunk, and each matched: the browser's word on the
        # whole file is then implied by the chunks' (docs/files.md), so it need not hash the file itself.
        self.chunks_checked = True

    def __repr__(self) -> str:  # never the id: it is the capability to the file
        return f"Transfer({self.direction.value}, {self.moved}/{self.size} bytes)"


def _digest(fd: int, size: int) -> str:
    """sha256 of the first ``size`` bytes of ``fd``, read with ``pread`` (blocking: run it off the loop), then
    ``fd`` closed: it is the thread's own copy, so a call cancelled meanwhile can close its own at once without the
    thread reading a descriptor number the pod has given to another file since."""
    try:
        hasher = hashlib.sha256()
        offset = 0
        while offset < size:
            block = os.pread(fd, min(_HASH_BLOCK, size - offset), offset)
            if not block:
                raise FileRefused("the file got shorter while it was read: upload it again once nothing writes to it")
            hasher.update(block)
            offset += len(block)
        return hasher.hexdigest()
    finally:
        os.close(fd)


def _chunk_digests(fd: int, size: int) -> list[str]:
    """sha256 of each :data:`CHUNK` of the first ``size`` bytes of ``fd``, then ``fd`` closed (as :func:`_digest`)."""
    try:
        digests = []
        for offset in range(0, size, CHUNK):
            block = os.pread(fd, min(CHUNK, size - offset), offset)
            if len(block) < min(CHUNK, size - offset):
                raise FileRefused("the file got shorter while it was read: upload it again once nothing writes to it")
            digests.append(hashlib.sha256(block).hexdigest())
        return digests
    finally:
        os.close(fd)


def _write_back(fd: int) -> None:
    """``fdatasync`` of ``fd``, then ``fd`` closed (the thread's own copy, as :func:`_digest`'s). Its failure is
    not lost: the fsync before the file is placed reports it (Linux reports a write-back error to every descriptor
    open on the file when it happened) and the file is refused."""
    try:
        with contextlib.suppress(OSError):
            os.fdatasync(fd)
    finally:
        os.close(fd)


class Transfers:
    """The pod's open transfers, by id, with their :class:`Ledger`. One per pod.

    ``workdir(session_id)`` is the session's working folder (the agent's cwd), made if missing. ``clock`` reads
    monotonic seconds (the idle timeout). Not thread-safe: used from the event loop only (an upload's digests are
    taken in worker threads, and a download's write-backs run in them, each on a descriptor of its own that the
    thread closes).
    """

    def __init__(
        self, limits: FileLimits, workdir: Callable[[str], Path], *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.limits = limits
        self.ledger = Ledger(limits)
        self._workdir = workdir
        self._clock = clock
        self._open: dict[str, Transfer] = {}
        self._writer: concurrent.futures.ThreadPoolExecutor | None = None  # downloads' write-backs, made at the first

    def __len__(self) -> int:
        return len(self._open)

    # -- opening, for a tool call -------------------------------------------------------------------------------

    async def open_upload(self, session_id: str, path: str) -> Transfer:
        """The transfer of the file ``path`` names in the session's working folder, opened and hashed; or
        :class:`FileRefused` naming the rule it breaks or the cap it passes."""
        split_path(path)  # the path's own rules first: they need no slot
        self.ledger.admit(session_id)
        try:
            opened = open_upload(self._workdir(session_id), path, self.limits.max_file_bytes)
        except BaseException:
            self.ledger.settle(session_id, reserved=0, moved=0)
            raise
        transfer = Transfer(session_id, Direction.UPLOAD, size=opened.size, name=opened.name, now=self._clock())
        transfer.fd = opened.fd
        try:
            self.ledger.reserve(session_id, opened.size)
        except BaseException:
            self._close(transfer, reserved=0)
            raise
        try:
            # Off the loop: 100 MiB take a few tenths of a second to hash. The chunks' digests are taken beside the
            # file's, each thread on a descriptor of its own, while the browser has nothing to do yet: sent with each
            # binary read, they spare the pod hashing each chunk again while the browser waits for it.
            whole = os.dup(transfer.fd)
            try:
                chunks = os.dup(transfer.fd)
            except OSError:
                os.close(whole)
                raise
            transfer.sha256, transfer.chunk_sha256 = await asyncio.gather(
                asyncio.to_thread(_digest, whole, transfer.size),
                asyncio.to_thread(_chunk_digests, chunks, transfer.size))
        except OSError as exc:
            self._close(transfer, reserved=transfer.size)
            raise FileRefused(f"{path!r} could not be read: {exc.strerror}") from None
        except BaseException:
            self._close(transfer, reserved=transfer.size)
            raise
        self._open[transfer.id] = transfer
        return transfer

    def open_download(self, session_id: str, path: str | None) -> Transfer:
        """A download's transfer: its temporary file made (0600, ``O_EXCL``) in the folder ``path`` names (the
        downloads folder without one), and its cap: the file cap, or what the session has left if less."""
        # The path's own rules first: they need no slot.
        parts, name = download_target(path) if path is not None else (None, "")
        self.ledger.admit(session_id)
        folder: Folder | None = None
        try:
            cap = min(self.limits.max_file_bytes, self.ledger.left(session_id))
            if cap <= 0:
                self.ledger.reserve(session_id, 1)  # raises, saying what is left
            folder = open_download_folder(self._workdir(session_id), parts)
            fd, temp = create_temp(folder)
            self.ledger.reserve(session_id, cap)
        except BaseException:
            if folder is not None:
                folder.close()
            self.ledger.settle(session_id, reserved=0, moved=0)
            raise
        transfer = Transfer(session_id, Direction.DOWNLOAD, size=cap, name=name, now=self._clock())
        transfer.fd, transfer.folder, transfer.temp = fd, folder, temp
        self._open[transfer.id] = transfer
        return transfer

    # -- chunks, for the extension ----------------------------------------------------------------------------

    def get(self, session_id: str, transfer_id: str, direction: Direction) -> Transfer:
        """The open transfer ``transfer_id`` of ``session_id`` in ``direction``, or :class:`TransferInvalid`."""
        transfer = self._open.get(transfer_id)
        if transfer is None or transfer.session_id != session_id:
            # The same words whether it is another session's or none: an id says nothing of other sessions.
            raise TransferInvalid("no such transfer in this session: it ended or was never opened")
        if transfer.direction is not direction:
            verb = "read" if direction is Direction.UPLOAD else "written"
            raise TransferInvalid(f"this transfer is a {transfer.direction.value}: it cannot be {verb}")
        if transfer.failure is not None:
            raise TransferInvalid(f"this transfer failed: {transfer.failure}")
        return transfer

    def read(self, session_id: str, transfer_id: str, offset: int) -> tuple[bytes, bool]:
        """At most :data:`CHUNK` bytes of an upload from ``offset``, and whether they reach its end."""
        transfer = self.get(session_id, transfer_id, Direction.UPLOAD)
        if offset < 0 or offset > transfer.size:
            raise TransferInvalid(f"offset {offset} is outside the file's {transfer.size} bytes")
        if offset > transfer.moved + (WINDOW - 1) * CHUNK:
            # Reads come in order; one this far ahead is past the window the pod offered, not a retry.
            raise TransferInvalid(f"offset {offset} is more than {WINDOW} chunks ahead of the {transfer.moved} bytes "
                                  "read in order: keep at most that many reads in flight")
        length = min(CHUNK, transfer.size - offset)
        try:
            data = os.pread(transfer.fd, length, offset) if length else b""
        except OSError as exc:
            self.fail(transfer, f"the file could not be read in the pod: {exc.strerror}")
            raise TransferInvalid(f"this transfer failed: {transfer.failure}") from None
        if len(data) < length:
            self.fail(transfer, "the file got shorter while it was uploaded; upload it again once nothing writes to it")
            raise TransferInvalid(f"this transfer failed: {transfer.failure}")
        transfer.last_chunk = self._clock()
        if offset == transfer.moved:  # served in order: the digest of what left the pod is kept as it goes
            transfer.hasher.update(data)
            transfer.moved += len(data)
            if transfer.moved == transfer.size and transfer.hasher.hexdigest() != transfer.sha256:
                self.fail(transfer, "the file changed while it was uploaded (its sha256 is not the one it had when "
                                    "the call began): what the page got may differ; upload it again once nothing "
                                    "writes to it")
                raise TransferInvalid(f"this transfer failed: {transfer.failure}")
            transfer.served_whole = transfer.moved == transfer.size
        eof = offset + len(data) >= transfer.size
        transfer.served_end = transfer.served_end or eof
        return data, eof

    def chunk_digest(self, session_id: str, transfer_id: str, offset: int, data: bytes) -> str:
        """The sha256 of an upload's chunk ``data`` read at ``offset``, as the chunk was when the call began (taken
        with the file's): a chunk that changed since is refused by the extension at once. Hashed now for a read that
        is not one of those chunks (an offset inside one)."""
        transfer = self.get(session_id, transfer_id, Direction.UPLOAD)
        index, inside = divmod(offset, CHUNK)
        if not inside and index < len(transfer.chunk_sha256) and len(data) == min(CHUNK, transfer.size - offset):
            return transfer.chunk_sha256[index]
        return hashlib.sha256(data).hexdigest()

    def served_whole(self, session_id: str, transfer_id: str) -> str | None:
        """An upload's sha256 once every byte of it was read in order and they hash to it (``None`` before)."""
        transfer = self.get(session_id, transfer_id, Direction.UPLOAD)
        return transfer.sha256 if transfer.served_whole else None

    def write(self, session_id: str, transfer_id: str, offset: int, data: bytes | memoryview,
              sha256: str | None = None) -> int:
        """Append ``data`` (at most :data:`CHUNK` bytes, at ``offset`` = the bytes written so far) to a download;
        returns the bytes written in all. A write past the cap fails the transfer and removes its file. ``sha256``:
        the chunk's digest as the browser took it; a chunk that does not match it fails the transfer."""
        transfer = self.get(session_id, transfer_id, Direction.DOWNLOAD)
        if len(data) > CHUNK:
            raise TransferInvalid(f"a chunk is at most {CHUNK} bytes, not {len(data)}: send smaller chunks")
        if offset != transfer.moved:
            raise TransferInvalid(f"offset {offset} is not the {transfer.moved} bytes written so far: writes are "
                                  "sequential")
        if transfer.moved + len(data) > transfer.size:
            self.fail(transfer, f"the download is over the cap of {transfer.size} bytes")
            raise TransferInvalid(f"{transfer.moved + len(data)} bytes would be over the cap of {transfer.size} bytes; "
                                  "the transfer failed and its partial file was removed")
        if sha256 is None:
            transfer.chunks_checked = False
        elif hashlib.sha256(data).hexdigest() != sha256.lower():
            self.fail(transfer, f"the chunk at {offset} is not the bytes the browser read (its sha256 differs)")
            raise TransferInvalid(f"this transfer failed: {transfer.failure}; its partial file was removed")
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(transfer.fd, view):]
        except OSError as exc:
            self.fail(transfer, f"the pod could not write the file: {exc.strerror}")
            raise TransferInvalid(f"this transfer failed: {transfer.failure}") from None
        transfer.hasher.update(data)
        transfer.moved += len(data)
        transfer.last_chunk = self._clock()
        if transfer.moved - transfer.written_back >= _WRITE_BACK:
            self._write_back(transfer)
        return transfer.moved

    def _write_back(self, transfer: Transfer) -> None:
        """Start writing what the download wrote so far to disk, in a thread, unless its last write-back still runs."""
        if transfer.writing_back is not None and not transfer.writing_back.done():
            return
        if self._writer is None:
            self._writer = concurrent.futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix="openab-write-back")
        try:
            fd = os.dup(transfer.fd)
        except OSError:
            return  # no descriptor to spare: the fsync before the file is placed writes it all
        transfer.written_back = transfer.moved
        transfer.writing_back = self._writer.submit(_write_back, fd)
        transfer.writing_back_fd = fd

    # -- the clock ----------------------------------------------------------------------------------------------

    def idle_left(self, transfer: Transfer) -> float | None:
        """Seconds until ``transfer`` is idle too long (``None``: no chunk yet, so no idle clock runs)."""
        if transfer.last_chunk is None or transfer.ended or transfer.served_end:
            return None
        return transfer.last_chunk + self.limits.idle_timeout - self._clock()

    def check_idle(self, transfer: Transfer) -> bool:
        """Fail ``transfer`` if it went ``idle_timeout`` s without a chunk; ``True`` if it is (now) failed."""
        left = self.idle_left(transfer)
        if left is not None and left <= 0 and transfer.failure is None:
            self.fail(transfer, f"no chunk came for {self.limits.idle_timeout:g} s, so the transfer was stopped")
        return transfer.failure is not None

    # -- the end ------------------------------------------------------------------------------------------------

    def fail(self, transfer: Transfer, reason: str) -> None:
        """The transfer fails now: no chunk is served any more, a partial download is removed at once."""
        if transfer.failure is not None:
            return
        transfer.failure = reason
        transfer.failed.set()
        if transfer.direction is Direction.DOWNLOAD:
            self._discard_temp(transfer)
        log.info("a file %s failed: %s", transfer.direction.value, reason)

    def finish_download(self, transfer: Transfer, reported: Mapping[str, Any]) -> Placed:
        """Check the browser's word on a download (``size``, ``sha256``) against what was written, then move the
        file into place; :class:`FileRefused` (and the file removed) on any mismatch."""
        if transfer.failure is not None:
            raise FileRefused(transfer.failure)
        size, digest = reported.get("size"), reported.get("sha256")
        written = transfer.hasher.hexdigest()
        if not isinstance(size, int) or isinstance(size, bool) or size != transfer.moved:
            self.fail(transfer, f"the browser said the file has {size!r} bytes but {transfer.moved} arrived")
            raise FileRefused(f"{transfer.failure}; the partial file was removed: download it again")
        if digest is None and transfer.chunks_checked:
            pass  # every chunk's digest was the browser's: the file's is the pod's own, of the same bytes
        elif not isinstance(digest, str) or digest.lower() != written:
            self.fail(transfer, "the sha256 the browser gave is not the one of the bytes that arrived")
            raise FileRefused(f"{transfer.failure}; the file was removed: download it again")
        url = _shown(reported.get("url"))
        fallback = safe_name(url.split("?", 1)[0].split("#", 1)[0]) if url else "download"
        suggested = _shown(reported.get("name"))
        name = transfer.name or safe_name(suggested, default=fallback)
        renamed_from = suggested if not transfer.name and suggested and name != suggested else None
        assert transfer.folder is not None and transfer.temp is not None
        try:
            os.fsync(transfer.fd)  # on disk before it has a name the agent trusts
            final = place(transfer.folder, transfer.temp, name)
        except (OSError, FileRefused) as exc:
            self.fail(transfer, str(exc) if isinstance(exc, FileRefused) else f"the file could not be kept: {exc}")
            raise FileRefused(f"{transfer.failure}; the download was removed") from None
        transfer.temp = None  # it has its name now: never removed as partial
        kind = _shown(reported.get("type")) or mimetypes.guess_type(final)[0] or "application/octet-stream"
        return Placed(transfer.folder.shown(final), transfer.moved, written, kind, url, renamed_from)

    def end(self, transfer: Transfer) -> None:
        """The call ended (any way): the id is forgotten, the files closed, a download not placed removed."""
        if transfer.ended:
            return
        transfer.ended = True
        self._open.pop(transfer.id, None)
        if transfer.direction is Direction.DOWNLOAD:
            self._discard_temp(transfer)
        self._close(transfer, reserved=transfer.size)

    def session_closed(self, session_id: str) -> None:
        """The session is gone: its transfers fail and end, and its life's count is forgotten."""
        for transfer in [t for t in self._open.values() if t.session_id == session_id]:
            self.fail(transfer, "the session was closed")
            self.end(transfer)
        self.ledger.forget(session_id)

    def close(self) -> None:
        """The pod stops: every open transfer fails and ends (a partial download is removed), and the write-back
        threads stop once the write-back each may be running ends (one ``fdatasync``, not waited for here)."""
        for transfer in list(self._open.values()):
            # A write-back still queued would sync a file that is removed now: it never runs, its descriptor closes.
            if transfer.writing_back is not None and transfer.writing_back.cancel():
                os.close(transfer.writing_back_fd)
            self.fail(transfer, "the pod is stopping")
            self.end(transfer)
        if self._writer is not None:
            self._writer.shutdown(wait=False)
            self._writer = None

    def _discard_temp(self, transfer: Transfer) -> None:
        if transfer.folder is not None and transfer.temp is not None:
            remove(transfer.folder, transfer.temp)
            transfer.temp = None

    def _close(self, transfer: Transfer, *, reserved: int) -> None:
        if transfer.fd >= 0:
            with contextlib.suppress(OSError):
                os.close(transfer.fd)
            transfer.fd = -1
        if transfer.folder is not None:
            with contextlib.suppress(OSError):
                transfer.folder.close()
            transfer.folder = None
        # What crossed counts, whether or not the transfer succeeded: the cap is on what a session moves.
        self.ledger.settle(transfer.session_id, reserved=reserved, moved=transfer.moved)
