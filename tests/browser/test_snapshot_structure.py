"""A snapshot that keeps a page's structure (issue 23): a long page whole in one call, or its outline and a way to
every part; tables as grids that tie each value to its row and column; names as the accessible-name algorithm
computes them, and a ref on everything that can be clicked.

The pages are modelled on the failures the issue found on real sites (tests/site/): a long documentation page
(docs_long.html), an admin changelist of fifty changes in eight columns (changelist.html), and the names a header,
a search box, a dropdown, icon links, a file field and script-made buttons got wrong (names.html). Every snapshot
comes through the real pod from the real extension in real Chromium, as in test_tools.py.
"""

from __future__ import annotations

import re

import pytest
from mcp import Client

from bench.bench_snapshot_tokens import count_tokens

from .live_pod import call

pytestmark = pytest.mark.anyio

# A line of the outline: a part, its region ref and what it costs.
OUTLINE_ITEM = re.compile(r"^ *(?P<line>.*?) \[region=(?P<ref>e\d+), ~(?P<tokens>\d+) tokens\]$", re.M)
NOTE = re.compile(r"\[lines (\d+)-(\d+) of (\d+) \(~(\d+) tokens in all, over max_tokens=(\d+)\)\. "
                  r"(?:Call again with offset=(\d+)(?: region=e\d+)? for the rest, region= for one part, or use "
                  r"browser_find to find words\.|This is the end\.)\]$")
REFS = re.compile(r"(?:\bref=|\]\()(e\d+)\b")


def body_of(result: str) -> str:
    """The page's part of a result, between its page-content markers."""
    m = re.search(r"<<<page-content (\d{15})\n(.*)\n>>>page-content \1", result, re.S)
    assert m, result[:500]
    return m.group(2)


def cells(row: str) -> list[str]:
    """The cells of a grid line `| a | b |`, a `\\|` inside a cell kept in it."""
    assert row.startswith("| ") and row.endswith(" |"), row
    return [c.strip() for c in re.split(r"(?<!\\)\|", row[1:-1])]


async def snapshot_of(client: Client, url: str, **args: object) -> str:
    text, is_error = await call(client, "browser_navigate", {"url": url})
    assert not is_error, text
    snap, is_error = await call(client, "browser_snapshot", dict(args))
    assert not is_error, snap
    return snap


async def clicked(client: Client, ref: str, said: str) -> None:
    """Clicks `ref` and waits for the page to say `said`."""
    text, is_error = await call(client, "browser_click", {"ref": ref})
    assert not is_error, text
    text, is_error = await call(client, "browser_wait_for", {"text": said, "timeout_ms": 5000})
    assert not is_error, text


async def test_a_page_over_the_budget_comes_as_its_outline_and_every_part_can_be_had(client: Client,
                                                                                     site: str) -> None:
    whole = await snapshot_of(client, f"{site}/docs_long.html")
    assert not NOTE.search(whole), whole[-300:]  # under the default budget: the whole page in one call
    every_ref = set(REFS.findall(whole))

    first, _ = await call(client, "browser_snapshot", {"max_tokens": 8000})  # the same document: the same refs
    m = NOTE.search(first)
    assert m and m.group(6), first[-400:]
    assert int(m.group(5)) == 8000 and int(m.group(4)) > 8000
    outline = {item["line"].strip(): item for item in OUTLINE_ITEM.finditer(first)}
    # The outline names every part: the side menu, each section's heading (a link in a heading keeps its ref),
    # the table with its size and the form.
    assert '- navigation "Contents"' in outline and "# The garden tool guide" in outline, first[:3000]
    assert all(f"## Section {s}: the " in "\n".join(outline) for s in range(1, 61)), first[:4000]
    assert re.search(r"^## \[Table of Contents\]\(e\d+\)$", "\n".join(outline), re.M)
    assert '- table "Tool options" (2 rows, 3 columns)' in outline
    assert '- form "Order a catalogue"' in outline
    assert len(first) < 8000 * 5

    # A section by its region ref: that section whole, to the next heading of its level, with working refs.
    section = next(item for line, item in outline.items() if line.startswith("## Section 33:"))
    part, is_error = await call(client, "browser_snapshot", {"region": section["ref"]})
    assert not is_error, part
    lines = body_of(part).splitlines()[2:]  # after the page's title and URL
    assert lines[0].startswith(" ## Section 33:") and not any("Section 34" in ln for ln in lines), lines
    assert re.search(r"\[zeolite\]\(e\d+\)", part) and part.startswith(f"Region {section['ref']} of the page")

    # Read on by offset until the end: every ref of the whole snapshot comes, none twice.
    seen = REFS.findall(first.split("\nThe page from its start:\n", 1)[1])
    offset = int(m.group(6))
    for _ in range(20):
        piece, is_error = await call(client, "browser_snapshot", {"max_tokens": 8000, "offset": offset})
        assert not is_error, piece
        seen += REFS.findall(body_of(piece))
        note = NOTE.search(piece)
        assert note, piece[-400:]
        if not note.group(6):
            break
        offset = int(note.group(6))
    assert "END-OF-GUIDE" in piece and "This is the end." in piece
    assert set(seen) == every_ref and len(seen) == len(every_ref)

    text, is_error = await call(client, "browser_snapshot", {"region": "e999999"})
    assert is_error and "take a browser_snapshot and use a region= ref" in text


async def test_a_code_heavy_reference_page_comes_whole_and_its_cost_is_told_as_the_model_counts_it(
        client: Client, site: str) -> None:
    # A page like Python's argparse reference: every mark of its console sessions counted as a token, as the
    # estimate did, put it over the default budget and cut it in two; GPT-4o's tokenizer counts far fewer.
    whole = await snapshot_of(client, f"{site}/docs_code.html")
    assert not NOTE.search(whole), whole[-300:]
    body = body_of(whole)
    assert "END-OF-REFERENCE" in body and "## 75. The " in body
    assert re.search(r"^ >>> parser = optparse2\.ArgumentParser\(prog='PROG', \w+=225\)", body, re.M), body[-3000:]
    real = count_tokens([body])[0]
    assert 18_000 < real < 24_000, real  # the page is as big as the case it models

    paged, _ = await call(client, "browser_snapshot", {"max_tokens": 2000})
    note = NOTE.search(paged)
    assert note, paged[-400:]
    estimate = int(note.group(4))
    # Within 10% of the model's count, and rather over than under: a client refuses a result past its limit.
    assert real * 0.98 <= estimate <= real * 1.10, (estimate, real)


async def test_find_gives_the_matching_lines_with_their_refs_in_context(client: Client, site: str) -> None:
    await call(client, "browser_navigate", {"url": f"{site}/docs_long.html"})
    found, is_error = await call(client, "browser_find", {"text": "ZEOLITE"})
    assert not is_error, found
    assert found.startswith('1 line(s) of the page hold "ZEOLITE"'), found
    body = body_of(found)
    assert re.search(r"^\(under ## Section 33: the \w+\)$", body, re.M), body
    assert re.search(r"The rarest word on this page is \[zeolite\]\(e\d+\), used for sandy soil\.", body)
    many, _ = await call(client, "browser_find", {"text": "the maker's site", "max_results": 3})
    assert many.startswith('180 line(s) of the page hold "the maker\'s site"; the first 3 (max_results for more)')
    assert body_of(many).count("@@ line ") == 3
    none, is_error = await call(client, "browser_find", {"text": "no such words anywhere"})
    assert not is_error and none.startswith('No line of the page holds "no such words anywhere".')

    # In a table, a row comes under its header row, and its controls' refs work.
    await call(client, "browser_navigate", {"url": f"{site}/changelist.html"})
    row, _ = await call(client, "browser_find", {"text": "Change 4012"})
    lines = body_of(row).splitlines()
    header = next(i for i, ln in enumerate(lines) if "| Reviewer |" in ln)
    assert "[Change 4012](e" in lines[header + 1], lines
    box = re.search(r'checkbox "Select this object for an action - Change 4012" \[ref=(e\d+)\]', lines[header + 1])
    assert box, lines
    await clicked(client, box.group(1), "Picked: 4012")


async def test_a_table_keeps_every_cell_in_its_row_and_column(client: Client, site: str) -> None:
    snap = await snapshot_of(client, f"{site}/changelist.html")
    lines = body_of(snap).splitlines()
    top = next(i for i, ln in enumerate(lines) if ln.strip().startswith("- table"))
    assert lines[top].strip() == "- table (50 rows, 8 columns):", lines[top]
    grid = [ln.strip() for ln in lines[top + 1:top + 53]]
    head = cells(grid[0])
    assert [re.sub(r"\(e\d+\)", "(eN)", c) for c in head[1:]] == [
        "[Number](eN)", "[Title](eN)", "Owner", "Reviewer", "Merged", "Date", "Lines"], head
    assert re.fullmatch(r'checkbox "Select all objects on this page for an action" \[ref=e\d+\]', head[0])
    assert grid[1] == "|" + "-|" * 8
    rows = [cells(r) for r in grid[2:]]
    assert len(rows) == 50 and all(len(r) == 8 for r in rows), grid
    owners = ["ada", "grace", "linus", "barbara", "ken"]
    for i, row in enumerate(rows, 1):
        assert re.fullmatch(rf"\[Change {4000 + i}\]\(e\d+\)", row[1]), row
        assert row[3] == owners[i % 5], row
        # An empty cell stays, so what follows it stays in its column.
        assert row[4] == ("" if i % 3 == 0 else owners[(i + 2) % 5]), row
        assert row[5] == ("True" if i % 2 else "False"), row  # the yes/no icon by its alt
        if i % 10 == 0:
            assert row[6:] == [f"reverted in {4001 + i}", ""], row  # a cell spanning two columns
        else:
            assert row[6] == ("" if i % 4 == 0 else f"2026-03-{i % 28 + 1:02d}") and row[7] == str(i * 7), row
    box = re.search(r"\[ref=(e\d+)\]", rows[6][0])
    assert box and "Change 4007" in rows[6][0]
    await clicked(client, box.group(1), "Picked: 4007")
    # A table captioned by a link (an admin's app list) keeps the link's ref in the table's line.
    app = re.search(r"^ *- table \[Shop\]\((e\d+)\) \(1 rows, 3 columns\):$", body_of(snap), re.M)
    assert app, body_of(snap)[-600:]
    await clicked(client, app.group(1), "Shop app opened")

    # interactive_only keeps the header and every row that holds a control, whole, with its links' addresses.
    outline, _ = await call(client, "browser_snapshot", {"interactive_only": True})
    kept = [cells(ln.strip()) for ln in outline.splitlines() if ln.strip().startswith("| checkbox")]
    assert len(kept) == 51 and all(len(r) == 8 for r in kept), outline
    assert [r[2:] for r in kept[1:]] == [r[2:] for r in rows]
    assert re.fullmatch(r"\[Change 4001\]\(e\d+ /change/4001/\)", kept[1][1]), kept[1]

    # A table over the budget, asked for as a region: each piece starts with the table's line and header again.
    small, _ = await call(client, "browser_snapshot", {"max_tokens": 600})
    region = re.search(r"- table \(50 rows, 8 columns\) \[region=(e\d+), ~\d+ tokens\]", small)
    assert region, small
    table, _ = await call(client, "browser_snapshot", {"max_tokens": 1200, "region": region.group(1)})
    note = NOTE.search(table)
    assert note and note.group(6) and f"region={region.group(1)} for the rest" in table, table[-300:]
    rest, _ = await call(client, "browser_snapshot", {"max_tokens": 1200, "offset": int(note.group(6)),
                                                      "region": region.group(1)})
    body = body_of(rest).splitlines()
    assert body[0].strip() == "- table (50 rows, 8 columns):" and body[1].strip() == grid[0], body[:3]
    assert body[2].strip() == grid[1] and re.match(r" *\| checkbox .*Change 40\d\d", body[3]), body[:4]


async def test_names_are_the_accessible_names_and_every_clickable_has_a_ref(client: Client, site: str) -> None:
    snap = await snapshot_of(client, f"{site}/names.html")
    body = body_of(snap)
    # The header reads as written, its links in place.
    assert re.search(r"^Welcome, admin\. \[View site\]\(e\d+\) / \[Change password\]\(e\d+\) /$", body, re.M), body
    assert re.search(r'^ - button "Log out" \[ref=e\d+\] \[submit\]$', body, re.M)
    # Links inside headings keep their refs.
    counts = re.search(r"^## \[Show counts\]\((e\d+)\)$", body, re.M)
    assert counts and re.search(r"^## \[Table of Contents\]\(e\d+\)$", body, re.M), body
    # A field by its label, its placeholder at the last; never by its name attribute.
    assert re.search(r'- searchbox "Search the docs" \[ref=e\d+\]$', body, re.M)
    assert re.search(r'- textbox "Filter by tag" \[ref=e\d+\]$', body, re.M)
    assert '"q"' not in body and '"q2"' not in body and "nameonly" not in body
    # A dropdown by its label, showing its choice; its options are not its name.
    assert re.search(r'- combobox "Sort by" \[ref=e\d+\] options: "Newest first", "Oldest first", "Most read": '
                     r"Oldest first$", body, re.M), body
    # Icon links and buttons by the title, SVG title, alt or aria-label inside them.
    calendar = re.search(r'- link "Choose a Date" \[ref=(e\d+)\]', body)
    assert calendar and '- link "Settings" [ref=' in body and '- link "Help" [ref=' in body
    assert '- button "Close" [ref=' in body and "[]" not in body
    # The file field's text reads with its link, not as "Currently: Change:".
    assert re.search(r"^Currently: \[report\.pdf\]\(e\d+\)$", body, re.M) and "Currently: Change:" not in body
    assert re.search(r'- checkbox "Clear" \[ref=e\d+\]', body)
    assert re.search(r'- textbox "Quantity" \[ref=e\d+\]: 2$', body, re.M)  # aria-labelledby
    # A password inside a label never names anything.
    assert re.search(r'- checkbox "Remember" \[ref=e\d+\]$', body, re.M) and "s3cr3t-in-label" not in snap
    found, _ = await call(client, "browser_find", {"text": "s3cr3t"})
    assert found.startswith("No line of the page holds")
    # Elements the page made clickable by a script, with no role: a short one by its words, a card as a part.
    archive = re.search(r'- generic "Archive" \[ref=(e\d+)\]$', body, re.M)
    star = re.search(r'- generic "Star this page" \[ref=(e\d+)\]$', body, re.M)  # an icon styled inline
    card = re.search(r"^- generic \[ref=(e\d+)\]:\n A card the page made clickable", body, re.M)
    assert archive and star and card, body
    # A page's words in a cell cannot pass for a ref or a cell of their own.
    assert '| Tea | button "Pay" [ref =e1] and [free] (e2) \\| a fake cell |' in body, body
    for ref, said in [(counts.group(1), "counts shown"), (calendar.group(1), "calendar opened"),
                      (archive.group(1), "archive clicked"), (star.group(1), "starred"),
                      (card.group(1), "card clicked")]:
        await clicked(client, ref, said)
