"""Serve an MCP server that a test defines itself, from a thread of the test process.

    server = new_server("plan", title="…", instructions="…")
    server.add_tool(work)
    with mcp_serving(server) as url:   # "http://127.0.0.1:40321/mcp"
        ...

The server is the official SDK's streamable HTTP app, served by uvicorn as the example servers are
(``mcp_servers.common.main``: stateless, plain JSON), on a free port of 127.0.0.1. Because it runs in the test
process, the test reads what its tools observed (calls, concurrency) straight from their Python state; Celery
workers and subprocesses reach it over HTTP like any server.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator

import uvicorn
from mcp.server.mcpserver import MCPServer

from mcp_servers.common import MCP_PATH
from tests.mcp_processes import HOST, free_port
from tests.served import PromptUvicorn


@contextlib.contextmanager
def mcp_serving(server: MCPServer, *, startup_timeout: float = 60.0) -> Iterator[str]:
    """Serve ``server`` until the block ends; yields its endpoint URL."""
    app = server.streamable_http_app(streamable_http_path=MCP_PATH, stateless_http=True, json_response=True, host=HOST)
    port = free_port()
    served = PromptUvicorn(uvicorn.Config(app, host=HOST, port=port, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=served.run, name=f"mcp-{server.name}", daemon=True)
    thread.start()
    deadline = time.monotonic() + startup_timeout
    while not served.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError(f"the MCP server {server.name!r} did not start on port {port}")
        time.sleep(0.01)
    try:
        yield f"http://{HOST}:{port}{MCP_PATH}"
    finally:
        served.stop()  # within milliseconds, not uvicorn's 0.1 s ticks (tests/served.py)
        thread.join(timeout=10)
