// What stops the agent in its tab until someone answers: a JavaScript dialog the page opened (met by a call,
// answered by browser_handle_dialog; lib/dialogs.js watches them) and the person's own turn in the tab
// (browser_handoff; lib/handoff.js shows the card).

import { ToolError, BAD_ARGS, NO_DIALOG, NOT_ALLOWED } from './errors.js';
import { classify } from './guard.js';
import { dialogReport } from './dialogs.js';
import { handOff, handoffOutcome, handoffSeconds } from './handoff.js';
import { text, withPage } from './results.js';
import { snapshot } from './tools-read.js';

/** The dialog a call opened (`ran`) or was stopped by, as its result. */
export function dialogMet(dialog, tool, ran, call) {
  // The person's yes to this very step covers the dialog it opened: accepting it asks no second time.
  if (ran && call.personAllowed) dialog.approved = true;
  const { ours, page } = dialogReport(dialog, tool, ran);
  return { ...text(withPage(ours, page)), ...(!ran && { isError: true }) };
}

async function handleDialog(b, args, call) {
  if (typeof args.accept !== 'boolean') throw new ToolError(BAD_ARGS, '"accept" must be true (OK, Leave) or false (Cancel, Stay)');
  const tab = await b.tabs.target();
  const dialog = b.dialogs && b.dialogs.pending(tab.id);
  if (!dialog) throw new ToolError(NO_DIALOG, 'no JavaScript dialog is open in the agent tab; take a browser_snapshot to see the page');
  const desc = { type: dialog.type, message: dialog.message, origin: dialog.origin, url: dialog.url };
  const risky = classify('browser_handle_dialog', desc, { accept: args.accept });
  if (dialog.approved && !(risky && risky.secret)) {
    call.allowed();
  } else {
    try {
      await call.check('browser_handle_dialog', desc, { accept: args.accept }, { url: tab.url, tabId: tab.id });
    } catch (e) {
      // A dialog left open blocks the page: what the person did not allow is answered Cancel.
      if (e instanceof ToolError && e.code === NOT_ALLOWED && (await b.dialogs.answer(tab.id, false).then(() => true, () => false))) {
        e.message += ' The dialog was dismissed (Cancel).';
      }
      throw e;
    }
  }
  call.throwIfCancelled();
  // Leave on a "leave this page?" dialog goes on with the navigation it held.
  const watch = b.loads.watch(tab.id);
  try {
    await b.dialogs.answer(tab.id, args.accept, args.accept && dialog.type === 'prompt' ? String(args.prompt_text ?? '') : undefined);
  } catch (e) {
    watch.stop();
    throw e;
  }
  await b.loads.settle(watch, args.accept && dialog.type === 'beforeunload');
  return text(`${args.accept ? 'accepted' : 'dismissed'} the ${dialog.type} dialog. If the page changed, take a new browser_snapshot.`);
}

async function handoff(b, args, call) {
  const tab = await b.tabs.target();
  const seconds = handoffSeconds(args.timeout_s);
  const answer = await handOff({
    guard: b.guard, tab, reason: args.reason, seconds, signal: call.signal,
    personTurn: () => b.page.exec({ tabId: tab.id, allFrames: true }, 'personTurn', []).catch(() => {}),
  });
  const outcome = handoffOutcome(answer, seconds);
  const open = b.dialogs && b.dialogs.pending(tab.id);
  const page = open ? dialogMet(open, 'browser_handoff', true, call) : await snapshot(b, {});
  return { content: [{ type: 'text', text: outcome.text }, ...page.content], ...(outcome.isError && { isError: true }) };
}

export const PERSON_TOOLS = {
  browser_handle_dialog: handleDialog,
  browser_handoff: handoff,
};
