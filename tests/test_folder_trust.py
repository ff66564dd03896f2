"""Folder trust for Claude and Gemini, which load a project's MCP servers only in a folder the person trusts:
`openab config write` says whether the CLI trusts the folder and what to run; with --trust-folder it records that
trust for the one folder in the CLI's own file, keeping the rest, 0600, and refuses what it must not touch (a link
another user planted, a file it cannot read, a shape the CLI never wrote) before it writes anything. What the
real CLIs make of the records is tests/agents/test_mcp_config_clis.py's business; these pin the files."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest
from mcp_config_harness import Dirs, dirs_fixture  # noqa: F401 - the fixture of the writers' folders
from test_mcp_config_refusals import NOBODY, as_root, plant_link, snapshot  # noqa: F401 - as_root: a fixture

from openab_browser.core.agents.config import ConfigError, config_write, folder_trust, trust_folder
from openab_browser.core.agents.config.files import MAX_FILE_BYTES

TRUSTING = ["claude", "gemini"]


def record_file(agent: str, dirs: Dirs) -> Path:
    return dirs["home"] / (".claude.json" if agent == "claude" else ".gemini/trustedFolders.json")


def users_record(agent: str) -> dict[str, Any]:
    """What the CLI itself keeps in its record file: all of it must survive our write."""
    if agent == "claude":
        return {"userID": "u-1", "numStartups": 7, "oauthAccount": {"emailAddress": "a@example.org"},
                "projects": {"/elsewhere": {"hasTrustDialogAccepted": True, "allowedTools": ["Bash(ls)"]}}}
    return {"/elsewhere": "TRUST_FOLDER", "/untrusted": "DO_NOT_TRUST"}


def trusted_in(agent: str, doc: dict[str, Any], folder: Path) -> bool:
    if agent == "claude":
        return bool(doc["projects"][str(folder)]["hasTrustDialogAccepted"])
    return bool(doc[str(folder)] == "TRUST_FOLDER")


@pytest.mark.parametrize("agent", TRUSTING)
def test_without_the_flag_the_output_says_what_to_run_and_nothing_is_trusted(agent: str, dirs: Dirs) -> None:
    done = config_write(agent, **dirs)
    project = dirs["dir"].resolve()
    assert f"{agent} does not trust {project} yet" in done.text
    assert {"claude": '"Pending approval"', "gemini": '"Disabled"'}[agent] in done.text
    assert f"run `{agent}` in {project} once" in done.text
    assert f"openab config write --agent {agent} --dir {project} --trust-folder" in done.text
    assert not record_file(agent, dirs).exists()


@pytest.mark.parametrize("agent", TRUSTING)
def test_the_flag_records_the_one_folder_and_keeps_the_rest_of_the_file(agent: str, dirs: Dirs) -> None:
    record = record_file(agent, dirs)
    record.parent.mkdir(parents=True, exist_ok=True)
    record.write_text(json.dumps(users_record(agent)))
    os.chmod(record, 0o644)

    done = config_write(agent, trust_folder=True, **dirs)
    project = dirs["dir"].resolve()
    doc = json.loads(record.read_text())
    assert trusted_in(agent, doc, project)
    for key, value in users_record(agent).items():
        if key != "projects":
            assert doc[key] == value
    if agent == "claude":
        assert doc["projects"]["/elsewhere"] == users_record("claude")["projects"]["/elsewhere"]
    assert stat.S_IMODE(record.stat().st_mode) == 0o600
    assert f"recorded in {record} that you trust {project}" in done.text
    assert record in done.paths
    trust = folder_trust(agent, project, home=dirs["home"])
    assert trust is not None and trust.trusted
    # Once trusted, a second write says so and does not touch the record again.
    assert f"{agent} already trusts {project}" in config_write(agent, **dirs).text


@pytest.mark.parametrize("agent", TRUSTING)
def test_folders_the_record_needs_are_made_0700(agent: str, dirs: Dirs, tmp_path: Path) -> None:
    moved = tmp_path / "moved" / "config"
    env = {"CLAUDE_CONFIG_DIR": str(moved)} if agent == "claude" else {"GEMINI_CLI_HOME": str(moved)}
    written = trust_folder(agent, dirs["dir"], home=dirs["home"], env=env)
    assert written == (moved / ".claude.json" if agent == "claude" else moved / ".gemini" / "trustedFolders.json")
    assert stat.S_IMODE(written.stat().st_mode) == 0o600
    for folder in {moved, written.parent}:
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700


def test_claude_trust_counts_up_to_the_git_root_and_no_further(dirs: Dirs, tmp_path: Path) -> None:
    # As `claude mcp list` 2.1 reads it (tests/agents/test_mcp_config_clis.py runs it on the same records).
    repo = tmp_path / "outside" / "repo"
    sub = repo / "sub"
    sub.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    home = dirs["home"]

    def trusted(*folders: Path) -> bool:
        home.mkdir(exist_ok=True)
        (home / ".claude.json").write_text(json.dumps(
            {"projects": {str(f): {"hasTrustDialogAccepted": True} for f in folders}}))
        trust = folder_trust("claude", sub, home=home)
        return trust is not None and trust.trusted

    assert trusted(sub) and trusted(repo)
    assert not trusted(tmp_path / "outside")
    (repo / ".git").rename(repo / "not-git")
    assert not trusted(repo)  # outside a repository, a trusted parent does not count


def test_gemini_takes_the_longest_rule_and_its_own_switches(dirs: Dirs, tmp_path: Path) -> None:
    project = tmp_path / "a" / "b"
    project.mkdir(parents=True)
    home = dirs["home"]
    (home / ".gemini").mkdir(parents=True)

    def trusted(rules: dict[str, str], **env: str) -> bool:
        (home / ".gemini" / "trustedFolders.json").write_text(json.dumps(rules))
        trust = folder_trust("gemini", project, home=home, env=env)
        return trust is not None and trust.trusted

    assert trusted({str(tmp_path / "a"): "TRUST_FOLDER"})
    assert not trusted({str(tmp_path / "a"): "TRUST_FOLDER", str(project): "DO_NOT_TRUST"})
    assert trusted({str(project / "child"): "TRUST_PARENT"})
    assert not trusted({str(tmp_path / "x"): "TRUST_FOLDER"})
    assert trusted({}, GEMINI_CLI_TRUST_WORKSPACE="true")
    assert not trusted({str(project): "TRUST_FOLDER"}, GEMINI_CLI_TRUST_WORKSPACE="false")
    (home / ".gemini" / "settings.json").write_text(json.dumps({"security": {"folderTrust": {"enabled": False}}}))
    assert trusted({})


# -- what --trust-folder refuses, before anything is written ---------------------------------------------------


@pytest.mark.parametrize("agent", TRUSTING)
def test_home_root_and_agents_without_folder_trust_are_refused(agent: str, dirs: Dirs) -> None:
    for folder in (dirs["home"], Path("/")):
        folder.mkdir(parents=True, exist_ok=True)
        with pytest.raises(ConfigError, match="would trust every project under it"):
            config_write(agent, trust_folder=True, dir=folder, home=dirs["home"])
    with pytest.raises(ConfigError, match="--trust-folder is for claude and gemini"):
        config_write("codex", trust_folder=True, **dirs)
    assert list(dirs["home"].iterdir()) == []
    assert not dirs["dir"].exists()


@pytest.mark.usefixtures("as_root")
@pytest.mark.parametrize("agent", TRUSTING)
def test_a_link_another_user_planted_at_the_record_is_not_followed(agent: str, dirs: Dirs, tmp_path: Path) -> None:
    victim = tmp_path / "victim.json"
    victim.write_text(json.dumps({"keep": "me"}))
    before = snapshot(victim)
    plant_link(record_file(agent, dirs), victim)

    with pytest.raises(ConfigError, match=f"owned by uid {NOBODY}"):
        config_write(agent, trust_folder=True, **dirs)
    assert snapshot(victim) == before
    assert record_file(agent, dirs).is_symlink()
    assert not dirs["dir"].exists()  # refused before the entry was written


@pytest.mark.parametrize("agent", TRUSTING)
@pytest.mark.parametrize(("text", "says"), [
    ("{not json", "could not be read as JSON"),
    ("[1, 2]", "the top level is not an object"),
])
def test_a_record_it_cannot_read_is_refused_and_kept(agent: str, text: str, says: str, dirs: Dirs) -> None:
    record = record_file(agent, dirs)
    record.parent.mkdir(parents=True, exist_ok=True)
    record.write_text(text)

    with pytest.raises(ConfigError, match=says):
        config_write(agent, trust_folder=True, **dirs)
    assert record.read_text() == text
    assert not dirs["dir"].exists()


def test_a_claude_record_of_another_shape_is_left_alone(dirs: Dirs) -> None:
    record = record_file("claude", dirs)
    record.parent.mkdir(parents=True)
    for doc in ({"projects": ["a list"]}, {"projects": {str(dirs["dir"].absolute()): "yes"}}):
        record.write_text(json.dumps(doc))
        dirs["dir"].mkdir(exist_ok=True)
        with pytest.raises(ConfigError, match="accept its trust dialog instead"):
            config_write("claude", trust_folder=True, **dirs)
        assert json.loads(record.read_text()) == doc


@pytest.mark.parametrize("agent", TRUSTING)
def test_a_huge_record_is_refused_with_its_size_not_read_whole(agent: str, dirs: Dirs) -> None:
    record = record_file(agent, dirs)
    record.parent.mkdir(parents=True, exist_ok=True)
    with record.open("wb") as f:
        f.truncate(MAX_FILE_BYTES + 4096)  # sparse: no disk taken

    with pytest.raises(ConfigError, match=r"is 64 MiB, more than the 64 MiB openab reads"):
        config_write(agent, trust_folder=True, **dirs)
    assert record.stat().st_size == MAX_FILE_BYTES + 4096
    trust = folder_trust(agent, dirs["dir"], home=dirs["home"])
    assert trust is not None and not trust.trusted
