// The pairing link's confirmation (lib/pairing.js opens it in place of a `<host>/pair#code=` page). It names the
// host and asks; only Connect sends the code to the service worker, which claims it and saves the gateway. The
// code leaves the address bar as soon as the person has answered, either way.

import { pairLink, pairProblem } from '../lib/pairing.js';

const params = new URLSearchParams(location.hash.slice(1));
const at = params.get('at') || '';
const code = params.get('code') || '';
const tabId = Number(params.get('tab'));
const link = pairLink(`${at}#code=${code}`);
const status = document.getElementById('status');

function say(text, level = '') {
  status.textContent = text;
  status.className = level;
}

function forgetCode() {
  history.replaceState(null, '', location.pathname);
}

function answered() {
  document.getElementById('ask').hidden = true;
  forgetCode();
}

if (!link || link.at !== at) {
  say('This is not a pairing link: nothing was saved.', 'error');
  forgetCode();
} else if (pairProblem(at)) {
  say(`${pairProblem(at)} Nothing was saved.`, 'error');
  forgetCode();
} else {
  document.getElementById('host').textContent = link.host;
  document.title = `Pair openab with ${link.host}?`;
  document.getElementById('ask').hidden = false;
  document.getElementById('connect').focus();
}

document.getElementById('connect').addEventListener('click', async () => {
  // Opened in the click itself: Chrome opens a side panel only in answer to a person's gesture.
  if (Number.isInteger(tabId) && tabId > 0) chrome.sidePanel?.open({ tabId }).catch(() => {});
  for (const b of document.querySelectorAll('button')) b.disabled = true;
  say(`Connecting to ${link.host}…`);
  const result = await chrome.runtime.sendMessage({ type: 'pair-connect', at, code });
  answered();
  if (result && result.ok) {
    say(`Connected: the openab side panel now uses the gateway at ${result.host}. You can close this tab.`, 'ok');
  } else {
    say(`${(result && result.error) || 'Pairing failed.'} Nothing was saved.`, 'error');
  }
});

document.getElementById('cancel').addEventListener('click', () => {
  answered();
  say('Cancelled: this browser was not paired, and nothing was saved. You can close this tab.');
});
