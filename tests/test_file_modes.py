"""Every file and folder openab writes is its uid's alone: folders 0700, files 0600, whatever the umask.

The state dir holds the pod's key, the session naming secret, each session's working folder, the audit log
and the browser socket; an agent's MCP config (in the person's HOME) holds a session's entry. One run goes
through all of it as `openab run` does (the key made on first start, a session, its agent started with a
config-file handoff, a browser tool call, the session closed) and `openab config write` writes its entries;
then every path openab made is walked. A mode any looser would hand another local user a person's browser.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from agents.fake_model import Call, FakeModel, Script, serving
from test_runtime_pod import first_run, prompt

from openab_browser.core.agents.recipes import RECIPES, Recipe
from openab_browser.core.settings import Settings

pytestmark = pytest.mark.anyio

OPENAB = str(Path(sys.executable).parent / "openab")

@pytest.fixture
def umask(request: pytest.FixtureRequest) -> Iterator[int]:
    """The process's umask for one test (agents and `openab config write` inherit it), then the old one."""
    previous = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(previous)


@pytest.fixture
def home() -> Iterator[Path]:
    """A person's existing home: loose, as homes often are. Short: the socket path under it must fit 107 bytes."""
    root = Path(tempfile.mkdtemp(prefix="oab-"))
    home = root / "home"
    home.mkdir()
    os.chmod(home, 0o755)
    try:
        yield home
    finally:
        shutil.rmtree(root, ignore_errors=True)


def loose(root: Path, *, skip: set[Path]) -> dict[str, str]:
    """Every path under ``root`` whose mode is not private, with what it is.

    No exceptions: the bridge's socket is 0600 like a file. Only ``skip`` is left out: folders that existed
    before (a home, a project), which openab never loosens nor tightens, as they are not its own.
    """
    found: dict[str, str] = {}
    for folder, dirs, files in os.walk(root):
        for name in [*dirs, *files]:
            path = Path(folder) / name
            if path in skip:
                continue
            st = os.lstat(path)
            mode = stat.S_IMODE(st.st_mode)
            relative = str(path.relative_to(root))
            if stat.S_ISDIR(st.st_mode):
                expected = 0o700
            elif stat.S_ISREG(st.st_mode) or stat.S_ISSOCK(st.st_mode):
                expected = 0o600
            else:
                found[relative] = f"a {stat.filemode(st.st_mode)[0]!r} entry, not a file or a folder"
                continue
            if mode != expected or st.st_uid != os.geteuid():
                found[relative] = f"mode {mode:04o} (uid {st.st_uid}), expected {expected:04o}"
    return found


def made_under(root: Path, before: set[Path]) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p not in before)


def config_write(home: Path, project: Path, *args: str) -> None:
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "SESSION_TOKEN": "t0ken-" + "x" * 40}
    done = subprocess.run([OPENAB, "config", "write", "--dir", str(project), *args], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


async def run_pod_once(
    home: Path, state: Path, mode: str, recipe: Recipe, model: FakeModel, *, before: set[Path]
) -> dict[str, str]:
    """`openab run`'s start (the key made and kept), one session with a prompt, and the session closed; returns
    what was loose while the pod ran (the socket and the session's folder exist only then)."""
    settings = Settings(port=0, state_dir=state, browser_mode=mode, model_url=f"{model.url}/v1")
    base_env = {"PATH": os.environ["PATH"], "HOME": str(home)}
    async with first_run(settings, recipe=recipe, base_env=base_env) as (_pod, ext, browser, session_id):
        turn = await prompt(ext, session_id, "Open the page, please.")
        assert turn.result == {"stopReason": "end_turn"}, turn
        if recipe.browser_via == "acp":
            assert [name for name, _ in browser.calls] == ["browser_navigate"], turn.text
        running = {**loose(state, skip=before), **loose(home, skip=before)}
        await ext.request("session/close", {"sessionId": session_id})
    return running


@pytest.mark.parametrize("umask", [0o022, 0o000], indirect=True, ids=["umask 022", "umask 000"])
@pytest.mark.parametrize("mode", ["proxy", "bridge"])
async def test_every_file_and_folder_openab_writes_is_private(mode: str, umask: int, home: Path) -> None:
    state = home / ".local" / "state" / "openab"  # the default, made with its missing parents
    project = home / "project"
    project.mkdir()
    before = {home, project}
    with serving(FakeModel()) as model:
        model.set_script(Script(calls=[Call("browser_navigate", {"url": "https://example.org/private"})]))
        # The browser handed over in session/new: a tool call, so the audit log and the conversations are kept.
        running = await run_pod_once(home, state, mode, RECIPES["builtin"], model, before=before)
        # Codex-shaped config handoff: the session's entry goes into $HOME/.codex/config.toml, in a folder made
        # for it.
        model.set_script(Script(text="hello"))
        codex = dataclasses.replace(RECIPES["builtin"], browser_via="config", config_agent="codex")
        running |= await run_pod_once(home, state, mode, codex, model, before=before)
    config_write(home, project, "--agent", "gemini")
    config_write(home, project, "--agent", "vscode", "--mode", "proxy", "--url", "http://127.0.0.1:9/mcp",
                 "--token-env", "SESSION_TOKEN")
    written = made_under(home, before)
    for expected in (".local/state/openab/keys/acp.verifier", ".local/state/openab/audit.jsonl", ".codex/config.toml"):
        assert expected in written, written
    assert any(p.startswith("project/") for p in written), written
    assert running == {}, f"loose while the pod ran (umask {umask:03o}): {running}"
    after = loose(home, skip=before)
    assert after == {}, f"loose after the run (umask {umask:03o}): {after}; all written: {written}"
