// Several steps in one call: browser_fill_form (the fields of one form: text, choices, checks) and browser_batch
// (any steps). Each step goes through the stages a call of its own would (lib/pipeline.js stepPipeline: the plan,
// its receipt, downloads, late loads, dialogs, the implementation and its guard), inside the one turn of the call
// that carries it, so nothing else acts on the page between its steps. The call stops at the first step that fails
// or that needs the person: a card in the middle of a batch would ask the person about one step of several they
// never saw together, so that step is not taken and the agent calls it alone, where its card asks, or hands off.

import { ToolError, BAD_ARGS, BAD_TARGET } from './errors.js';
import { factsOf } from './catalogue.js';
import { text, withPage } from './results.js';

const MAX_STEPS = 20;
const MAX_FIELDS = 50;
export const NEEDS_PERSON = 'needs_person';

/** The guard as a step of a batch sees it: the same rules, but a step that would show a card stops the batch. */
function withoutCards(guard, stopped) {
  return Object.create(guard, {
    ask: {
      value: async (card) => {
        stopped.card = card;
        throw new ToolError(NEEDS_PERSON, 'this step needs the person, so it was not taken. Call it alone (its card asks ' +
          'them), or hand them the tab with browser_handoff. What it would have asked is in the block below',
        String(card.title || '').slice(0, 500));
      },
    },
  });
}

/** Why a tool cannot be a step of a batch, or '' (from its facts: the person's own steps and files are not). */
function unbatchable(name) {
  const facts = factsOf(name);
  if (!facts) return 'is not a tool of this browser';
  if (Object.hasOwn(FORM_TOOLS, name)) return 'runs steps itself';
  if (facts.exclusive || facts.guard.includes('person')) return "is the person's (it waits for them)";
  if (facts.guard.includes('transfers')) return 'moves a file, which is asked about alone';
  return '';
}

/**
 * Runs `count` steps one after another through the step path, stopping at the first that fails or needs the person.
 * `stepAt(i)` says the step when its turn comes (`{tool, args, label}`, or `{label, skip}` for one with nothing to
 * do), so it sees the page as the steps before it left it. Returns the call's result: our summary, then each step's
 * own words.
 */
async function runSteps(b, count, stepAt, call, what) {
  const parts = [];
  let done = 0;
  let stop = '';
  for (let i = 0; i < count && !stop; i++) {
    const stopped = {};
    let result;
    let label = `step ${i + 1}`;
    try {
      const s = await stepAt(i);
      label = s.label;
      result = s.skip ? text(s.skip) : await b.step(s.tool, s.args, call.step((guard) => withoutCards(guard, stopped)));
    } catch (e) {
      if (!(e instanceof ToolError)) throw e;
      result = { ...text(withPage(e.message, e.page)), isError: true };
    }
    const said = (result.content || []).filter((c) => c.type === 'text').map((c) => c.text).join('\n');
    parts.push(`${i + 1}. ${label}: ${said}`);
    if (result.isError) stop = stopped.card ? `step ${i + 1} needs the person and was not taken` : `step ${i + 1} failed`;
    else done++;
  }
  const rest = count - done - (stop ? 1 : 0);
  const head = stop
    ? `${what}: ${done} of ${count} steps done, then ${stop}${rest ? `; the ${rest} after it were not run` : ''}.`
    : `${what}: all ${count} steps done.`;
  return { ...text(`${head}\n\n${parts.join('\n\n')}`), ...(stop && { isError: true }) };
}

function targetOf(field, i) {
  const { ref, selector } = field;
  if ((ref === undefined || ref === '') && (typeof selector !== 'string' || !selector)) {
    throw new ToolError(BAD_TARGET, `field ${i + 1} needs "ref" (from browser_snapshot) or "selector"`);
  }
  return ref !== undefined && ref !== '' ? { ref } : { selector };
}

/** What a field asks for, checked before any field is filled: a bad one leaves the form as it was. */
function checkField(field, i) {
  if (!field || typeof field !== 'object') throw new ToolError(BAD_ARGS, `field ${i + 1} must be an object`);
  targetOf(field, i);
  const values = Array.isArray(field.values) && field.values.every((v) => typeof v === 'string');
  if (typeof field.checked !== 'boolean' && !values && typeof field.value !== 'string') {
    throw new ToolError(BAD_ARGS, `field ${i + 1} needs "value" (text or an option), "values" (options) or "checked"; nothing was filled`);
  }
}

/**
 * A field as the step a person would take on it, looked at when its turn comes: a check box clicked only when it is
 * not as asked, a list's options chosen, text typed into anything else (the field's old text replaced). With a
 * JavaScript dialog open the page cannot be looked at: the step is taken as text, and its dialogs stage reports it.
 */
async function fieldStep(b, field, i) {
  const target = targetOf(field, i);
  const label = target.ref !== undefined ? `[ref=${target.ref}]` : target.selector;
  const element = typeof field.element === 'string' ? { element: field.element } : {};
  const tab = await b.tabs.target();
  const blocked = Boolean(b.dialogs && b.dialogs.pending(tab.id));
  const loc = await b.page.locate(tab, target);
  if (typeof field.checked === 'boolean') {
    const click = { tool: 'browser_click', args: { ...target, ...element }, label: `${field.checked ? 'check' : 'uncheck'} ${label}` };
    if (blocked) return click;
    const [r] = await b.page.exec(loc.target, 'stateAfter', [loc.spec]);
    const state = r && r.result;
    if (!state || state.gone || state.error) throw b.page.error(state, loc, target);
    const now = state.state.checked ?? state.state.pressed;
    return now === field.checked ? { label, skip: `already ${field.checked ? 'checked' : 'unchecked'}` } : click;
  }
  if (Array.isArray(field.values)) return { tool: 'browser_select_option', args: { ...target, ...element, values: field.values }, label: `choose in ${label}` };
  const typing = { tool: 'browser_type', args: { ...target, ...element, text: field.value, clear: true }, label: `type into ${label}` };
  if (blocked) return typing;
  const [d] = await b.page.exec(loc.target, 'describeTarget', [loc.spec, {}]);
  if (!d || !d.result || d.result.error) throw b.page.error(d && d.result, loc, target);
  if (d.result.desc.tag === 'select') return { tool: 'browser_select_option', args: { ...target, ...element, value: field.value }, label: `choose in ${label}` };
  return typing;
}

async function fillForm(b, args, call) {
  const fields = args.fields;
  if (!Array.isArray(fields) || !fields.length || fields.length > MAX_FIELDS) {
    throw new ToolError(BAD_ARGS, `"fields" must be a list of 1 to ${MAX_FIELDS} fields`);
  }
  fields.forEach(checkField);
  return runSteps(b, fields.length, (i) => fieldStep(b, fields[i], i), call, 'browser_fill_form');
}

async function batch(b, args, call) {
  const given = args.steps;
  if (!Array.isArray(given) || !given.length || given.length > MAX_STEPS) {
    throw new ToolError(BAD_ARGS, `"steps" must be a list of 1 to ${MAX_STEPS} steps, each {tool, arguments}`);
  }
  const steps = given.map((s, i) => {
    const name = s && typeof s.tool === 'string' ? s.tool : '';
    const why = unbatchable(name);
    if (why) throw new ToolError(BAD_ARGS, `step ${i + 1}: ${name || '(no tool)'} ${why}; nothing was run`);
    const a = s.arguments ?? {};
    if (!a || typeof a !== 'object' || Array.isArray(a)) throw new ToolError(BAD_ARGS, `step ${i + 1}: "arguments" must be an object; nothing was run`);
    return { tool: name, args: a, label: name };
  });
  return runSteps(b, steps.length, async (i) => steps[i], call, 'browser_batch');
}

export const FORM_TOOLS = {
  browser_fill_form: fillForm,
  browser_batch: batch,
};
