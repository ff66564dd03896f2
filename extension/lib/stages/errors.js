// Stage 3 of lib/pipeline.js: a failure in any later stage becomes an isError result that says what happened,
// which the agent can act on. Chrome's own messages can quote a page's URL, so they count as the page's text.

import { ToolError } from '../errors.js';
import { text, withPage } from '../results.js';

export async function toolErrors(step, next) {
  try {
    return await next();
  } catch (e) {
    const msg = e instanceof ToolError ? withPage(e.message, e.page) : withPage('tool error; the browser said:', String(e.message || e));
    return { ...text(msg), isError: true };
  }
}
