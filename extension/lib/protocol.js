// What the pod and the extension agree on beside the tools, written once for both languages: the waits and the
// `_meta` keys both sides read and write. The pod reads the object between the two JSON markers as JSON
// (core/protocol_file.py), so it stays JSON: double quotes, no comments, no trailing commas. A module and not a
// .json file: Chrome does not load a JSON module again when it restarts a service worker.

export const PROTOCOL = Object.freeze(/* JSON */ {
  "waits": {
    "promptSeconds": 1800,
    "cardSeconds": 300
  },
  "meta": {
    "action": "dev.openab/action",
    "agent": "dev.openab/agent",
    "agents": "dev.openab/agents",
    "agentsUnavailable": "dev.openab/agentsUnavailable",
    "download": "dev.openab/download",
    "earlier": "dev.openab/earlier",
    "fresh": "dev.openab/fresh",
    "guard": "dev.openab/guard",
    "guardRule": "dev.openab/guard_rule",
    "marksRunning": "dev.openab/marksRunning",
    "outcome": "dev.openab/outcome",
    "permissionRelay": "dev.openab/permissionRelay",
    "receipt": "dev.openab/receipt",
    "stopped": "dev.openab/stopped"
  }
} /* JSON */);

/** The `_meta` keys of the pod's and the extension's messages, by name. */
export const META = Object.freeze({ ...PROTOCOL.meta });
/** How long the panel waits for a prompt's answer; the pod keeps its waits for the person under it. */
export const PROMPT_WAIT_MS = PROTOCOL.waits.promptSeconds * 1000;
/** How long a card waits for the person. */
export const CARD_WAIT_MS = PROTOCOL.waits.cardSeconds * 1000;
