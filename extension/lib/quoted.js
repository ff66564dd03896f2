// Words that came from a page, a file or the agent, as openab shows them (issue 33): on one line, with nothing in
// them that could start a line of ours, reorder the words around them or hide. lib/receipts.js quotes a page's words
// with it inside the untrusted block, panel/steps.js the words of a row; the pod's counterpart is
// core/journal/words.py's printable.

// C0 and C1 controls and DEL, the line and paragraph separators, lone surrogates, and the bidi controls (an override
// turns "Buy now" and our words after it around). Other format characters stay: a zero-width joiner or non-joiner
// is part of emoji and of Persian and Indic words.
const UNSAFE = /[\p{Cc}\u2028\u2029\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]|\p{Cs}/gu;
const NAMED = { '\n': '\\n', '\r': '\\r', '\t': '\\t' };

/** `text` with every character above shown as its escape (`\n`, `\u202e`): one line, read in the order written. */
export function oneLine(text) {
  return String(text).replace(UNSAFE, (c) => NAMED[c] || `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}
