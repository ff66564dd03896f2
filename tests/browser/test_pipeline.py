"""Each stage of the extension's one path for every action (lib/pipeline.js, lib/stages/), alone.

Every stage runs as the shipped module inside the extension's own page, given a step and a `next` of the test's
own: fakes of the browser's parts (a tab list, a dialog watcher, a downloads count), never of our modules. What the
stages do together is what tests/browser/test_tools.py, test_dialogs.py, test_handoff.py, test_plan.py,
test_journal.py and test_files.py hold end to end.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import Page

from .harness import unpaired_panel

pytestmark = pytest.mark.anyio

LIB = Path(__file__).parents[2] / "extension" / "lib"


@pytest.fixture(scope="module")
async def page(site: str, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Page]:
    async with unpaired_panel(site, tmp_path_factory.mktemp("pipeline")) as page:
        yield page


# What every check starts from: the catalogue (as the worker's start reads it), the module under test as `m`, and
# helpers to make a step of a catalogue tool and a `next` that records it ran.
PRELUDE = """
const catalogue = await import('/lib/catalogue.js');
await catalogue.loadCatalogue();
const m = await import(`/lib/${MODULE}`);
const errors = await import('/lib/errors.js');
const call = (extra = {}) => ({ decision: '', rule: '', personAllowed: false, throwIfCancelled() {}, ...extra });
const step = (name, extra = {}) => ({ name, args: {}, facts: catalogue.factsOf(name), call: call(), parts: {},
  tabId: 7, ...extra });
const said = (result) => result.content.map((c) => c.text).join('\\n');
const ran = [];
const answer = (text) => () => { ran.push(text); return { content: [{ type: 'text', text }] }; };
"""


async def run(page: Page, module: str, body: str, arg: Any = None) -> Any:
    """Runs `body` (statements ending in a `return`) with the module `module` of lib/ as `m`."""
    script = f"async (arg) => {{ const MODULE = {module!r}; {PRELUDE}\n{body}\n}}"
    return await page.evaluate(script, arg)


async def test_the_queue_answers_busy_past_its_bound_and_counts_a_call_out_when_it_ends(page: Page) -> None:
    got = await run(page, "stages/queue.js", """
        const stage = m.queue(2);
        const gates = [];
        const held = () => new Promise((resolve) => gates.push(resolve));
        const first = stage(step('browser_click'), held);
        const second = stage(step('browser_click'), held);
        const refused = await stage(step('browser_snapshot'), answer('third'));
        gates[0]({ content: [] });
        await first;
        const after = await stage(step('browser_snapshot'), answer('fourth'));
        gates[1]({ content: [] });
        await second;
        return { refused: [said(refused), refused.isError], after: said(after), ran };
    """)
    assert got == {"refused": ["the browser is busy with 2 queued calls; wait for them and retry", True],
                   "after": "fourth", "ran": ["fourth"]}


async def test_while_the_person_has_the_tab_every_other_call_is_refused_at_once(page: Page) -> None:
    got = await run(page, "stages/exclusive.js", """
        const stage = m.exclusive();
        let release;
        const turn = stage(step('browser_handoff'), () => new Promise((resolve) => { release = resolve; }));
        const other = await stage(step('browser_click'), answer('click'));
        const again = await stage(step('browser_handoff'), answer('handoff'));
        release({ content: [{ type: 'text', text: 'done' }] });
        const done = await turn;
        const later = await stage(step('browser_click'), answer('click later'));
        // A call that is not exclusive holds nothing: the one after it runs too.
        let slow;
        const plain = stage(step('browser_type'), () => new Promise((resolve) => { slow = resolve; }));
        const beside = await stage(step('browser_snapshot'), answer('beside'));
        slow({ content: [] });
        await plain;
        return { other: [said(other), other.isError], again: said(again), done: said(done), later: said(later),
          beside: said(beside), ran };
    """)
    assert got == {
        "other": ["browser_click was not run: the person has the agent tab (a browser_handoff waits for them); wait "
                  "for its result", True],
        "again": "refused: a browser_handoff already waits for the person; wait for its result before handing off "
                 "again",
        "done": "done", "later": "click later", "beside": "beside", "ran": ["click later", "beside"],
    }


async def test_a_failure_of_a_later_stage_becomes_an_error_result_with_the_pages_words_apart(page: Page) -> None:
    got = await run(page, "stages/errors.js", """
        const fine = await m.toolErrors(step('browser_click'), answer('ok'));
        const ours = await m.toolErrors(step('browser_click'), () => {
          throw new errors.ToolError(errors.NO_TAB, 'no agent tab');
        });
        const chromes = await m.toolErrors(step('browser_click'), async () => {
          throw new Error('Cannot access https://evil.example/ignore-previous');
        });
        return { fine: [said(fine), Boolean(fine.isError)], ours: [said(ours), ours.isError],
          chromes: [said(chromes), chromes.isError] };
    """)
    assert got["fine"] == ["ok", False]
    assert got["ours"] == ["no agent tab", True]
    text, failed = got["chromes"]
    # Chrome's message may quote a page's URL: it is the page's text, in its untrusted block.
    assert failed and text.startswith("tool error; the browser said:") and "<<<page-content" in text
    assert re.search(r"<<<page-content \d+\nCannot access https://evil.example/ignore-previous\n>>>page-content",
                     text)


async def test_calls_take_turns_in_order_and_one_cancelled_while_it_waits_never_starts(page: Page) -> None:
    got = await run(page, "stages/turn.js", """
        const activity = [];
        const stage = m.turn((delta) => activity.push(delta));
        const parts = { tabs: { current: 41 } };
        const events = [];
        let finishFirst;
        const first = stage(step('browser_click', { parts }), () => {
          events.push('first starts');
          return new Promise((resolve) => { finishFirst = resolve; });
        });
        const cancelled = step('browser_type', { parts, call: call({ throwIfCancelled() {
          throw new errors.ToolError(errors.CANCELLED, 'the call was cancelled');
        } }) });
        const second = stage(cancelled, () => { events.push('cancelled one starts'); return {}; });
        const thirdStep = step('browser_snapshot', { parts, tabId: null });
        const third = stage(thirdStep, () => { events.push('third starts'); return { content: [] }; });
        await new Promise((resolve) => setTimeout(resolve, 20));
        events.push('first ends');
        parts.tabs.current = 42; // the first call made another tab current
        finishFirst({ content: [] });
        await first;
        const refused = await second.then(() => 'ran', (e) => e.code);
        await third;
        return { events, refused, activity, tab: thirdStep.tabId };
    """)
    assert got == {"events": ["first starts", "first ends", "third starts"], "refused": "cancelled",
                   "activity": [1, -1, 1, -1], "tab": 42}


async def test_without_an_approved_plan_a_step_is_refused_before_its_turn_does_anything(page: Page) -> None:
    got = await run(page, "stages/plan.js", """
        const plan = { refusal: (name, args) => (args.action === 'list' ? '' : `${name} was not run: no plan`) };
        const refused = await m.planGate(step('browser_tabs', { args: { action: 'open' }, parts: { guard: { plan } } }),
          answer('opened'));
        const listed = await m.planGate(step('browser_tabs', { args: { action: 'list' }, parts: { guard: { plan } } }),
          answer('listed'));
        const noPlan = await m.planGate(step('browser_click', { parts: { guard: { plan: null } } }), answer('clicked'));
        return { refused: [said(refused), refused.isError], listed: said(listed), noPlan: said(noPlan), ran };
    """)
    assert got == {"refused": ["browser_tabs was not run: no plan", True], "listed": "listed", "noPlan": "clicked",
                   "ran": ["listed", "clicked"]}


async def test_the_receipt_is_begun_before_the_step_and_ended_with_its_result(page: Page) -> None:
    got = await run(page, "stages/receipt.js", """
        const events = [];
        const receipts = {
          before: async (name, args) => { events.push(`before ${name} ${args.ref}`); return { kind: 'element' }; },
          after: async (at, args, result) => {
            events.push(`after ${at.kind} ${said(result)}`);
            return { ...result, content: [...result.content, { type: 'text', text: 'Receipt: ...' }] };
          },
        };
        const stage = m.receipt(receipts);
        const result = await stage(step('browser_click', { args: { ref: 'e3' } }), () => {
          events.push('step');
          return { content: [{ type: 'text', text: 'clicked' }] };
        });
        const failed = await stage(step('browser_click', { args: { ref: 'e4' } }), () => {
          throw new Error('gone');
        }).then(() => '', (e) => e.message);
        return { events, result: said(result), failed };
    """)
    # A step that throws gets no receipt: the error goes on to the errors stage as it was.
    assert got == {"events": ["before browser_click e3", "step", "after element clicked", "before browser_click e4"],
                   "result": "clicked\nReceipt: ...", "failed": "gone"}


async def test_a_download_that_starts_while_a_step_runs_is_counted_as_the_agents(page: Page) -> None:
    got = await run(page, "stages/downloads.js", """
        const counted = [];
        const files = { downloads: { activity: (tabId, delta) => counted.push([tabId, delta, [...ran]]) } };
        await m.downloadsActivity(step('browser_click', { tabId: 5, parts: { files } }), answer('clicked'));
        const thrown = await m.downloadsActivity(step('browser_click', { tabId: 6, parts: { files } }), () => {
          throw new Error('failed');
        }).then(() => '', (e) => e.message);
        const none = await m.downloadsActivity(step('browser_click', { parts: { files: null } }), answer('no socket'));
        return { counted, thrown, none: said(none) };
    """)
    assert got == {"counted": [[5, 1, []], [5, -1, ["clicked"]], [6, 1, ["clicked"]], [6, -1, ["clicked"]]],
                   "thrown": "failed", "none": "no socket"}


async def test_the_last_actions_late_navigation_lands_before_the_step(page: Page) -> None:
    got = await run(page, "stages/late-load.js", """
        const events = [];
        const loads = { lateLoad: async (tabId) => { await null; events.push(`landed in ${tabId}`); } };
        await m.lateLoad(step('browser_snapshot', { tabId: 9, parts: { loads } }), () => {
          events.push('step');
          return {};
        });
        return events;
    """)
    assert got == ["landed in 9", "step"]


# A dialog watcher of the test's own (lib/dialogs.js's surface): `watch` is what hold() says of the tab, `open` the
# dialog already open there, `opens` one that opens while the step runs.
FAKE_DIALOGS = """
const dialog = { type: 'confirm', message: 'Delete everything?', url: 'https://shop.example/',
  origin: 'https://shop.example' };
const watcher = ({ watch = 'watched', open = null, opens = null, note = '' } = {}) => ({
  held: [], settled: [],
  async hold(tabId) { this.held.push(tabId); return watch; },
  settle(tabId) { this.settled.push(tabId); },
  pending: () => open,
  blindNote: () => note,
  async race(tabId, work) {
    if (opens) return { dialog: opens };
    return { result: await work() };
  },
});
const through = async (name, dialogs) => {
  const result = await m.dialogs(step(name, { parts: { dialogs } }), answer(name));
  return { said: said(result), error: Boolean(result.isError), held: dialogs.held, settled: dialogs.settled };
};
"""


async def test_a_dialog_open_in_the_tab_is_what_a_step_that_meets_it_reports(page: Page) -> None:
    got = await run(page, "stages/dialogs.js", FAKE_DIALOGS + """
        return {
          meets: await through('browser_click', watcher({ open: dialog })),
          answers: await through('browser_handle_dialog', watcher({ open: dialog })),
          free: await through('browser_tabs', watcher({ open: dialog })),
          clear: await through('browser_snapshot', watcher()),
          ran,
        };
    """)
    assert got["meets"]["error"] and "browser_click" not in got["ran"]
    assert "dialog" in got["meets"]["said"] and "Delete everything?" in got["meets"]["said"]
    assert got["meets"]["held"] == got["meets"]["settled"] == [7]
    assert got["answers"] == {"said": "browser_handle_dialog", "error": False, "held": [7], "settled": [7]}
    # A tool that never waits on the page's script leaves the tab unwatched.
    assert got["free"] == {"said": "browser_tabs", "error": False, "held": [], "settled": []}
    assert got["clear"]["said"] == "browser_snapshot"
    assert got["ran"] == ["browser_handle_dialog", "browser_tabs", "browser_snapshot"]


async def test_a_dialog_that_opens_during_a_step_ends_it_unless_it_is_the_persons_turn(page: Page) -> None:
    got = await run(page, "stages/dialogs.js", FAKE_DIALOGS + """
        const opened = await through('browser_click', watcher({ opens: dialog }));
        const person = await through('browser_handoff', watcher({ opens: dialog }));
        const approved = call({ personAllowed: true });
        const mine = { ...dialog };
        await m.dialogs(step('browser_click', { call: approved, parts: { dialogs: watcher({ opens: mine }) } }),
          answer('x'));
        return { opened, person, approvedDialog: Boolean(mine.approved) };
    """)
    assert not got["opened"]["error"] and "Delete everything?" in got["opened"]["said"]
    assert got["person"]["said"] == "browser_handoff"
    # The person's yes to the very step covers the dialog it opened (lib/tools-person.js, dialogMet).
    assert got["approvedDialog"] is True


async def test_a_tab_blocked_by_an_unseen_dialog_refuses_all_but_the_persons_turn(page: Page) -> None:
    got = await run(page, "stages/dialogs.js", FAKE_DIALOGS + """
        const blocked = await through('browser_click', watcher({ watch: 'blocked' }));
        const person = await through('browser_handoff', watcher({ watch: 'blocked' }));
        // Unwatched (the person cancelled the debugging bar): a failure says a dialog may be why.
        const note = 'the agent cannot see JavaScript dialogs in this chat';
        const unwatched = () => step('browser_click', { parts: { dialogs: watcher({ watch: 'unwatched', note }) } });
        const failing = await m.dialogs(unwatched(),
          () => ({ content: [{ type: 'text', text: 'it failed' }], isError: true }));
        const thrown = await m.dialogs(unwatched(), () => { throw new errors.ToolError(errors.NO_TAB, 'it threw'); })
          .then(() => '', (e) => e.message);
        return { blocked, person, failing: said(failing), thrown };
    """)
    assert got["blocked"]["error"] and got["blocked"]["said"].startswith("browser_click ")
    assert got["person"] == {"said": "browser_handoff", "error": False, "held": [7], "settled": [7]}
    assert got["failing"] == "it failed\nthe agent cannot see JavaScript dialogs in this chat"
    assert got["thrown"] == "it threw (the agent cannot see JavaScript dialogs in this chat)"


async def test_the_implementation_gets_the_parts_the_arguments_and_its_call(page: Page) -> None:
    got = await run(page, "stages/act.js", """
        const parts = { tabs: {} };
        const mine = step('browser_click', { args: { ref: 'e1' }, parts });
        const click = (p, a, c) => ({ same: p === parts && c === mine.call, ref: a.ref });
        const implementations = new Map([['browser_click', click]]);
        return await m.act(implementations)(mine, () => { throw new Error('act is the last stage'); });
    """)
    assert got == {"same": True, "ref": "e1"}


async def test_a_repeat_of_a_step_that_may_have_happened_waits_for_the_persons_card(page: Page) -> None:
    """The card names the earlier step by what the browser recorded of it (else the agent's words, else the verb), its
    time, and what the browser knows; "Check the page" does not take the step, "Do it again" is the person's yes."""
    got = await run(page, "stages/again.js", """
        const at = Date.parse('2026-12-05T12:03:00Z');
        const out = {};
        for (const [name, reply, record, args] of [
            ['check', 'check', { outcome: 'committed', ended: at + 2000, element: 'Buy now' }, {}],
            ['again', 'again', null, { element: 'the Buy now button' }],
            ['timeout', 'timeout', { outcome: null }, {}],
            ['left', 'check', { outcome: 'effect_unknown', ended: at }, {}],
            ['none', 'again', undefined, {}]]) {
          const cards = [];
          const verdicts = [];
          const guard = { ask: async (card) => { cards.push(card); return reply; } };
          const earlier = record === undefined ? null
            : { action: 'act-' + 'a'.repeat(22), tool: 'browser_click', at, why: 'lost', record };
          const mine = step('browser_click', { args, parts: { guard },
            call: call({ earlier, again(allowed) { verdicts.push(allowed); } }) });
          const result = await m.again(mine, reply === 'again' ? answer('ran') : () => { throw new Error('ran'); });
          out[name] = { cards, verdicts, said: said(result), error: Boolean(result.isError), ran: [...ran] };
          ran.length = 0;
        }
        out.clock = new Date(at).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });
        return out;
    """)
    clock = got["clock"]
    (card,) = got["check"]["cards"]
    assert card["kind"] == "again" and card["tabId"] == 7
    assert card["title"] == f'"Buy now" at {clock} may already have happened'
    assert card["detail"].startswith("This browser did it at ")
    assert "its answer never reached the agent" in card["detail"]
    assert got["check"]["verdicts"] == [False] and got["check"]["error"] and got["check"]["ran"] == []
    assert got["check"]["said"].startswith("not allowed by the user (the person chose to check the page first): the "
                                           "earlier browser_click (act-")
    assert got["again"]["cards"][0]["title"] == f'"the Buy now button" at {clock} may already have happened'
    assert got["again"]["cards"][0]["detail"].startswith("This browser has no record of running it")
    assert got["again"]["verdicts"] == [True] and got["again"]["ran"] == ["ran"] and not got["again"]["error"]
    assert got["timeout"]["cards"][0]["title"] == f"This click at {clock} may already have happened"
    assert got["timeout"]["said"].startswith("not allowed by the user (the person did not answer): ")
    assert got["none"] == {"cards": [], "verdicts": [], "said": "ran", "error": False, "ran": ["ran"]}
    assert got["left"]["cards"][0]["detail"].startswith("This browser did it as the page went to another page, so it "
                                                        "may or may not have gone through; ")


async def test_a_step_whose_page_went_away_under_it_says_how_far_it_got(page: Page) -> None:
    """Chrome replaced the document the call was in (PAGE_LEFT): once the tab is at rest, a read is read again from
    the page that came, a step the guard had not let act says it was not done, and one it had may have happened,
    with the outcome the pod's journal keeps as effect_unknown. Any other failure passes on as it was."""
    got = await run(page, "stages/page-left.js", """
        const rested = [];
        const loads = { atRest: async (tabId) => { rested.push(tabId); return { url: 'https://shop.example/next' }; } };
        const leaves = (times) => () => {
          if (times-- > 0) throw new errors.ToolError(errors.PAGE_LEFT, 'the page went to another page');
          ran.push('again');
          return { content: [{ type: 'text', text: 'read the new page' }] };
        };
        const of = (name, acted) => step(name, { parts: { loads },
          call: call({ signal: null, mayHaveActed: () => acted }) });
        const out = {};
        out.read = await m.pageLeft(of('browser_snapshot', false), leaves(1));
        out.notDone = await m.pageLeft(of('browser_click', false), leaves(1));
        out.unknown = await m.pageLeft(of('browser_type', true), leaves(1));
        try {
          await m.pageLeft(of('browser_snapshot', false), leaves(2));
        } catch (e) {
          out.twice = e.code;
        }
        try {
          await m.pageLeft(of('browser_click', true), () => { throw new errors.ToolError(errors.STALE_REF, 'gone'); });
        } catch (e) {
          out.other = e.code;
        }
        return { out: Object.fromEntries(Object.entries(out).map(([k, r]) => [k, typeof r === 'string' ? r
          : { said: said(r), error: Boolean(r.isError), meta: r._meta || null }])), rested, ran };
    """)
    out = got["out"]
    assert out["read"] == {"said": "read the new page", "error": False, "meta": None}
    assert out["notDone"]["error"] and out["notDone"]["meta"] is None
    assert out["notDone"]["said"].startswith("browser_click was not done: the page went to another page before the "
                                             "step reached it")
    assert "URL: https://shop.example/next" in out["notDone"]["said"]
    assert out["unknown"]["error"] and out["unknown"]["meta"] == {"dev.openab/outcome": "effect_unknown"}
    assert out["unknown"]["said"].startswith("the page went to another page while browser_type was being done, so it "
                                             "may or may not have happened")
    assert "URL: https://shop.example/next" in out["unknown"]["said"]
    # Read again once only; a failure that is not the page leaving is not waited on.
    assert out["twice"] == "page_left" and out["other"] == "stale_ref"
    assert got["rested"] == [7, 7, 7, 7] and got["ran"] == ["again"]


async def test_a_look_that_ends_with_its_page_on_its_way_out_is_read_again_from_the_page_that_comes(
        page: Page) -> None:
    """A navigation to another document under way in the tab when a look at the page returns (facts.look: the page
    set it going as the look ran): the look waits for it to land and reads once more. A wait that was met stands (on
    the page that comes, what it waited for may never show), an action is never taken twice for it, and a look with
    nothing under way is not waited on."""
    got = await run(page, "stages/page-left.js", """
        const landings = [];
        // The tab's navigations under way as lib/loads.js reports them: one per entry, then none.
        const loadsOf = (underWay) => ({ landing: async (tabId, signal) => {
          landings.push(tabId);
          return underWay.shift() || false;
        } });
        let reads = 0;
        const read = () => ({ content: [{ type: 'text', text: `read ${++reads}` }] });
        const of = (name, underWay) => step(name, { parts: { loads: loadsOf(underWay) },
          call: call({ signal: null, mayHaveActed: () => true }) });
        const out = {};
        out.leaving = said(await m.pageLeft(of('browser_snapshot', [true, true]), read));
        out.still = said(await m.pageLeft(of('browser_snapshot', []), read));
        out.click = said(await m.pageLeft(of('browser_click', [true]), answer('clicked')));
        out.waited = said(await m.pageLeft(of('browser_wait_for', [true]), answer('done waiting')));
        return { out, landings, ran };
    """)
    # Once: the second read is the answer even with another navigation under way after it.
    assert got["out"] == {"leaving": "read 2", "still": "read 3", "click": "clicked", "waited": "done waiting"}
    assert got["landings"] == [7, 7] and got["ran"] == ["clicked", "done waiting"]


async def test_the_result_carries_the_guards_decision_and_rule_only_when_it_was_consulted(page: Page) -> None:
    got = await run(page, "stages/meta.js", """
        const result = { content: [], _meta: { 'dev.openab/receipt': { url_after: 'x' } } };
        const of = (decision, rule) => m.resultMeta(step('browser_click', { call: call({ decision, rule }) }),
          () => result);
        return [await of('', ''), await of('asked-allowed', 'person:word:delete'), await of('allowed', '')];
    """)
    receipt = {"dev.openab/receipt": {"url_after": "x"}}
    assert got[0] == {"content": [], "_meta": receipt}
    assert got[1]["_meta"] == {**receipt, "dev.openab/guard": "asked-allowed",
                               "dev.openab/guard_rule": "person:word:delete"}
    assert got[2]["_meta"] == {**receipt, "dev.openab/guard": "allowed"}


async def test_the_stages_run_in_their_order_and_one_may_answer_in_the_next_ones_place(page: Page) -> None:
    got = await run(page, "pipeline.js", """
        const events = [];
        const stage = (name) => async (s, next) => {
          events.push(`${name} in`);
          const r = await next();
          events.push(`${name} out`);
          return r;
        };
        const answers = async () => { events.push('answers'); return 'answered'; };
        const result = await m.compose([stage('a'), stage('b'), answers, stage('never')])(step('browser_click'));
        return { events, result };
    """)
    assert got == {"events": ["a in", "b in", "answers", "b out", "a out"], "result": "answered"}


def test_no_stage_and_no_part_of_the_path_names_a_tool() -> None:
    """The path decides from a tool's facts: a tool's name in it would be a rule the catalogue does not say."""
    files = [LIB / "pipeline.js", LIB / "tools.js", *sorted((LIB / "stages").glob("*.js"))]
    assert len(files) >= 12
    for path in files:
        code = "\n".join(line for line in path.read_text().splitlines() if not line.lstrip().startswith(("//", "*")))
        assert not re.search(r"""['"`]browser_\w+""", code), path.name
