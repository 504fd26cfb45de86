"""A built site for a browser (the site's browser tests, the PDF printer in ``tools.pdf``):
served over HTTP on 127.0.0.1 (MathJax's fonts and the search index do not load from
``file://``), and the Chromium that reads it, with its flags."""

from __future__ import annotations

import contextlib
import functools
import http.server
import shutil
import threading
from pathlib import Path

#: Chromium's flags for a headless run in a container (no sandbox, no GPU, no network chatter).
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def chromium_path() -> str | None:
    """Debian's Chromium, or None (Playwright drives it; it cannot download a browser here)."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    """Serves files without logging every request (keeps test and build output clean)."""

    def log_message(self, *args):
        pass


@contextlib.contextmanager
def serve(directory: Path, handler: type[http.server.SimpleHTTPRequestHandler] = QuietHandler):
    """Serve ``directory`` on a free port of 127.0.0.1 in a thread; yields the base URL
    (``http://127.0.0.1:PORT/``). ``handler``: a ``QuietHandler`` subclass to change what is
    served."""
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(handler, directory=str(directory))
    )
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
