// Stage 4 of lib/pipeline.js: one call at a time, in the order they came, so two calls never interleave on a page.
// A call's turn starts once every call before it ended (whichever way); a call cancelled while it waited never
// starts. The turn fixes the agent tab the step runs in, and is what the panel shows as the browser being busy.

/** The stage, with its own chain of turns; `onActivity(+1)` as a turn starts, `(-1)` as it ends. */
export function turn(onActivity) {
  let chain = Promise.resolve();
  // Not async: the next call's place in the chain is taken the moment this one arrives.
  return (step, next) => {
    const run = chain.then(async () => {
      step.call.throwIfCancelled();
      step.tabId = step.parts.tabs.current;
      onActivity(+1);
      try {
        return await next();
      } finally {
        onActivity(-1);
      }
    });
    chain = run.catch(() => {});
    return run;
  };
}
