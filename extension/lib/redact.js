// Token-shaped secrets in page text. Everything the tools return from a page passes through
// redactTokens() before the agent sees it (fields are redacted earlier, in page/agent.js, by kind).
// The patterns aim at strings that are secrets by their shape, and leave ordinary words,
// identifiers, URLs, UUIDs, commit ids and checksums (lower-case hex) alone. docs/extension.md
// lists them.

const MARK = '[redacted]';

// A PEM private key block (an unterminated one is cut to the end of the text).
const PEM = /-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|$)/g;

// A JSON Web Token: base64url JSON header and payload (both start with `{"`, so `eyJ`), then the
// signature (and the two more parts of an encrypted one).
const JWT = /(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}(?:\.[A-Za-z0-9_-]*){1,3}/g;

// Keys whose vendors give them a fixed prefix.
const PREFIXED = new RegExp('(?<![A-Za-z0-9_-])(?:' + [
  'sk-(?=[A-Za-z0-9_-]*[0-9])[A-Za-z0-9_-]{20,}', // OpenAI, Anthropic (sk-proj-..., sk-ant-...)
  '(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}', // Stripe secret and restricted keys
  'gh[pousr]_[A-Za-z0-9]{30,}', // GitHub tokens
  'github_pat_[A-Za-z0-9_]{30,}', // GitHub fine-grained tokens
  'glpat-[A-Za-z0-9_-]{20,}', // GitLab
  'xox[abposr]-[A-Za-z0-9-]{10,}', // Slack
  '(?:AKIA|ASIA)[A-Z0-9]{16}', // AWS access key ids
  'AIza[A-Za-z0-9_-]{35}', // Google API keys
  'npm_[A-Za-z0-9]{36}', // npm
  'hf_[A-Za-z0-9]{30,}', // Hugging Face
  'pypi-[A-Za-z0-9_-]{50,}', // PyPI
].join('|') + ')(?![A-Za-z0-9_-])', 'g');

// An HTTP credential after its scheme word: `Bearer <token>`, `Basic <base64>`.
const SCHEME = /\b(Bearer|Basic)(\s+)([A-Za-z0-9._~+/-]{16,}=*)(?![A-Za-z0-9._~+/=-])/gi;

// A value given to a secret-named key: `token=...`, `"api_key": "..."`, `password: ...`,
// `authenticity_token=...`, `?code=...` (OAuth). The value must be 8+ token characters with a
// digit, and not a call (`token = next_token(...)`), so code samples read as they are.
const NAMED = /(\b[A-Za-z0-9_-]{0,40}?(?:token|secret|passw(?:or)?d|pwd|api[_-]?key|apikey|access[_-]?key|private[_-]?key|client[_-]?secret|session[_-]?id|sessid|sid|signature|sig|otp|auth)|[?&#]code)(["']?\s*[:=]\s*["']?)([A-Za-z0-9._~+/=-]{8,})(?![A-Za-z0-9._~+/=(-])/gi;

// Anything else that looks random: a run of 32+ base64 characters holding upper and lower case
// letters and digits, changing between those three classes at 40% or more of its adjacent
// pairs, with no lower-case stretch longer than 7 and few `-`/`_`. Words, identifiers
// (`getElementsByTagName`), slugs and paths change class rarely or hold long lower-case words;
// random tokens change class at about 60% of pairs.
const RUN = /[A-Za-z0-9+/_-]{32,}={0,2}/g;

function looksRandom(run) {
  const core = run.replace(/=+$/, '');
  let upper = 0;
  let lower = 0;
  let digit = 0;
  let seps = 0;
  let pairs = 0;
  let changes = 0;
  let lowerRun = 0;
  let longestLower = 0;
  let prev = '';
  for (const ch of core) {
    let cls = '';
    if (ch >= 'A' && ch <= 'Z') cls = 'u';
    else if (ch >= 'a' && ch <= 'z') cls = 'l';
    else if (ch >= '0' && ch <= '9') cls = 'd';
    else if (ch === '-' || ch === '_') seps++;
    if (cls === 'u') upper++;
    else if (cls === 'd') digit++;
    if (cls === 'l') {
      lower++;
      longestLower = Math.max(longestLower, ++lowerRun);
    } else {
      lowerRun = 0;
    }
    if (cls && prev) {
      pairs++;
      if (cls !== prev) changes++;
    }
    prev = cls;
  }
  return upper >= 2 && lower >= 2 && digit >= 1 && seps <= core.length / 10 && longestLower <= 7 &&
    pairs > 0 && changes / pairs >= 0.4;
}

function hasDigit(s) {
  return /[0-9]/.test(s);
}

/** `text` with every token-shaped string replaced by `[redacted]`. Idempotent. */
export function redactTokens(text) {
  let t = String(text);
  t = t.replace(PEM, MARK);
  t = t.replace(JWT, MARK);
  t = t.replace(PREFIXED, MARK);
  t = t.replace(SCHEME, (m, scheme, space, value) =>
    (hasDigit(value) || /=$/.test(value) || value.length >= 24 ? `${scheme}${space}${MARK}` : m));
  t = t.replace(NAMED, (m, key, sep, value) =>
    (hasDigit(value) ? `${key}${sep}${MARK}` : m));
  t = t.replace(RUN, (m) => (looksRandom(m) ? MARK : m));
  return t;
}

// A card number as a program prints it: 13 to 19 digits, in groups apart by a space or a dash.
const CARD = /(?<![0-9])[0-9](?:[ -]?[0-9]){12,18}(?![0-9])/g;

/** Whether a run of digits passes the Luhn check every card number passes (a random one: 1 in 10). */
function luhn(digits) {
  let sum = 0;
  for (let i = 0; i < digits.length; i++) {
    let d = Number(digits[digits.length - 1 - i]);
    if (i % 2 === 1) d = d * 2 > 9 ? d * 2 - 9 : d * 2;
    sum += d;
  }
  return sum % 10 === 0;
}

/**
 * `text` with every card number replaced by `[redacted]`: for what a program prints of itself (its console, its
 * requests' bodies), where a card number is no field's value and no page layout says it is one. Idempotent.
 */
export function redactCardNumbers(text) {
  return String(text).replace(CARD, (m) => (luhn(m.replace(/[ -]/g, '')) ? MARK : m));
}
