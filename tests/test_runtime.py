"""The agent runtime's own promises, checked on real agent processes (the built-in agent, real CLIs):
where and how an agent runs, what it is given, when it goes, and what a person sees when it fails."""

from __future__ import annotations

import asyncio
import gc
import os
import stat
import sys
from pathlib import Path

import pytest
from agents.fake_model import Call, FakeModel, Script, serving
from live_settings import changed
from test_runtime_pod import (
    FakeBrowser,
    browser_session,
    environ,
    live_group,
    open_session,
    prompt,
    run_pod,
)
from waits import eventually

from openab_browser.core.agents.recipes import RECIPES
from openab_browser.core.mcp.access import HttpEndpoint

pytestmark = pytest.mark.anyio


async def test_the_agent_runs_in_its_own_group_directory_and_scrubbed_env(tmp_path: Path) -> None:
    # The pod's own environment, as `openab run` would have it.
    pod_env = {**os.environ, "GITHUB_TOKEN": "ghp_secret", "OPENAI_API_KEY": "sk-secret", "PASS_ME": "yes",
               "HTTPS_PROXY": "http://proxy.internal:3128", "LC_ALL": "C.UTF-8"}
    async with run_pod(tmp_path / "state", agent_env=["PASS_ME", "SET_ME=1"], base_env=pod_env) as pod, \
            pod.extension() as ext:
        _browser, session_id, pid = await browser_session(pod, ext)
        env = environ(pid)
        session = pod.pod.sessions.get(session_id)
        assert session is not None

        assert os.getpgid(pid) == pid, "the agent leads its own process group"
        workdir = Path(os.readlink(f"/proc/{pid}/cwd"))
        assert workdir == tmp_path / "state" / "sessions" / session.channel / "work"
        # The folder names neither the session id nor its uuid (a local user listing it could resume it) ...
        assert session_id.removeprefix("sess_") not in str(workdir)
        assert session_id.removeprefix("sess_").replace("-", "") not in str(workdir)
        # ... and nobody else can enter any folder on the way down to it.
        for folder in (workdir, workdir.parent, workdir.parent.parent, workdir.parent.parent.parent):
            assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700, folder
        assert env["OPENAB_BROWSER_CHANNEL"] == session.channel
        assert "GITHUB_TOKEN" not in env and "OPENAI_API_KEY" not in env
        assert env["PASS_ME"] == "yes" and env["SET_ME"] == "1"
        assert env["HTTPS_PROXY"] == "http://proxy.internal:3128" and env["LC_ALL"] == "C.UTF-8"
        assert "127.0.0.1" in env["NO_PROXY"].split(","), "the loopback browser endpoint bypasses the proxy"

        await pod.pod.evict(session_id, "test")
        assert not await asyncio.to_thread(workdir.exists), "a closed session leaves no files behind"


async def test_an_agent_that_is_not_installed_fails_the_prompt_saying_so(tmp_path: Path) -> None:
    command = ["openab-no-such-agent", "acp"]
    async with run_pod(tmp_path / "state", agent="custom", agent_cmd=command) as pod, pod.extension() as ext:
        session_id = await ext.new_session([])
        first = await prompt(ext, session_id, "hello")
        second = await prompt(ext, session_id, "hello again")

    for turn in (first, second):
        assert turn.error is not None
        assert "'openab-no-such-agent' not found on PATH" in str(turn.error)


async def test_a_known_agent_that_is_not_installed_says_how_to_install_it(tmp_path: Path) -> None:
    async with run_pod(tmp_path / "state", agent="codex", base_env={"PATH": str(tmp_path)}) as pod, \
            pod.extension() as ext:
        session_id = await ext.new_session([])
        turn = await prompt(ext, session_id, "hello")

    assert turn.error is not None
    assert "Could not start Codex: agent command 'codex-acp' not found on PATH" in str(turn.error)
    assert "npm install -g @zed-industries/codex-acp" in str(turn.error)


async def test_an_agent_that_exits_at_start_says_how_and_never_repeats_its_key(tmp_path: Path) -> None:
    script = "import os, sys; sys.stderr.write('invalid key ' + os.environ['DEMO_API_KEY'] + '\\n'); sys.exit(3)"
    async with run_pod(tmp_path / "state", agent_cmd=[sys.executable, "-c", script],
                       agent_env=["DEMO_API_KEY=sk-live-0123456789abcdef"]) as pod, pod.extension() as ext:
        session_id = await ext.new_session([])
        turn = await prompt(ext, session_id, "hello")

    assert turn.error is not None
    assert "exited with code 3" in str(turn.error) and "invalid key [redacted]" in str(turn.error)
    assert "sk-live-0123456789abcdef" not in str(turn.error)


async def test_an_agent_that_never_answers_initialize_is_given_up_on(tmp_path: Path) -> None:
    # Written in its working folder: the one folder of the pod a confined agent may write.
    command = [sys.executable, "-c", "import os, time; open('agent.pid', 'w').write(str(os.getpid())); time.sleep(120)"]
    async with run_pod(tmp_path / "state", agent_cmd=command, agent_start_timeout=1) as pod, \
            pod.extension() as ext:
        session_id = await ext.new_session([])
        turn = await prompt(ext, session_id, "hello")
        pid_file = next((tmp_path / "state").glob("sessions/*/work/agent.pid"))
        pid = int(await asyncio.to_thread(pid_file.read_text))
        await eventually(lambda: not live_group(pid))  # the stuck agent was stopped, not left behind

    assert turn.error is not None
    assert "did not answer initialize/session/new within 1 s" in str(turn.error)


async def test_an_agent_writing_a_line_over_8_mib_is_stopped(tmp_path: Path) -> None:
    command = [sys.executable, "-c", "import sys; sys.stdout.write('x' * (9 << 20) + '\\n'); sys.stdout.flush(); "
               "import time; time.sleep(60)"]
    async with run_pod(tmp_path / "state", agent_cmd=command) as pod, pod.extension() as ext:
        session_id = await ext.new_session([])
        turn = await prompt(ext, session_id, "hello")

    assert turn.error is not None
    assert f"it wrote a line over {8 << 20} bytes on stdout" in str(turn.error)


async def test_sessions_get_their_own_agents_and_prompt_at_the_same_time(tmp_path: Path) -> None:
    async with run_pod(tmp_path / "state") as pod, pod.extension() as one, pod.extension() as two:
        first, first_id, first_pid = await browser_session(pod, one)
        second, second_id, second_pid = await browser_session(pod, two)
        turns = await asyncio.gather(
            prompt(one, first_id, "open https://example.org/one"),
            prompt(two, second_id, "open https://example.org/two"),
        )

    assert [t.result for t in turns] == [{"stopReason": "end_turn"}] * 2
    assert first_pid != second_pid
    assert (first.url, second.url) == ("https://example.org/one", "https://example.org/two")


async def test_an_idle_agent_is_stopped_and_the_next_prompt_starts_a_fresh_one(tmp_path: Path) -> None:
    async with run_pod(tmp_path / "state") as pod, pod.extension() as ext:
        browser, session_id, first_pid = await browser_session(pod, ext)
        def swept() -> bool:
            pod.runtime.sweep_idle()
            return session_id not in pod.runtime.agents

        with changed(pod.pod.settings, agent_idle_ttl=0.01):
            await eventually(swept)
        await eventually(lambda: not live_group(first_pid))

        turn = await prompt(ext, session_id, "open example.org")
        second_pid = pod.runtime.agents.get(session_id)

    assert turn.result == {"stopReason": "end_turn"}
    assert browser.url == "https://example.org"
    assert second_pid not in (None, first_pid)


async def test_builtin_agent_runs_a_model_tool_loop(tmp_path: Path) -> None:
    with serving(FakeModel()) as model:
        page = "https://example.org/from-the-model"
        model.set_script(Script(calls=[Call("browser_navigate", {"url": page})]))
        async with run_pod(tmp_path / "state", model_url=f"{model.url}/v1") as pod, pod.extension() as ext:
            browser = FakeBrowser(ext)
            session_id = await open_session(pod, ext)
            turn = await prompt(ext, session_id, "Open the page from the model, please.")

    assert turn.result == {"stopReason": "end_turn"}
    assert browser.calls == [("browser_navigate", {"url": page})]
    assert f"FINAL ANSWER: tool returned <<navigated to {page}>>" in turn.text
    asked = [entry for entry in model.log if entry.kind == "chat"]
    assert "browser_navigate" in asked[0].tools, "the browser's tools were offered to the model"


async def test_builtin_model_loop_stops_at_the_tool_call_cap(tmp_path: Path) -> None:
    with serving(FakeModel()) as model:
        model.set_script(Script(calls=[Call("browser_snapshot", {})] * 10))
        async with run_pod(tmp_path / "state", model_url=f"{model.url}/v1", max_tool_calls_per_turn=3) as pod, \
                pod.extension() as ext:
            browser = FakeBrowser(ext)
            session_id = await open_session(pod, ext)
            turn = await prompt(ext, session_id, "Look at the page forever.")

    assert turn.result == {"stopReason": "max_turn_requests"}
    assert [name for name, _ in browser.calls] == ["browser_snapshot"] * 3
    assert "Stopped after 3 tool calls" in turn.text


@pytest.mark.agents
async def test_a_silent_agent_is_stopped_with_a_clear_error_and_replaced(tmp_path: Path) -> None:
    from agents.harness import ACP_COMMANDS, agent_env, require

    binary = require(ACP_COMMANDS["codex"][0])
    with serving(FakeModel()) as model:
        agent = agent_env("codex", model.url, tmp_path / "codex")
        recipe = RECIPES["codex"]
        recipe = type(recipe)(**{**recipe.__dict__, "argv": (str(binary), *recipe.argv[1:])})
        model.set_script(Script(text="too late", hang=True))
        async with run_pod(tmp_path / "state", env=agent.env, recipe=recipe, agent_silence_timeout=2) as pod, \
                pod.extension() as ext:
            _browser, session_id, pid = await browser_session(pod, ext)
            silent = await prompt(ext, session_id, "Think hard.")
            # The prompt the stopped agent never answered is failed and collected now: an error of it nobody read
            # would reach the loop's handler (asyncio logs it; this test's runner raises it).
            gc.collect()
            await asyncio.sleep(0)
            model.set_script(Script(text="awake again"))
            model.release()
            again = await prompt(ext, session_id, "Hello?", timeout=120)
            second_pid = pod.runtime.agents.get(session_id)

    assert silent.error is not None and "said nothing for 2 s" in str(silent.error)
    assert "Prompt again" in str(silent.error)
    assert again.result == {"stopReason": "end_turn"} and "awake again" in again.text
    assert second_pid not in (None, pid)


async def test_a_config_file_agent_gets_its_entry_in_its_file_and_loses_it_with_its_session(tmp_path: Path) -> None:
    import dataclasses
    import tomllib

    # Codex-shaped: the entry goes into $CODEX_HOME/config.toml, a file that outlives the session's workdir.
    codex_home = tmp_path / "codex-home"
    codex_home.mkdir()
    (codex_home / "config.toml").write_text('model = "theirs"\n')
    recipe = dataclasses.replace(RECIPES["builtin"], browser_via="config", config_agent="codex")
    async with run_pod(tmp_path / "state", recipe=recipe, env={"CODEX_HOME": str(codex_home)}) as pod, \
            pod.extension() as ext:
        session_id = await open_session(pod, ext)
        await prompt(ext, session_id, "hello")  # the first prompt starts the agent, and writes its file
        session = pod.pod.sessions.get(session_id)
        assert session is not None and pod.pod.browser is not None
        entry = (await pod.pod.browser.open(session)).entry
        assert isinstance(entry, HttpEndpoint)
        url = entry.url
        written = tomllib.loads((codex_home / "config.toml").read_text())
        assert written["mcp_servers"]["openab_browser"]["url"] == url
        assert written["model"] == "theirs"

        await pod.pod.evict(session_id, "test")
        after = tomllib.loads((codex_home / "config.toml").read_text())
        assert "openab_browser" not in after.get("mcp_servers", {}), "the entry went with its session"
        assert after["model"] == "theirs", "and nothing else in the file changed"
