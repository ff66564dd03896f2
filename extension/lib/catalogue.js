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
export let MCP_REVISIONS = null;
export let DEFAULTS = null;
export let DEFAULT_MAX_CHARS = 0;

let loading = null;

/** Take `data` (the parsed catalogue.json) as the catalogue; a file without its parts is refused whole. */
export function useCatalogue(data) {
  if (!Array.isArray(data?.tools) || !data.mcp || !Number.isInteger(data.defaults?.maxChars)) {
    throw new Error('extension/catalogue.json lacks tools, mcp or defaults.maxChars: reinstall the extension');
  }
  TOOLS = data.tools;
  MCP_REVISIONS = data.mcp;
  DEFAULTS = data.defaults;
  DEFAULT_MAX_CHARS = data.defaults.maxChars;
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
