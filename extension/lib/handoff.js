// Handing the agent tab to the person: signing in, a CAPTCHA, a one-time code, a payment are theirs to do.
// The panel shows a "your turn" card with the agent's reason; the call waits for Done or Cancel, or for
// its bounded timeout. What the person types is marked in the page (page/agent.js, personTurn) so no
// later snapshot or read shows it to the agent.

import { ToolError, BAD_ARGS, BUSY, CANCELLED, NO_TAB } from './errors.js';
import { DEFAULTS, toolNamed } from './catalogue.js';
import { showTab, TAB_CLOSED } from './guard.js';
import { webOrigin } from './settings.js';

// The default stays under the pod's tunnel timeout (OPENAB_TUNNEL_TIMEOUT, 170 s by default), which would otherwise
// end the call first and tell the agent its outcome is unknown; the bounds are the ones the schema states.
const MAX_REASON = 300;

/** The bounded wait, in seconds, for what the agent asked. */
export function handoffSeconds(asked) {
  const { minimum, maximum } = toolNamed('browser_handoff').inputSchema.properties.timeout_s;
  const n = Number.isInteger(asked) ? asked : DEFAULTS.handoffTimeoutSeconds;
  return Math.min(Math.max(n, minimum), maximum);
}

/**
 * Shows the person the tab and the card, and waits: resolves 'done' | 'cancel' | 'timeout', throws when
 * the call is cancelled (Stop, the socket lost). `personTurn` marks the page so the person's typing stays
 * theirs; it runs again on every page the tab loads while the person has it.
 */
export async function handOff({ guard, tab, reason, seconds, signal, personTurn }) {
  const said = String(reason || '').replace(/\s+/g, ' ').trim().slice(0, MAX_REASON);
  if (!said) throw new ToolError(BAD_ARGS, '"reason" must say what the person should do, e.g. "Sign in to example.com"');
  const reloaded = (tabId, info) => {
    if (tabId === tab.id && info.status === 'complete') personTurn();
  };
  chrome.tabs.onUpdated.addListener(reloaded);
  try {
    await personTurn();
    // The person acts in the tab itself: bring it to the front of its window, and the window forward (the card's
    // Show me does it again, once they have looked elsewhere).
    await showTab(tab.id);
    const answer = await guard.ask({
      kind: 'handoff', tool: 'browser_handoff', title: 'Your turn', reason: said, site: webOrigin(tab.url),
      detail: String(tab.title || '').slice(0, 200), tabId: tab.id, timeoutMs: seconds * 1000,
    }, signal);
    if (answer === 'cancelled') throw new ToolError(CANCELLED, 'the call was cancelled');
    if (answer === TAB_CLOSED) {
      throw new ToolError(NO_TAB, 'the tab closed before the person answered, so the handoff ended with nothing done ' +
        'in it. Ask the person in the chat what they want, or open the page again.');
    }
    if (answer === 'deny') throw new ToolError(BUSY, 'too many questions wait in the panel; try again once they are answered');
    return answer === 'done' || answer === 'timeout' ? answer : 'cancel';
  } finally {
    chrome.tabs.onUpdated.removeListener(reloaded);
  }
}

/** Our words for the person's answer, before the fresh snapshot. */
export function handoffOutcome(answer, seconds) {
  if (answer === 'done') return { isError: false, text: 'The person says they are done. The page as it is now:' };
  if (answer === 'timeout') {
    return { isError: true, text: `The person did not answer in ${seconds} s and the card was taken away. ` +
      'Ask them in the chat before handing off again. The page as it is now:' };
  }
  return { isError: true, text: 'The person cancelled: they did not do it. Do not hand off again unless they ask; ' +
    'say in the chat what is needed. The page as it is now:' };
}
