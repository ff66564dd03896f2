// What the pod and the extension agree on beside the tools: ../protocol.json, which the pod reads too
// (core/protocol_file.py). The waits and the `_meta` keys both sides read and write, each written once.

import PROTOCOL from '../protocol.json' with { type: 'json' };

/** The `_meta` keys of the pod's and the extension's messages, by name (protocol.json's `meta`). */
export const META = Object.freeze({ ...PROTOCOL.meta });
/** How long the panel waits for a prompt's answer; the pod keeps its waits for the person under it. */
export const PROMPT_WAIT_MS = PROTOCOL.waits.promptSeconds * 1000;
/** How long a card waits for the person. */
export const CARD_WAIT_MS = PROTOCOL.waits.cardSeconds * 1000;
