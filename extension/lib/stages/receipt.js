// Stage 6 of lib/pipeline.js: a step that changes something leaves a receipt (lib/receipts.js, by its
// facts.receipt). Its look before is taken inside the step's turn, so no other call acts on the page between the
// look before, the step and the look after.

/** The stage, over the browser's `receipts` (lib/receipts.js: `before(name, args)`, `after(at, args, result)`). */
export function receipt(receipts) {
  return async (step, next) => {
    const at = await receipts.before(step.name, step.args);
    return receipts.after(at, step.args, await next());
  };
}
