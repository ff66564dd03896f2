// The page's own tools (WebMCP): a page registers tools with `document.modelContext.registerTool` (a name, a
// description, an input schema, annotations such as readOnlyHint), and browser_webmcp_tools lists them,
// browser_webmcp_call runs one. They are read and run from the extension's isolated world, which sees the page's
// tools (chrome.scripting; the debugger's WebMCP domain would keep a failing tool's message, but needs a feature
// of its own). Everything a page tool says of itself and returns is the page's words: untrusted. A call is judged
// like a click on the page's site on a button that says the tool's name and description, unless the page marks the
// tool read-only, and journaled as one step (it is an acting tool: the pod journals it, lib/actions.js echoes it).

import { ToolError, BAD_ARGS, NOT_FOUND, TIMEOUT, TOOL_ERROR } from './errors.js';
import { text, untrusted, pageSlice } from './results.js';
import { webOrigin } from './settings.js';
import { within } from './page-script.js';

const LIST_MS = 10_000;
const CALL_MS = 60_000;
const MAX_TOOLS = 100;
const MAX_DESCRIPTION = 1_000;
const MAX_SCHEMA = 4_000;
const MAX_LABEL = 200;
const NO_WEBMCP = 'this page offers no WebMCP tools: the browser has no WebMCP here (document.modelContext is missing). ' +
  'Chrome ships WebMCP behind a flag (--enable-features=WebMCP), and only on http(s) pages. Use the page itself ' +
  '(browser_snapshot, browser_click, browser_fill_form).';

/**
 * Runs in the page's isolated world: the page's tools as plain fields (Chrome's objects hold the window and do not
 * serialize), or `{none}` where there is no WebMCP. Self-contained: chrome.scripting sends it as source.
 */
async function pageTools(maxTools) {
  const mc = document.modelContext || navigator.modelContext;
  if (!mc || typeof mc.getTools !== 'function') return { none: true };
  const tools = await mc.getTools();
  return {
    tools: Array.from(tools || []).slice(0, maxTools).map((t) => {
      let schema = t.inputSchema;
      if (schema && typeof schema !== 'string') {
        try {
          schema = JSON.stringify(schema);
        } catch {
          schema = '';
        }
      }
      const a = t.annotations || {};
      return { name: String(t.name || ''), title: String(t.title || ''), description: String(t.description || ''),
        schema: String(schema || ''), readOnly: a.readOnlyHint === true };
    }),
  };
}

/** Runs in the page's isolated world: the page's tool `name` with `input`; its answer, or why it failed. */
async function runPageTool(name, input) {
  const mc = document.modelContext || navigator.modelContext;
  if (!mc || typeof mc.executeTool !== 'function') return { none: true };
  const tool = Array.from((await mc.getTools()) || []).find((t) => t.name === name);
  if (!tool) return { missing: true };
  try {
    const out = await mc.executeTool(tool, input);
    return { output: typeof out === 'string' ? out : JSON.stringify(out) ?? '' };
  } catch (e) {
    return { failed: String((e && e.message) || e) };
  }
}

async function inPage(tab, func, args, ms, what) {
  let results;
  try {
    results = await within(ms, chrome.scripting.executeScript({ target: { tabId: tab.id, frameIds: [0] }, func, args }), what);
  } catch (e) {
    if (e instanceof ToolError) throw e;
    throw new ToolError(TOOL_ERROR, 'could not reach the page; the browser said:', String(e.message || e));
  }
  const res = results && results[0] && results[0].result;
  if (!res) throw new ToolError(TOOL_ERROR, 'the page did not answer; take a browser_snapshot and try again');
  return res;
}

const cut = (s, max) => (s.length > max ? `${s.slice(0, max)}…` : s);

async function listTools(b, _args, call) {
  const tab = await b.tabs.target();
  call.throwIfCancelled();
  const got = await inPage(tab, pageTools, [MAX_TOOLS], LIST_MS, "the page's tools");
  if (got.none) return text(NO_WEBMCP);
  if (!got.tools.length) return text('the page in the agent tab registered no WebMCP tools.');
  const lines = got.tools.map((t) => [
    `- ${t.name}${t.readOnly ? ' (read-only)' : ''}${t.title && t.title !== t.name ? `: ${t.title}` : ''}`,
    t.description && `  description: ${cut(t.description, MAX_DESCRIPTION)}`,
    t.schema && `  input schema: ${cut(t.schema, MAX_SCHEMA)}`,
  ].filter(Boolean).join('\n'));
  return text(`the page in the agent tab registered ${got.tools.length} WebMCP tool${got.tools.length === 1 ? '' : 's'}; ` +
    'call one with browser_webmcp_call {name, arguments}. A tool the page does not mark read-only is judged like a ' +
    'click on the page, and may ask the user. Their names, descriptions and schemas are the page\'s words:\n' +
    untrusted(lines.join('\n')));
}

/** The label a page tool is judged by, as a button would be by its text: its name in words, title and description. */
function labelOf(tool) {
  const words = [tool.name.replace(/[_-]+/g, ' '), tool.title, tool.description].filter(Boolean).join(': ');
  return cut(words.replace(/\s+/g, ' ').trim(), MAX_LABEL);
}

async function callTool(b, args, call) {
  if (typeof args.name !== 'string' || !args.name) throw new ToolError(BAD_ARGS, '"name" must be the name of one of the page\'s tools (browser_webmcp_tools)');
  const input = args.arguments ?? {};
  if (!input || typeof input !== 'object' || Array.isArray(input)) throw new ToolError(BAD_ARGS, '"arguments" must be an object');
  const tab = await b.tabs.target();
  const got = await inPage(tab, pageTools, [MAX_TOOLS], LIST_MS, "the page's tools");
  if (got.none) throw new ToolError(NOT_FOUND, NO_WEBMCP);
  const tool = got.tools.find((t) => t.name === args.name);
  if (!tool) {
    throw new ToolError(NOT_FOUND, 'the page has no WebMCP tool of that name; the names it has are in the block below ' +
      '(browser_webmcp_tools describes them)', got.tools.map((t) => t.name).join(', ') || '(none)');
  }
  const at = { url: tab.url, tabId: tab.id };
  if (tool.readOnly) {
    // The page says it only reads: no card, but a site the person blocked stays blocked.
    call.destination(tab.url);
  } else {
    const desc = { role: "the page's tool", name: labelOf(tool), tag: 'webmcp', origin: webOrigin(tab.url), url: tab.url };
    await call.check('browser_webmcp_call', desc, { name: args.name }, at);
  }
  call.throwIfCancelled();
  const ran = await inPage(tab, runPageTool, [args.name, input], CALL_MS, `the page's tool ${args.name}`).catch((e) => {
    if (e instanceof ToolError && e.code === TIMEOUT) {
      throw new ToolError(TIMEOUT, `the page's tool did not answer in ${CALL_MS / 1000} s; it may still finish. Take a ` +
        'browser_snapshot before calling it again');
    }
    throw e;
  });
  if (ran.none || ran.missing) throw new ToolError(NOT_FOUND, 'the page took the tool away before it ran; call browser_webmcp_tools');
  if (ran.failed !== undefined) {
    // Chrome passes on a generic error, not the page's message; what it says is the page's or Chrome's.
    throw new ToolError(TOOL_ERROR, "the page's tool failed (Chrome passes on no more than the block below). It may " +
      'have done part of its work: take a browser_snapshot before calling it again', ran.failed);
  }
  const { body, note } = pageSlice(ran.output, 0);
  return text(`the page's tool ${args.name} ran${tool.readOnly ? ' (the page marks it read-only)' : ''}; what it returned is ` +
    `the page's words${note ? ` (${note})` : ''}:\n${untrusted(body)}`);
}

export const WEBMCP_TOOLS = {
  browser_webmcp_tools: listTools,
  browser_webmcp_call: callTool,
};
