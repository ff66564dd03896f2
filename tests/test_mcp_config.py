"""The MCP config writers: each agent CLI's file is written, merged, guarded and stripped as a user needs. What a
writer refuses to touch (links others planted, files it cannot parse, the flag file's folder) is
tests/test_mcp_config_refusals.py."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest
from mcp_config_harness import (
    BRIDGE,
    ENDPOINTS,
    PROXY,
    USER_SERVERS,
    Dirs,
    dirs_fixture,  # noqa: F401 - the fixture of the writers' folders
    main_file,
    read,
    seed,
    servers,
)

from openab_browser.core.agents import config as mcp_config
from openab_browser.core.agents.config import (
    AGENTS,
    SERVER_NAME,
    ConfigError,
    HttpEndpoint,
    StdioCommand,
    config_files,
    config_write,
    entry,
    strip,
    write,
)

# -- every writer ----------------------------------------------------------------------------------


@pytest.mark.parametrize("endpoint", ENDPOINTS)
@pytest.mark.parametrize("agent", AGENTS)
def test_written_file_parses_back_to_our_entry_with_mode_0600(
    agent: str, endpoint: HttpEndpoint | StdioCommand, dirs: Dirs
) -> None:
    paths = write(agent, endpoint, **dirs)

    assert paths and paths[0] == main_file(agent, dirs)
    assert servers(agent, dirs)[SERVER_NAME] == entry(agent, endpoint)
    for path in paths:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    leftovers = [p for p in paths[0].parent.iterdir() if p.name.endswith(".tmp")]
    assert leftovers == []


@pytest.mark.parametrize("agent", AGENTS)
def test_proxy_entry_carries_the_url_and_bearer_token(agent: str) -> None:
    text = json.dumps(entry(agent, PROXY))
    assert PROXY.url in text and f"Bearer {PROXY.token}" in text


@pytest.mark.parametrize("agent", AGENTS)
def test_bridge_entry_runs_openab_browser_bridge(agent: str) -> None:
    e = entry(agent, BRIDGE)
    argv = e["command"] if isinstance(e.get("command"), list) else [e.get("command", e.get("cmd")), *e["args"]]
    assert argv == ["openab", "browser-bridge"]


@pytest.mark.parametrize(
    ("agent", "shape"),
    [
        ("claude", {"type": "http"}),
        ("gemini", {"httpUrl": PROXY.url}),
        ("windsurf", {"serverUrl": PROXY.url}),
        ("opencode", {"type": "remote", "oauth": False}),
        ("codex", {"http_headers": {"Authorization": f"Bearer {PROXY.token}"}}),
        ("copilot", {"tools": ["*"]}),
        ("goose", {"type": "streamable_http", "uri": PROXY.url}),
        ("qwen", {"httpUrl": PROXY.url}),
        ("auggie", {"type": "http", "url": PROXY.url}),
    ],
)
def test_each_cli_gets_the_keys_it_needs_to_connect(agent: str, shape: dict[str, Any]) -> None:
    assert entry(agent, PROXY).items() >= shape.items()


# -- merging into the user's file -------------------------------------------------------------------


@pytest.mark.parametrize("agent", [a for a in AGENTS if a not in ("codex", "goose")])
def test_merge_keeps_the_users_servers_and_keys(agent: str, dirs: Dirs) -> None:
    spec = config_files(agent, **dirs)[0]
    seed(spec.path, json.dumps({"theme": "dark", spec.servers_key: USER_SERVERS}))

    write(agent, PROXY, **dirs)

    doc = read(spec.path)
    assert doc["theme"] == "dark"
    assert doc[spec.servers_key]["playwright"] == USER_SERVERS["playwright"]
    assert doc[spec.servers_key][SERVER_NAME] == entry(agent, PROXY)


def test_codex_merge_keeps_comments_and_other_tables(dirs: Dirs) -> None:
    path = main_file("codex", dirs)
    seed(path, '# my settings\nmodel = "o3"  # the good one\n\n[mcp_servers.docs]\ncommand = "docs-mcp"\n')

    write("codex", PROXY, **dirs)

    text = path.read_text()
    assert text.startswith('# my settings\nmodel = "o3"  # the good one\n')
    assert "[mcp_servers.openab_browser]" in text and "\n[mcp_servers]\n" not in text
    doc = tomllib.loads(text)
    assert doc["mcp_servers"]["docs"] == {"command": "docs-mcp"}
    assert doc["mcp_servers"][SERVER_NAME]["url"] == PROXY.url


def test_goose_merge_keeps_the_rest_of_config_yaml(dirs: Dirs) -> None:
    path = main_file("goose", dirs)
    original = (
        "GOOSE_PROVIDER: openai\nextensions:\n  # builtins\n  developer:\n    enabled: true\n    type: builtin\n"
        "GOOSE_MODE: smart_approve\n"
    )
    seed(path, original)

    write("goose", BRIDGE, **dirs)
    text = path.read_text()
    assert text.startswith("GOOSE_PROVIDER: openai\nextensions:\n  # builtins\n  developer:\n    enabled: true\n")
    assert text.endswith("GOOSE_MODE: smart_approve\n")
    assert "  openab_browser:\n    type: \"stdio\"\n" in text

    assert strip("goose", BRIDGE, **dirs) == [path]
    assert path.read_text() == original


def test_goose_values_that_only_look_like_numbers_do_not_break_a_write(dirs: Dirs) -> None:
    # Our own entry, hand-edited: "²" and "-٣" are digits to str.isdigit() and not to int(), and read as numbers
    # they failed the whole write with a ValueError.
    path = main_file("goose", dirs)
    seed(path, "extensions:\n  openab_browser:\n    type: stdio\n    timeout: ²\n    retries: -٣\n")
    write("goose", BRIDGE, **dirs)
    text = path.read_text()
    assert "  openab_browser:\n    type: \"stdio\"\n" in text
    assert strip("goose", BRIDGE, **dirs) == [path]


def test_goose_flow_style_extensions_is_refused(dirs: Dirs) -> None:
    path = main_file("goose", dirs)
    seed(path, "extensions: {developer: {enabled: true}}\n")
    with pytest.raises(ConfigError, match="block mapping"):
        write("goose", BRIDGE, **dirs)
    assert path.read_text() == "extensions: {developer: {enabled: true}}\n"


def test_rewrite_keeps_settings_the_user_put_on_our_entry(dirs: Dirs) -> None:
    write("kiro", PROXY, **dirs)
    path = main_file("kiro", dirs)
    doc = read(path)
    doc["mcpServers"][SERVER_NAME]["autoApprove"] = ["browser_read_dom"]
    doc["mcpServers"][SERVER_NAME]["disabled"] = True
    path.write_text(json.dumps(doc))

    write("kiro", HttpEndpoint("http://127.0.0.1:5000/mcp", "next-session"), **dirs)

    ours = servers("kiro", dirs)[SERVER_NAME]
    assert ours["url"] == "http://127.0.0.1:5000/mcp"
    assert ours["autoApprove"] == ["browser_read_dom"] and ours["disabled"] is True


def test_switching_proxy_to_bridge_leaves_no_http_field(dirs: Dirs) -> None:
    # Codex refuses an entry that mixes stdio and HTTP fields.
    write("codex", PROXY, **dirs)
    write("codex", BRIDGE, **dirs)
    assert set(servers("codex", dirs)[SERVER_NAME]) == {"command", "args", "startup_timeout_sec", "tool_timeout_sec"}


def test_write_goes_through_a_symlinked_config(dirs: Dirs, tmp_path: Path) -> None:
    real = tmp_path / "dotfiles" / "mcp.json"
    seed(real, json.dumps({"mcpServers": USER_SERVERS}))
    link = main_file("cursor", dirs)
    link.parent.mkdir(parents=True)
    link.symlink_to(real)  # the user's own link (a dotfile manager's)

    assert write("cursor", PROXY, **dirs) == [real]  # the file really written

    assert link.is_symlink()
    assert set(json.loads(real.read_text())["mcpServers"]) == {"playwright", SERVER_NAME}
    assert stat.S_IMODE(real.stat().st_mode) == 0o600
    assert str(real) in config_write("cursor", mode="bridge", **dirs).text


# -- strip on evict --------------------------------------------------------------------------------


@pytest.mark.parametrize("endpoint", ENDPOINTS)
@pytest.mark.parametrize("agent", AGENTS)
def test_strip_removes_our_entry_and_keeps_the_users(
    agent: str, endpoint: HttpEndpoint | StdioCommand, dirs: Dirs
) -> None:
    spec = config_files(agent, **dirs)[0]
    if spec.format == "json":
        seed(spec.path, json.dumps({spec.servers_key: USER_SERVERS}))
    write(agent, endpoint, **dirs)

    changed = strip(agent, endpoint, **dirs)

    assert spec.path in changed
    left = servers(agent, dirs)
    assert SERVER_NAME not in left
    if spec.format == "json":
        assert left == USER_SERVERS
    assert stat.S_IMODE(spec.path.stat().st_mode) == 0o600


@pytest.mark.parametrize("agent", AGENTS)
def test_strip_leaves_an_entry_another_session_has_since_written(agent: str, dirs: Dirs) -> None:
    other = HttpEndpoint("http://127.0.0.1:49999/mcp", "other-session")
    write(agent, PROXY, **dirs)
    write(agent, other, **dirs)  # a second session took over the shared file

    assert strip(agent, PROXY, **dirs) == []
    assert servers(agent, dirs)[SERVER_NAME] == entry(agent, other)


def test_strip_leaves_a_users_own_server_of_the_same_name(dirs: Dirs) -> None:
    path = main_file("cursor", dirs)
    theirs = {"command": "my-own-browser-mcp", "args": []}
    seed(path, json.dumps({"mcpServers": {SERVER_NAME: theirs}}))
    assert strip("cursor", BRIDGE, **dirs) == []
    assert json.loads(path.read_text())["mcpServers"][SERVER_NAME] == theirs


def test_strip_without_a_file_does_nothing(dirs: Dirs) -> None:
    assert strip("gemini", PROXY, **dirs) == []
    assert not main_file("gemini", dirs).exists()


# -- the files that must also name our server -----------------------------------------------------


def test_kiro_agent_files_get_the_server_and_the_grant_and_lose_them_on_strip(dirs: Dirs) -> None:
    agents_dir = dirs["dir"] / ".kiro" / "agents"
    seed(agents_dir / "dev.json", json.dumps({"name": "dev", "allowedTools": ["fs_read"], "mcpServers": {}}))
    seed(agents_dir / "._dev.json", "\x00\x05binary resource fork")

    paths = write("kiro", PROXY, **dirs)

    assert agents_dir / "._dev.json" not in paths
    dev = json.loads((agents_dir / "dev.json").read_text())
    assert dev["allowedTools"] == ["fs_read", "@openab_browser"]
    assert dev["mcpServers"][SERVER_NAME] == entry("kiro", PROXY)
    write("kiro", PROXY, **dirs)
    assert json.loads((agents_dir / "dev.json").read_text())["allowedTools"].count("@openab_browser") == 1

    strip("kiro", PROXY, **dirs)
    assert json.loads((agents_dir / "dev.json").read_text()) == {"name": "dev", "allowedTools": ["fs_read"],
                                                                  "mcpServers": {}}


def test_claude_project_server_is_approved_and_unapproved(dirs: Dirs) -> None:
    local = dirs["dir"] / ".claude" / "settings.local.json"
    seed(local, json.dumps({"permissions": {"allow": ["Bash(ls)"]}, "enabledMcpjsonServers": ["docs"]}))

    write("claude", BRIDGE, **dirs)
    assert json.loads(local.read_text())["enabledMcpjsonServers"] == ["docs", SERVER_NAME]

    strip("claude", BRIDGE, **dirs)
    assert json.loads(local.read_text()) == {"permissions": {"allow": ["Bash(ls)"]}, "enabledMcpjsonServers": ["docs"]}


# -- secrets ---------------------------------------------------------------------------------------


def test_token_env_keeps_the_token_out_of_the_file(dirs: Dirs) -> None:
    endpoint = HttpEndpoint(PROXY.url, PROXY.token, token_env="OPENAB_BROWSER_TOKEN")
    for agent in ("codex", "claude", "cursor", "opencode"):
        write(agent, endpoint, **dirs)
        assert PROXY.token not in main_file(agent, dirs).read_text()
    assert servers("codex", dirs)[SERVER_NAME]["bearer_token_env_var"] == "OPENAB_BROWSER_TOKEN"
    assert servers("claude", dirs)[SERVER_NAME]["headers"] == {"Authorization": "Bearer ${OPENAB_BROWSER_TOKEN}"}


def test_the_token_is_not_in_the_endpoints_repr() -> None:
    assert PROXY.token not in repr(PROXY)


# -- the `openab config write` entry point ----------------------------------------------------------


def test_config_write_bridge_reports_the_files_and_how_to_check(dirs: Dirs) -> None:
    done = config_write("codex-acp", mode="bridge", **dirs)
    assert done.paths == [main_file("codex", dirs)]
    assert str(done.paths[0]) in done.text and "codex mcp list" in done.text
    assert servers("codex", dirs)[SERVER_NAME]["command"] == "openab"


def test_config_write_proxy_never_prints_the_token(dirs: Dirs) -> None:
    done = config_write("gemini", mode="proxy", url=PROXY.url, token=PROXY.token, **dirs)
    assert PROXY.url in done.text and PROXY.token not in done.text
    assert servers("gemini", dirs)[SERVER_NAME]["headers"]["Authorization"] == f"Bearer {PROXY.token}"


def test_config_write_proxy_without_a_session_says_what_to_do(dirs: Dirs) -> None:
    with pytest.raises(ConfigError, match="--mode bridge"):
        config_write("cursor", mode="proxy", **dirs)


def test_unknown_agent_lists_the_known_ones() -> None:
    with pytest.raises(ConfigError, match="choose one of auggie, claude, codex"):
        config_write("notepad")


@pytest.mark.parametrize(
    ("agent", "where", "check"),
    [
        # Qwen Code's user file: a project's servers wait for the person's approval there (docs/agents.md).
        ("qwen-code", Path("home/.qwen/settings.json"), "qwen mcp list"),
        ("auggie", Path("project/.augment/settings.json"), "auggie mcp list"),
    ],
)
def test_config_write_knows_qwen_code_and_auggie(agent: str, where: Path, check: str, dirs: Dirs,
                                                  tmp_path: Path) -> None:
    done = config_write(agent, mode="proxy", url=PROXY.url, token=PROXY.token, **dirs)
    assert done.paths == [tmp_path / where] and check in done.text and PROXY.token not in done.text
    assert read(tmp_path / where)["mcpServers"][SERVER_NAME]["headers"] == {"Authorization": f"Bearer {PROXY.token}"}


def test_agent_commands_map_to_their_writer(dirs: Dirs) -> None:
    assert mcp_config.agent_name("/usr/local/bin/claude-agent-acp") == "claude"
    assert mcp_config.agent_name("kiro-cli") == "kiro"
    assert main_file("cursor-agent", dirs) == dirs["dir"] / ".cursor" / "mcp.json"
    assert main_file("codex", dirs) == dirs["home"] / ".codex" / "config.toml"


def test_unchanged_rewrite_still_tightens_the_mode(dirs: Dirs) -> None:
    write("vscode", BRIDGE, **dirs)
    path = main_file("vscode", dirs)
    os.chmod(path, 0o644)
    write("vscode", BRIDGE, **dirs)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_the_agents_env_moves_its_user_file(dirs: Dirs, tmp_path: Path) -> None:
    env = {"CODEX_HOME": str(tmp_path / "codex-home"), "XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    assert write("codex", BRIDGE, env=env, **dirs) == [tmp_path / "codex-home" / "config.toml"]
    assert write("goose", BRIDGE, env=env, **dirs) == [tmp_path / "xdg" / "goose" / "config.yaml"]
    assert write("qwen", BRIDGE, env={"QWEN_HOME": str(tmp_path / "qwen-home")}, **dirs) == [
        tmp_path / "qwen-home" / "settings.json"]
    assert not (dirs["home"] / ".codex").exists()


def test_our_own_env_counts_only_when_no_home_is_given(
    dirs: Dirs, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "mine"))
    assert main_file("codex", dirs) == dirs["home"] / ".codex" / "config.toml"
    assert config_files("codex")[0].path == tmp_path / "mine" / "config.toml"


def yaml_parser() -> list[str] | None:
    """A real YAML parser in some Python on this machine (Debian's python3-yaml), as a command."""
    for python in ("/usr/bin/python3", "python3"):
        argv = [python, "-c", "import json, sys, yaml; print(json.dumps(yaml.safe_load(sys.stdin)))"]
        try:
            if subprocess.run([*argv[:2], "import yaml"], capture_output=True).returncode == 0:
                return argv
        except OSError:
            continue
    return None


@pytest.mark.parametrize("endpoint", ENDPOINTS)
def test_goose_file_is_yaml_a_real_parser_reads_as_our_entry(
    endpoint: HttpEndpoint | StdioCommand, dirs: Dirs
) -> None:
    parser = yaml_parser()
    if parser is None:
        pytest.skip("no Python with PyYAML here (Debian: apt-get install python3-yaml)")
    path = main_file("goose", dirs)
    seed(path, "GOOSE_PROVIDER: openai\nextensions:\n  developer:\n    enabled: true\n    type: builtin\n")
    write("goose", endpoint, **dirs)

    parsed = json.loads(subprocess.run(parser, input=path.read_text(), capture_output=True, text=True,
                                       check=True).stdout)
    assert parsed["GOOSE_PROVIDER"] == "openai"
    assert parsed["extensions"]["developer"] == {"enabled": True, "type": "builtin"}
    assert parsed["extensions"][SERVER_NAME] == entry("goose", endpoint)


def test_config_write_proxy_can_name_the_tokens_variable_instead(dirs: Dirs) -> None:
    done = config_write("cursor", mode="proxy", url=PROXY.url, token_env="OPENAB_BROWSER_TOKEN", **dirs)
    assert servers("cursor", dirs)[SERVER_NAME]["headers"] == {"Authorization": "Bearer ${env:OPENAB_BROWSER_TOKEN}"}
    assert done.paths == [main_file("cursor", dirs)]


def test_config_write_refuses_a_variable_the_agent_cannot_expand(dirs: Dirs) -> None:
    # Gemini's headers take no variables: an entry without the token would fail silently (a 401).
    with pytest.raises(ConfigError, match="cannot read the token"):
        config_write("gemini", mode="proxy", url=PROXY.url, token_env="OPENAB_BROWSER_TOKEN", **dirs)
    assert not main_file("gemini", dirs).exists()
    assert mcp_config.expands_token("codex", "T") and not mcp_config.expands_token("goose", "T")
