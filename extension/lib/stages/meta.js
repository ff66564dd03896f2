// The outermost stage of lib/pipeline.js, so it sees every result, a refusal's too: what the guard decided for the
// call and the rule that decided it, in the result's _meta. The pod keeps both in its audit log
// (core/mcp_vocabulary.py, META_GUARD and META_GUARD_RULE; core/mcp/audit.py). Absent when the guard was not
// consulted; each call has its own ToolCall, so no decision can be read into another call's result.

import { META } from '../protocol.js';

export const GUARD_META = META.guard;
export const GUARD_RULE_META = META.guardRule;

export async function resultMeta(step, next) {
  const result = await next();
  const { decision, rule } = step.call;
  if (!decision) return result;
  return { ...result, _meta: { ...result._meta, [GUARD_META]: decision, ...(rule && { [GUARD_RULE_META]: rule }) } };
}
