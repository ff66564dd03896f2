// Ask before acting: the agent shows the person its plan for the task (what it will do, the sites it will use) and
// waits for Approve before it changes anything. With the setting on, every step that can change something waits
// for an approved plan; with it off, browser_plan is the agent's to offer and has the same effect once approved.
//
// An approved plan fences the task to its sites, and there it stands in for the routine risky-step cards: the
// person has already said yes to the task. It never covers what its card says still asks (lib/still-asks.js:
// passwords, one-time codes, payments and purchases, uploads, the page's own keyboard shortcuts), and a step or a
// page on a site outside it asks ("not in the approved plan").
// It covers the task the person asked and no other: it ends when they send their next message, press Stop or
// start a new chat (lib/panels.js), and with the worker (kept in memory only: a restarted worker asks again).

import { ToolError, BAD_ARGS, BUSY, CANCELLED, NOT_ALLOWED } from './errors.js';
import { factsOf, picks, toolNamed } from './catalogue.js';
import { MAX_CARDS } from './guard.js';
import { stillAsks, stillAsksSentence } from './still-asks.js';
import { text } from './results.js';
import { webOrigin } from './settings.js';

const MAX_SUMMARY = 500;
const MAX_STEP = 300;
const MAX_ITEMS = 20;

/**
 * A site as the agent listed it: a host ("shop.example", "127.0.0.1:8000"), which covers that host over http and
 * https, or an origin ("https://pay.example"), which covers that one only; a path after it is ignored. Returns
 * `{host}` or `{origin}` and `shown`, the words the card shows, or null when it names no web site. Pure.
 */
export function planSite(site) {
  const t = String(site ?? '').trim();
  if (!t || t.length > MAX_STEP) return null;
  const schemed = /^[a-z][a-z0-9+.-]*:\/\//i.test(t);
  let u;
  try {
    u = new URL(schemed ? t : `https://${t}`);
  } catch {
    return null;
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:' || u.username || u.password) return null;
  // The URL parser percent-encodes odd hosts ("exa mple.com"); such a site could never match a page.
  if (!/^([a-z0-9-]+\.)*[a-z0-9-]+$|^\[[0-9a-f:.]+\]$/i.test(u.hostname)) return null;
  if (schemed) return { origin: u.origin, shown: u.origin };
  // The port as written: the parser drops ":443" as https's default, which is not http's.
  const port = /^[^/?#]*:(\d+)(?:[/?#]|$)/.exec(t.replace(/^\[[^\]]*\]/, ''));
  const host = port ? `${u.hostname}:${Number(port[1])}` : u.hostname;
  return { host, shown: host };
}

/** Whether the listed `site` ({host} or {origin}) covers the page origin `origin`. Pure. */
function siteCovers(site, origin) {
  if (site.origin) return site.origin === origin;
  let u;
  try {
    u = new URL(origin);
  } catch {
    return false;
  }
  const port = u.port || (u.protocol === 'https:' ? '443' : '80');
  return site.host === u.hostname || site.host === `${u.hostname}:${port}`;
}

/** The proposal in browser_plan's arguments, cut to its bounds; throws bad_args on one the card could not show. */
export function readProposal(args) {
  const line = (s, max) => String(s ?? '').replace(/\s+/g, ' ').trim().slice(0, max);
  const summary = line(args.summary, MAX_SUMMARY);
  if (!summary) throw new ToolError(BAD_ARGS, '"summary" must say the task in a sentence, e.g. "Order the blue mug from shop.example"');
  const list = (name) => {
    const v = args[name];
    if (!Array.isArray(v) || !v.length || v.length > MAX_ITEMS) {
      throw new ToolError(BAD_ARGS, `"${name}" must be a list of 1 to ${MAX_ITEMS} strings`);
    }
    return v;
  };
  const steps = list('steps').map((s) => line(s, MAX_STEP)).filter(Boolean);
  if (!steps.length) throw new ToolError(BAD_ARGS, '"steps" must say what you will do, e.g. ["Open shop.example", "Check out"]');
  const sites = [];
  for (const s of list('sites')) {
    const site = planSite(s);
    if (!site) {
      throw new ToolError(BAD_ARGS, `"sites" must be hosts ("shop.example", "127.0.0.1:8000") or http(s) origins ` +
        `("https://pay.example"); ${JSON.stringify(String(s).slice(0, 80))} is neither`);
    }
    if (!sites.some((t) => t.shown === site.shown)) sites.push(site);
  }
  return { summary, steps, sites };
}

/** Our words for a step the guard did not find risky, on a card about the plan's sites: its facts.plan.step. */
function stepWords(tool, desc) {
  const label = desc ? `${desc.role} "${desc.name}"` : 'the page';
  const facts = factsOf(tool);
  // A function, not a string, puts the label in: the page's words are never read as a replacement pattern.
  return ((facts && facts.plan.step) || 'act on {target}').replace('{target}', () => label);
}

/** The places a step is on and can lead to: its frame's site, a link's and a form's destination. */
function placesOf(tool, desc, tabUrl) {
  if (!desc) return [webOrigin(tabUrl)];
  const places = [desc.origin || webOrigin(tabUrl)];
  if (tool !== 'browser_type' && tool !== 'browser_select_option') {
    if (desc.href) places.push(webOrigin(desc.href));
    if (desc.submit || (tool === 'browser_press_key' && desc.inForm)) places.push(webOrigin(desc.formAction));
  }
  return places.filter(Boolean);
}

export class Plan {
  /** @param {() => object} getSettings  current settings (askBeforeActing) */
  constructor(getSettings) {
    this.getSettings = getSettings;
    this.approved = null; // {summary, steps, sites}
    this._asking = new Set(); // AbortControllers of the plan cards that wait
    this._generation = 0;
  }

  /** The refusal a call gets when the person asked for a plan first and none is approved, else ''. */
  refusal(name, args) {
    if (this.approved || !this.getSettings().askBeforeActing) return '';
    const tool = toolNamed(name);
    // Reading, scrolling, the person's own turn and the plan itself change nothing on a site.
    if (tool.annotations.destructiveHint !== true) return '';
    // Nor do the calls its facts.plan.noSite names (listing the tabs, picking which one is current).
    if (picks(factsOf(name).plan.noSite, args)) return '';
    return `${name} was not run: the person asks to approve a plan before the agent acts ("Ask before acting" is ` +
      'on in openab\'s settings). Call browser_plan first, with the task, your steps and every site you will use; ' +
      'once the person approves it, do this step again.';
  }

  /** The first of `origins` the approved plan does not cover, or '' (also when no plan is approved). */
  outside(origins) {
    if (!this.approved) return '';
    return origins.find((o) => !this.approved.sites.some((s) => siteCovers(s, o))) || '';
  }

  /** Ends the approval and takes away a plan card still waiting: the task it was for is over. */
  end() {
    this._generation++;
    this.approved = null;
    for (const waiting of [...this._asking]) waiting.abort();
  }

  /**
   * The guard's hook: null when the approved plan (if any) has no say and the guard decides as usual, else the
   * guard's answer, `{asked, risky}`, after the "not in the approved plan" card when the step is off the plan's
   * sites. Throws not_allowed when the person declines that card.
   */
  async check(guard, { tool, desc, risky, tabUrl, signal }) {
    if (!this.approved) return null;
    // What the plan card says still asks (lib/still-asks.js) is the guard's to decide as if no plan were approved.
    const kept = stillAsks(risky);
    if (kept && risky.secret) return null;
    const away = this.outside(placesOf(tool, desc, tabUrl));
    if (away) {
      const what = risky ? risky.action : stepWords(tool, desc);
      const where = away === ((desc && desc.origin) || webOrigin(tabUrl)) ? ` on ${away}` : `, which leads to ${away}`;
      await this._askOffPlan(guard, { tool, title: `Not in the approved plan: the agent wants to ${what}${where}`, away,
        detail: (desc && desc.url) || tabUrl, signal });
      // The person's yes was to this step as the card showed it; what still asks does so on its own card.
      return kept ? null : { asked: true, risky, rule: `plan-off-site${risky ? `:${risky.rule}` : ''}` };
    }
    if (kept) return null;
    return { asked: false, risky, rule: risky ? `plan-approved:${risky.rule}` : 'routine' };
  }

  /** A page the agent is about to load (navigate, a new tab, a link opening one): asks when it is off the plan. */
  async checkDestination(guard, url, signal) {
    const away = this.outside([webOrigin(url)].filter(Boolean));
    if (!away) return false;
    await this._askOffPlan(guard, { tool: 'browser_navigate', title: `Not in the approved plan: the agent wants to open ${away}`,
      away, detail: url, signal });
    return true;
  }

  async _askOffPlan(guard, { tool, title, away, detail, signal }) {
    const decision = await guard.ask({ kind: 'off-plan', tool, title, site: away, detail: String(detail || '').slice(0, 500) }, signal);
    if (decision === 'add' && this.approved) {
      this.approved = { ...this.approved, sites: [...this.approved.sites, { origin: away, shown: away }] };
    }
    if (decision === 'allow' || decision === 'add') return;
    const why = decision === 'timeout' ? 'the person did not answer; the step was not taken' : 'the user declined';
    throw new ToolError(NOT_ALLOWED, `not allowed by the user (${why}): ${away} is not in the plan the person approved. ` +
      'Do not retry it; if the task needs that site, say so in the chat or call browser_plan again with it.');
  }

  /** browser_plan: shows the card and waits for the person's answer. */
  async propose(guard, args, signal) {
    const proposal = readProposal(args);
    // The guard shows no card beyond its bound and answers 'deny': that is no answer of the person's.
    if (guard.cards.size >= MAX_CARDS) throw new ToolError(BUSY, 'too many questions wait in the panel; try again once they are answered');
    const generation = this._generation;
    const ended = new AbortController();
    this._asking.add(ended);
    let answer;
    try {
      answer = await guard.ask({
        kind: 'plan', tool: 'browser_plan', title: 'The agent\'s plan', reason: proposal.summary,
        plan: { steps: proposal.steps, sites: proposal.sites.map((s) => s.shown) },
      }, signal ? AbortSignal.any([signal, ended.signal]) : ended.signal);
    } finally {
      this._asking.delete(ended);
    }
    if (signal && signal.aborted) throw new ToolError(CANCELLED, 'the call was cancelled');
    if (generation !== this._generation) {
      return { ...text('the plan was not approved: the person sent a new message (or started a new chat) before ' +
        'answering. Read what they asked now; call browser_plan again for that task.'), isError: true };
    }
    if (answer === 'approve') {
      this.approved = proposal;
      return text(`The person approved the plan. Sites in it: ${proposal.sites.map((s) => s.shown).join(', ')}. Routine ` +
        `steps there run without asking; ${stillAsksSentence(true)} every time, and a step or a page on any other site ` +
        'asks the person first. The approval covers this task only: it ends when the person sends their next message ' +
        'or starts a new chat.');
    }
    // A plan the person turned down takes the one before it with it: they said no to where the task was going.
    this.approved = null;
    if (answer === 'timeout') {
      return { ...text('the user did not approve the plan: they did not answer and the card was taken away. Do not act ' +
        'on any page; ask them in the chat.'), isError: true };
    }
    return { ...text('the user did not approve the plan. Do not act on any page for this task; ask the person in the ' +
      'chat what to change, then propose a new plan.'), isError: true };
  }
}

async function proposePlan(b, args, call) {
  return b.guard.plan.propose(b.guard, args, call.signal);
}

export const PLAN_TOOLS = {
  browser_plan: proposePlan,
};
