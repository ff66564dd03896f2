// The browser tools as the agent sees them (names, descriptions, argument schemas, MCP annotations) and the MCP
// revisions this server speaks. Their one source is ../catalogue.json, which the pod reads too
// (core/mcp/tools.py, advertised before a browser attaches): adding a tool is an entry there and its method in
// tools.js. A JSON module needs Chrome 123 (import attributes), the manifest's minimum_chrome_version.

import catalogue from '../catalogue.json' with { type: 'json' };

export const TOOLS = catalogue.tools;
export const MCP_REVISIONS = catalogue.mcp;
export const DEFAULTS = catalogue.defaults;
export const DEFAULT_MAX_CHARS = catalogue.defaults.maxChars;

/** The catalogue's entry for `name`; a name it lacks is this extension's own bug, so it throws at load. */
export function toolNamed(name) {
  const tool = TOOLS.find((t) => t.name === name);
  if (!tool) throw new Error(`extension/catalogue.json has no tool ${name}`);
  return tool;
}
