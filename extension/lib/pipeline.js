// One path for every browser action (docs/extension.md, One path for every action). Every call, of every tool,
// today's and tomorrow's, passes the same stages in this order; each is a module of lib/stages/ with one job, and
// decides from the tool's catalogue facts (lib/catalogue.js), never from its name. A stage is
// `async (step, next) => result`: it does its part on the way in, hands the step on with `next()` or answers in its
// place (a refusal), and may work on the result on the way back, as middleware does.
//
// `step` is one call: `{name, args, facts, call, parts, tabId}`: the tool's name, its arguments (an object), its
// catalogue facts, its ToolCall (lib/tools.js: the cancel signal, the guard's decision and rule), the browser's parts
// the implementations work with, and the agent tab it runs in (set when its turn comes).

import { queue } from './stages/queue.js';
import { exclusive } from './stages/exclusive.js';
import { toolErrors } from './stages/errors.js';
import { turn } from './stages/turn.js';
import { planGate } from './stages/plan.js';
import { receipt } from './stages/receipt.js';
import { downloadsActivity } from './stages/downloads.js';
import { lateLoad } from './stages/late-load.js';
import { dialogs } from './stages/dialogs.js';
import { again } from './stages/again.js';
import { pageLeft } from './stages/page-left.js';
import { act } from './stages/act.js';
import { resultMeta } from './stages/meta.js';

/** The stages as one function of a step, each calling the next; the last never calls on. */
export function compose(stages) {
  const at = async (i, step) => stages[i](step, () => at(i + 1, step));
  return (step) => at(0, step);
}

/**
 * The path of every call, in its order. `maxQueue` bounds the calls that wait, `onActivity(±1)` hears each turn
 * start and end, `receipts` is the browser's lib/receipts.js, `implementations` each tool's by its name.
 */
export function actionPipeline({ maxQueue, onActivity, receipts, implementations }) {
  return compose([
    resultMeta, //         on the way back, last: the guard's decision and rule in the result's _meta
    queue(maxQueue), //    1. a bound on the calls that wait
    exclusive(), //        2. nothing else while the person has the tab (facts.exclusive)
    toolErrors, //         3. a failure of any later stage as an isError result
    turn(onActivity), //   4. one call at a time, in order; the tab it runs in
    ...stepStages(receipts, implementations),
  ]);
}

/**
 * The path of one step of a call that carries several (lib/tools-form.js), inside that call's turn: the stages
 * after the turn, with its own errors and guard decision, so each step is taken as a call of its own would be.
 */
export function stepPipeline({ receipts, implementations }) {
  return compose([resultMeta, toolErrors, ...stepStages(receipts, implementations)]);
}

function stepStages(receipts, implementations) {
  return [
    planGate, //           5. Ask before acting: no acting step before an approved plan (facts.plan)
    receipt(receipts), //  6. the look before the step and its receipt after (facts.receipt)
    downloadsActivity, //  7. a download started meanwhile is the agent's
    lateLoad, //           8. the last action's late navigation lands first
    dialogs, //            9. a JavaScript dialog open or opening in the tab (facts.dialogs)
    again, //             10. a repeat of a step that may already have happened: the person decides first
    pageLeft, //          11. the page went to another one under the step: read again, not done, or may have been
    act(implementations), // 12. the implementation, which asks the guard through its ToolCall
  ];
}
