"""The local page `openab demo` has the agent work on: a name field and a button, nothing risky, no network."""

from __future__ import annotations

import contextlib
import http.server
import threading
from collections.abc import Iterator
from typing import Any

__all__ = ["DEMO_PAGE", "demo_site"]

DEMO_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>openab demo</title>
<style>body{font:18px system-ui,sans-serif;margin:3em;max-width:36em}input,button{font:inherit;padding:.3em .6em}
#greeting{margin-top:1.5em;font-size:1.6em;color:#1a7f37}</style></head>
<body>
  <h1>openab demo</h1>
  <p>An agent in the pod is using this page through your browser's openab extension.</p>
  <label for="name">Your name</label> <input id="name" name="name" autocomplete="off">
  <button id="hello" type="button">Say hello</button>
  <p id="greeting">Nobody has said hello yet.</p>
  <script>
    document.getElementById('hello').addEventListener('click', () => {
      const name = document.getElementById('name').value.trim() || 'stranger';
      document.getElementById('greeting').textContent = `Hello, ${name}! The agent clicked the button.`;
    });
  </script>
</body></html>
"""


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = DEMO_PAGE.encode()
        self.send_response(200 if self.path in ("/", "/index.html") else 404)
        self.send_header("content-type", "text/html; charset=utf-8")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        return None


@contextlib.contextmanager
def demo_site() -> Iterator[str]:
    """Serve the demo page on 127.0.0.1 at a free port; yields its URL."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, name="demo site", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
