"""A webhook receiver for tests of the operational events (common/infra/bus.py): it records each POST and answers a
status the test chooses."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Receiver:
    """A webhook receiver: records each post (headers, body) and answers ``status``."""

    def __init__(self, status: int = 200) -> None:
        self.status = status
        self.posts: list[tuple[dict[str, str], bytes]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format, *args):
                return

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                receiver.posts.append((dict(self.headers), body))
                self.send_response(receiver.status)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/events"

    def events(self) -> list[dict[str, Any]]:
        return [json.loads(body) for _, body in self.posts]

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
