"""core/files on real files in a real folder: the path rules under attack, the caps, the idle clock, the end of a
download (digest, names, modes). The socket and the MCP sides are in tests/test_files_e2e.py."""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import stat
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from openab_browser.core.errors import FileRefused, TransferInvalid
from openab_browser.core.files import CHUNK, FileLimits, Transfer, Transfers
from openab_browser.core.files.paths import TEMP_PREFIX, safe_name
from openab_browser.core.settings import Settings

pytestmark = pytest.mark.anyio

SESSION = "sess_00000000-0000-4000-8000-000000000001"
OTHER = "sess_00000000-0000-4000-8000-000000000002"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def root() -> Iterator[Path]:
    """Two sessions' working folders side by side, and a secret outside both."""
    base = Path(tempfile.mkdtemp(prefix="oab-files-"))
    for name in ("a", "b"):
        (base / name).mkdir(mode=0o700)
    (base / "secret.txt").write_text("not yours")
    try:
        yield base
    finally:
        for path in base.rglob("*"):  # a 0000 file or folder a test made must not stop the clean-up
            if not path.is_symlink():
                os.chmod(path, 0o700)
        import shutil

        shutil.rmtree(base, ignore_errors=True)


def transfers(root: Path, clock: Clock | None = None, **limits: float) -> Transfers:
    folders = {SESSION: root / "a", OTHER: root / "b"}
    return Transfers(FileLimits(**limits), folders.__getitem__, clock=clock or Clock())  # type: ignore[arg-type]


def listing(folder: Path) -> list[str]:
    """The files under ``folder``, by their paths relative to it (a download lands in its ``downloads/``)."""
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if not p.is_dir())


# -- paths under attack -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("path", "words"), [
    ("../secret.txt", "'..'"),
    ("sub/../../secret.txt", "'..'"),
    ("/etc/passwd", "absolute"),
    ("", "empty"),
    (".", "working folder itself"),
    ("report\x00.pdf", "control character"),
    ("report\n.pdf", "control character"),
    ("report\x1b[31m.pdf", "control character"),
    ("fdp\u202e.exe", "control character"),
    ("missing.pdf", "no file"),
])
async def test_upload_paths_that_break_a_rule_are_refused_naming_it(root: Path, path: str, words: str) -> None:
    files = transfers(root)
    with pytest.raises(FileRefused, match=re.escape(words)):
        await files.open_upload(SESSION, path)
    assert len(files) == 0 and not files.ledger.running  # a refusal holds no slot


async def test_a_symlink_is_never_followed_out_of_the_folder(root: Path) -> None:
    work = root / "a"
    (work / "link.txt").symlink_to(root / "secret.txt")
    (work / "inner.txt").write_text("mine")
    (work / "inside-link.txt").symlink_to(work / "inner.txt")
    (work / "out").symlink_to(root)  # a folder part leading out
    (work / "sub").mkdir()
    (work / "sub" / "doc.txt").write_text("doc")
    (work / "alias").symlink_to(work / "sub")  # a folder part that stays inside
    files = transfers(root)
    with pytest.raises(FileRefused, match="symbolic link"):
        await files.open_upload(SESSION, "link.txt")
    with pytest.raises(FileRefused, match="symbolic link"):  # the last part is never a link, even one inside
        await files.open_upload(SESSION, "inside-link.txt")
    with pytest.raises(FileRefused, match="leads out"):
        await files.open_upload(SESSION, "out/secret.txt")
    transfer = await files.open_upload(SESSION, "alias/doc.txt")
    assert transfer.sha256 == hashlib.sha256(b"doc").hexdigest()
    files.end(transfer)


async def test_a_fifo_a_device_and_a_folder_are_not_regular_files(root: Path) -> None:
    work = root / "a"
    os.mkfifo(work / "pipe")
    (work / "folder").mkdir()
    files = transfers(root)
    # A FIFO with no writer would block a read forever: it is refused when opened, without waiting.
    with pytest.raises(FileRefused, match="not a regular file"):
        await asyncio.wait_for(files.open_upload(SESSION, "pipe"), 10)
    with pytest.raises(FileRefused, match="is a folder"):
        await files.open_upload(SESSION, "folder")
    try:
        os.mknod(work / "null", 0o600 | stat.S_IFCHR, os.makedev(1, 3))
    except PermissionError:
        return  # no CAP_MKNOD here: the FIFO stands for every non-regular file
    with pytest.raises(FileRefused, match="not a regular file"):
        await files.open_upload(SESSION, "null")


def _bytes_read() -> int:
    """Bytes this process read through read(2) and friends so far (Linux's /proc/self/io ``rchar``)."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("no rchar in /proc/self/io")


async def test_a_2_gib_file_is_refused_before_a_byte_is_read(root: Path) -> None:
    big = root / "a" / "big.iso"
    big.touch()
    os.truncate(big, 2 << 30)  # sparse: 2 GiB long, no block on disk
    files = transfers(root)
    before = _bytes_read()
    with pytest.raises(FileRefused, match=r"2147483648 bytes, over the cap of 104857600 bytes"):
        await files.open_upload(SESSION, "big.iso")
    # Reading /proc/self/io costs a few hundred bytes of rchar; hashing even 1 MiB of the file would cost 1 MiB.
    assert _bytes_read() - before < 64 * 1024
    assert len(files) == 0


# -- caps --------------------------------------------------------------------------------------------------------


async def test_two_at_once_per_session_and_the_pod_bound(root: Path) -> None:
    for name in ("one", "two", "three"):
        (root / "a" / name).write_bytes(b"x")
        (root / "b" / name).write_bytes(b"x")
    files = transfers(root, per_pod=3)
    first = await files.open_upload(SESSION, "one")
    second = files.open_download(SESSION, None)
    with pytest.raises(FileRefused, match="2 files are already being transferred in this session"):
        await files.open_upload(SESSION, "three")
    third = await files.open_upload(OTHER, "one")
    with pytest.raises(FileRefused, match="3 files are being transferred in this pod"):
        await files.open_upload(OTHER, "two")
    files.end(first)
    again = await files.open_upload(SESSION, "three")  # a slot freed by an ended call
    for transfer in (second, third, again):
        files.end(transfer)
    assert not files.ledger.running and not files.ledger.reserved


async def test_an_uploads_chunks_have_the_digests_taken_when_it_opened(root: Path) -> None:
    body = os.urandom(CHUNK * 2 + 3)
    (root / "a" / "c.bin").write_bytes(body)
    files = transfers(root)
    upload = await files.open_upload(SESSION, "c.bin")
    assert upload.sha256 == hashlib.sha256(body).hexdigest()
    assert upload.chunk_sha256 == [hashlib.sha256(body[at:at + CHUNK]).hexdigest() for at in (0, CHUNK, 2 * CHUNK)]
    data, _ = files.read(SESSION, upload.id, CHUNK)
    assert files.chunk_digest(SESSION, upload.id, CHUNK, data) == upload.chunk_sha256[1]
    data, _ = files.read(SESSION, upload.id, 5)  # inside a chunk: hashed as it is read
    assert files.chunk_digest(SESSION, upload.id, 5, data) == hashlib.sha256(body[5:5 + CHUNK]).hexdigest()
    files.end(upload)


async def test_the_session_cap_counts_both_ways_over_the_session_life(root: Path) -> None:
    (root / "a" / "six").write_bytes(b"6" * 600)
    files = transfers(root, max_session_bytes=1000)
    upload = await files.open_upload(SESSION, "six")
    data, eof = files.read(SESSION, upload.id, 0)
    assert (data, eof) == (b"6" * 600, True)
    files.end(upload)
    download = files.open_download(SESSION, None)
    assert download.size == 400  # the cap the browser is told: what the session has left
    files.write(SESSION, download.id, 0, b"d" * 400)
    files.end(download)
    with pytest.raises(FileRefused, match="has 0 left"):
        files.open_download(SESSION, None)
    with pytest.raises(FileRefused, match="has 0 left, less than 600"):
        await files.open_upload(SESSION, "six")
    files.session_closed(SESSION)  # a session's life ends with it
    files.end(await files.open_upload(SESSION, "six"))


async def test_a_write_past_the_cap_fails_the_transfer_and_removes_its_file(root: Path) -> None:
    files = transfers(root, max_file_bytes=CHUNK + 10)
    download = files.open_download(SESSION, "out.bin")
    assert download.temp is not None and download.temp.startswith(TEMP_PREFIX)
    temp = root / "a" / download.temp
    assert stat.S_IMODE(temp.stat().st_mode) == 0o600
    assert files.write(SESSION, download.id, 0, b"a" * CHUNK) == CHUNK
    with pytest.raises(TransferInvalid, match=f"over the cap of {CHUNK + 10} bytes"):
        files.write(SESSION, download.id, CHUNK, b"b" * 11)
    assert not temp.exists() and listing(root / "a") == []  # removed at once, not when the call ends
    assert download.failed.is_set()
    with pytest.raises(TransferInvalid, match="failed"):
        files.write(SESSION, download.id, CHUNK, b"b")
    files.end(download)


async def test_writes_are_sequential_and_chunks_bounded(root: Path) -> None:
    files = transfers(root)
    download = files.open_download(SESSION, None)
    with pytest.raises(TransferInvalid, match="sequential"):
        files.write(SESSION, download.id, 5, b"x")
    with pytest.raises(TransferInvalid, match=f"at most {CHUNK} bytes"):
        files.write(SESSION, download.id, 0, b"x" * (CHUNK + 1))
    files.write(SESSION, download.id, 0, b"x")
    with pytest.raises(TransferInvalid, match="sequential"):
        files.write(SESSION, download.id, 0, b"x")  # the same chunk twice is not appended twice
    files.end(download)


async def test_a_transfer_is_its_session_s_own_and_of_one_direction(root: Path) -> None:
    (root / "a" / "mine.txt").write_text("mine")
    files = transfers(root)
    upload = await files.open_upload(SESSION, "mine.txt")
    download = files.open_download(SESSION, None)
    with pytest.raises(TransferInvalid, match="no such transfer in this session"):
        files.read(OTHER, upload.id, 0)
    with pytest.raises(TransferInvalid, match="no such transfer in this session"):
        files.write(OTHER, download.id, 0, b"x")
    with pytest.raises(TransferInvalid, match="cannot be read"):
        files.read(SESSION, download.id, 0)
    with pytest.raises(TransferInvalid, match="cannot be written"):
        files.write(SESSION, upload.id, 0, b"x")
    files.end(upload)
    with pytest.raises(TransferInvalid, match="no such transfer in this session: it ended"):
        files.read(SESSION, upload.id, 0)  # forgotten with its call
    files.end(download)
    assert listing(root / "a") == ["mine.txt"]


async def test_an_idle_transfer_fails_once_its_first_chunk_came(root: Path) -> None:
    clock = Clock()
    files = transfers(root, clock, idle_timeout=30)
    download = files.open_download(SESSION, None)
    clock.now += 600  # before the first chunk the person may be deciding: the call's own timeout bounds that
    assert not files.check_idle(download)
    files.write(SESSION, download.id, 0, b"x")
    clock.now += 29
    assert not files.check_idle(download)
    clock.now += 2
    assert files.check_idle(download)
    assert download.failure is not None and "no chunk came for 30 s" in download.failure
    assert listing(root / "a") == []
    files.end(download)


# -- the end of a download ---------------------------------------------------------------------------------------


def _download(files: Transfers, path: str | None, body: bytes) -> object:
    transfer = files.open_download(SESSION, path)
    for offset in range(0, len(body), CHUNK):
        files.write(SESSION, transfer.id, offset, body[offset:offset + CHUNK])
    return transfer


async def test_a_long_download_is_written_back_to_disk_while_it_comes(root: Path) -> None:
    # So that the fsync before the file is placed waits for its last stretch only; the file is the same.
    files = transfers(root)
    body = os.urandom(40 << 20)
    transfer = _download(files, "long.bin", body)
    assert isinstance(transfer, Transfer) and transfer.writing_back is not None
    assert 16 << 20 <= transfer.written_back <= len(body)  # one every 16 MiB, once the last one is done
    transfer.writing_back.result(timeout=30)
    placed = files.finish_download(transfer, {"size": len(body), "sha256": hashlib.sha256(body).hexdigest()})
    assert (root / "a" / placed.path).read_bytes() == body
    files.end(transfer)
    files.close()


async def test_a_pod_that_stops_ends_its_transfers_and_its_write_back_threads(root: Path) -> None:
    files = transfers(root)
    others = set(_write_back_threads())  # other tests' stores, never closed
    transfer = _download(files, "long.bin", os.urandom(40 << 20))
    assert isinstance(transfer, Transfer) and transfer.writing_back is not None
    ours = set(_write_back_threads()) - others
    assert ours
    files.close()
    assert transfer.ended and transfer.failure == "the pod is stopping"
    assert listing(root / "a") == []  # the partial download is removed
    for thread in ours:
        await asyncio.to_thread(thread.join, 30)
    assert not any(t.is_alive() for t in ours)
    # What stops is the pool, not the store: a pod never writes after it, but nothing breaks if one did.
    again = _download(files, "again.bin", os.urandom(20 << 20))
    assert isinstance(again, Transfer) and again.writing_back is not None
    again.writing_back.result(timeout=30)
    files.close()


def _write_back_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("openab-write-back")]


async def test_a_digest_or_size_mismatch_removes_the_file(root: Path) -> None:
    files = transfers(root)
    body = b"invoice" * 1000
    transfer = files.open_download(SESSION, None)
    files.write(SESSION, transfer.id, 0, body)
    with pytest.raises(FileRefused, match="sha256 the browser gave is not"):
        files.finish_download(transfer, {"name": "invoice.pdf", "size": len(body), "sha256": "0" * 64})
    files.end(transfer)
    transfer = files.open_download(SESSION, None)
    files.write(SESSION, transfer.id, 0, body)
    with pytest.raises(FileRefused, match="bytes but 7000 arrived"):
        files.finish_download(transfer, {"name": "invoice.pdf", "size": 7001,
                                         "sha256": hashlib.sha256(body).hexdigest()})
    files.end(transfer)
    assert listing(root / "a") == []


async def test_names_are_made_safe_and_never_replace_a_file(root: Path) -> None:
    work = root / "a"
    (work / "downloads").mkdir()
    (work / "downloads" / "report.pdf").write_text("the agent's own")
    files = transfers(root)
    placed = []
    for name in ("../../report.pdf", "report.pdf", "\x1b]0;owned\x07.bashrc", "", "a/b\\c.txt"):
        body = name.encode() + b"!"
        transfer = files.open_download(SESSION, None)
        files.write(SESSION, transfer.id, 0, body)
        result = files.finish_download(transfer, {"name": name, "size": len(body), "url": "https://x.test/f.bin?a=1",
                                                  "sha256": hashlib.sha256(body).hexdigest(), "type": "text/plain"})
        files.end(transfer)
        placed.append(result.path)
        assert stat.S_IMODE((work / result.path).stat().st_mode) == 0o600
        assert (work / result.path).read_bytes() == body
    assert placed == ["downloads/report (1).pdf", "downloads/report (2).pdf", "downloads/]0;owned.bashrc",
                      "downloads/f.bin", "downloads/c.txt"]
    assert (work / "downloads" / "report.pdf").read_text() == "the agent's own"
    assert not [p for p in listing(work) if TEMP_PREFIX in p]


async def test_the_agents_path_names_the_file_in_a_folder_of_the_working_folder(root: Path) -> None:
    work = root / "a"
    (work / "in").mkdir()
    files = transfers(root)
    transfer = files.open_download(SESSION, "in/bill.pdf")
    files.write(SESSION, transfer.id, 0, b"%PDF")
    placed = files.finish_download(transfer, {"name": "other.pdf", "size": 4, "sha256": hashlib.sha256(b"%PDF")
                                              .hexdigest(), "type": "application/pdf", "url": "https://x.test/b"})
    files.end(transfer)
    assert placed.path == "in/bill.pdf" and (work / "in" / "bill.pdf").read_bytes() == b"%PDF"
    with pytest.raises(FileRefused, match="no folder 'nope'"):
        files.open_download(SESSION, "nope/bill.pdf")
    with pytest.raises(FileRefused, match=re.escape("'..'")):
        files.open_download(SESSION, "../b/bill.pdf")


def test_safe_name() -> None:
    assert safe_name("..") == "download"
    assert safe_name("...hidden") == "hidden"
    assert safe_name("C:\\Users\\x\\evil.exe") == "evil.exe"
    long = safe_name("x" * 400 + ".pdf")
    assert long.endswith(".pdf") and len(long.encode()) <= 200


def test_the_caps_come_from_the_settings_and_their_variables() -> None:
    settings = Settings.from_env({"OPENAB_MAX_FILE_BYTES": "1000", "OPENAB_MAX_SESSION_FILE_BYTES": "5000",
                                  "OPENAB_FILE_IDLE_TIMEOUT": "2.5"}, state_dir=Path("/nonexistent"))
    assert FileLimits.from_settings(settings) == FileLimits(1000, 5000, 2.5)
    defaults = FileLimits.from_settings(Settings(state_dir=Path("/nonexistent")))
    assert (defaults.max_file_bytes, defaults.max_session_bytes, defaults.idle_timeout) == (100 << 20, 1 << 30, 30.0)
    assert (defaults.per_session, defaults.per_pod) == (2, 16)
    with pytest.raises(ValueError, match="max_file_bytes"):
        Settings.from_env({"OPENAB_MAX_FILE_BYTES": "0"})
