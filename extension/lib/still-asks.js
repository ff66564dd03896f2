// What an approved plan and autopilot never wave through: the one list both the plan card's sentence (panel/cards.js,
// lib/plan.js's answer to the agent) and the guard's behaviour (lib/plan.js, Plan.check) are made from, so what the
// card promises and what the guard does cannot drift apart (tests/browser/test_guard_inputs.py holds them together).
//
// Each entry: `id` (recorded as the guard's rule), `words` (how the card names it), and `covers(risky)`, whether the
// guard's finding about a step (lib/guard.js, classify) is of this kind. Pure: the panel imports it too.

// The risks (lib/risky-words.js) that spend the person's money.
const PAYING = new Set(['buy', 'order', 'checkout', 'pay', 'transfer', 'subscribe']);

export const STILL_ASKS = Object.freeze([
  { id: 'password', words: 'passwords', covers: (r) => r.secret === 'password' },
  { id: 'one-time-code', words: 'one-time codes and other secrets', covers: (r) => r.secret === 'one-time code' || r.secret === 'secret' },
  { id: 'payment', words: 'payments and purchases', covers: (r) => r.secret === 'payment' || PAYING.has(r.risk) },
  { id: 'upload', words: 'uploads', covers: (r) => r.upload === true },
  { id: 'shortcut', words: "the page's own keyboard shortcuts", covers: (r) => r.rule === 'key-shortcut' },
]);

/** The entry of STILL_ASKS that covers the guard's finding `risky`, or null. Pure. */
export function stillAsks(risky) {
  return (risky && STILL_ASKS.find((entry) => entry.covers(risky))) || null;
}

/**
 * "Passwords, one-time codes and other secrets, ..., uploads and the page's own keyboard shortcuts still ask": the
 * list in words, capitalised as a sentence's start unless `midSentence`. Pure.
 */
export function stillAsksSentence(midSentence = false) {
  const words = STILL_ASKS.map((e) => e.words);
  const listed = `${words.slice(0, -1).join(', ')} and ${words[words.length - 1]}`;
  return `${midSentence ? listed : `${listed[0].toUpperCase()}${listed.slice(1)}`} still ask`;
}
