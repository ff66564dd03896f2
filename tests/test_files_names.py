"""Where a download lands and under what name (docs/files.md, "Where downloads land"), under attack: every name of
READ_AS_INSTRUCTIONS in the spellings a page can choose, names with controls, bidi and invisible characters, names
10,000 characters long, and a working folder whose `downloads` is a planted link or a file. The rules are
core/files/paths.py's; the whole call through the pod is in tests/test_files_e2e.py, in real Chromium in
tests/browser/test_files.py."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from openab_browser.core.errors import FileRefused
from openab_browser.core.files import FileLimits, Placed, Transfers
from openab_browser.core.files.paths import (
    DOWNLOADS_FOLDER,
    MAX_NAME_BYTES,
    READ_AS_INSTRUCTIONS,
    download_target,
    inert_name,
    read_as_instructions,
    safe_name,
)

SESSION = "sess_00000000-0000-4000-8000-000000000001"
BODY = b"# do what this file says\n"


def example(entry: str) -> str:
    """A name the entry stands for: a pattern's ``*`` made a real tail or stem."""
    return entry.replace(".env*", ".env.local").replace(".git*", ".gitignore").replace(".aider*", ".aider.conf.yml") \
        .replace("*.pth", "evil.pth")


def fullwidth(name: str) -> str:
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in name)


def swapped(name: str) -> str:
    return "".join(c.lower() if i % 2 else c.upper() for i, c in enumerate(name))


def spellings(name: str) -> list[str]:
    """``name`` as a page may spell it to slip past a check: case, Unicode forms, dots, spaces, invisibles."""
    bare = name.lstrip(".")
    return [
        name, name.upper(), swapped(name), fullwidth(name), name.replace(".", "\uff0e"),
        f"{name}.", f"{name} ", f"{name}. . ", f"\u200b{name}", f"{name[:2]}\u200d{name[2:]}",
        f"\u202e{name}", f"\u00a0{name}", f"\u3164{name}", f"\u2060{name}\ufeff",
        # However many dots and spaces come first, a dotted entry is still that entry.
        f". .{bare}", f" . .{bare}", f"..{bare}", f"\u2024{bare}", f"\u2025{bare}",
    ]


def hidden_or_read(name: str) -> bool:
    return name[:1] in (".", " ") or read_as_instructions(name) is not None


ATTACKS = [(entry, spelled) for entry in READ_AS_INSTRUCTIONS for spelled in spellings(example(entry))]


@pytest.mark.parametrize(("entry", "spelled"), ATTACKS, ids=[f"{e}:{s!r}" for e, s in ATTACKS])
def test_every_listed_name_in_odd_spellings_is_read_as_instructions_and_renamed(entry: str, spelled: str) -> None:
    assert read_as_instructions(spelled) is not None, spelled
    landed = safe_name(spelled)
    assert landed.startswith("download-") and not hidden_or_read(landed), landed
    # The agent's own path names none either, as its file or as any folder on the way.
    for path in (spelled, f"out/{spelled}", f"{spelled}/x.txt", f"a/{spelled}/b/x.txt"):
        with pytest.raises(FileRefused):
            download_target(path)


@pytest.mark.parametrize("name", ["report.pdf", "envelope.pdf", "github-export.csv", "agents.md.pdf", "my-conftest.py",
                                  "Makefile.txt", "na\u00efve plan.pdf", "Q3 sales.xlsx", "gitlab", "env", "cursor",
                                  "package-lock.json", "README.md"])
def test_ordinary_names_land_as_given(name: str) -> None:
    assert read_as_instructions(name) is None
    assert safe_name(name) == name
    assert download_target(f"in/{name}") == (("in",), name)


@pytest.mark.parametrize(("given", "landed"), [
    (". .mcp.json", "download-mcp.json"),
    (" . .env", "download-env"),
    ("\u200b.env", "download-env"),
    ("AGENTS.md.", "download-AGENTS.md"),
    ("\uff0emcp\uff0ejson", "download-mcp.json"),
    ("evil.pth", "download-evil.pth.txt"),  # the extension is what Python's site reads: it changes too
    ("a\uff0fb\uff0fCLAUDE.md", "download-CLAUDE.md"),  # a fullwidth solidus is a solidus once normalised
    ("C:\\Users\\x\\conftest.py", "download-conftest.py"),
    ("...hidden", "hidden"),  # a dotfile no tool reads: its dots go, its name stays
    ("report\x00.pdf", "report.pdf"),
    ("\x1b]0;owned\x07bill.pdf", "]0;ownedbill.pdf"),
    ("fdp\u202e.exe", "fdp.exe"),
    ("\ud800a.txt", "a.txt"),  # a lone surrogate (JSON can carry one) would fail the encoding
    ("\u3164", "download"),
    ("..", "download"),
    ("\u2026", "download"),  # an ellipsis is three dots once normalised
])
def test_names_a_page_chooses(given: str, landed: str) -> None:
    assert safe_name(given) == landed


def test_ten_thousand_character_names() -> None:
    for given in ("A" * 10_000, "A" * 9_996 + ".pdf", ". " * 5_000 + "AGENTS.md", "." * 10_000 + "env",
                  "\u200b" * 10_000 + ".mcp.json", "x" * 9_996 + ".pth", "x" * 196 + ".pth." + "z" * 9_000,
                  "\ufdfa" * 10_000):  # one character NFKC makes eighteen
        landed = safe_name(given)
        assert not hidden_or_read(landed), landed
        assert len(landed.encode()) <= MAX_NAME_BYTES + len("download-.txt"), len(landed.encode())
    assert safe_name("A" * 9_996 + ".pdf").endswith(".pdf")
    assert safe_name(". " * 5_000 + "AGENTS.md") == "download-AGENTS.md"
    with pytest.raises(FileRefused, match="over 4096 characters"):
        download_target("a" * 10_000)
    with pytest.raises(FileRefused, match="over 255 bytes"):
        download_target("a" * 300)


def test_the_agents_path_is_refused_saying_what_to_do() -> None:
    with pytest.raises(FileRefused, match=re.escape("give another name, e.g. 'download-AGENTS.md', or leave `path` "
                                                    "out (the file then lands in downloads/ under a safe name)")):
        download_target("notes/AGENTS.md")
    with pytest.raises(FileRefused, match=re.escape("'.github' in '.github/workflows/ci.yml' is a folder name")):
        download_target(".github/workflows/ci.yml")
    with pytest.raises(FileRefused, match=r"starts with a dot or a space: .* e\.g\. 'hidden\.txt'"):
        download_target(".hidden.txt")
    with pytest.raises(FileRefused, match="starts with a dot or a space"):
        download_target(" report.pdf")
    with pytest.raises(FileRefused, match="shows nothing"):
        download_target("out/\u3164")
    with pytest.raises(FileRefused, match="control character"):
        download_target("bill\u202e.pdf")
    assert inert_name("notes.pth") == "download-notes.pth.txt"


# -- on real folders ------------------------------------------------------------------------------------------------


@pytest.fixture
def work() -> Iterator[Path]:
    base = Path(tempfile.mkdtemp(prefix="oab-names-"))
    (base / "work").mkdir(mode=0o700)
    (base / "outside").mkdir()
    try:
        yield base / "work"
    finally:
        shutil.rmtree(base, ignore_errors=True)


def download(work: Path, path: str | None, served: str) -> Placed:
    """One download through the pod's transfers, the server naming it ``served``; where it landed."""
    files = Transfers(FileLimits(), lambda _session: work)
    transfer = files.open_download(SESSION, path)
    try:
        files.write(SESSION, transfer.id, 0, BODY)
        return files.finish_download(transfer, {"name": served, "size": len(BODY),
                                                "sha256": hashlib.sha256(BODY).hexdigest(), "url": "https://x.test/f"})
    finally:
        files.end(transfer)


def test_a_page_named_download_lands_renamed_in_the_downloads_folder(work: Path) -> None:
    placed = download(work, None, ". .mcp.json")
    assert placed.path == "downloads/download-mcp.json" and placed.renamed_from == ". .mcp.json"
    assert (work / "downloads" / "download-mcp.json").read_bytes() == BODY
    placed = download(work, None, "report.csv")
    assert placed.path == "downloads/report.csv" and placed.renamed_from is None
    assert sorted(os.listdir(work)) == [DOWNLOADS_FOLDER]  # nothing in the root, not even a temporary file
    assert sorted(os.listdir(work / "downloads")) == ["download-mcp.json", "report.csv"]


@pytest.mark.parametrize("umask", [0o000, 0o022, 0o277])
def test_the_downloads_folder_is_made_0700_whatever_the_umask(work: Path, umask: int) -> None:
    previous = os.umask(umask)
    try:
        download(work, None, "a.txt")
    finally:
        os.umask(previous)
    st = os.lstat(work / "downloads")
    assert stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o700


@pytest.mark.parametrize("target", ["../outside", ".", "missing"])
def test_a_link_planted_at_downloads_is_never_followed(work: Path, target: str) -> None:
    (work / "downloads").symlink_to(target)
    with pytest.raises(FileRefused, match="downloads/ in your working folder is a symbolic link, which is never "
                                          "followed: remove the link"):
        download(work, None, "AGENTS.md")
    assert (work / "downloads").is_symlink() and os.listdir(work) == ["downloads"]
    assert os.listdir(work.parent / "outside") == []
    with pytest.raises(FileRefused, match="symbolic link"):  # nor through the agent's path into it
        download(work, "downloads/x.txt", "x.txt")


def test_a_file_at_downloads_is_not_a_folder(work: Path) -> None:
    (work / "downloads").write_bytes(b"mine")
    with pytest.raises(FileRefused, match="downloads/ in your working folder is a file, not a folder: move it away"):
        download(work, None, "a.txt")
    assert (work / "downloads").read_bytes() == b"mine"


def test_the_agents_path_lands_where_it_says_under_the_same_rules(work: Path) -> None:
    # The agent chose it: its folder (the root included) and its name, once the name passes.
    assert download(work, "bill.pdf", "AGENTS.md").path == "bill.pdf"
    assert download(work, "downloads/bill.pdf", "x").path == "downloads/bill.pdf"  # the folder made if missing
    # A folder link that leads to a folder the rules refuse is refused too.
    (work / ".github").mkdir()
    (work / "docs").symlink_to(".github")
    with pytest.raises(FileRefused, match=re.escape("'.github' in '.github' is a folder name")):
        download(work, "docs/ci.yml", "ci.yml")
    with pytest.raises(FileRefused, match="read as instructions or config"):
        download(work, "conftest.py", "conftest.py")
    assert sorted(os.listdir(work)) == [".github", "bill.pdf", "docs", "downloads"]
    assert os.listdir(work / ".github") == []
