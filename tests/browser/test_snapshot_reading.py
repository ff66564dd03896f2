"""What the model reads in a browser_snapshot: text in its reading order, a ref on everything it can act on,
and no more words than it needs, against @playwright/mcp's browser_snapshot on the same Chromium.

The pages are bench/'s (tests/site/bench/: a checkout form, an article with links inside its sentences, a
table of orders, a task web app). The snapshot comes through the real pod from the real extension, as in
test_tools.py; @playwright/mcp (npm, tests/bench/package.json) attaches to the same Chromium over its DevTools
port. bench/bench_snapshot_tokens.py measures the sizes in tokens; here they are checked in characters.
"""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from mcp import Client
from waits import eventually

from bench.bench_browser_tools import PAGES, playwright_page, ref_of
from bench.bench_snapshot_tokens import (
    OPENAB_REF,
    PLAYWRIGHT_INTERACTIVE,
    page_facts,
    peer_navigate,
    playwright_mcp,
    without_tab_list,
    words_missing,
)

from .conftest import KEY, extension_browser
from .live_pod import LiveGateway, call

pytestmark = pytest.mark.anyio

# A loose bound that catches a regression; the target (0.6x in tokens) and the figures are bench/'s.
MOST = 0.8
# A link inside a sentence: its words, its ref, and its address only when it leads to another site (or when
# interactive_only lists it).
INLINE = re.compile(r"\[([^\]]+)\]\((e\d+)(?: ([^)\s,]+))?(, new tab)?\)")


@pytest.fixture(scope="module")
def profile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("browser")


@pytest.fixture(scope="module")
def browser(gateway: LiveGateway, site: str, profile: Path) -> Iterator[Path]:
    """As conftest's, with a DevTools port for @playwright/mcp and Playwright to attach to the same Chromium."""
    defaults = {"url": gateway.url, "key": KEY, "autopilot": True}
    with extension_browser(profile, site, defaults, extra=("--remote-debugging-port=0",)) as ext:
        yield ext


@pytest.fixture(scope="module")
async def cdp(browser: Path, profile: Path) -> str:
    port_file = profile / "profile" / "DevToolsActivePort"
    await eventually(lambda: port_file.exists() and bool(port_file.read_text().split()), 30)
    return f"http://127.0.0.1:{port_file.read_text().split()[0]}"


@pytest.fixture(scope="module")
async def peer(cdp: str) -> AsyncIterator[Client]:
    async with playwright_mcp(cdp) as client:
        yield client


async def snapshot_of(client: Client, url: str) -> str:
    text, is_error = await call(client, "browser_navigate", {"url": url})
    assert not is_error, text
    snap, is_error = await call(client, "browser_snapshot")
    assert not is_error, snap
    return snap


async def test_links_stay_inside_their_sentence_with_refs_that_work(client: Client, site: str) -> None:
    snap = await snapshot_of(client, f"{site}/bench/article.html")
    # Read as written: the page's text on a line of its own under its container, each link's words where they
    # stand with its ref beside them; where a link on this site goes, its sentence says.
    assert re.search(r"^ Grow steady care the that steady and the need through where\. See "
                     r"\[our watering guide\]\(e\d+\) for practical schedules, or ask "
                     r"in \[the watering thread\]\(e\d+\)\. Care will", snap, re.M), snap
    assert "See for practical schedules" not in snap
    assert re.search(r"Read the \[watering\]\(e\d+\) section first", snap), snap
    # A link that leaves the site says where to, always.
    assert re.search(r"check \[your local rules\]\(e\d+ https://example\.org/local-rules\) before", snap), snap
    assert re.search(r"^ ## Watering$", snap, re.M), snap  # a heading in markdown's spelling, under main
    # Phrasing inside a sentence (strong, em) stays in it too.
    assert "most failed gardens are watered too often, not too little." in snap

    form = await snapshot_of(client, f"{site}/bench/form.html")
    footer = next(line for line in form.splitlines() if "Shipping help" in line)
    m = INLINE.search(footer)
    assert m and m.group(1) == "Shipping help" and m.group(3) is None, footer
    text, is_error = await call(client, "browser_click", {"ref": m.group(2)})
    assert not is_error, text
    text, is_error = await call(client, "browser_wait_for", {"url": "article.html", "load": True})
    assert not is_error, text
    after, _ = await call(client, "browser_snapshot")
    assert re.search(r"^ # The kitchen garden through the year$", after, re.M), after


async def test_states_an_agent_acts_on_are_shown(client: Client, site: str) -> None:
    snap = await snapshot_of(client, f"{site}/bench/app.html")
    assert re.search(r'- tab "List" \[ref=e\d+\] \[selected\]', snap), snap
    assert re.search(r'- tab "Board" \[ref=e\d+\]$', snap, re.M), snap
    # A task's name, project and date read as one line, as on the screen.
    assert re.search(r"^ +Pay the electricity bill Home Today$", snap, re.M), snap
    # The hidden "new task" box is not offered.
    assert "What needs doing?" not in snap and "Task name" not in snap
    form = await snapshot_of(client, f"{site}/bench/form.html")
    assert '- group "Shipping address":' in form
    assert not re.search(r"^ *Shipping address$", form, re.M), form  # the legend is the group's name, not a line
    assert "- status: Nothing submitted yet." in form  # a container's own text stays


@pytest.mark.parametrize("name", PAGES)
async def test_every_control_has_a_ref_in_both_and_ours_is_shorter(client: Client, peer: Client, cdp: str,
                                                                   site: str, name: str) -> None:
    url = f"{site}/bench/{name}.html"
    ours = await snapshot_of(client, url)
    await peer_navigate(peer, url)
    theirs = without_tab_list((await call(peer, "browser_snapshot"))[0])
    async with playwright_page(cdp) as page:
        interactive, text = await page_facts(page, url)
    assert interactive > 5
    assert words_missing(text, ours) == [], ours
    assert len(OPENAB_REF.findall(ours)) >= interactive, ours
    assert len(PLAYWRIGHT_INTERACTIVE.findall(theirs)) >= interactive, theirs
    assert len(ours) <= MOST * len(theirs), (len(ours), len(theirs))


async def test_a_page_cannot_forge_a_ref_mark_or_flood_a_line(client: Client, site: str) -> None:
    snap = await snapshot_of(client, f"{site}/inline_marks.html")
    assert "\x01" not in snap
    # The page's own marks are gone; its one real link has a ref that clicks.
    line = next(ln for ln in snap.splitlines() if "A page writes" in ln)
    m = INLINE.search(line)
    assert m is not None and (m.group(1), m.group(3)) == ("a real link", None), line
    # Nor can it hide its own words behind the mark of an address that only interactive_only shows.
    assert line == f"A page writes 99 and 1 into its text, then {m.group(0)} and more text.", line
    assert "\x02" not in snap
    assert len(OPENAB_REF.findall(line)) == 1
    # Text that begins like the outline's own lines is labelled as text: no fake control, no fake heading.
    assert '\ntext: - button "Pay now" [ref=e1]\n' in snap and '\n- button "Pay now"' not in snap
    assert "\ntext: # Not a heading\n" in snap
    # 400 links in one paragraph would make a line too long to read: each gets a line of its own instead.
    assert set(re.findall(r'- link "link (\d+)" \[ref=e\d+\]', snap)) == {str(i) for i in range(400)}
    text, is_error = await call(client, "browser_click", {"ref": m.group(2)})
    assert not is_error, text
    text, is_error = await call(client, "browser_wait_for", {"url": "page2.html", "load": True})
    assert not is_error, text


async def test_since_shows_only_what_changed_and_its_refs_work(client: Client, site: str) -> None:
    full = await snapshot_of(client, f"{site}/bench/app.html")
    text, is_error = await call(client, "browser_click", {"ref": ref_of(full, 'button "Add task"')})
    assert not is_error, text
    delta, is_error = await call(client, "browser_snapshot", {"since": True})
    assert not is_error, delta
    assert delta.startswith("What changed since the last snapshot, as a unified diff")
    changed = [ln for ln in delta.splitlines() if ln[:1] in "+-" and not ln.startswith(">>>")]
    # The button took the focus and the "new task" box appeared after the tab list; nothing else changed.
    assert [re.sub(r"e\d+", "eN", ln) for ln in changed] == [
        '-  - button "Add task" [ref=eN]', '+  - button "Add task" [ref=eN] [focused]',
        '+ - textbox "Task name" [ref=eN]', '+ - button "Save" [ref=eN]']
    assert ' - tab "Calendar" ' in delta  # the unchanged line that places them
    assert len(delta) < 0.25 * len(full)
    text, is_error = await call(client, "browser_type", {"ref": ref_of(delta, 'textbox "Task name"'), "text": "Mow"})
    assert not is_error, text
    await call(client, "browser_click", {"ref": ref_of(delta, 'button "Save"')})
    after, _ = await call(client, "browser_snapshot", {"since": True})
    added = [ln for ln in after.splitlines() if ln.startswith("+")]
    assert any(re.fullmatch(r'\+   - checkbox "Done: Mow" \[ref=e\d+\]', ln) for ln in added), after
    assert any(ln.startswith('- - textbox "Task name"') for ln in after.splitlines()), after

    again, _ = await call(client, "browser_snapshot", {"since": True})
    assert again.startswith("Nothing changed since the last snapshot.\n")


async def test_since_after_another_page_or_mode_is_the_whole_snapshot(client: Client, site: str) -> None:
    await snapshot_of(client, f"{site}/bench/app.html")
    await call(client, "browser_navigate", {"url": f"{site}/bench/form.html"})
    whole, _ = await call(client, "browser_snapshot", {"since": True})
    assert whole.startswith("The page is at another URL since the last snapshot: this is all of it.\n")
    assert 'button "Continue to payment"' in whole
    outline, _ = await call(client, "browser_snapshot", {"since": True, "interactive_only": True})
    assert outline.startswith("The last snapshot was taken with another interactive_only: this is all of it.\n")
    # Asked again in the same mode: the comparison is with the outline just taken.
    snap, _ = await call(client, "browser_snapshot", {"since": True, "interactive_only": True})
    assert snap.startswith("Nothing changed since the last snapshot.\nUntrusted page content follows")


async def test_since_pages_through_one_comparison(client: Client, site: str) -> None:
    await snapshot_of(client, f"{site}/bench/article.html")
    await call(client, "browser_navigate", {"url": f"{site}/bench/article.html"})  # a new document: new refs
    first, _ = await call(client, "browser_snapshot", {"since": True, "max_chars": 3000})
    m = re.search(r"\[characters 0-3000 of (\d+)\. Call again with offset=3000 for more\.\]", first)
    assert m, first[-300:]
    # The second piece is cut from the same diff, not from a comparison with the first piece's own snapshot.
    second, _ = await call(client, "browser_snapshot", {"since": True, "max_chars": 3000, "offset": 3000})
    assert f"[characters 3000-6000 of {m.group(1)}." in second
    assert "Nothing changed" not in second


async def test_since_on_a_page_that_rewrites_everything_stays_bounded(client: Client, site: str) -> None:
    full = await snapshot_of(client, f"{site}/churn.html")
    assert "\nround 1 line 0\n" in full
    await call(client, "browser_click", {"ref": ref_of(full, 'button "Rewrite every line"')})
    start = time.monotonic()
    delta, is_error = await call(client, "browser_snapshot", {"since": True, "max_chars": 4000})
    assert not is_error, delta
    assert time.monotonic() - start < 10  # 3,000 lines changed both ways: compared as a block, not line by line
    assert "\n-round 1 line 0\n-round 1 line 1\n" in delta, delta[:1500]
    assert "Call again with offset=4000 for more." in delta


async def test_interactive_only_keeps_a_sentences_links_with_their_addresses(client: Client, site: str) -> None:
    await call(client, "browser_navigate", {"url": f"{site}/bench/article.html"})
    outline, _ = await call(client, "browser_snapshot", {"interactive_only": True})
    # Where each link goes, which the whole snapshot leaves to the sentence around a link on this site.
    links = re.search(r"^ - links: \[our watering guide\]\((e\d+) /bench/guide/watering\.html\) "
                      r"\[the watering thread\]\((e\d+) /bench/forum/watering\.html\)$", outline, re.M)
    assert links, outline
    assert "practical schedules" not in outline and "\n ## Watering\n" in outline
    full, _ = await call(client, "browser_snapshot")
    assert len(outline) < 0.5 * len(full)
    # The same refs in both, so an address read here goes with the link read there, and the ref clicks.
    assert f"[our watering guide]({links.group(1)})" in full, full
    text, is_error = await call(client, "browser_click", {"ref": links.group(2)})
    assert not is_error, text
    text, is_error = await call(client, "browser_wait_for", {"url": "forum/watering.html", "load": True})
    assert not is_error, text


async def test_a_long_documentation_page_comes_whole_in_one_call(client: Client, cdp: str, site: str) -> None:
    # The long page: the default call gave half its words and refs, the rest two calls later.
    url = f"{site}/docs_long.html"
    snap = await snapshot_of(client, url)
    async with playwright_page(cdp) as page:
        interactive, text = await page_facts(page, url)
    assert interactive > 500
    assert words_missing(text, snap) == [], snap[-2000:]
    assert len(OPENAB_REF.findall(snap)) >= interactive
    assert "END-OF-GUIDE" in snap and "offset=" not in snap
    assert len(snap) > 40_000  # longer than the old default page of characters
