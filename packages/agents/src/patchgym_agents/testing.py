"""A local JSON-over-HTTP server for tests that play an OpenAI-compatible endpoint.

The agents tests script one chat reply per request, the trainer tests one policy per
task; both need the same plumbing (a threaded server on a free local port, JSON in and
out, a context manager that starts and stops it), so it lives here and each test server
only says what to answer.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self


class JsonServer:
    """Answers every POST with :meth:`respond`; ``base_url`` ends in ``/v1``."""

    def __init__(self) -> None:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                status, payload = server.respond(self.path, body)
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                if status == 429:
                    self.send_header("Retry-After", "0")  # clients retry at once
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def respond(self, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """The status and JSON payload for a POST of ``body`` to ``path`` (from any thread)."""
        raise NotImplementedError

    @property
    def base_url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def __enter__(self) -> Self:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
