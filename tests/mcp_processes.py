"""Start the example MCP servers as real processes, for tests.

    with running_mcp_servers("telecom", "retail") as urls:
        urls["telecom"]  # "http://127.0.0.1:40321/mcp"

Each server runs ``python -m mcp_servers.<name>.server`` on a free port of
127.0.0.1 and is ready when ``GET /health`` answers. If it dies or does not
answer in time, :class:`MCPServerStartError` says so with the server's output.
Teardown terminates the process and kills it after a grace period.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from tests.guarded import guarded_popen

PROJECT_ROOT = Path(__file__).resolve().parent.parent
SERVER_NAMES = ("telecom", "retail", "finance")
HOST = "127.0.0.1"


class MCPServerStartError(RuntimeError):
    """An example MCP server did not come up; the message carries its output."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


class MCPServerProcess:
    """One example server in a subprocess. ``start()`` returns once it serves; ``stop()`` always cleans up.

    ``module``: a test's own server, run as ``python -m <module>`` with the example servers' command line
    (``mcp_servers.common.main``), instead of ``mcp_servers.<name>.server``."""

    def __init__(
        self,
        name: str,
        *,
        delay_ms: int = 0,
        startup_timeout: float = 60.0,
        grace_period: float = 5.0,
        log_level: str = "warning",
        module: str | None = None,
    ) -> None:
        if module is None and name not in SERVER_NAMES:
            raise ValueError(f"unknown MCP server {name!r}; expected one of {SERVER_NAMES}")
        self.name = name
        self.module = module or f"mcp_servers.{name}.server"
        self.delay_ms = delay_ms
        self.startup_timeout = startup_timeout
        self.grace_period = grace_period
        self.log_level = log_level
        self.port: int | None = None
        self.process: subprocess.Popen[bytes] | None = None
        self._log = None

    @property
    def url(self) -> str:
        if self.port is None:
            raise RuntimeError(f"MCP server {self.name!r} is not started")
        return f"http://{HOST}:{self.port}/mcp"

    def output(self) -> str:
        """Everything the server wrote to stdout and stderr so far."""
        if self._log is None:
            return ""
        self._log.flush()
        self._log.seek(0)
        return self._log.read().decode("utf-8", errors="replace")

    def start(self) -> MCPServerProcess:
        # Another process may take the free port between our probe and the server's bind: try a few.
        for attempt in range(3):
            try:
                self._spawn(free_port())
                self._wait_until_ready()
                return self
            except MCPServerStartError as error:
                address_taken = "address already in use" in str(error).lower()
                self.stop()
                if not address_taken or attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def _spawn(self, port: int) -> None:
        self.port = port
        env = dict(os.environ)
        # The project root first: its platform/ package stands in for the stdlib module.
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PROJECT_ROOT), env.get("PYTHONPATH")]))
        env["PYTHONUNBUFFERED"] = "1"
        # A file, not a pipe: nobody drains a pipe while the server runs, and a full one would block it.
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 - closed in stop()
        command = [
            sys.executable,
            "-m",
            self.module,
            "--host",
            HOST,
            "--port",
            str(port),
            "--delay-ms",
            str(self.delay_ms),
            "--log-level",
            self.log_level,
        ]
        # Killed with this process however it ends (an interrupted run's xdist worker never reaches the teardown),
        # and in a session of its own: a terminal's Ctrl-C reaches the test process, which stops it.
        self.process = guarded_popen(command, env=env, log=self._log)

    def _wait_until_ready(self) -> None:
        assert self.process is not None and self.port is not None
        deadline = time.monotonic() + self.startup_timeout
        while True:
            code = self.process.poll()
            if code is not None:
                raise MCPServerStartError(
                    f"MCP server {self.name!r} exited with status {code} while starting on port {self.port}.\n"
                    f"--- its output ---\n{self.output()}"
                )
            if self._healthy():
                return
            if time.monotonic() > deadline:
                raise MCPServerStartError(
                    f"MCP server {self.name!r} did not answer on {self.url} within {self.startup_timeout:g}s.\n"
                    f"--- its output ---\n{self.output()}"
                )
            time.sleep(0.05)

    def _healthy(self) -> bool:
        assert self.port is not None
        connection = http.client.HTTPConnection(HOST, self.port, timeout=1)
        try:
            connection.request("GET", "/health")
            return connection.getresponse().status == 200
        except OSError:
            return False
        finally:
            connection.close()

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=self.grace_period)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if self._log is not None:
            self._log.close()
            self._log = None


@contextlib.contextmanager
def running_mcp_servers(*names: str, delay_ms: int = 0) -> Iterator[dict[str, str]]:
    """Start the named servers (default: all) and yield ``{name: endpoint URL}``; stop them on the way out."""
    servers = [MCPServerProcess(name, delay_ms=delay_ms) for name in (names or SERVER_NAMES)]
    try:
        for server in servers:
            server.start()
        yield {server.name: server.url for server in servers}
    finally:
        for server in servers:
            server.stop()
