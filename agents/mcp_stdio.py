"""MCP servers that speak stdio, declared by the operator and run by the platform.

A stdio server is a command line: code the platform runs, so it is declared where code is — the environment
(``MCP_STDIO_SERVERS``, read at start), never a form of the admin. Each declared server is registered as an MCP server
whose endpoint is ``stdio:<name>`` (``manage.py mcp_stdio_servers``); the admin shows it and may disable it, and its
tools are synced and offered like any other. The value is a JSON object of servers by name, each a command line
(a list of strings) or ``{"command": [...], "env": {...}, "cwd": "..."}``::

    MCP_STDIO_SERVERS='{"time": ["uvx", "mcp-server-time"], "files": {"command": ["mcp-files", "/srv/docs"],
                        "env": {"FILES_READ_ONLY": "1"}}}'

Each process of the platform that calls a stdio server's tools runs that server as its own child, started on the first
call (:mod:`agents.mcp`), restarted when it exits — after :data:`RESTART_MIN_SECONDS`, doubling up to
:data:`RESTART_MAX_SECONDS` while it keeps exiting within :data:`STEADY_SECONDS` of its start — and stopped when the
platform's process stops (its stdin closes, which ends a stdio server; the platform also closes it on a clean exit).
The child inherits only the SDK's safe default environment (``PATH``, ``HOME``, …) and the variables declared.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

SCHEME = "stdio:"
RESTART_MIN_SECONDS = 0.5
RESTART_MAX_SECONDS = 30.0
STEADY_SECONDS = 30.0  # a server that ran this long before it exited is restarted after the shortest wait again


@dataclass(frozen=True)
class StdioServer:
    """A declared stdio server: its command line, extra environment and working folder."""

    name: str
    command: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict, hash=False, compare=False)
    cwd: str | None = None

    @property
    def endpoint(self) -> str:
        return f"{SCHEME}{self.name}"


def _server(name: str, value: object) -> StdioServer:
    where = f"MCP_STDIO_SERVERS[{name!r}]"
    spec = {"command": value} if isinstance(value, list) else value
    if not isinstance(spec, dict) or set(spec) - {"command", "env", "cwd"}:
        raise ImproperlyConfigured(f"{where}: a command line (a list of strings) or an object of command, env, cwd.")
    command, env, cwd = spec.get("command"), spec.get("env") or {}, spec.get("cwd")
    if not (isinstance(command, list) and command and all(isinstance(part, str) and part for part in command)):
        raise ImproperlyConfigured(f"{where}.command: a non-empty list of non-empty strings.")
    if not (isinstance(env, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())):
        raise ImproperlyConfigured(f"{where}.env: an object of strings.")
    if cwd is not None and not isinstance(cwd, str):
        raise ImproperlyConfigured(f"{where}.cwd: a folder's path.")
    return StdioServer(name, tuple(command), dict(env), cwd)


def declared() -> dict[str, StdioServer]:
    """The stdio servers ``MCP_STDIO_SERVERS`` declares, by name; raises ``ImproperlyConfigured`` naming what is
    wrong (a name that is not a slug, a command that is not a list of strings, …)."""
    raw = settings.MCP_STDIO_SERVERS
    if not raw:
        return {}
    try:
        servers = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError as exc:
        raise ImproperlyConfigured(f"MCP_STDIO_SERVERS: not JSON: {exc}") from None
    if not isinstance(servers, dict):
        raise ImproperlyConfigured("MCP_STDIO_SERVERS: a JSON object of servers by name.")
    for name in servers:
        if not (isinstance(name, str) and name.replace("_", "").replace("-", "").isalnum() and len(name) <= 64):
            raise ImproperlyConfigured(f"MCP_STDIO_SERVERS: {name!r} is not a server name (letters, digits, _ and -).")
    return {name: _server(name, value) for name, value in servers.items()}


def stdio_name(endpoint: str) -> str | None:
    """The declared server's name of a ``stdio:<name>`` endpoint; ``None`` for any other endpoint."""
    return endpoint[len(SCHEME) :] if endpoint.startswith(SCHEME) else None


def restart_delay(previous: float, ran: float) -> float:
    """How long to wait before starting a server again that exited after running ``ran`` seconds, the wait before
    its last start having been ``previous`` (0: none)."""
    if ran >= STEADY_SECONDS or previous <= 0:
        return RESTART_MIN_SECONDS
    return min(previous * 2, RESTART_MAX_SECONDS)
