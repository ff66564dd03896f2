"""Files across the gap (docs/files.md): browser_upload and browser_download in real Chromium with the real extension
and the real pod, the agent's calls made by the official MCP client at the session's proxy endpoint.

Playwright plays the person: the upload's card is read and answered in the panel. The test site's server
(tests/browser/harness.py) is the other end: a multipart form's target that says the name, size and sha256 of the
file it received, a report it serves only with the session cookie a page visit left in the browser, a download that
never ends, a file whose server-given name tries to leave the folder. What the pod wrote is read in the session's
working folder; what the extension asked of the pod is read off the tapped /acp socket.
"""

from __future__ import annotations

import hashlib
import http.server
import json
import stat
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from playwright.async_api import BrowserContext, Page, expect
from refs import ref_of
from scripted_agent import ScriptedAgent
from waits import eventually

from .conftest import panel_tunnel
from .harness import ODD_NAME, PLAIN_REPORT, PRIVATE_REPORT, page_at, playwright_browser, serving, stage_extension
from .live_pod import KEY, LiveGateway, TappedSocket, call, opened
from .test_panel import guard_said, in_background, result_text
from .test_units import run

pytestmark = pytest.mark.anyio

CAP = 4 << 20  # the pod's max_file_bytes here: the endless download stops at it
READ = "_openab/file/read"
WRITE = "_openab/file/write"
ASKS = "The agent wants to "


@pytest.fixture(scope="module")
async def gateway(agent: ScriptedAgent, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[LiveGateway]:
    # A cap small enough for the endless download to reach it; the pod's own de-duplication window, as shipped.
    async with LiveGateway(tmp_path_factory.mktemp("state"), agent, max_file_bytes=CAP) as gw:
        yield gw


@pytest.fixture(scope="module")
def downloads(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The person's downloads folder: what the browser saves there is theirs, and the agent's downloads stay out."""
    return tmp_path_factory.mktemp("person-downloads")


@pytest.fixture(scope="module")
async def context(gateway: LiveGateway, site: str, downloads: Path,
                  tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[BrowserContext]:
    tmp = tmp_path_factory.mktemp("files")
    ext = stage_extension(tmp / "ext", {"url": gateway.url, "key": KEY, "autopilot": False})
    async with playwright_browser(ext, tmp / "profile", f"{site}/index.html", downloads=downloads) as ctx:
        yield ctx


tunnel = panel_tunnel()



def socket_of(gateway: LiveGateway) -> TappedSocket:
    [sock] = [s for s in gateway.browser_sockets if not s.closed.is_set()]
    return sock


def asked(gateway: LiveGateway, method: str) -> int:
    """How many `method` requests the extension sent the pod on its socket so far."""
    return len(socket_of(gateway).requests(method))


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def put(workdir: Path, name: str, data: bytes) -> Path:
    path = workdir / name
    path.write_bytes(data)
    return path




async def card_answered(panel: Page, client: Client, tool: str, args: dict[str, Any], decision: str,
                        before: Any = None) -> tuple[str, str, Any]:
    """Calls `tool`, waits for its one card, runs `before` (what the page does while the person reads it), answers;
    the card's title, its site line and the call's result."""
    async with in_background(client.call_tool(tool, args)) as out:
        card = panel.locator(".card")
        await expect(card).to_have_count(1)
        title = await card.locator(".title").text_content() or ""
        where = await card.locator(".where").text_content() or ""
        if before is not None:
            await before()
        await card.locator(f"button[data-decision={decision}]").click()
    await expect(panel.locator(".card")).to_have_count(0)
    return title, where, out["result"]


def document(size: int) -> bytes:
    """A text file of `size` bytes that is not the same byte over and over (a chunk out of place would show)."""
    line = b"".join(b"line %06d of the agent's notes\n" % i for i in range(size // 30 + 1))
    return line[:size]


# -- upload --------------------------------------------------------------------------------------------------------


async def test_an_upload_asks_naming_the_file_its_size_and_the_site_and_a_no_reads_nothing(
        panel: Page, client: Client, context: BrowserContext, gateway: LiveGateway, workdir: Path, site: str) -> None:
    data = document(1_572_864)  # 1.5 MB: three chunks of the pod's, two pieces into the page
    put(workdir, "notes.txt", data)
    snap, tab = await opened(client, context, f"{site}/upload.html")
    field = ref_of(snap, '"Document"')
    reads = asked(gateway, READ)

    title, where, result = await card_answered(panel, client, "browser_upload", {"ref": field, "path": "notes.txt"},
                                               "deny")
    host = site.removeprefix("http://")
    assert title.startswith(ASKS) and '"notes.txt"' in title and "(1.5 MB)" in title and host in title, title
    assert host in where
    assert result.is_error and "not allowed by the user" in result_text(result), result_text(result)
    assert guard_said(result) == "denied"
    # Declined: not one byte of the file was asked of the pod, and the page has nothing.
    assert asked(gateway, READ) == reads
    assert await tab.evaluate("document.getElementById('doc').files.length") == 0
    assert await tab.evaluate("window.events") == []

    _, _, result = await card_answered(panel, client, "browser_upload", {"ref": field, "path": "notes.txt"}, "allow")
    said = result_text(result)
    assert not result.is_error, said
    assert guard_said(result) == "asked-allowed"
    assert "notes.txt" in said and sha256(data) in said
    assert asked(gateway, READ) >= reads + 3
    assert await tab.evaluate("window.events") == ["input: notes.txt", "change: notes.txt"]
    # The form sends it as a person's pick would be sent: its server got these very bytes under that name.
    send = ref_of(snap, 'button "Send"')
    _, _, result = await card_answered(panel, client, "browser_click", {"ref": send}, "allow")
    assert not result.is_error, result_text(result)
    received = await page_at(context, f"{site}/upload-echo")
    got = received.locator("#received li.file")
    await expect(got).to_have_count(1)
    assert await got.get_attribute("data-field") == "document"
    assert await got.get_attribute("data-name") == "notes.txt"
    assert await got.get_attribute("data-size") == str(len(data))
    assert await got.get_attribute("data-sha256") == sha256(data)


async def test_a_page_that_swaps_the_field_after_the_card_gets_nothing(
        panel: Page, client: Client, context: BrowserContext, gateway: LiveGateway, workdir: Path, site: str) -> None:
    put(workdir, "contract.txt", document(40_000))
    snap, tab = await opened(client, context, f"{site}/upload.html")
    reads = asked(gateway, READ)

    async def swap() -> None:
        await tab.evaluate("window.swapField()")

    _, _, result = await card_answered(panel, client, "browser_upload",
                                       {"ref": ref_of(snap, '"Document"'), "path": "contract.txt"}, "allow", swap)
    said = result_text(result)
    assert result.is_error and "nothing was uploaded" in said and "Nothing was read from your file" in said, said
    assert asked(gateway, READ) == reads
    assert await tab.evaluate("document.getElementById('doc').files.length") == 0
    assert await tab.evaluate("window.events") == []


async def test_a_drop_zone_gets_the_file_as_a_persons_drop(
        panel: Page, client: Client, context: BrowserContext, workdir: Path, site: str) -> None:
    data = document(300_000)
    put(workdir, "photo-list.txt", data)
    snap, tab = await opened(client, context, f"{site}/upload.html")
    title, _, result = await card_answered(panel, client, "browser_upload",
                                           {"ref": ref_of(snap, 'region "Drop files here"'), "path": "photo-list.txt"},
                                           "allow")
    assert '"photo-list.txt"' in title and "(293 KB)" in title and 'region "Drop files here"' in title, title
    assert not result.is_error, result_text(result)
    await expect(tab.locator("#dropped")).to_have_text(
        f"dropped photo-list.txt, {len(data)} bytes, sha256 {sha256(data)}")


async def test_an_upload_refuses_a_field_that_takes_no_file(
        panel: Page, client: Client, context: BrowserContext, gateway: LiveGateway, workdir: Path, site: str) -> None:
    put(workdir, "name.txt", b"Ada")
    snap, _ = await opened(client, context, f"{site}/form.html")
    reads = asked(gateway, READ)
    field = ref_of(snap, 'textbox "Username"')
    text, is_error = await call(client, "browser_upload", {"ref": field, "path": "name.txt"})
    assert is_error and "not a file field" in text, text
    await expect(panel.locator(".card")).to_have_count(0)
    assert asked(gateway, READ) == reads


# -- download ------------------------------------------------------------------------------------------------------


def fetched_without_the_browser(url: str) -> int:
    """The HTTP status the site gives a request that does not come from the person's browser."""
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as e:
        return e.code


def written(folder: Path) -> set[str]:
    """Every file under ``folder``, by its path relative to it: a download lands in the working folder's
    ``downloads/`` unless the agent gave a path."""
    return {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()}


async def test_a_download_goes_with_the_persons_cookie_into_the_working_folder(
        client: Client, context: BrowserContext, gateway: LiveGateway, workdir: Path, site: str) -> None:
    private = f"{site}/files/private/report.csv"
    assert fetched_without_the_browser(private) == 403  # only the browser's session opens it
    # A page visit leaves the session cookie (SameSite=Lax, HttpOnly) in the browser.
    await opened(client, context, f"{site}/files/sign-in")
    writes = asked(gateway, WRITE)
    text, is_error = await call(client, "browser_download", {"url": private})
    assert not is_error, text
    path = workdir / "downloads" / "report.csv"  # no path given: the downloads folder, under the server's name
    assert path.read_bytes() == PRIVATE_REPORT
    assert sha256(PRIVATE_REPORT) in text and " to downloads/report.csv in your working folder" in text, text
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert asked(gateway, WRITE) - writes == -(-len(PRIVATE_REPORT) // (512 * 1024))  # chunks of 512 KiB

    # By a link's ref, under the name the agent gives.
    snap, _ = await opened(client, context, f"{site}/download.html")
    text, is_error = await call(client, "browser_download", {"ref": ref_of(snap, "Monthly report"), "path": "may.csv"})
    assert not is_error, text
    assert (workdir / "may.csv").read_bytes() == PRIVATE_REPORT


async def test_a_download_that_never_ends_is_stopped_at_the_cap(
        client: Client, context: BrowserContext, workdir: Path, site: str) -> None:
    before = written(workdir)
    text, is_error = await call(client, "browser_download", {"url": f"{site}/files/endless"})
    assert is_error and "cap" in text and str(CAP) in text, text
    assert written(workdir) == before  # nothing kept, not even a partial file


async def test_a_server_given_name_stays_in_the_folder_and_readable(
        client: Client, workdir: Path, site: str) -> None:
    before = written(workdir)
    text, is_error = await call(client, "browser_download", {"url": f"{site}/files/odd-name"})
    assert not is_error, text
    [landed] = written(workdir) - before
    assert (workdir / landed).read_bytes() == PLAIN_REPORT
    folder, name = landed.split("/")
    assert folder == "downloads" and f" to {landed} in your working folder" in text, text
    assert not name.startswith(".") and all(ord(c) >= 32 and ord(c) != 127 for c in name), name
    assert "evil" in name and name != ODD_NAME
    assert not any("evil" in p.name for p in workdir.parent.rglob("*") if workdir not in p.parents and p != workdir)


class _NamingHandler(http.server.BaseHTTPRequestHandler):
    """A server that names its file what the query says (`/named?name=...`), as a hostile page's server may."""

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        [name] = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)["name"]
        self.send_response(200)
        self.send_header("content-type", "application/octet-stream")
        self.send_header("content-length", str(len(PLAIN_REPORT)))
        self.send_header("content-disposition", f"attachment; filename*=UTF-8''{urllib.parse.quote(name, safe='')}")
        self.end_headers()
        self.wfile.write(PLAIN_REPORT)


@pytest.fixture(scope="module")
def naming_site() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _NamingHandler)
    server.daemon_threads = True
    with serving(server) as port:
        yield f"http://127.0.0.1:{port}"


def instructions_in(workdir: Path) -> list[str]:
    """Every file or folder in the working folder (at any depth) an agent CLI would read as its instructions or
    config, whatever the case: what a page must never plant."""
    read = {"agents.md", ".mcp.json", "mcp.json", ".env", "conftest.py", "claude.md"}
    return sorted(str(p.relative_to(workdir)) for p in workdir.rglob("*") if p.name.casefold() in read)


async def test_a_server_named_dotfile_or_agent_instructions_lands_renamed_in_the_downloads_folder(
        client: Client, workdir: Path, naming_site: str) -> None:
    # The server names its file to be read by the agent's CLI: a dotfile behind dots and spaces, instructions.
    for served, landed in ((". .mcp.json", "download-mcp.json"), ("AGENTS.md", "download-AGENTS.md"),
                           (" . .env", "download-env"), ("conftest.py", "download-conftest.py")):
        url = f"{naming_site}/named?name={urllib.parse.quote(served)}"
        text, is_error = await call(client, "browser_download", {"url": url})
        assert not is_error, text
        # Where it landed, in the pod's words: the path relative to the working folder, and the server's name quoted.
        assert f" to downloads/{landed} in your working folder: {len(PLAIN_REPORT)} bytes" in text, text
        assert f"The server named it {json.dumps(served)}" in text, text
        placed = workdir / "downloads" / landed
        assert placed.read_bytes() == PLAIN_REPORT and stat.S_IMODE(placed.stat().st_mode) == 0o600
    assert stat.S_IMODE((workdir / "downloads").stat().st_mode) == 0o700
    assert instructions_in(workdir) == []
    # The agent's own path may not name one either: refused before the browser is asked, saying what to do.
    for given, said in (("CLAUDE.md", "give another name, e.g. 'download-CLAUDE.md'"),
                        (".github/workflows/ci.yml", "'.github' in '.github/workflows/ci.yml' is a folder name"),
                        (".env", "'.env' in '.env' is a file name")):
        text, is_error = await call(client, "browser_download", {"url": f"{naming_site}/named?name=x.txt",
                                                                 "path": given})
        assert is_error and "browser_download was not run" in text and said in text, text
    assert instructions_in(workdir) == [] and not (workdir / ".github").exists()


@pytest.mark.parametrize("url", ["file:///etc/passwd", "data:text/plain,hello", "javascript:alert(1)",
                                 "chrome://settings", "blob:http://127.0.0.1/x"])
async def test_a_download_from_anything_but_http_is_refused(client: Client, workdir: Path, url: str) -> None:
    before = written(workdir)
    text, is_error = await call(client, "browser_download", {"url": url})
    assert is_error and "http" in text, text
    assert written(workdir) == before


async def test_the_extension_itself_refuses_what_is_not_http(panel: Page) -> None:
    # The pod refuses these before a call reaches the browser; the browser's own check does not rely on it.
    said = await run(panel, "tools-download.js", """arg.map((u) => { try { m.downloadUrl(u); return 'fetched'; }
        catch (e) { return e.message; } })""", ["file:///etc/passwd", "data:,x", "blob:https://a.example/1",
                                                 "javascript:void(0)", "chrome://settings", "ftp://a.example/f"])
    assert all(s.startswith("only http(s) URLs can be downloaded") for s in said), said
    assert "computer" in said[0] and "page's own object" in said[2]


async def test_a_download_a_click_started_is_the_agents_and_the_persons_downloads_are_untouched(
        panel: Page, client: Client, context: BrowserContext, workdir: Path, downloads: Path, site: str) -> None:
    snap, _ = await opened(client, context, f"{site}/download.html")
    text, is_error = await call(client, "browser_download", {})
    assert is_error and "no download is waiting" in text, text
    # A button whose script starts the download, then a link with the download attribute.
    for element, path in (('button "Export prices"', "export.csv"), ('link "Price list"', "list.csv")):
        text, is_error = await call(client, "browser_click", {"ref": ref_of(snap, element)})
        assert not is_error, text
        text, is_error = await call(client, "browser_download", {"path": path})
        assert not is_error, text
        assert (workdir / path).read_bytes() == PLAIN_REPORT
        text, is_error = await call(client, "browser_download", {})
        assert is_error and "no download is waiting" in text, text  # taken once
    # Chrome's list of the person's downloads, and their folder, have none of the agent's.
    assert await panel.evaluate("chrome.downloads.search({})") == []
    await eventually(lambda: not any(downloads.iterdir()), 15, what="the person's downloads folder to be empty")


async def test_a_file_an_export_form_posts_is_the_agents_and_its_page_stays(
        panel: Page, client: Client, context: BrowserContext, gateway: LiveGateway, workdir: Path, downloads: Path,
        site: str) -> None:
    # An "Export" button submitting a POST form, answered with the file: only that POST, with the person's cookie,
    # gets it (the same address fetched again with GET is not found), so the browser's one answer must be taken.
    await opened(client, context, f"{site}/files/sign-in")
    snap, page = await opened(client, context, f"{site}/download.html")
    writes = asked(gateway, WRITE)
    # Submitting a form is a step the person approves (autopilot is off here).
    _, _, clicked = await card_answered(panel, client, "browser_click", {"ref": ref_of(snap, 'button "Export orders"')},
                                        "allow")
    said = result_text(clicked)
    assert "it started a download" in said and "browser_download with no ref or url" in said, said
    text, is_error = await call(client, "browser_download", {})
    assert not is_error, text
    path = workdir / "downloads" / "orders.csv"  # the server's name for it, in the downloads folder
    assert path.read_bytes() == PRIVATE_REPORT and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert sha256(PRIVATE_REPORT) in text and "/files/export" in text
    assert asked(gateway, WRITE) - writes == -(-len(PRIVATE_REPORT) // (512 * 1024))
    # The tab still shows the page the form was on; Chrome saved, listed and showed nothing.
    assert page.url == f"{site}/download.html"
    text, is_error = await call(client, "browser_snapshot")
    assert 'button "Export orders"' in text, text
    assert await panel.evaluate("chrome.downloads.search({})") == []
    assert not written(downloads)
    text, is_error = await call(client, "browser_download", {})
    assert is_error and "no download is waiting" in text, text  # taken once

    # A form whose answer never ends is read up to what the browser holds of one, then refused whole.
    before = written(workdir)
    await card_answered(panel, client, "browser_click", {"ref": ref_of(snap, 'button "Export the live log"')}, "allow")
    text, is_error = await call(client, "browser_download", {})
    assert is_error and "the file the page sent (in answer to a POST) is over the 64.0 MB" in text, text
    assert written(workdir) == before
    # One that announces more is refused on its headers alone, saying its size.
    await card_answered(panel, client, "browser_click", {"ref": ref_of(snap, 'button "Export everything"')}, "allow")
    text, is_error = await call(client, "browser_download", {})
    assert is_error and "the file the page sent (in answer to a POST) is 200 MB, over the 64.0 MB" in text, text
    # The page answers still: the tab was not left waiting on the cancelled answer.
    await card_answered(panel, client, "browser_click", {"ref": ref_of(snap, 'button "Export orders"')}, "allow")
    text, is_error = await call(client, "browser_download", {"path": "again.csv"})
    assert not is_error and (workdir / "again.csv").read_bytes() == PRIVATE_REPORT, text


async def test_a_one_time_link_a_click_follows_is_taken_from_the_browsers_one_answer(
        client: Client, context: BrowserContext, workdir: Path, site: str) -> None:
    # A receipt's signed link answers once: the file is the browser's answer to the click, not a second fetch.
    snap, _ = await opened(client, context, f"{site}/download.html")
    text, is_error = await call(client, "browser_click", {"ref": ref_of(snap, "Your receipt")})
    assert not is_error and "it started a download" in text, text
    text, is_error = await call(client, "browser_download", {"path": "receipt.bin"})
    assert not is_error, text
    assert (workdir / "receipt.bin").read_bytes() == PLAIN_REPORT
    assert fetched_without_the_browser(f"{site}/files/once?receipt=7f3a") == 410  # used up by the browser's one load

    # A GET download past what the browser holds is fetched again at its address, as before: here it meets the pod's
    # cap.
    before = written(workdir)
    text, is_error = await call(client, "browser_click", {"ref": ref_of(snap, "Live log")})
    assert not is_error and "it started a download" in text, text
    text, is_error = await call(client, "browser_download", {})
    assert is_error and "cap" in text and str(CAP) in text, text
    assert written(workdir) == before


async def test_a_download_the_person_starts_stays_theirs(
        panel: Page, context: BrowserContext, downloads: Path, site: str) -> None:
    page = await context.new_page()
    try:
        await page.goto(f"{site}/download.html")
        async with page.expect_download() as started:
            await page.click("#plain")
        download = await started.value
        assert await download.failure() is None
        listed = await panel.evaluate("chrome.downloads.search({})")
        assert [d["url"] for d in listed] == [f"{site}/files/plain.csv"]
    finally:
        await page.close()
        await panel.evaluate("chrome.downloads.erase({})")


# -- the extension's parts, as shipped -----------------------------------------------------------------------------


async def test_only_the_person_or_their_site_rule_lets_a_file_go(panel: Page) -> None:
    # The guard as shipped, in the extension's page: autopilot and an approved plan for the site still ask.
    said = await panel.evaluate("""async () => {
        await (await import('/lib/catalogue.js')).loadCatalogue();
        const { Guard } = await import('/lib/guard.js');
        const { Plan } = await import('/lib/plan.js');
        const desc = { role: 'button', name: 'Document', tag: 'input', type: 'file', sensitive: 'file',
            origin: 'https://shop.example', url: 'https://shop.example/send', file: { name: 'a.txt', size: 2048 } };
        const out = {};
        for (const [label, settings, planned] of [
                ['autopilot', { autopilot: true, siteRules: {} }, false],
                ['plan', { autopilot: true, siteRules: {} }, true],
                ['rule', { autopilot: false, siteRules: { 'shop.example': 'always' } }, false]]) {
            const plan = new Plan(() => settings);
            const sites = [{ host: 'shop.example', shown: 'shop.example' }];
            if (planned) plan.approved = { summary: 's', steps: ['s'], sites };
            let shown;
            const card = new Promise((resolve) => { shown = resolve; });
            const guard = new Guard(() => settings, async () => {}, () => {
                for (const c of guard.cards.values()) shown(`asked: ${c.title}`);
            }, plan);
            const checked = guard.check('browser_upload', desc, {}, null, 'https://shop.example/send')
                .then((r) => `ran, asked=${r.asked}`, (e) => e.message);
            out[label] = await Promise.race([checked, card]);
            guard.cancelAll();
        }
        return out;
    }""")
    card = ('asked: The agent wants to upload the file "a.txt" (2.0 KB) to shop.example: put it in the file field '
            'button "Document"')
    assert said == {"autopilot": card, "plan": card, "rule": "ran, asked=false"}



# -- the wire: binary frames where the pod offers them, JSON where it does not ----------------------------------------


def chunk_requests(gateway: LiveGateway, method: str, since: int) -> list[dict[str, Any]]:
    """The params of the extension's `method` requests after the first `since`, as the tap kept them (a binary
    frame's as its header)."""
    return [r["params"] for r in socket_of(gateway).requests(method)[since:]]


async def test_files_go_in_binary_frames_and_in_json_to_a_pod_that_offers_none(
        panel: Page, client: Client, context: BrowserContext, gateway: LiveGateway, workdir: Path, site: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    data = document(2_621_440 + 7)  # 2.5 MB and a bit: six chunks of the pod's, three pieces into the page
    put(workdir, "framed.txt", data)
    await opened(client, context, f"{site}/files/sign-in")
    for offered in (True, False):
        if not offered:  # an older pod: its calls' `file` says nothing of frames or a window
            monkeypatch.setattr("openab_browser.core.files.calls._OFFER", {})
        writes, reads = asked(gateway, WRITE), asked(gateway, READ)
        text, is_error = await call(client, "browser_download", {"url": f"{site}/files/private/report.csv",
                                                                 "path": f"report-{offered}.csv"})
        assert not is_error, text
        assert (workdir / f"report-{offered}.csv").read_bytes() == PRIVATE_REPORT
        assert sha256(PRIVATE_REPORT) in text
        sent = chunk_requests(gateway, WRITE, writes)
        assert sent and all(("sha256" in p) is offered and ("data" in p) is not offered for p in sent), sent

        snap, tab = await opened(client, context, f"{site}/upload.html?offered={offered}")
        _, _, result = await card_answered(panel, client, "browser_upload",
                                           {"ref": ref_of(snap, '"Document"'), "path": "framed.txt"}, "allow")
        assert not result.is_error, result_text(result)
        held = await tab.evaluate("""async () => { const f = document.getElementById('doc').files[0];
            const d = new Uint8Array(await crypto.subtle.digest('SHA-256', await f.arrayBuffer()));
            return [f.size, Array.from(d, (v) => v.toString(16).padStart(2, '0')).join('')]; }""")
        assert held == [len(data), sha256(data)]
        assert len(chunk_requests(gateway, READ, reads)) == 6
        # The pod's answers: a binary frame's result says its size, a JSON one carries the chunk in base64.
        answers = [socket_of(gateway).answer(r) for r in socket_of(gateway).requests(READ)[reads:]]
        assert all(a is not None and ("size" in a["result"]) is offered and ("data" in a["result"]) is not offered
                   for a in answers), answers


# The extension's end of a binary frame (lib/rpc.js): a request with bytes goes as one frame of the pod's layout, and
# an answer in a frame settles its request with its bytes; a frame that is not one is dropped, the request still open.
