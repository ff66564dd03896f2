// Stage 10 of lib/pipeline.js: a step the pod runs over an earlier one that may already have happened (the agent's
// `repeat` after the journal held it: docs/journal.md, "Unsettled steps"). Doing it again may buy twice, and only a
// look at the page can tell, so the person decides on a card that names the earlier step and its time: "Check the
// page" brings the tab forward and the step is not taken; "Do it again" lets it run, and is the person's yes to it
// (the guard does not ask a second time). What the browser recorded of the earlier step (lib/actions.js) is on the
// card: it finished it, started it and never saw it end, or never ran it.

import { factsOf } from '../catalogue.js';
import { showTab, TAB_CLOSED } from '../guard.js';
import { text } from '../results.js';
import { EFFECT_UNKNOWN } from './page-left.js';

const CHECK = 'check';
const AGAIN = 'again';

function clock(ms) {
  return new Date(ms).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });
}

/** What the card calls the step: the element as the browser recorded it, the agent's own words for it, its ref. */
function named(earlier, args) {
  const record = earlier.record;
  if (record && record.element) return `"${record.element}"`;
  if (typeof args.element === 'string' && args.element.trim()) return `"${args.element.trim().slice(0, 120)}"`;
  const facts = factsOf(earlier.tool);
  const verb = facts && facts.row && facts.row.verbs ? facts.row.verbs[0].toLowerCase() : 'step';
  return `This ${verb}`;
}

/** What this browser knows of the earlier step, in the person's words. */
function known(earlier) {
  const record = earlier.record;
  const lost = earlier.why === 'restart' ? 'the agent\'s pod restarted during it' : 'its answer never reached the agent';
  if (!record) return `This browser has no record of running it; ${lost}.`;
  if (record.outcome === 'committed') return `This browser did it at ${clock(record.ended || earlier.at)}, but ${lost}.`;
  if (record.outcome === 'failed') return `This browser tried it and it did not go through; ${lost}.`;
  if (record.outcome === EFFECT_UNKNOWN) {
    return `This browser did it as the page went to another page, so it may or may not have gone through; ${lost}.`;
  }
  return `This browser started it and has no record of how it ended; ${lost}.`;
}

export async function again(step, next) {
  const { earlier } = step.call;
  if (!earlier) return next();
  const what = named(earlier, step.args);
  const answer = await step.parts.guard.ask({
    kind: 'again', tool: step.name, title: `${what} at ${clock(earlier.at)} may already have happened`,
    site: '', detail: `${known(earlier)} The agent wants to do it again.`, tabId: step.tabId ?? undefined,
  }, step.call.signal);
  if (answer === AGAIN) {
    step.call.again(true);
    return next();
  }
  step.call.again(false);
  if (answer === CHECK && step.tabId != null) await showTab(step.tabId);
  const why = answer === CHECK ? 'the person chose to check the page first'
    : answer === 'timeout' ? 'the person did not answer' : answer === TAB_CLOSED ? 'the tab closed before the person answered'
      : 'the question was cancelled';
  // In the guard's words for a step the person did not allow (lib/guard.js), which the panel's row reads.
  return { ...text(`not allowed by the user (${why}): the earlier ${earlier.tool} (${earlier.action}) may already ` +
    'have happened, and the person decides whether it is done again. Do not call it again unless they ask you to in ' +
    'the chat.'), isError: true };
}
