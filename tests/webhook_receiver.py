"""A webhook receiver for tests of the operational events (common/infra/bus.py) and of the other posts the platform
makes: it records each request and answers a status the test chooses (a redirect, with ``location``)."""

from __future__ import annotations

import json
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.served import serve_in_thread


class Receiver:
    """A webhook receiver: records each post (headers, body) in ``posts`` and every request (method, path, headers)
    in ``requests``, and answers ``status`` (with a ``Location`` header when ``location`` is set); over TLS with a
    server context (``tls``). While ``held`` is an event not set, a post is recorded but not answered until it is
    (a minute at most)."""

    def __init__(self, status: int = 200, location: str = "", tls: ssl.SSLContext | None = None) -> None:
        self.status = status
        self.location = location
        self.posts: list[tuple[dict[str, str], bytes]] = []
        self.requests: list[tuple[str, str, dict[str, str]]] = []
        self.held: threading.Event | None = None
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format, *args):
                return

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                receiver.posts.append((dict(self.headers), body))
                if receiver.held is not None:
                    receiver.held.wait(60)
                self._answer()

            def do_GET(self):
                self._answer()

            def _answer(self):
                receiver.requests.append((self.command, self.path, dict(self.headers)))
                self.send_response(receiver.status)
                if receiver.location:
                    self.send_header("Location", receiver.location)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        if tls is not None:  # HTTPS, with the certificate the context holds
            self.server.socket = tls.wrap_socket(self.server.socket, server_side=True)
        serve_in_thread(self.server)

    @property
    def port(self) -> int:
        return self.server.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/events"

    def events(self) -> list[dict[str, Any]]:
        return [json.loads(body) for _, body in self.posts]

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
