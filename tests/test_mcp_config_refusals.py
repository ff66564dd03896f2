"""The MCP config writers refuse what they must not touch: links another user planted (file and folder), our own
link to another user's file, a planted backup name, a path that is not a regular file, a file they cannot parse
(backed up first), and for the file a CLI is pointed at on its command line, a link at its place and a folder others
can enter."""

from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path

import pytest
from mcp_config_harness import (
    BRIDGE,
    PROXY,
    USER_SERVERS,
    Dirs,
    dirs_fixture,  # noqa: F401 - the fixture of the writers' folders
    main_file,
    seed,
)

from openab_browser.core.agents import config as mcp_config
from openab_browser.core.agents.config import (
    AGENTS,
    SERVER_NAME,
    ConfigError,
    entry,
    strip,
    write,
)

# -- files we must not touch -----------------------------------------------------------------------


NOBODY = 65534  # a uid that is not ours: the planter of the links below


@pytest.fixture
def as_root() -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to give a file or link to another uid (lchown)")


def plant_link(link: Path, target: Path, owner: int = NOBODY) -> None:
    """A symbolic link at ``link`` to ``target``, made by (owned by) ``owner``."""
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(target)
    os.lchown(link, owner, owner)


def snapshot(path: Path) -> tuple[bytes, int, int]:
    st = path.stat()
    return path.read_bytes(), stat.S_IMODE(st.st_mode), st.st_uid


@pytest.mark.usefixtures("as_root")
def test_a_link_another_user_planted_is_not_written_through(dirs: Dirs, tmp_path: Path) -> None:
    victim = tmp_path / "victim.json"
    seed(victim, json.dumps({"mcpServers": USER_SERVERS}))
    os.chmod(victim, 0o644)
    before = snapshot(victim)
    link = main_file("cursor", dirs)
    plant_link(link, victim)

    with pytest.raises(ConfigError, match=f"owned by uid {NOBODY}") as refused:
        write("cursor", PROXY, **dirs)
    assert str(link) in str(refused.value)
    assert snapshot(victim) == before  # neither rewritten nor chmodded
    assert link.is_symlink()
    # Taking the entry out goes through the same door.
    with pytest.raises(ConfigError, match=f"owned by uid {NOBODY}"):
        strip("cursor", PROXY, **dirs)
    assert snapshot(victim) == before


@pytest.mark.usefixtures("as_root")
def test_a_planted_link_to_a_folder_is_not_written_through(dirs: Dirs, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    plant_link(dirs["dir"] / ".cursor", elsewhere)
    with pytest.raises(ConfigError, match=f"owned by uid {NOBODY}"):
        write("cursor", BRIDGE, **dirs)
    assert list(elsewhere.iterdir()) == []


@pytest.mark.usefixtures("as_root")
def test_our_own_link_to_a_file_of_another_user_is_not_written_through(dirs: Dirs, tmp_path: Path) -> None:
    victim = tmp_path / "victim.json"
    seed(victim, json.dumps({"mcpServers": USER_SERVERS}))
    os.chown(victim, NOBODY, NOBODY)
    before = snapshot(victim)
    plant_link(main_file("cursor", dirs), victim, owner=os.geteuid())
    with pytest.raises(ConfigError, match=f"belongs to uid {NOBODY}"):
        write("cursor", PROXY, **dirs)
    assert snapshot(victim) == before


@pytest.mark.usefixtures("as_root")
def test_the_runtimes_writer_refuses_a_planted_link_too(dirs: Dirs, tmp_path: Path) -> None:
    # What the agent runtime calls for an agent that reads its config file (core/agents/provision.py).
    from openab_browser.core.agents.config.claims import ConfigClaims

    victim = tmp_path / "victim.toml"
    seed(victim, "# the user's\n")
    before = snapshot(victim)
    plant_link(main_file("codex", dirs), victim)
    claims = ConfigClaims()
    with pytest.raises(ConfigError, match=f"owned by uid {NOBODY}"):
        claims.write("sess_1", "codex", BRIDGE, dirs["dir"], home=dirs["home"], env={})
    assert snapshot(victim) == before


def test_a_planted_backup_name_is_not_written_through(dirs: Dirs, tmp_path: Path) -> None:
    # The backup of an unreadable file has a predictable name: a dangling link planted there must not make the
    # backup land in the link's target.
    path = main_file("cursor", dirs)
    seed(path, "{ not json")
    now = int(time.time())
    targets = []
    for second in range(now - 1, now + 10):
        stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(second))
        target = tmp_path / f"stolen-{second}"
        (path.parent / f"{path.name}.{stamp}.bak").symlink_to(target)
        targets.append(target)

    with pytest.raises(ConfigError, match="kept a copy at") as refused:
        write("cursor", PROXY, **dirs)

    assert not any(t.exists() for t in targets)
    backup = Path(str(refused.value).split("kept a copy at ")[1].split(". ")[0])
    assert not backup.is_symlink() and backup.read_text() == "{ not json"
    assert stat.S_IMODE(backup.stat().st_mode) == 0o600


def test_a_config_path_that_is_not_a_regular_file_is_refused_at_once(dirs: Dirs) -> None:
    path = main_file("cursor", dirs)
    path.parent.mkdir(parents=True)
    os.mkfifo(path)  # reading it would wait for a writer forever
    with pytest.raises(ConfigError, match="not a regular file"):
        write("cursor", PROXY, **dirs)
    assert stat.S_ISFIFO(os.lstat(path).st_mode)



@pytest.mark.parametrize("agent", AGENTS)
def test_unparsable_file_is_backed_up_and_refused(agent: str, dirs: Dirs) -> None:
    path = main_file(agent, dirs)
    garbage = "{ this is: [not valid" if path.suffix != ".yaml" else "extensions: [oops\n"
    seed(path, garbage)

    with pytest.raises(ConfigError) as refused:
        write(agent, PROXY, **dirs)

    assert path.read_text() == garbage
    backups = list(path.parent.glob(path.name + ".*.bak"))
    assert len(backups) == 1 and backups[0].read_text() == garbage
    assert str(path) in str(refused.value) and str(backups[0]) in str(refused.value)
    assert PROXY.token not in str(refused.value)


def test_servers_key_of_the_wrong_type_is_refused(dirs: Dirs) -> None:
    path = main_file("cursor", dirs)
    seed(path, '{"mcpServers": ["not", "an", "object"]}')
    with pytest.raises(ConfigError, match="expected an object"):
        write("cursor", PROXY, **dirs)
    assert json.loads(path.read_text()) == {"mcpServers": ["not", "an", "object"]}


def test_a_refusal_writes_no_file_at_all(dirs: Dirs) -> None:
    agents_dir = dirs["dir"] / ".kiro" / "agents"
    seed(agents_dir / "good.json", json.dumps({"name": "good", "allowedTools": ["fs_read"]}))
    seed(agents_dir / "broken.json", "{")

    with pytest.raises(ConfigError, match=r"broken\.json"):
        write("kiro", PROXY, **dirs)

    assert not main_file("kiro", dirs).exists()
    assert json.loads((agents_dir / "good.json").read_text()) == {"name": "good", "allowedTools": ["fs_read"]}


# -- the file a CLI is pointed at on its command line (Copilot's --additional-mcp-config @FILE) ----------------


@pytest.fixture
def session_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "sessions" / "c1" / "work"
    folder.mkdir(parents=True, mode=0o700)
    folder.chmod(0o700)
    return folder


def test_the_flag_file_holds_our_server_alone_0600(session_dir: Path) -> None:
    path = session_dir / ".openab-browser.json"
    mcp_config.write_flag_file("copilot", PROXY, path)

    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert json.loads(path.read_text()) == {"mcpServers": {SERVER_NAME: entry("copilot", PROXY)}}
    assert mcp_config.remove_flag_file(path) and not path.exists()
    assert not mcp_config.remove_flag_file(path), "nothing left to remove"


def test_a_link_at_the_flag_files_place_is_replaced_not_written_through(session_dir: Path, tmp_path: Path) -> None:
    theirs = tmp_path / "victim.json"
    theirs.write_text("keep me")
    path = session_dir / ".openab-browser.json"
    path.symlink_to(theirs)

    mcp_config.write_flag_file("copilot", PROXY, path)

    assert theirs.read_text() == "keep me" and not path.is_symlink() and PROXY.token in path.read_text()
    path.unlink()
    path.symlink_to(theirs)
    assert mcp_config.remove_flag_file(path) and theirs.read_text() == "keep me", "the link went, not its target"


@pytest.mark.parametrize("mode", [0o755, 0o770, 0o777])
def test_the_flag_file_is_refused_in_a_folder_others_can_enter(session_dir: Path, mode: int) -> None:
    session_dir.chmod(mode)
    path = session_dir / ".openab-browser.json"

    with pytest.raises(ConfigError, match="chmod 700"):
        mcp_config.write_flag_file("copilot", PROXY, path)
    assert not path.exists() and list(session_dir.iterdir()) == []


def test_the_flag_file_is_refused_through_a_linked_folder(session_dir: Path, tmp_path: Path) -> None:
    linked = tmp_path / "linked"
    linked.symlink_to(session_dir)

    with pytest.raises(ConfigError):
        mcp_config.write_flag_file("copilot", PROXY, linked / ".openab-browser.json")
    assert list(session_dir.iterdir()) == []
