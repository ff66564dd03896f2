// A tool failure the agent can act on. It becomes an MCP result with isError, never a protocol
// error, so the model sees the message and can correct itself.
// `message` is in our words; `page` (optional) is text from the page that goes with it, which the
// agent gets inside an untrusted-content block.
export class ToolError extends Error {
  constructor(code, message, page = '') {
    super(message);
    this.code = code;
    this.page = page;
  }
}

// A ToolError's code says which failure it is to the code that catches it (the agent reads the message).
// The page script (page/*.js, a classic script that cannot import this module) answers with the codes of
// the failures it finds in the page under the same spellings: stale_ref, no_focus, focus_moved, not_found,
// bad_selector, bad_target, action_failed.
export const BAD_ARGS = 'bad_args';
export const BAD_SELECTOR = 'bad_selector';
export const BAD_TARGET = 'bad_target';
export const BAD_URL = 'bad_url';
export const BROWSER_RESTRICTED = 'browser_restricted';
export const BUSY = 'busy';
export const CANCELLED = 'cancelled';
export const CHAT_ENDED = 'chat_ended';
export const FOCUS_MOVED = 'focus_moved';
export const LOAD_FAILED = 'load_failed';
export const NO_DIALOG = 'no_dialog';
export const NO_FOCUS = 'no_focus';
export const NO_HISTORY = 'no_history';
export const NO_TAB = 'no_tab';
export const NO_WINDOW = 'no_window';
export const NOT_ALLOWED = 'not_allowed';
export const NOT_FOUND = 'not_found';
export const NOT_OWNED = 'not_owned';
// The page the call was in went away under it: the tab moved to another page while the call was in the page
// (lib/page-script.js); lib/stages/page-left.js says what that means for the step.
export const PAGE_LEFT = 'page_left';
export const SCREENSHOT_FAILED = 'screenshot_failed';
export const STALE_REF = 'stale_ref';
export const TIMEOUT = 'timeout';
export const TOOL_ERROR = 'tool_error';

/**
 * Right before each effect on a page: a call whose chat ended (New chat) or whose tab the person took back
 * (Stop sharing) is cancelled, and every await before this point may have been the moment it happened.
 */
export function throwIfCancelled(signal) {
  if (signal && signal.aborted) throw new ToolError(CANCELLED, 'the call was cancelled');
}
