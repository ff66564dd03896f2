// The browser tools as the agent sees them: names, descriptions, argument schemas. core/mcp/tools.py keeps
// the pod's copy (advertised before a browser attaches) equal to this list (tests/test_tool_catalogue.py).

import { DIALOG_TOOL } from './dialogs.js';
import { HANDOFF_TOOL } from './handoff.js';

export const DEFAULT_MAX_CHARS = 40_000;

const target = {
  ref: { type: 'string', description: 'element ref from browser_snapshot, e.g. "e6"' },
  selector: { type: 'string', description: 'CSS selector (first match in the top frame)' },
};
const paging = {
  max_chars: { type: 'integer', minimum: 100, description: `characters to return (default ${DEFAULT_MAX_CHARS})` },
  offset: { type: 'integer', minimum: 0, description: 'character offset to continue from (paging)' },
};

export const TOOLS = [
  {
    name: 'browser_snapshot',
    description: 'Outline of the agent tab as accessibility-style lines with refs, e.g. `- button "Sign in" [ref=e6]`; ' +
      "the page's text and `## headings` read as lines without the dash. A link inside a sentence reads `[its words](e7)`, " +
      'e7 its ref, with its address when it leads to another site (`[its words](e7 https://...)`); interactive_only ' +
      'lists every link with its address. Use the refs with browser_click, browser_type and friends. Take a new ' +
      'snapshot after the page changes; since=true shows only what changed.',
    inputSchema: {
      type: 'object',
      properties: {
        interactive_only: { type: 'boolean', description: 'only elements with refs, and headings (much shorter); a link inside a sentence with its address' },
        since: { type: 'boolean', description: 'only the lines that changed since the last snapshot of this tab, as a diff' },
        ...paging,
      },
    },
  },
  {
    name: 'browser_read_dom',
    description: "Read the HTML of the agent tab's page, or of the first element matching a CSS selector.",
    inputSchema: { type: 'object', properties: { selector: { type: 'string', description: 'optional CSS selector to scope the read' }, ...paging } },
  },
  {
    name: 'browser_screenshot',
    description: 'JPEG screenshot of the visible part of the agent tab (downscaled unless full_size is true).',
    inputSchema: { type: 'object', properties: { full_size: { type: 'boolean', description: 'keep the captured pixel size' } } },
  },
  {
    name: 'browser_navigate',
    description: 'Load an http(s) URL in the agent tab (opens an agent tab if there is none) and wait for it.',
    inputSchema: { type: 'object', properties: { url: { type: 'string', description: "an absolute http(s) URL, or a path (/...) on the agent tab's site, as snapshots show same-site links" } }, required: ['url'] },
  },
  {
    name: 'browser_click',
    description: 'Click an element, by ref (preferred) or CSS selector.',
    inputSchema: { type: 'object', properties: { ...target } },
  },
  {
    name: 'browser_type',
    description: 'Type text into a field, by ref (preferred) or CSS selector. Replaces the value unless clear is false.',
    inputSchema: {
      type: 'object',
      properties: { ...target, text: { type: 'string' }, clear: { type: 'boolean', description: 'replace the current value (default true)' } },
      required: ['text'],
    },
  },
  {
    name: 'browser_press_key',
    description: 'Press a key (e.g. "Enter", "Tab", "Escape", "a", "Control+Enter") in an element, which takes the keyboard focus for it, or in the focused element.',
    inputSchema: { type: 'object', properties: { key: { type: 'string' }, ...target }, required: ['key'] },
  },
  {
    name: 'browser_select_option',
    description: 'Choose an option of a <select>, by its value or its visible label.',
    inputSchema: { type: 'object', properties: { ...target, value: { type: 'string' } }, required: ['value'] },
  },
  {
    name: 'browser_scroll',
    description: 'Scroll the page (direction up/down/top/bottom, optional pixels) or scroll an element into view by ref.',
    inputSchema: {
      type: 'object',
      properties: { direction: { type: 'string', enum: ['up', 'down', 'top', 'bottom'] }, pixels: { type: 'integer', minimum: 1 }, ref: target.ref },
    },
  },
  {
    name: 'browser_back',
    description: 'Go back one page in the agent tab history.',
    inputSchema: { type: 'object', properties: {} },
  },
  {
    name: 'browser_wait_for',
    description: 'Wait until text appears, a selector matches a visible element, the URL contains a string, or the page has loaded.',
    inputSchema: {
      type: 'object',
      properties: {
        text: { type: 'string' }, selector: { type: 'string' }, url: { type: 'string', description: 'substring of the URL' },
        load: { type: 'boolean' }, timeout_ms: { type: 'integer', minimum: 100, maximum: 60000, description: 'default 10000' },
      },
    },
  },
  {
    name: 'browser_tabs',
    description: 'Agent tabs only: list them, open a new one at a URL, switch the agent to one, or close one it opened.',
    inputSchema: {
      type: 'object',
      properties: { action: { type: 'string', enum: ['list', 'open', 'switch', 'close'] }, url: { type: 'string' }, tab_id: { type: 'integer' } },
      required: ['action'],
    },
  },
  DIALOG_TOOL,
  HANDOFF_TOOL,
];
