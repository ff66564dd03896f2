"""`openab key rotate`: a new `/acp` key for the pod that keeps its own, shown once to the operator who asked.

The pod keeps only its key's verifier (:mod:`.acp_key`), so a key that was never seen (made at a start whose stderr
was a container's log) or that was lost, or one that may have leaked, is replaced rather than read back. The new
key goes to this command's stdout, once, and nowhere else; its verifier replaces the kept one atomically. A pod
running on the same state dir reads the new verifier at its next connection: the old key opens nothing new, and
connections already open stay until they close (restart the pod to end them too).

An operator who gives the key (``OPENAB_ACP_AUTH_KEY``, ``--key-file``, a Kubernetes Secret) rotates it where they
keep it: this command refuses then, since the pod never reads a kept key while given one.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

__all__ = ["register"]


def register(commands: Any) -> None:
    key = commands.add_parser("key", help="the /acp key the pod keeps itself: make a new one")
    actions = key.add_subparsers(dest="key_action", required=True, metavar="ACTION")
    rotate = actions.add_parser(
        "rotate", help="make a new /acp key, keep only its verifier, print the key once",
        description="Make a new /acp key for the pod on this state dir: its verifier replaces the kept one, and the "
                    "key is printed here, once (the pod keeps no copy of it). A pod running on the state dir takes "
                    "it at its next connection; the old key opens nothing new.")
    rotate.add_argument("--state-dir", help="the pod's state dir (env OPENAB_STATE_DIR)")
    rotate.set_defaults(handler=_rotate)


def _rotate(args: argparse.Namespace) -> int:
    from openab_browser.core.settings import Settings

    from .acp_key import rotate_key
    from .pairing import gateway_url, make_private_dir
    from .pod_file import read_pod_file

    try:
        settings = Settings.from_env(state_dir=args.state_dir)
    except ValueError as exc:
        print(f"openab: {exc}", file=sys.stderr)
        return 2
    given = ("OPENAB_ACP_AUTH_KEY_FILE" if settings.token_file is not None
             else "OPENAB_ACP_AUTH_KEY" if settings.token is not None else None)
    if given is not None:
        print(f"openab: the pod takes its key from {given}, not a kept one: rotate the key there (e.g. "
              "`openssl rand -hex 32` into the file or Secret) and restart the pod", file=sys.stderr)
        return 2
    try:
        make_private_dir(settings.state_dir)
        path, key = rotate_key(settings.state_dir)
    except ValueError as exc:  # ConfigurationError
        print(f"openab: {exc}", file=sys.stderr)
        return 2
    try:
        running = read_pod_file(settings.state_dir)
    except ValueError:  # a pod.json not to trust: the URL then comes from the settings
        running = None
    live = running is not None and running.alive()
    url = running.ws_url if running is not None and live else gateway_url(settings)[0]
    pod = ("The pod running on this state dir takes it at its next connection; the old key opens nothing new "
           "(connections open now stay until they close: restart the pod to end them)."
           if live else
           "No pod runs on this state dir now: the next `openab run` on it takes this key.")
    print(f"A new /acp key; only its verifier is kept ({path}), so this is the one time it is shown.\n"
          f"Pair the openab side panel (Settings; paste these lines into Gateway URL):\n"
          f"    Gateway URL: {url or 'the ingress wss:// address ending /acp'}\n"
          f"    Key:         {key}\n"
          f"{pod}", flush=True)
    if not os.isatty(sys.stdout.fileno()):
        print("openab: the key went to stdout, which is not a terminal: keep it out of logs", file=sys.stderr)
    return 0
