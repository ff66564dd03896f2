// Stage 5 of lib/pipeline.js: "Ask before acting" (lib/plan.js). A step that changes something waits for an approved
// plan; decided in the step's turn, once the calls queued before it (a browser_plan among them) are done.

import { text } from '../results.js';

export async function planGate(step, next) {
  const plan = step.parts.guard.plan;
  const unplanned = plan ? plan.refusal(step.name, step.args) : '';
  return unplanned ? { ...text(unplanned), isError: true } : next();
}
