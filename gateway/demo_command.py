"""`openab demo`: everything on this machine, with no account: the gateway, the built-in agent, a local demo
page and headless Chromium running the openab extension. One short task runs through the real browser; the
transcript is printed and the screenshot saved.

The task is handed to the session's agent by the demo itself (there is no one to type it into the side
panel of a headless browser); everything after that is the real path: the built-in agent process, the
session's proxy endpoint, the MCP-over-ACP tunnel, the extension and its guard, the page. The agent's updates
also go to the extension's side panel, as in a turn the person started there, so the panel's screenshot, saved
beside the agent's, shows the conversation as the person would see it.

A risky step waits for the person on a card in that panel, which nobody can answer in a headless browser: the
turn's clock is the socket's (`_openab/person` stops it while a card waits, as for a panel's own turn), so the
demo says which step waits, and, when the task's time runs out first, that the card went unanswered.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from collections.abc import Callable

    from openab_browser.core.jsonrpc import JsonObject
    from openab_browser.core.pod import Pod
    from openab_browser.core.sessions import Session
    from openab_browser.core.turn_watch import Person, TurnClock

    from .demo_browser import DemoChromium

# How long a stopped task may take to wind down (the agent's cancel) before the demo ends anyway.
STOP_TIMEOUT = 10.0

__all__ = ["DemoTurn", "default_task", "panel_screenshot_path", "register", "run_demo"]


def default_task(page: str) -> str:
    return f"open {page}\ntype Ada into Your name\nclick Say hello\nread\nscreenshot"


def register(commands: Any) -> None:
    demo = commands.add_parser(
        "demo", help="try openab here: a local gateway, the built-in agent and headless Chromium with the extension"
    )
    demo.add_argument("--task", help="what to ask the built-in agent (default: fill and click the demo page)")
    demo.add_argument("--screenshot", default="openab-demo.jpg", help="where to save the screenshot")
    demo.add_argument("--chromium", help="the Chromium or Chrome binary (default: found on this machine)")
    demo.add_argument("--extension", help="the extension folder (default: extension/ of this source tree)")
    demo.add_argument("--port", type=int, default=0, help="gateway port (default: any free port)")
    demo.add_argument("--model-url", help="run the built-in agent's model loop against this endpoint instead")
    demo.add_argument("--agent", default="builtin", help="another agent CLI to try instead (claude, codex, ...)")
    demo.add_argument("--agent-env", action="append", metavar="NAME[=VALUE]",
                      help="give that agent NAME from this environment (its API key), or set NAME=VALUE")
    demo.add_argument("--no-browser", action="store_true",
                      help="start no browser: serve until Ctrl-C and say how to load the extension by hand")
    demo.add_argument("--timeout", type=float, default=120.0, help="seconds for the browser and the task")
    demo.set_defaults(handler=_demo)


def _own_clock() -> TurnClock:
    from openab_browser.core.turn_watch import Person

    return Person().clock()


def panel_screenshot_path(screenshot: Path) -> Path:
    """Where the side panel's screenshot goes: beside the agent's, ``<name>-panel.png``."""
    return screenshot.with_name(f"{screenshot.stem}-panel.png")


@dataclass
class DemoTurn:
    """The demo's :class:`openab_browser.core.agent_backend.PromptTurn`: prints the agent's steps as they come, and
    hands
    each to ``forward`` (the side panel's socket). With :meth:`watch_person` its clock is the extension socket's,
    so it stops while a card waits in the panel and says so."""

    session: Session
    out: TextIO
    updates: list[JsonObject] = field(default_factory=list)
    screenshot: bytes | None = None
    # Until watch_person: a person of its own, never asking.
    clock: TurnClock = field(default_factory=_own_clock)
    forward: Callable[[JsonObject], None] | None = None
    # The title of the step asked about now ("" when no card waits), and of the last step that started.
    waiting_on: str = ""
    _last_step: str = ""

    def watch_person(self, person: Person) -> None:
        self.clock.close()
        self.clock = person.clock(changed=self._person_changed)

    def _person_changed(self) -> None:
        waiting = self.clock.waiting_for_person()
        if waiting and not self.waiting_on:
            self.waiting_on = self._last_step or "a step of the agent's"
            self.out.write(f"     Waiting for your answer in the side panel: {self.waiting_on}\n"
                           "     (the demo's Chromium is headless, so nobody can answer it here: the card waits "
                           "until the task's --timeout)\n")
            self.out.flush()
        elif not waiting and self.waiting_on:
            self.waiting_on = ""

    @property
    def can_ask_permission(self) -> bool:
        return False

    def send_update(self, update: JsonObject) -> None:
        self.updates.append(update)
        kind = update.get("sessionUpdate")
        if kind == "agent_message_chunk":
            content = update.get("content") or {}
            self.out.write(str(content.get("text", "")))
        elif kind == "tool_call":
            self._last_step = str(update.get("title") or "")
            self.out.write(f"  -> {update.get('title')}\n")
        elif kind == "tool_call_update" and update.get("status") in ("completed", "failed"):
            for item in update.get("content") or []:
                block = item.get("content") if isinstance(item, dict) else None
                if isinstance(block, dict) and block.get("type") == "image" and isinstance(block.get("data"), str):
                    self.screenshot = base64.b64decode(block["data"])
            if update.get("status") == "failed":
                said = " ".join(str(item.get("content", {}).get("text", "")) for item in update.get("content") or []
                                if isinstance(item, dict) and isinstance(item.get("content"), dict))
                # The card's own timeout (extension/lib/guard.js) declines that one step.
                self.out.write("     (the card timed out unanswered: that step was not taken)\n"
                               if "did not answer" in said else "     (failed)\n")
        if self.forward is not None:
            self.forward(update)
        self.out.flush()

    async def request_permission(self, params: JsonObject, *, timeout: float) -> JsonObject:
        from openab_browser.core.acp.backend import PermissionUnavailable

        raise PermissionUnavailable("nobody is at the demo's side panel")


def _demo(args: argparse.Namespace) -> int:
    # The loop here, not at module level: `openab browser-bridge` imports this module to build its parser, and
    # its relay keeps asyncio from loading ssl (bridge/relay_command.py), which only works before asyncio loads.
    from openab_browser.core.event_loop import run

    from .logs import configure_logging

    configure_logging("warning")
    try:
        return run(run_demo(args, out=sys.stdout))
    except KeyboardInterrupt:
        return 130


async def run_demo(args: argparse.Namespace, *, out: TextIO) -> int:
    import asyncio
    import secrets
    import tempfile

    from openab_browser.core.settings import Settings

    from .app import create_app
    from .assemble import assemble
    from .demo_browser import HOW_TO_GET_CHROMIUM, chromium_path, extension_dir, headless_chromium, how_to_load_by_hand
    from .demo_site import demo_site
    from .server import running_server

    key = secrets.token_urlsafe(24)
    with tempfile.TemporaryDirectory(prefix="openab-demo-") as temp, demo_site() as page:
        workdir = Path(temp)
        settings = Settings.from_env(
            {}, host="127.0.0.1", port=args.port, token=key, state_dir=workdir / "state", agent=args.agent,
            agent_env=args.agent_env, model_url=args.model_url, permissions="browser-only",
        )
        try:
            pod = assemble(settings)
        except ValueError as exc:
            out.write(f"openab demo: {exc}\n")
            return 2
        async with running_server(create_app(pod), port=args.port) as base_url:
            ws_url = "ws" + base_url.removeprefix("http") + "/acp"
            out.write(f"openab demo: gateway on {ws_url}, demo page on {page}\n")
            binary, extension = chromium_path(args.chromium), extension_dir(args.extension)
            if args.no_browser or binary is None or extension is None:
                if not args.no_browser:
                    out.write((HOW_TO_GET_CHROMIUM if binary is None else
                               "The extension folder was not found: pass --extension DIR.") + "\n")
                out.write(how_to_load_by_hand(extension, ws_url, key) + "\n")
                if not args.no_browser:
                    return 1
                out.write("Serving until Ctrl-C.\n")
                out.flush()
                await asyncio.Event().wait()
            assert binary is not None and extension is not None
            out.write(f"starting headless {Path(binary).name} with the extension from {extension}\n")
            out.flush()
            with headless_chromium(binary, extension, workdir, ws_url=ws_url, key=key, start_url=page) as browser:
                return await _run_task(pod, args, page, workdir, browser, out)
    return 1


async def _run_task(
    pod: Pod, args: argparse.Namespace, page: str, workdir: Path, browser: DemoChromium, out: TextIO
) -> int:
    import asyncio

    try:
        tunnel = await pod.tunnels.wait_attached(timeout=args.timeout)
    except TimeoutError:
        out.write(f"The extension did not connect within {args.timeout:g} s; Chromium's log is below.\n")
        log = (await asyncio.to_thread((workdir / "chromium.log").read_text, errors="replace")).splitlines()[-15:]
        out.write("\n".join(log) + "\n")
        return 1
    session = pod.sessions.get(tunnel.session_id)
    if session is None:
        out.write("The extension's session ended before the task could start.\n")
        return 1
    task = args.task or default_task(page)
    out.write(f"\nthe extension is attached (session {session.id}); the task:\n  "
              + task.replace("\n", "\n  ") + "\n\n--- transcript ---\n")
    out.flush()
    turn = DemoTurn(session, out, forward=_to_panel(pod, session))
    socket = pod.connections.get(session.owner) if session.owner is not None else None
    if socket is not None:
        turn.watch_person(socket.person)
    session.prompting = True  # the side panel cannot start a turn in the middle of ours
    panel = panel_screenshot_path(Path(args.screenshot))
    code, panel_said = 1, ""
    prompt = asyncio.ensure_future(pod.backend.prompt(turn, [{"type": "text", "text": task}]))
    try:
        done, _ = await asyncio.wait({prompt}, timeout=args.timeout)
        if not done:
            # The panel as the person would find it now, a waiting card in it, before stopping the turn takes
            # the card away.
            panel_said = await _panel_shot(browser, panel)
            unanswered = (f": the card about “{turn.waiting_on}” timed out unanswered in the side panel"
                          if turn.waiting_on else "")
            out.write(f"\n--- the task did not finish within {args.timeout:g} s{unanswered} ---\n")
        elif prompt.exception() is not None:  # an RpcError from the agent: say it, like the side panel would
            exc = prompt.exception()
            out.write(f"\n--- the agent failed: {getattr(exc, 'message', exc)} ---\n")
        else:
            stop_reason = prompt.result()
            out.write(f"\n--- end of turn: {stop_reason} ---\n")
            code = 0 if stop_reason == "end_turn" else 1
    finally:
        if not prompt.done():
            prompt.cancel()
            with contextlib.suppress(Exception, asyncio.CancelledError):
                async with asyncio.timeout(STOP_TIMEOUT):
                    await prompt
        session.prompting = False
        turn.clock.close()
    if turn.screenshot is not None:
        saved = await asyncio.to_thread(_save, Path(args.screenshot), turn.screenshot)
        out.write(f"screenshot saved to {saved}\n")
    out.write((panel_said or await _panel_shot(browser, panel)) + "\n")
    out.flush()
    return code


def _to_panel(pod: Pod, session: Session) -> Callable[[JsonObject], None]:
    """Each update to the socket that holds the session now, as the pod sends a panel's own turn's."""

    def forward(update: JsonObject) -> None:
        socket = pod.connections.get(session.owner) if session.owner is not None else None
        if socket is not None:
            socket.rpc.notify("session/update", {"sessionId": session.id, "update": update})

    return forward


async def _panel_shot(browser: DemoChromium, path: Path) -> str:
    from .demo_panel import PanelError, panel_screenshot

    try:
        saved = await panel_screenshot(browser, path)
    except (PanelError, TimeoutError, OSError, ValueError) as exc:
        return f"the side panel could not be shown: {exc or 'it did not load in time'}"
    return f"side panel screenshot saved to {saved}"


def _save(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path.resolve()
