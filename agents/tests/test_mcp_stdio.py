"""stdio MCP servers declared by the operator (``MCP_STDIO_SERVERS``), run by the platform: registered, synced and
called like any server, started again when they stop, and never left running when the platform's process ends —
with ``mcp_servers.all_content`` served over stdio, real processes throughout (``/proc`` tells which are alive)."""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import time
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from agents.mcp import STATUS_OK, Endpoint, runtime, tool_call
from agents.models import McpServer, McpTool, McpTransport
from agents.services import mcp_tools_sync

ROOT = Path(__file__).resolve().parents[2]
HANG_GUARD_SECONDS = 60  # waits for a process to start or stop end long before this; it only stops a hung test


def stdio_servers(marker: int) -> str:
    """``MCP_STDIO_SERVERS`` for the all-content server; ``marker`` (its ignored image size) finds its process."""
    command = [sys.executable, "-m", "mcp_servers.all_content.server", "--stdio", "--image-bytes", str(marker)]
    return json.dumps({"lines": {"command": command, "env": {"PYTHONPATH": str(ROOT)}, "cwd": str(ROOT)}})


def processes(marker: int) -> dict[int, int]:
    """``{pid: parent pid}`` of the live processes of the server started with ``marker``."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if b"--stdio" in argv and str(marker).encode() in argv and fields[0] != "Z":
            found[int(entry.name)] = int(fields[1])
    return found


def waited(condition, what: str):
    deadline = time.monotonic() + HANG_GUARD_SECONDS
    while not (value := condition()):
        assert time.monotonic() < deadline, f"still waiting for {what}"
        time.sleep(0.05)
    return value


@pytest.fixture
def marker(settings):
    marker = random.randrange(10**8, 10**9)
    settings.MCP_STDIO_SERVERS = stdio_servers(marker)
    yield marker
    runtime.run_sync(runtime.close_all())
    waited(lambda: not processes(marker), "the server to stop")


def call(tool: str, arguments=None):
    endpoint = Endpoint("lines", "stdio:lines", 10.0)
    return asyncio.run(tool_call(endpoint=endpoint, tool=tool, arguments=arguments or {}, schema={}))


@pytest.mark.django_db
def test_a_declared_stdio_server_is_registered_synced_and_its_tools_called(marker):
    out = StringIO()
    call_command("mcp_stdio_servers", stdout=out)

    server = McpServer.objects.get(name="lines")
    assert (server.transport, server.endpoint) == (McpTransport.STDIO, "stdio:lines")
    assert "lines: registered (stdio:lines: " in out.getvalue()
    report = mcp_tools_sync(server=server)
    assert "server_status" in report.created and McpTool.objects.filter(server=server).count() == len(report.created)
    result = call("server_status")
    assert result.status == STATUS_OK and result.result["network"] == "up"
    assert list(processes(marker).values()) == [os.getpid()]  # one server, this process's child


@pytest.mark.django_db
def test_an_endpoint_may_name_only_a_declared_stdio_server(marker):
    from django.core.exceptions import ValidationError

    with pytest.raises(ValidationError, match="No stdio server 'other' is declared"):
        McpServer(name="other", transport=McpTransport.STDIO, endpoint="stdio:other").full_clean()
    with pytest.raises(ValidationError, match="stdio transport"):
        McpServer(name="mixed", endpoint="stdio:lines").full_clean()


def test_a_stdio_server_that_stops_is_started_again(marker):
    assert call("server_status").ok
    [first] = processes(marker)

    os.kill(first, signal.SIGKILL)

    [second] = waited(lambda: [pid for pid in processes(marker) if pid != first], "the server to start again")
    assert runtime.connections[Endpoint("lines", "stdio:lines", 10.0)].restarts == 1
    assert call("server_status").ok
    assert list(processes(marker)) == [second]


PLATFORM_PROCESS = """
import asyncio, sys
import django
django.setup()
from agents.mcp import Endpoint, tool_call
result = asyncio.run(tool_call(endpoint=Endpoint("lines", "stdio:lines", 10.0), tool="server_status", arguments={},
                               schema={}))
print(result.status, flush=True)
sys.stdin.readline()  # the test's word to end, or its kill
"""


@pytest.mark.parametrize("end", ["exits", "killed"])
def test_no_stdio_server_outlives_the_platforms_process(marker, end):
    env = {**os.environ, "MCP_STDIO_SERVERS": stdio_servers(marker), "PYTHONPATH": str(ROOT)}
    platform = subprocess.Popen(
        [sys.executable, "-c", PLATFORM_PROCESS],
        cwd=ROOT,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert platform.stdout is not None and platform.stdout.readline().strip() == "ok"
        assert list(processes(marker).values()) == [platform.pid]
        if end == "killed":
            platform.kill()
        else:
            platform.communicate("\n", timeout=HANG_GUARD_SECONDS)  # it returns: a clean exit
        platform.wait(timeout=HANG_GUARD_SECONDS)

        waited(lambda: not processes(marker), "the server to stop with the platform's process")
    finally:
        platform.kill()
        platform.wait()
