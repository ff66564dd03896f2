// Stage 1 of lib/pipeline.js: a bound on the calls that wait. Past it a call is answered at once, busy, instead of
// waiting behind calls that may take minutes (a handoff, a card the person has not answered).

import { text } from '../results.js';

/** The stage, with its own count: at most `max` calls are in the stages after it at once. */
export function queue(max) {
  let queued = 0;
  return async (step, next) => {
    if (queued >= max) {
      return { ...text(`the browser is busy with ${queued} queued calls; wait for them and retry`), isError: true };
    }
    queued++;
    try {
      return await next();
    } finally {
      queued--;
    }
  };
}
