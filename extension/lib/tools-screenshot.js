// browser_screenshot: the agent tab as a JPEG image block, sized and encoded by lib/image.js.

import { ToolError, SCREENSHOT_FAILED } from './errors.js';
import { JPEG_QUALITY, encodeJpeg } from './image.js';
import { PAGE_ANSWER_MS, within } from './page-script.js';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function screenshot(b, args) {
  const tab = await b.tabs.target();
  // captureVisibleTab shoots whatever is visible, so the agent tab must be the active one for a
  // moment; the user's own tab comes back right after.
  const [shown] = await chrome.tabs.query({ active: true, windowId: tab.windowId });
  if (!tab.active) await chrome.tabs.update(tab.id, { active: true });
  try {
    return await capture(tab, args);
  } finally {
    if (shown && shown.id !== tab.id) await chrome.tabs.update(shown.id, { active: true }).catch(() => {});
  }
}

async function capture(tab, args) {
  let dataUrl;
  for (let attempt = 0; ; attempt++) {
    try {
      const shot = chrome.tabs.captureVisibleTab(tab.windowId, { format: 'jpeg', quality: Math.round(JPEG_QUALITY * 100) });
      dataUrl = await within(PAGE_ANSWER_MS, shot, 'the tab capture');
      break;
    } catch (e) {
      if (e instanceof ToolError) throw e;
      const m = String(e.message);
      // Chrome allows two captures per second per extension: wait out the window.
      if (attempt < 3 && /MAX_CAPTURE_VISIBLE_TAB_CALLS_PER_SECOND/.test(m)) {
        await sleep(1050);
        continue;
      }
      // A tab that was in the background has no painted frame until it renders once.
      if (attempt < 8 && /readback|Failed to capture/i.test(m)) {
        await sleep(150);
        continue;
      }
      throw new ToolError(SCREENSHOT_FAILED, `could not capture the tab: ${m}. Try again in a moment.`);
    }
  }
  const img = await encodeJpeg(dataUrl, { full: args.full_size === true });
  return { content: [{ type: 'image', data: img.data, mimeType: 'image/jpeg' }] };
}

export const SCREENSHOT_TOOLS = {
  browser_screenshot: screenshot,
};
