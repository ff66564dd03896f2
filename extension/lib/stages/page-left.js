// Stage 11 of lib/pipeline.js: a step whose page went to another one while the step was in it (lib/page-script.js,
// PAGE_LEFT: Chrome replaced the document the call was running in). What that means depends on how far the step
// got, which only this point of the path knows for every tool alike: a read is read again from the page that came,
// as is a look at the page (facts.look: its answer is the page as it is) that ended with the page on its way out
// (a navigation to another document under way, not yet committed); a wait or a record of what happened stands;
// a step the guard had not yet let act, or whose real input was never sent, did nothing; one it had may or may not
// have happened, and the pod's journal must hold it as such (docs/journal.md, "effect_unknown"), never as a failure
// the agent may simply try again.

import { onlyReads } from '../catalogue.js';
import { ToolError, PAGE_LEFT } from '../errors.js';
import { META } from '../protocol.js';
import { text, withPage } from '../results.js';

/** The outcome the step's result names when it may or may not have happened (docs/journal.md). */
export const EFFECT_UNKNOWN = 'effect_unknown';

export async function pageLeft(step, next) {
  let result;
  try {
    result = await next();
  } catch (e) {
    if (!(e instanceof ToolError) || e.code !== PAGE_LEFT || step.tabId == null) throw e;
    const tab = await step.parts.loads.atRest(step.tabId, step.call.signal);
    // Once: a page that goes on moving under every read is said to be moving (the error, as it is).
    if (onlyReads(step.name, step.args)) return next();
    const at = tab && tab.url ? `URL: ${tab.url}` : '';
    if (!step.call.mayHaveActed() || e.unsent) {
      return { ...text(withPage(`${step.name} was not done: the page went to another page before the step reached ` +
        "it (the tab's address is in the block below). Take a browser_snapshot of the page there.", at)), isError: true };
    }
    const unknown = text(withPage(`the page went to another page while ${step.name} was being done, so it may or may ` +
      "not have happened (the tab's address is in the block below). Take a browser_snapshot to see which; do it " +
      'again only if it did not, with "repeat": true.', at));
    return { ...unknown, isError: true, _meta: { [META.outcome]: EFFECT_UNKNOWN } };
  }
  // The page's own script may set it going a moment after the last action's window (lib/loads.js, lateLoad), on a
  // busy machine as the look runs: what it saw is a page on its way out. Once, as above.
  if (step.facts.look && await step.parts.loads.landing(step.tabId, step.call.signal)) return next();
  return result;
}
