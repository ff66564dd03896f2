// Stage 12 of lib/pipeline.js, the last: the tool's implementation, `(parts, args, call) => result`, from the
// tables of the modules by kind (lib/tools.js). An implementation that acts on the page asks the guard through its
// ToolCall (`call.check`, `call.going`), which notes the decision and the rule the result-meta stage reports.

/** The stage, over `implementations`, a Map of each tool's implementation by its catalogue name. */
export function act(implementations) {
  return async (step) => implementations.get(step.name)(step.parts, step.args, step.call);
}
