"""The suite's little HTTP servers (the scripted model, the webhook receivers, the fake Kubernetes API…), each served
by ``serve_forever`` in a daemon thread of the test's process.

``socketserver`` looks at a ``shutdown()`` between two waits on its socket, half a second each by default: a test
that stopped its server waited for it in its teardown (~0.4 s a test, some 150 tests). Here the loop looks every
20 ms, a wake-up that costs microseconds."""

from __future__ import annotations

import socketserver
import threading

POLL_SECONDS = 0.02  # how long a shutdown() waits for the serving loop, at most


def serve_in_thread(server: socketserver.BaseServer, name: str | None = None) -> threading.Thread:
    """``server`` served in a daemon thread, started; ``server.shutdown()`` returns within :data:`POLL_SECONDS`."""
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": POLL_SECONDS}, name=name, daemon=True
    )
    thread.start()
    return thread
