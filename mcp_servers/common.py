"""What the example servers share: the server factory, the slow-server knob and the command line.

Every server is stateless streamable HTTP with plain JSON answers: each POST to
``/mcp`` stands alone, so a client may keep one session for as long as it
likes (a server restart does not invalidate it) and several servers can sit
behind a load balancer. ``GET /health`` answers ``{"status": "ok"}`` for
readiness probes.
"""

from __future__ import annotations

import argparse
import copy
import logging
import os
from collections.abc import Callable, Sequence
from typing import Any, Literal

import anyio
import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

MCP_PATH = "/mcp"
HEALTH_PATH = "/health"

LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]

# The demo tools only read fixed data.
READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)

__all__ = ["HEALTH_PATH", "MCP_PATH", "READ_ONLY", "AccessLineWithoutQuery", "brl", "log_config", "main", "new_server"]


def _delay_tool_calls(delay_ms: int):
    """Server middleware that holds every ``tools/call`` for ``delay_ms`` before answering."""
    seconds = delay_ms / 1000

    async def delay(ctx: Any, call_next: Any) -> Any:
        if ctx.method == "tools/call":
            await anyio.sleep(seconds)
        return await call_next(ctx)

    return delay


def new_server(
    name: str, *, title: str, instructions: str, delay_ms: int = 0, log_level: LogLevel = "INFO"
) -> MCPServer:
    """An ``MCPServer`` with the health route and, when ``delay_ms`` > 0, slow tool calls."""
    server = MCPServer(
        name,
        title=title,
        instructions=instructions,
        version="1.0.0",
        log_level=log_level,
        middleware=[_delay_tool_calls(delay_ms)] if delay_ms > 0 else None,
    )

    @server.custom_route(HEALTH_PATH, methods=["GET"])
    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok", "server": name})

    return server


def brl(value: float) -> str:
    """``289.9`` → ``"R$ 289,90"``."""
    text = f"{value:,.2f}".replace(",", "_").replace(".", ",").replace("_", ".")
    return f"R$ {text}"


def _non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError("must be zero or more")
    return value


def main(
    build: Callable[..., MCPServer],
    *,
    description: str,
    port_env: str,
    default_port: int,
    argv: Sequence[str] | None = None,
) -> None:
    """Parse the command line, build the server with ``build(delay_ms=..., log_level=...)`` and serve it."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--host", default=os.environ.get("MCP_HOST", "127.0.0.1"), help="default: 127.0.0.1")
    try:
        port = int(os.environ.get(port_env) or default_port)
    except ValueError:
        parser.error(f"{port_env} must be a port number, not {os.environ[port_env]!r}")
    parser.add_argument("--port", type=int, default=port, help=f"default: ${port_env}, else {default_port}")
    parser.add_argument(
        "--delay-ms",
        type=_non_negative_int,
        default=_non_negative_int(os.environ.get("MCP_DELAY_MS") or "0"),
        help="hold every tool call this long before answering, to test slow servers (default: $MCP_DELAY_MS, else 0)",
    )
    parser.add_argument(
        "--log-level",
        type=str.upper,
        choices=["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"],
        default=os.environ.get("MCP_LOG_LEVEL", "INFO").upper(),
    )
    args = parser.parse_args(argv)

    server = build(delay_ms=args.delay_ms, log_level=args.log_level)
    app = server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        stateless_http=True,
        json_response=True,
        # On 127.0.0.1/localhost the SDK turns on DNS-rebinding protection (Host/Origin checks).
        host=args.host,
    )
    # workers=1: uvicorn would otherwise read the web server's WEB_CONCURRENCY and refuse an app object.
    uvicorn.run(
        app, host=args.host, port=args.port, log_level=args.log_level.lower(), workers=1, log_config=log_config()
    )


class AccessLineWithoutQuery(logging.Filter):
    """uvicorn's access line with the path only: a client may send its credentials in the query string
    (``/mcp?token=…``), and they are no business of this server's log."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) == 5 and isinstance(args[2], str) and "?" in args[2]:
            client, method, path, version, status = args
            record.args = (client, method, path.partition("?")[0], version, status)
        return True


def log_config() -> dict[str, Any]:
    """uvicorn's default logging, its access lines through :class:`AccessLineWithoutQuery`."""
    config = copy.deepcopy(uvicorn.config.LOGGING_CONFIG)
    config.setdefault("filters", {})["path_only"] = {"()": AccessLineWithoutQuery}
    config["handlers"]["access"]["filters"] = ["path_only"]
    return config
