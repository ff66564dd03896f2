// Stage 2 of lib/pipeline.js: while the person has the tab (a call whose facts.exclusive is true, browser_handoff,
// is queued or waits for them) nothing else runs. A call queued behind it would wait minutes for an answer and then
// act on a page the person changed, so it is refused at once, saying why.

import { text } from '../results.js';

/** The stage, with its own holder: the name of the exclusive call that holds the tab, or ''. */
export function exclusive() {
  let holder = '';
  return async (step, next) => {
    if (holder) {
      const why = step.facts.exclusive
        ? `refused: a ${holder} already waits for the person; wait for its result before handing off again`
        : `${step.name} was not run: the person has the agent tab (a ${holder} waits for them); wait for its result`;
      return { ...text(why), isError: true };
    }
    if (!step.facts.exclusive) return next();
    holder = step.name;
    try {
      return await next();
    } finally {
      holder = '';
    }
  };
}
