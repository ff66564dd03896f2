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

/** Take `data` (the parsed catalogue.json) as the catalogue; a file without its parts is refused whole. */
export function useCatalogue(data) {
  if (!Array.isArray(data?.tools) || !data.mcp || !Number.isInteger(data.defaults?.maxChars)) {
    throw new Error('extension/catalogue.json lacks tools, mcp or defaults.maxChars: reinstall the extension');
  }
  checkFacts(data.tools);
  TOOLS = data.tools.map(({ facts, ...advertised }) => advertised);
  FACTS = new Map(data.tools.map((t) => [t.name, Object.freeze({ ...t.facts, guard: Object.freeze([...t.facts.guard]) })]));
  MCP_REVISIONS = data.mcp;
  DEFAULTS = data.defaults;
  DEFAULT_MAX_CHARS = data.defaults.maxChars;
}

// What the guard can judge in an input (lib/guard.js, classify): each acting tool names the facets it can have, and
// 'routine' says on purpose that it has none that ask (a scroll, a hover). 'person' is a tool whose step is the
// person's own (a handoff, a plan card): the person is asked by the tool itself.
export const GUARD_FACETS = Object.freeze(['activates', 'submits', 'types', 'presses', 'chooses', 'drops', 'transfers',
  'runs_code', 'navigates', 'answers', 'person', 'routine']);

/**
 * Every tool has facts, and every tool that acts (not readOnlyHint) has a guard rule of known facets: an acting tool
 * the guard would not know how to judge stops the worker at start-up instead of running unasked.
 */
export function checkFacts(tools) {
  for (const t of tools) {
    const guard = t.facts && t.facts.guard;
    if (!Array.isArray(guard)) throw new Error(`extension/catalogue.json: ${t.name} has no facts.guard`);
    for (const f of guard) if (!GUARD_FACETS.includes(f)) throw new Error(`extension/catalogue.json: ${t.name} has an unknown guard facet ${f}`);
    const acts = !(t.annotations && t.annotations.readOnlyHint === true);
    if (acts && !guard.length) throw new Error(`extension/catalogue.json: ${t.name} acts on the page and has no guard rule (facts.guard)`);
    if (!acts && guard.length) throw new Error(`extension/catalogue.json: ${t.name} only reads and has a guard rule`);
  }
}

/** The facts of the tool `name` (catalogue.json), or null for a name the catalogue lacks. */
export function factsOf(name) {
  return FACTS.get(name) || null;
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
