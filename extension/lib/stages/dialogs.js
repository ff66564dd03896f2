// Stage 9 of lib/pipeline.js: JavaScript dialogs (lib/dialogs.js). A dialog blocks the page's script, so one open
// in the tab is what a call reports instead of running, and one that opens while it runs ends it. How a tool meets
// them is its facts.dialogs: 'meets' (as said), 'free' (it never waits on the page's script: not watched),
// 'answers' (an open dialog is what it is for), 'person' (the person's turn: they answer the dialogs they meet).

import { Dialogs } from '../dialogs.js';
import { ToolError } from '../errors.js';
import { text } from '../results.js';
import { dialogMet } from '../tools-person.js';

export async function dialogs(step, next) {
  const watcher = step.parts.dialogs;
  const { tabId } = step;
  if (!watcher || step.facts.dialogs === 'free' || tabId == null) return next();
  // The tab is watched only while calls run there (lib/dialogs.js says why).
  const watch = await watcher.hold(tabId);
  try {
    return await watched(step, next, watcher, watch);
  } finally {
    watcher.settle(tabId);
  }
}

async function watched(step, next, watcher, watch) {
  const way = step.facts.dialogs;
  if (watch === 'blocked' && way !== 'person') return { ...text(Dialogs.blocked(step.name)), isError: true };
  if (watch !== 'watched') return blind(next, watcher.blindNote());
  const open = watcher.pending(step.tabId);
  if (open && way !== 'answers') return dialogMet(open, step.name, false, step.call);
  if (way === 'person') return next();
  const { result, dialog } = await watcher.race(step.tabId, next);
  return dialog ? dialogMet(dialog, step.name, true, step.call) : result;
}

/** Unseen, a dialog may be what a failure is about: the agent is told it cannot know. */
async function blind(next, note) {
  if (!note) return next();
  try {
    const result = await next();
    return result && result.isError ? { ...result, content: [...result.content, { type: 'text', text: note }] } : result;
  } catch (e) {
    if (e instanceof ToolError) e.message += ` (${note})`;
    throw e;
  }
}
