// Stage 8 of lib/pipeline.js: a navigation the last action's page started after that call returned lands before
// this step runs (lib/loads.js, lateLoad), so the step meets the new page, not the old one.

export async function lateLoad(step, next) {
  await step.parts.loads.lateLoad(step.tabId);
  return next();
}
