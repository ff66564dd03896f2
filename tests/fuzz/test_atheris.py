"""The coverage-guided side of the fuzz runs: each ``atheris_<surface>.py`` harness, in its own process (libFuzzer
owns it), from seed messages and a dictionary of the surface's words. It must exit 0 (a crash or a broken
oracle exits otherwise, with the input written beside the corpus) after the runs asked for."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from .seeds import ACP, ACP_WORDS, MCP, MCP_WORDS, write_corpus
from .sizes import inputs

HERE = Path(__file__).resolve().parent
DONE = re.compile(rb"Done (\d+) runs in (\d+) second")
# harness -> its seeds, its words, and what follows each seed (the HTTP harness reads its choices from the end).
HARNESSES = {
    "jsonrpc": (ACP + MCP, ACP_WORDS + MCP_WORDS, b""),
    "acp": (ACP, ACP_WORDS, b""),
    "http": (MCP, MCP_WORDS, bytes(22)),
    "bridge": (MCP, MCP_WORDS, b""),
}


def fuzz(harness: str, runs: int, max_seconds: int, folder: Path) -> int:
    """Run one harness; the number of inputs it tried."""
    messages, words, suffix = HARNESSES[harness]
    corpus, dictionary = write_corpus(folder, messages, words, suffix=suffix)
    command = [sys.executable, str(HERE / f"atheris_{harness}.py"), f"-runs={runs}", f"-max_total_time={max_seconds}",
               f"-dict={dictionary}", f"-artifact_prefix={folder}/", "-print_final_stats=1", str(corpus)]
    done = subprocess.run(command, capture_output=True, timeout=max_seconds + 120, cwd=folder,
                          env={"PATH": "/usr/bin:/bin", "OPENAB_FUZZ_DIR": str(folder)})
    tail = done.stderr[-4000:].decode(errors="replace")
    (folder / "stderr.log").write_bytes(done.stderr)
    assert done.returncode == 0, f"atheris_{harness}.py exited {done.returncode}:\n{tail}"
    found = DONE.search(done.stderr)
    assert found is not None, tail
    tried = int(found.group(1))
    print(f"{harness}/atheris: tried={tried} crashes=0 hangs=0 in {int(found.group(2))} s")
    return tried


@pytest.mark.parametrize("harness", sorted(HARNESSES))
def test_atheris_finds_nothing(harness: str, tmp_path: Path) -> None:
    runs = inputs(20_000)
    assert fuzz(harness, runs, 60, tmp_path) == runs


@pytest.mark.long
@pytest.mark.timeout(7200)
@pytest.mark.parametrize("harness", sorted(HARNESSES))
def test_atheris_finds_nothing_in_100k_runs(harness: str, tmp_path: Path) -> None:
    runs = inputs(100_000)
    assert fuzz(harness, runs, 3600, tmp_path) == runs
