"""Tables that stay tables whatever their cells hold, long cells that are never cut silently, and names and
wrappers as a person reads them (issue 37, items 7 to 9).

The pages are modelled on the failures the issue found on real sites (tests/site/): a CMS's listing of forty pages
whose cells hold a checkbox with its label, a heading with a list of row actions, a list in a small form, code and
a table of their own (cms_listing.html); a database's reference manual whose description cells run long and end
with their examples, and a note longer than a text line holds (reference.html); a data browser's table of more rows
than a snapshot shows (many_rows.html); Sphinx's numbered links and an editor's wrappers that say they are nothing
(sphinx_editor.html). Every snapshot comes through the real pod from
the real extension in real Chromium, as in test_snapshot_structure.py.
"""

from __future__ import annotations

import re

import pytest
from mcp import Client

from .live_pod import call
from .test_snapshot_structure import body_of, cells, clicked, snapshot_of

pytestmark = pytest.mark.anyio

# A cell or a text cut where the outline's limit is, as it says so.
CUT = re.compile(r"… \[cut at (\d+) of ~(\d+) characters: browser_snapshot region=(e\d+) reads it whole\]")


def grid_under(lines: list[str], top: int, height: int, width: int) -> tuple[list[str], list[list[str]]]:
    """The header's and the rows' cells of the grid under the table's line `top`, each row `width` cells."""
    grid = [ln.strip() for ln in lines[top + 1:top + height + 3]]
    assert grid[1] == "|" + "-|" * width, grid[:3]
    table = [cells(r) for r in grid[:1] + grid[2:]]
    assert len(table) == height + 1 and all(len(r) == width for r in table), grid
    return table[0], table[1:]


async def test_a_listing_stays_a_grid_whatever_its_cells_hold(client: Client, site: str) -> None:
    snap = await snapshot_of(client, f"{site}/cms_listing.html")
    lines = body_of(snap).splitlines()
    top = next((i for i, ln in enumerate(lines) if ln.strip().startswith("- table")), None)
    assert top is not None and lines[top].strip() == '- table "Pages" (40 rows, 6 columns):', snap
    head, rows = grid_under(lines, top, 40, 6)
    assert head[1:] == ["Title", "Author", "Status", "Slug", "Translations"], head
    assert re.fullmatch(r'checkbox "Select all" \[ref=e\d+\]', head[0]), head
    authors = ["ada", "grace", "linus", "barbara", "ken"]
    for i, row in enumerate(rows, 1):
        # Each control in its own row: the row's checkbox named by its label once, the title's heading and its
        # list of actions, the status list inside its form, the slug's code, the translations' own table.
        assert re.fullmatch(rf'checkbox "Select Page {i}" \[ref=e\d+\]', row[0]), row
        assert re.fullmatch(rf"\[Page {i}\]\(e\d+\) \[Edit\]\(e\d+\); \[View\]\(e\d+\); "
                            rf'button "Trash" \[ref=e\d+\]', row[1]), row
        assert re.fullmatch(rf"\[{authors[i % 5]}\]\(e\d+\)", row[2]), row
        status = "Draft" if i % 3 == 0 else "Published"
        assert re.fullmatch(rf'combobox "Status of Page {i}" \[ref=e\d+\] options: "Draft", "Published": {status}',
                            row[3]), row
        assert row[4] == f"/pages/page-{i}", row
        langs = ["de", "fr", "ja"]
        translations = ("none" if i % 4 == 0 else
                        f"(table: Language, State; {langs[i % 3]}, {'done' if i % 2 else 'review'})")
        assert row[5] == translations, row
    # Nothing of the table is left to read as loose lines after it.
    assert lines[top + 43:] == ["Nothing picked."], lines[top + 43:]

    # browser_find gives a row whole under its header row: the checkbox found with its title is that row's.
    found, is_error = await call(client, "browser_find", {"text": "Page 17"})
    assert not is_error, found
    body = body_of(found).splitlines()
    at = next(i for i, ln in enumerate(body) if "[Page 17](" in ln)
    assert cells(body[at - 1].strip())[1:] == head[1:], body
    box = re.match(r'\| checkbox "Select Page 17" \[ref=(e\d+)\] \|', body[at].strip())
    assert box, body
    await clicked(client, box.group(1), "Picked: 17")
    trash = re.search(r'button "Trash" \[ref=(e\d+)\]', body[at])
    assert trash, body
    await clicked(client, trash.group(1), "Trashed: 17")


async def test_long_cells_are_whole_or_say_where_they_are_cut_and_find_reads_every_word(client: Client,
                                                                                       site: str) -> None:
    snap = await snapshot_of(client, f"{site}/reference.html")
    body = body_of(snap)
    rows = [ln.strip() for ln in body.splitlines() if ln.strip().startswith("| pad_")]
    assert len(rows) == 12, body[:3000]
    marks = {}
    for i, row in enumerate(rows, 1):
        description = cells(row)[1]
        cut = CUT.search(description)
        if cut is None:
            # Whole: its example is there, to its last word.
            assert description.endswith(f"Example: pad_{i}('hi', 5, 'xy') returns the marker zanzibar-{i}."), row
        else:
            assert f"zanzibar-{i}" not in description and int(cut.group(1)) < int(cut.group(2)), row
            marks[i] = cut.group(3)
    # The cells of 1,500 to 4,100 characters, cut at 600 before, are whole; the one of 9,500 says where it is cut.
    assert list(marks) == [8], marks
    # The mark's ref reads that cell alone and whole, its example included.
    cell, is_error = await call(client, "browser_snapshot", {"region": marks[8]})
    assert not is_error, cell
    assert cell.startswith(f"Region {marks[8]} of the page: that element alone, whole.")
    assert "pad_8('hi', 5, 'xy') returns the marker zanzibar-8." in body_of(cell), cell
    assert "(rule 8.0)" in cell and "zanzibar-7" not in cell

    # interactive_only, which keeps the lines one can act on, keeps no line for its cut mark alone.
    outline, _ = await call(client, "browser_snapshot", {"interactive_only": True})
    assert "(rule " not in outline and "links:" not in outline and "# String functions" in outline, outline

    # A text longer than a line holds says so too, and its mark reads it whole.
    note = next(ln for ln in body.splitlines() if "(rule 99.0)" in ln)
    cut = CUT.search(note)
    assert cut and "quokka-clause" not in note, note[-300:]
    whole, _ = await call(client, "browser_snapshot", {"region": cut.group(3)})
    assert "The last note names the quokka-clause." in whole, whole[-500:]
    # Under a budget smaller than the note, it comes in pieces that read on inside its one line, none lost.
    pieces, args = [], {"region": cut.group(3), "max_tokens": 1000}
    for _ in range(10):
        piece, is_error = await call(client, "browser_snapshot", args)
        assert not is_error, piece
        pieces.append(body_of(piece))
        more = re.search(r"Call again with offset=(\d+)", piece)
        if not more:
            break
        args = {**args, "offset": int(more.group(1))}
    assert len(pieces) > 2 and "This is the end." in piece, piece[-300:]
    assert re.sub(r"\s+", "", "".join(pieces)) == re.sub(r"\s+", "", body_of(whole)), pieces

    # browser_find reads what the snapshot cut: the example's row under the header row, and the note's end.
    for i in (1, 3, 8):
        found, is_error = await call(client, "browser_find", {"text": f"the MARKER zanzibar-{i}."})
        assert not is_error and found.startswith(f'1 line(s) of the page hold "the MARKER zanzibar-{i}."'), found
        lines = body_of(found).splitlines()
        hit = next(ln for ln in lines if f"zanzibar-{i}." in ln)
        assert cells(lines[lines.index(hit) - 1].strip()) == ["Function", "Description", "Return type"], lines
        # A long row reads as its start (which row it is) and the words around the match, as the result says.
        assert "each after the lines that place it (a long line as its start and the words around" in found
        assert hit.strip().startswith(f"| pad_{i}(string text, length integer) | ") and len(hit) < 1000, hit
        assert f"Example: pad_{i}('hi', 5, 'xy') returns the marker zanzibar-{i}." in hit, hit
    found, _ = await call(client, "browser_find", {"text": "quokka-clause"})
    assert found.startswith('1 line(s) of the page hold "quokka-clause"'), found
    assert "The last note names the quokka-clause." in found


async def test_numbered_links_keep_the_space_after_their_number(client: Client, site: str) -> None:
    snap = await snapshot_of(client, f"{site}/sphinx_editor.html")
    body = body_of(snap)
    assert re.search(r'- link "1\. Whetting Your Appetite" \[ref=e\d+\]', body), body
    assert re.search(r'- link "2\.1\. Invoking the Interpreter" \[ref=e\d+\]', body), body
    assert re.search(r"start with \[1\. Whetting Your Appetite\]\(e\d+\) and read on\.", body), body
    assert "1.Whetting" not in body and "2.1.Invoking" not in body


async def test_an_editors_wrappers_are_no_lines_of_their_own(client: Client, site: str) -> None:
    body = body_of(await snapshot_of(client, f"{site}/sphinx_editor.html"))
    # Its code reads as it stands, with no "- presentation:" line around it.
    assert "presentation" not in body and "- none" not in body, body
    assert re.search(r'^ *def greet\(name\):\n *return "hello " \+ name\n *print\(greet\("ada"\)\)$', body, re.M), body


async def test_find_reads_words_that_run_across_lines(client: Client, site: str) -> None:
    # The editor's two lines of code: no one line of the outline holds the words, the page's text does.
    await call(client, "browser_navigate", {"url": f"{site}/sphinx_editor.html"})
    found, is_error = await call(client, "browser_find", {"text": "greet(name): return"})
    assert not is_error and found.startswith('No one line of the outline holds "greet(name): return", but the '
                                             "page's text does"), found
    assert 'def greet(name): return "hello " + name' in found, found


async def test_find_reads_the_rows_past_those_a_snapshot_shows(client: Client, site: str) -> None:
    snap = await snapshot_of(client, f"{site}/many_rows.html", max_tokens=200_000)
    assert re.search(r"\(rows 1-19\d\d of 2100 shown; browser_find finds a row by its words\)", snap), snap[-500:]
    assert "| Station 2077 |" not in snap
    found, is_error = await call(client, "browser_find", {"text": "Station 2077"})
    assert not is_error and found.startswith('1 line(s) of the page hold "Station 2077"'), found
    assert "| Station | Reading | Unit |\n | Station 2077 | 6231 | mm |" in found, found
