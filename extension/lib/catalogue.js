// The browser tools as the agent sees them (names, descriptions, argument schemas, MCP annotations) and the MCP
// revisions this server speaks. Their one source is ../catalogue.json, which the pod reads too
// (core/catalogue.py, advertised before a browser attaches): adding a tool is an entry there and its
// implementation in its kind's table (tools-*.js).
//
// The file is read with fetch when the worker starts (background.js awaits loadCatalogue before it dials),
// not imported as a JSON module: Chrome runs `import ... with { type: 'json' }` on a worker's first start but
// cannot start the worker again from it once it stopped (seen with Chromium 156), and an MV3 worker is stopped
// whenever it idles. Until then the bindings below are empty; nothing reads them before the socket is up.

export let TOOLS = [];
// Each tool's `facts` by its name: openab's own, kept out of what TOOLS advertises.
export let FACTS = new Map();
export let MCP_REVISIONS = null;
export let DEFAULTS = null;
export let DEFAULT_MAX_CHARS = 0;

let loading = null;

function deepFreeze(value) {
  if (value && typeof value === 'object') for (const v of Object.values(value)) deepFreeze(v);
  return Object.freeze(value);
}

/** Take `data` (the parsed catalogue.json) as the catalogue; a file without its parts is refused whole. */
export function useCatalogue(data) {
  if (!Array.isArray(data?.tools) || !data.mcp || !Number.isInteger(data.defaults?.maxChars)) {
    throw new Error('extension/catalogue.json lacks tools, mcp or defaults.maxChars: reinstall the extension');
  }
  checkFacts(data.tools);
  TOOLS = data.tools.map(({ facts: _facts, ...advertised }) => advertised);
  FACTS = new Map(data.tools.map((t) => [t.name, deepFreeze(structuredClone(t.facts))]));
  MCP_REVISIONS = data.mcp;
  DEFAULTS = data.defaults;
  DEFAULT_MAX_CHARS = data.defaults.maxChars;
}

// What the guard can judge in an input (lib/guard.js, classify): each acting tool names the facets it can have, and
// 'routine' says on purpose that it has none that ask (a scroll, a hover). 'person' is a tool whose step is the
// person's own (a handoff, a plan card): the person is asked by the tool itself.
export const GUARD_FACETS = Object.freeze(['activates', 'submits', 'types', 'presses', 'chooses', 'drops', 'transfers',
  'runs_code', 'navigates', 'answers', 'person', 'routine']);

// The rest of a tool's facts (docs/extension.md, The catalogue's facts), each read by one stage or module:
// `receipt` (lib/receipts.js), `dialogs`, `exclusive` and `look` (lib/stages/), `plan` (lib/plan.js), `row`
// (panel/steps.js), `journal` (the pod's core/catalogue.py; its `reads` also spares a listing of the tabs a receipt).
export const RECEIPTS = Object.freeze(['element', 'page', 'none']);
// How a JavaScript dialog in the tab meets a call: 'meets' (one open stops it, one that opens ends it), 'free'
// (never waits on the page's script), 'answers' (it is what answers one), 'person' (the person's turn: they answer
// the dialogs they meet themselves).
export const DIALOG_WAYS = Object.freeze(['meets', 'free', 'answers', 'person']);

/**
 * Every tool has all its facts with known values, and every tool that acts (not readOnlyHint) has a guard rule of
 * known facets: an acting tool the guard would not know how to judge stops the worker at start-up instead of
 * running unasked. core/catalogue.py refuses the same files.
 */
export function checkFacts(tools) {
  for (const t of tools) {
    const facts = t.facts;
    const bad = (what) => new Error(`extension/catalogue.json: ${t.name} ${what}`);
    const guard = facts && facts.guard;
    if (!Array.isArray(guard)) throw bad('has no facts.guard');
    for (const f of guard) if (!GUARD_FACETS.includes(f)) throw bad(`has an unknown guard facet ${f}`);
    const acts = !(t.annotations && t.annotations.readOnlyHint === true);
    if (acts && !guard.length) throw bad('acts on the page and has no guard rule (facts.guard)');
    if (!acts && guard.length) throw bad('only reads and has a guard rule');
    if (!RECEIPTS.includes(facts.receipt) || (!acts && facts.receipt !== 'none')) {
      throw bad(`has facts.receipt ${JSON.stringify(facts.receipt)}: one of ${RECEIPTS.join(', ')} ('none' for a read)`);
    }
    if (!DIALOG_WAYS.includes(facts.dialogs)) throw bad(`has facts.dialogs ${JSON.stringify(facts.dialogs)}: one of ${DIALOG_WAYS.join(', ')}`);
    if (typeof facts.exclusive !== 'boolean') throw bad('has no boolean facts.exclusive');
    if (typeof facts.look !== 'boolean' || (acts && facts.look)) {
      throw bad('has no boolean facts.look (false for an acting tool)');
    }
    if (!isObject(facts.journal) || (facts.journal.reads !== undefined && !isArgs(facts.journal.reads))) {
      throw bad('has no facts.journal, or its reads is not {argument: [values]}');
    }
    const plan = facts.plan;
    if (!isObject(plan) || (acts && !nonEmpty(plan.step)) || (plan.noSite !== undefined && !isArgs(plan.noSite))) {
      throw bad('has no facts.plan (an acting tool says its step, e.g. "click {target}"), or its noSite is not {argument: [values]}');
    }
    checkRow(facts.row, bad);
  }
}

const isObject = (v) => Boolean(v) && typeof v === 'object' && !Array.isArray(v);
const nonEmpty = (v) => typeof v === 'string' && v.length > 0;
const isScalar = (v) => ['string', 'number', 'boolean'].includes(typeof v);
// Argument values that pick out some calls of a tool: {action: ['list']} is a call whose `action` is 'list'.
const isArgs = (v) => isObject(v) && Object.values(v).every((vs) => Array.isArray(vs) && vs.length && vs.every(isScalar));

function checkRow(row, bad) {
  const words = (r) => Array.isArray(r.verbs) && r.verbs.length === 3 && r.verbs.every(nonEmpty) &&
    (nonEmpty(r.object) !== nonEmpty(r.says));
  if (!isObject(row) || !words(row)) throw bad('has no facts.row: {verbs: [imperative, past, progressive], object: kind or says: words}');
  if (row.when === undefined) return;
  if (!Array.isArray(row.when) || !row.when.every((w) => isObject(w) && isArgs(w.args) && words(w))) {
    throw bad('has a facts.row.when that is not a list of {args, verbs, object or says}');
  }
}

/** Whether `args` has one of the values `picked` ({argument: [values]}) lists. Pure. */
export function picks(picked, args) {
  if (!picked || !args || typeof args !== 'object') return false;
  return Object.entries(picked).some(([name, values]) => values.includes(args[name]));
}

/** Whether a call of `name` with `args` only reads: a readOnlyHint tool, or an acting one's journal.reads. */
export function onlyReads(name, args) {
  const facts = FACTS.get(name);
  const tool = TOOLS.find((t) => t.name === name);
  return Boolean(tool && tool.annotations.readOnlyHint === true) || Boolean(facts && picks(facts.journal.reads, args));
}

/** The facts of the tool `name` (catalogue.json), or null for a name the catalogue lacks. */
export function factsOf(name) {
  return FACTS.get(name) || null;
}

/**
 * The browser tool call an agent's step is, `{tool, args}`, or null: from its input when a relay wraps the call
 * (`{tool, arguments, element}`, as the built-in agent does), else from its title, in whatever form the agent CLI
 * names a server's tool (`mcp__openab_browser__browser_click`, `openab_browser: browser_click`, `browser_click`),
 * with the input as its arguments. `input` is the step's arguments, or their JSON text as a row keeps them. Pure.
 */
export function stepCall(title, input) {
  if (typeof input === 'string') {
    try {
      input = JSON.parse(input);
    } catch {
      input = null; // cut to its bound, or not JSON: the title alone says
    }
  }
  const given = input && typeof input === 'object' && !Array.isArray(input) ? input : {};
  if (typeof given.tool === 'string' && FACTS.has(given.tool)) {
    const args = given.arguments && typeof given.arguments === 'object' ? given.arguments : {};
    return { tool: given.tool, args: { element: given.element, ...args } };
  }
  const tool = String(title || '').split(/__|[^A-Za-z0-9_]+/).find((part) => FACTS.has(part));
  return tool ? { tool, args: given } : null;
}

/** Whether the guard rule of the tool `name` has `facet`. */
export function hasFacet(name, facet) {
  const facts = FACTS.get(name);
  return Boolean(facts && facts.guard.includes(facet));
}

/** Read the packaged catalogue.json once; every later call gets the same promise. */
export function loadCatalogue() {
  loading ??= fetch(chrome.runtime.getURL('catalogue.json'))
    .then((response) => response.json())
    .then(useCatalogue);
  return loading;
}

/** The catalogue's entry for `name`; a name it lacks is this extension's own bug, so it throws. */
export function toolNamed(name) {
  const tool = TOOLS.find((t) => t.name === name);
  if (!tool) throw new Error(`extension/catalogue.json has no tool ${name}`);
  return tool;
}
