// The words on a page that make a step risky: a click on, a drop onto, a choice of, or a dialog's accept of
// something that says one of them asks the person first (lib/guard.js). They are ours, never the page's: the
// guard says the canonical name of the risk (`risk`, in English) and the words it matched (`said`, from our
// own list), so a card and an error may quote them in openab's voice.
//
// A page's words are matched whole: "Deleted items", "Sending tips" and "Payment history" name no step.

const ENGLISH = [
  ['buy', /\b(buy|purchase)\b/i],
  ['order', /\b(order|place order)\b/i],
  ['checkout', /\b(checkout|check out)\b/i],
  ['pay', /\b(pay)\b/i],
  ['send', /\b(send)\b/i],
  ['post', /\b(post|tweet|reply)\b/i],
  ['publish', /\b(publish)\b/i],
  ['delete', /\b(delete|remove|erase)\b/i],
  ['trash', /\b(trash|bin|discard)\b/i],
  ['archive', /\b(archive)\b/i],
  ['unsubscribe', /\b(unsubscribe|cancel (?:my |your )?subscription)\b/i],
  ['sign in', /\b(sign ?in|log ?in)\b/i],
  ['sign up', /\b(sign ?up|register)\b/i],
  ['sign out', /\b(sign ?out|log ?out)\b/i],
  ['upload', /\b(upload)\b/i],
  ['transfer', /\b(transfer|withdraw)\b/i],
  ['subscribe', /\b(subscribe)\b/i],
];

/**
 * The first risky word in `text` (a label, an option, a dialog's message): `{risk, said}`, or null. `risk` is the
 * step's kind in our words ('delete', 'buy'); `said` the words of our list that matched, folded to lower case and
 * single spaces. Pure.
 */
export function riskyWord(text) {
  const s = String(text || '');
  if (!s) return null;
  let best = null;
  for (const [risk, pattern] of ENGLISH) {
    const m = pattern.exec(s);
    if (m && (!best || m.index < best.index)) best = { index: m.index, risk, said: m[1].toLowerCase().replace(/\s+/g, ' ') };
  }
  return best && { risk: best.risk, said: best.said };
}
