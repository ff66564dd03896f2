// Chrome's password manager offers "Save password?" when a form with a password is submitted, also when it
// was the agent that typed the password: saving it would put a password the person may never have seen into
// their password manager, under their name. So while a password the agent typed may still be submitted,
// Chrome's offer to save passwords is off, and it is put back as soon as that is over.

// A typed password counts as pending until its tab has been quiet this long: no more typing, no page
// loading (a submission loads or changes the page, and Chrome decides to offer the save right then).
const HOLD_MS = 60_000;
// Set while the setting is ours: a worker that stopped holding it puts it back when it starts again.
const HELD = 'openab.passwordSavingHeld';

/** The setting, where Chrome has it (the "privacy" permission). */
function setting() {
  return globalThis.chrome?.privacy?.services?.passwordSavingEnabled ?? null;
}

/**
 * Holds Chrome's "offer to save passwords" off while any password the agent typed is pending, per tab, and
 * clears our hold (the person's own choice applies again) when none is. A setting another extension or a
 * policy controls is left alone. The setting is the browser's: the worker makes one (background.js).
 */
export class AgentPasswords {
  constructor() {
    this.pending = new Map(); // tabId -> the timer that ends its hold
    this._chain = Promise.resolve();
    chrome.tabs.onRemoved.addListener((tabId) => this._done(tabId));
    chrome.tabs.onUpdated.addListener((tabId, change) => {
      if (change.status && this.pending.has(tabId)) this._arm(tabId);
    });
    chrome.storage.local.get(HELD).then((got) => {
      if (got[HELD] && !this.pending.size) this._queue(() => this._restore());
    }, () => {});
  }

  /** The agent is about to type a password in a tab: Chrome must not offer to save it. */
  typing(tabId) {
    this._arm(tabId);
    return this._queue(async () => {
      const s = setting();
      if (!s || !this.pending.size) return;
      const now = await s.get({});
      if (now.levelOfControl !== 'controllable_by_this_extension' && now.levelOfControl !== 'controlled_by_this_extension') return;
      await chrome.storage.local.set({ [HELD]: true });
      if (now.value !== false || now.levelOfControl !== 'controlled_by_this_extension') await s.set({ value: false });
    });
  }

  _arm(tabId) {
    clearTimeout(this.pending.get(tabId));
    this.pending.set(tabId, setTimeout(() => this._done(tabId), HOLD_MS));
  }

  _done(tabId) {
    if (!this.pending.has(tabId)) return;
    clearTimeout(this.pending.get(tabId));
    this.pending.delete(tabId);
    if (!this.pending.size) this._queue(() => this._restore());
  }

  async _restore() {
    if (this.pending.size) return;
    const s = setting();
    if (s && (await s.get({})).levelOfControl === 'controlled_by_this_extension') await s.clear({});
    await chrome.storage.local.remove(HELD);
  }

  /** One change of the setting at a time, in the order asked. */
  _queue(step) {
    this._chain = this._chain.then(step).catch((e) => console.warn('openab: the password-saving setting', e.message));
    return this._chain;
  }
}
