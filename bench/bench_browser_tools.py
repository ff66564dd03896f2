"""The extension's browser tools in real headless Chromium against Playwright driving the same Chromium over CDP.

One Chromium runs the real extension, attached to the real gateway (`openab_browser.gateway` on uvicorn, as
tests/browser/test_tools.py runs it); the extension's tools are called by the official `mcp` client at the
session's proxy endpoint, as an agent calls them, so every figure includes the whole path (HTTP, the pod, the
tunnel, the WebSocket, the service worker, the page script). Playwright connects to the same Chromium over its
DevTools port and drives a tab of its own on the same local pages. Each tool and its Playwright counterpart
alternate in rounds, so both see the same machine at the same moments; the figure is the ratio of the medians.

| tool | openab (MCP call) | Playwright (CDP) |
| --- | --- | --- |
| navigate | browser_navigate, to the page's load | page.goto (load) |
| snapshot | browser_snapshot | locator("body").aria_snapshot(mode="ai"), what @playwright/mcp shows |
| snapshot, hand-spelled MCP client | the same through `McpPoster` (httpx2): no official client's work | the same |
| click | browser_click by ref, a button that changes text | page.click by selector |
| click, a turn apart | the same, 0.3 s between clicks | the same, 0.3 s between clicks |
| type | browser_type by ref into a text field | page.fill by selector |
| screenshot | browser_screenshot (JPEG) | page.screenshot(type="jpeg") |
| snapshot after 21 s idle | browser_snapshot 21 s after the last call (the debugger attaches again) | the same |

Real input by the agent tab's place (issue 37): hover, click, drag and type on tests/site's pages (the menu of
hand_menu.html, the sortable list, the terminal), with the agent tab behind the person's tab and in front,
alternating in rounds, before Playwright attaches to anything (it turns on focus emulation in every tab it knows,
which would make a tab behind another behave as one in front). Which tab is in front is set over the DevTools port,
as the person's click on a tab would (tests/browser/person_devtools.py); the figure is behind / front, target 2x.

| tool | the call timed |
| --- | --- |
| hover | browser_hover on the menu's "File" |
| click | browser_click on the open menu's "Export" (the real mouse: moved, pressed, let go) |
| drag | browser_drag of a sortable list's first item onto its fourth |
| type | browser_type of 17 characters into the terminal's keyboard field (a keydown, keypress, input and keyup each) |

Chrome lets an extension capture a tab at most twice a second, so screenshot samples are spaced 0.6 s apart
(untimed) on both sides. Every other tool's calls run back to back, which no agent does: its next call comes a
model turn later. A click is the one tool that this changes (a click watches for a late navigation that a next
call within 80 ms waits out), so clicks are timed both ways: back to back, and 0.3 s apart (untimed; shorter
than any model turn).

Run: ``python bench/bench_browser_tools.py [--quick] [--out DIR] [--extension DIR] [--input-only] [--only ROWS]``
(from the repository, venv active); ``--extension`` times another copy of ``extension/`` (an earlier commit's, from
``git worktree add``), so a change is measured before and after in the same session, alternating runs;
``--input-only`` runs the rows by the agent tab's place alone; ``--only`` runs the rows of the comparison with
Playwright named (comma-separated, e.g. ``--only "click,click, a turn apart,type"``) and no others.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import re
import shutil
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from browser.harness import CHROMIUM, chromium, site_server, stage_extension
from browser.live_pod import KEY, LiveGateway
from browser.person_devtools import DevTools, devtools
from mcp import Client
from playwright.async_api import Browser, Page, async_playwright
from waits import eventually

from bench.baselines import McpPoster
from bench.common import arguments, interleaved, plot_latencies, ratio, summary, write_result

NAME = "browser_tools"
TOOLS = ("navigate", "snapshot", "snapshot, hand-spelled MCP client", "click", "click, a turn apart", "type",
         "screenshot")
TARGET = 1.5  # each median <= 1.5x Playwright's
POSITIONS = ("behind", "front")  # the agent tab behind the person's, or in front
INPUT_TOOLS = ("hover", "click", "drag", "type")
POSITION_TARGET = 2.0  # each real input's median behind <= 2x in front (issue 37)
CALL_TIMEOUT = 120.0  # an earlier extension's drag in a tab behind took a minute
SCREENSHOT_GAP = 0.6  # Chrome's quota: two captures a second per extension
TURN_GAP = 0.3  # between an agent's calls: a model turn, which takes longer
# Longer than the extension keeps its debugger on a tab after a call (lib/dialogs.js, LINGER_MS = 20 s): the call
# after such a pause attaches it again, as the first call of a task after a long model turn does.
IDLE_GAP = 21.0
IDLE_ROUNDS = 3
# The pages bench/ compares on, served from tests/site/bench/.
PAGES = ("form", "article", "table", "app")


@dataclass
class Rig:
    """One Chromium with the extension attached to a live pod, and the site both sides browse."""

    site: str  # base URL of tests/site
    client: Client  # the session's agent: the official MCP client at the proxy endpoint
    cdp: str  # the same Chromium's DevTools endpoint (http://127.0.0.1:PORT)
    # The same endpoint through an MCP client spelled by hand on httpx2 (bench/baselines.py), as target 1 drives
    # the proxy path: what a call costs without the official client's own work (its models and streams).
    bare: McpPoster
    profile: Path  # the Chromium's profile, where it writes its DevTools port


@contextlib.asynccontextmanager
async def browser_rig(extension: Path | None = None) -> AsyncIterator[Rig]:
    """The real gateway, the real extension (or the copy at ``extension``) in headless Chromium (with a DevTools
    port), and the agent's client."""
    if not CHROMIUM:
        raise SystemExit("Debian chromium is not installed: apt-get install chromium")
    with tempfile.TemporaryDirectory(prefix="openab-bench-browser-") as tmp_name, site_server() as site:
        tmp = Path(tmp_name)
        (tmp / "state").mkdir(mode=0o700)
        gateway = LiveGateway(tmp / "state")
        await gateway.start()
        try:
            # Autopilot: the guard's questions are the person's time, not the tools'.
            defaults = {"url": gateway.url, "key": KEY, "autopilot": True}
            if extension is None:
                ext = stage_extension(tmp / "ext", defaults)
            else:  # staged as stage_extension stages extension/
                ext = Path(shutil.copytree(extension, tmp / "ext"))
                (ext / "defaults.json").write_text(json.dumps(defaults))
            with chromium(ext, tmp / "profile", f"{site}/index.html", log=tmp / "chromium.log",
                          extra=("--remote-debugging-port=0",)):
                port_file = tmp / "profile" / "DevToolsActivePort"
                await eventually(lambda: port_file.exists() and bool(port_file.read_text().split()), 30)
                port = port_file.read_text().split()[0]
                tunnel = await gateway.attached(await gateway.browser_socket(0))
                endpoint = await gateway.endpoint(tunnel.session_id)
                async with (
                    gateway.agent_client(tunnel.session_id) as client,
                    McpPoster(endpoint.url, endpoint.token) as bare,
                ):
                    await bare.initialize()
                    yield Rig(site=site, client=client, cdp=f"http://127.0.0.1:{port}", bare=bare,
                              profile=tmp / "profile")
        finally:
            await gateway.stop()


async def call(client: Client, name: str, args: dict[str, Any] | None = None) -> str:
    """A tool call's text; an error result stops the benchmark, since its timing would measure a failure."""
    result = await asyncio.wait_for(client.call_tool(name, args or {}), CALL_TIMEOUT)
    text = "\n".join(getattr(c, "text", "") for c in result.content)
    if result.is_error:
        raise RuntimeError(f"{name} failed: {text[:500]}")
    return text


def ref_of(snapshot: str, contains: str) -> str:
    """The ref on the first snapshot line that contains `contains`."""
    for line in snapshot.splitlines():
        if contains in line and (m := re.search(r"\[ref=(e\d+)\]", line)):
            return m.group(1)
    raise RuntimeError(f"no ref for {contains!r} in the snapshot:\n{snapshot[:2000]}")


@contextlib.asynccontextmanager
async def playwright_page(cdp: str) -> AsyncIterator[Page]:
    """A tab of Playwright's own in the same Chromium, driven over the DevTools protocol."""
    async with async_playwright() as p:
        browser: Browser = await p.chromium.connect_over_cdp(cdp)
        page = await browser.contexts[0].new_page()
        try:
            yield page
        finally:
            await page.close()


async def timed(action: Callable[[], Awaitable[Any]]) -> float:
    start = time.perf_counter()
    await action()
    return time.perf_counter() - start


async def measure(rig: Rig, page: Page, rounds: int, per_round: int, quick: bool = False,
                  only: Sequence[str] = ()) -> dict[str, dict[str, list[float]]]:
    """Samples in seconds, by tool, then by side ('openab', 'playwright')."""
    form = f"{rig.site}/bench/form.html"
    client = rig.client
    counter = 0

    def fresh(url: str) -> str:
        # A new query each time: a real load, never a same-document no-op.
        nonlocal counter
        counter += 1
        return f"{url}?n={counter}"

    async def openab_ready() -> tuple[str, str]:
        await call(client, "browser_navigate", {"url": fresh(form)})
        snap = await call(client, "browser_snapshot")
        return ref_of(snap, 'button "Back to cart"'), ref_of(snap, 'textbox "Email address *"')

    await page.goto(fresh(form))
    back, email = await openab_ready()
    pages = [f"{rig.site}/bench/{name}.html" for name in PAGES]

    async def o_navigate() -> list[float]:
        urls = [fresh(pages[i % len(pages)]) for i in range(per_round)]
        return [await timed(lambda: call(client, "browser_navigate", {"url": url})) for url in urls]  # noqa: B023

    async def p_navigate() -> list[float]:
        urls = [fresh(pages[i % len(pages)]) for i in range(per_round)]
        return [await timed(lambda: page.goto(url)) for url in urls]  # noqa: B023

    async def o_snapshot() -> list[float]:
        return [await timed(lambda: call(client, "browser_snapshot")) for _ in range(per_round)]

    async def o_snapshot_bare() -> list[float]:
        return [await timed(lambda: rig.bare.call_tool("browser_snapshot")) for _ in range(per_round)]

    async def p_snapshot() -> list[float]:
        return [await timed(lambda: page.locator("body").aria_snapshot(mode="ai")) for _ in range(per_round)]

    # The same click again and again on purpose: `repeat` says so, else the journal answers the second one from
    # the first (docs/journal.md) and the figure is no longer a click's.
    async def o_click() -> list[float]:
        return [await timed(lambda: call(client, "browser_click", {"ref": back, "repeat": True}))
                for _ in range(per_round)]

    async def p_click() -> list[float]:
        return [await timed(lambda: page.click("#back")) for _ in range(per_round)]

    async def o_click_turn() -> list[float]:
        return await spaced(lambda: call(client, "browser_click", {"ref": back, "repeat": True}), TURN_GAP)

    async def p_click_turn() -> list[float]:
        return await spaced(lambda: page.click("#back"), TURN_GAP)

    # The lambdas run at once, inside the same iteration: the loop variable cannot have moved on.
    async def o_type() -> list[float]:
        texts = [f"ada{i}@example.com" for i in range(per_round)]
        return [await timed(lambda: call(client, "browser_type", {"ref": email, "text": t})) for t in texts]  # noqa: B023

    async def p_type() -> list[float]:
        texts = [f"ada{i}@example.com" for i in range(per_round)]
        return [await timed(lambda: page.fill("#email", t)) for t in texts]  # noqa: B023

    async def spaced(action: Callable[[], Awaitable[Any]], gap: float, count: int = 0) -> list[float]:
        out = []
        for _ in range(count or per_round):
            await asyncio.sleep(gap)
            out.append(await timed(action))
        return out

    async def o_snapshot_idle() -> list[float]:
        return await spaced(lambda: call(client, "browser_snapshot"), IDLE_GAP, count=1)

    async def p_snapshot_idle() -> list[float]:
        return await spaced(lambda: page.locator("body").aria_snapshot(mode="ai"), IDLE_GAP, count=1)

    async def o_screenshot() -> list[float]:
        return await spaced(lambda: call(client, "browser_screenshot"), SCREENSHOT_GAP)

    async def p_screenshot() -> list[float]:
        return await spaced(lambda: page.screenshot(type="jpeg", quality=92), SCREENSHOT_GAP)

    results: dict[str, dict[str, list[float]]] = {}
    plan: Sequence[tuple[str, Callable[[], Awaitable[list[float]]], Callable[[], Awaitable[list[float]]]]] = [
        ("navigate", o_navigate, p_navigate), ("snapshot", o_snapshot, p_snapshot),
        ("snapshot, hand-spelled MCP client", o_snapshot_bare, p_snapshot), ("click", o_click, p_click),
        ("click, a turn apart", o_click_turn, p_click_turn), ("type", o_type, p_type),
        ("screenshot", o_screenshot, p_screenshot), ("snapshot after 21 s idle", o_snapshot_idle, p_snapshot_idle),
    ]
    for tool, mine, theirs in plan:
        idle = tool.endswith("idle")
        if (idle and quick) or (only and tool not in only):  # an idle row's warm-up alone is two idle gaps
            continue
        if tool != "navigate":
            await page.goto(fresh(form))
            back, email = await openab_ready()
        # Warm both sides once (page script injected, CDP sessions up), then the timed rounds.
        await mine()
        await theirs()
        samples = await interleaved(IDLE_ROUNDS if idle else rounds, {"openab": mine, "playwright": theirs})
        results[tool] = samples
    return results


async def input_pass(rig: Rig, person: DevTools, front: str) -> dict[str, float]:
    """One of each real input with the tab `front` in front: seconds by tool. The pages are loaded untimed."""
    client = rig.client
    await person.front(front)
    took: dict[str, float] = {}
    await call(client, "browser_navigate", {"url": f"{rig.site}/hand_menu.html"})
    snap = await call(client, "browser_snapshot")
    took["hover"] = await timed(lambda: call(client, "browser_hover", {"ref": ref_of(snap, 'button "File"'),
                                                                      "repeat": True}))
    snap = await call(client, "browser_snapshot")  # the menu is open now
    took["click"] = await timed(lambda: call(client, "browser_click", {"ref": ref_of(snap, 'menuitem "Export"'),
                                                                      "repeat": True}))
    await call(client, "browser_navigate", {"url": f"{rig.site}/sortable.html"})
    snap = await call(client, "browser_snapshot")
    took["drag"] = await timed(lambda: call(client, "browser_drag", {
        "ref": ref_of(snap, 'listitem "Alpha"'), "to_ref": ref_of(snap, 'listitem "Delta"'), "repeat": True}))
    await call(client, "browser_navigate", {"url": f"{rig.site}/terminal.html"})
    snap = await call(client, "browser_snapshot")
    took["type"] = await timed(lambda: call(client, "browser_type", {
        "ref": ref_of(snap, 'textbox "Terminal input"'), "text": "echo hello, world", "repeat": True}))
    return took


async def measure_positions(rig: Rig, rounds: int) -> dict[str, dict[str, list[float]]]:
    """Samples in seconds by tool, then by the agent tab's place; the places alternate, first one then the other."""
    samples: dict[str, dict[str, list[float]]] = {tool: {p: [] for p in POSITIONS} for tool in INPUT_TOOLS}
    async with devtools(rig.profile) as person:
        theirs = await person.tab_at(f"{rig.site}/index.html")
        await call(rig.client, "browser_navigate", {"url": f"{rig.site}/hand_menu.html"})
        agent = await person.tab_at(f"{rig.site}/hand_menu.html")
        tabs = {"behind": theirs, "front": agent}
        await input_pass(rig, person, theirs)  # warm: the page script in each page, the debugger attached
        for number in range(rounds):
            for position in POSITIONS if number % 2 == 0 else reversed(POSITIONS):
                for tool, seconds in (await input_pass(rig, person, tabs[position])).items():
                    samples[tool][position].append(seconds)
        await person.front(theirs)
    return samples


def compared(samples: dict[str, dict[str, list[float]]], sides: Sequence[str], target: float,
             flat: dict[str, list[float]], label: str) -> dict[str, Any]:
    """Each tool's two sides summed up and their ratio (the first over the second) against `target`; every sample
    also goes into `flat` under `label`, for the plot."""
    figures: dict[str, Any] = {}
    for tool, by_side in samples.items():
        first, second = summary(by_side[sides[0]]), summary(by_side[sides[1]])
        r = ratio(first, second)
        figures[tool] = {sides[0]: first, sides[1]: second, "ratio": r, "met": r["p50"] <= target}
        for side, values in by_side.items():
            flat[label.format(side=side, tool=tool)] = values
    return figures


async def run(quick: bool, out: Path, extension: Path | None = None, input_only: bool = False,
              only: Sequence[str] = ()) -> Path:
    rounds, per_round = (2, 2) if quick else (15, 4)
    samples: dict[str, dict[str, list[float]]] = {}
    by_place: dict[str, dict[str, list[float]]] = {}
    async with browser_rig(extension) as rig:
        # Before Playwright attaches: its focus emulation would make a tab behind another one in front.
        if not only:
            by_place = await measure_positions(rig, 2 if quick else 8)
        if not input_only:
            async with playwright_page(rig.cdp) as page:
                samples = await measure(rig, page, rounds, per_round, quick, only)
    flat: dict[str, list[float]] = {}
    figures = compared(samples, ("openab", "playwright"), TARGET, flat, "{side} {tool}")
    places = compared(by_place, POSITIONS, POSITION_TARGET, flat, "{tool}, agent tab {side}")
    result = {
        "target": f"each tool's median <= {TARGET}x Playwright's over CDP, same Chromium, same run",
        "tab_positions": {"target": f"each real input's median with the agent tab behind <= {POSITION_TARGET}x in "
                                    "front, same run", "tools": places},
        "rounds": rounds, "per_round": per_round, "quick": quick, "chromium": CHROMIUM, "tools": figures,
        "extension": "a copy given by --extension" if extension else "extension/", "input_only": input_only,
        "only": list(only),
    }
    path = write_result(NAME, result, out)
    plot_latencies(NAME, flat, out, title="browser tools: openab extension vs Playwright (CDP), same Chromium")
    return path


def main(argv: Sequence[str] | None = None) -> Path:
    def more(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--extension", type=Path, default=None,
                            help="time this copy of extension/ instead (e.g. an earlier commit's, from git worktree)")
        parser.add_argument("--input-only", action="store_true",
                            help="only the real input rows by the agent tab's place (no Playwright)")
        parser.add_argument("--only", default="", metavar="ROWS",
                            help="only these rows of the comparison with Playwright, comma-separated (e.g. "
                                 "'click,click, a turn apart,type'; no rows by the tab's place)")

    args = arguments(__doc__.splitlines()[0] if __doc__ else NAME, argv, more)
    out: Path = args.out
    only = tuple(row.strip() for row in re.split(r",(?! )", str(args.only)) if row.strip())
    if unknown := [row for row in only if row not in (*TOOLS, "snapshot after 21 s idle")]:
        raise SystemExit(f"--only: no such row {unknown[0]!r}; the rows are {', '.join(TOOLS)}")
    return asyncio.run(run(bool(args.quick), out, args.extension, bool(args.input_only), only))


if __name__ == "__main__":
    main()
