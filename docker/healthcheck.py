"""The image's HEALTHCHECK: is `openab run` answering /healthz on the port it was told to serve?

Reads the same variables as the pod (OPENAB_PORT, OPENAB_TLS_CERT), so a pod moved to another port or to TLS
is checked where it listens. Exit 0: alive; 1: not (with the reason on stderr, which `docker inspect` shows).
Only the standard library: it runs every 30 s, and must cost a fraction of what the pod does.
"""

from __future__ import annotations

import json
import os
import ssl
import sys
import urllib.error
import urllib.request


def main() -> int:
    port = os.environ.get("OPENAB_PORT", "8080")
    tls = bool(os.environ.get("OPENAB_TLS_CERT"))
    context = None
    if tls:
        # The certificate names the pod's public host, not 127.0.0.1: this checks liveness, not identity.
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    url = f"{'https' if tls else 'http'}://127.0.0.1:{port}/healthz"
    try:
        with urllib.request.urlopen(url, timeout=4, context=context) as answer:  # noqa: S310 - a fixed local URL
            if json.loads(answer.read(1024)) == {"ok": True}:
                return 0
            print(f"{url} answered, but not as openab does", file=sys.stderr)
    except (OSError, ValueError) as exc:
        print(f"{url}: {exc}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
