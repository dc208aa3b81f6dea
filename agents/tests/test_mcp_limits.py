"""An MCP call's time limit is the whole call's, and the answer names a tool's failure whole."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Iterator

import pytest

from agents.mcp import STATUS_TIMEOUT, STATUS_UNAVAILABLE, Endpoint, tool_call

LIMIT_SECONDS = 1.0
MARGIN_SECONDS = 0.5  # scheduling on a busy machine, not a second limit

SCHEMA = {"type": "object", "properties": {"msisdn": {"type": "string"}}}


@pytest.fixture
def frozen_server() -> Iterator[str]:
    """A server that accepts connections and never answers: what a SIGSTOPped process looks like from outside
    (the kernel completes the handshake for it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"


def timed_call(endpoint: Endpoint):
    started = time.monotonic()
    result = asyncio.run(tool_call(endpoint=endpoint, tool="consultar_fatura", arguments={}, schema=SCHEMA))
    return result, time.monotonic() - started


def test_a_call_to_a_frozen_server_ends_within_its_limit_connecting_included(frozen_server):
    endpoint = Endpoint("frozen", frozen_server, timeout=LIMIT_SECONDS)
    for _ in range(2):  # the second call opens a new session too: still one limit, no wait for the old one
        result, seconds = timed_call(endpoint)
        assert result.status == STATUS_TIMEOUT
        assert result.error == f"no answer from frozen within {LIMIT_SECONDS:g}s"
        assert seconds < LIMIT_SECONDS + MARGIN_SECONDS
        assert result.latency_ms < (LIMIT_SECONDS + MARGIN_SECONDS) * 1000


def test_a_call_to_a_slow_server_ends_within_its_limit(slow_telecom_server):
    endpoint = Endpoint("slow", slow_telecom_server, timeout=LIMIT_SECONDS)
    for _ in range(2):
        result, seconds = timed_call(endpoint)
        assert result.status == STATUS_TIMEOUT
        assert seconds < LIMIT_SECONDS + MARGIN_SECONDS


def test_the_answer_names_why_a_tool_was_unavailable_whole(api, telecom):
    from agents.models import McpServer
    from common.config_version import config_version_bump
    from conversations.models import ToolCall

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    McpServer.objects.filter(name="telecom").update(endpoint=f"http://127.0.0.1:{port}/mcp")
    config_version_bump()

    response = api.post(
        "/api/gateway/message",
        {
            "agent_id": "telecom_contas",
            "payload": {
                "text": "Minha fatura veio alta",
                "session_id": "mcp-down",
                "context": {"msisdn": "5511999999999", "invoice_id": "INV001"},
            },
        },
        format="json",
    )

    assert response.status_code == 200
    calls = list(ToolCall.objects.filter(status=STATUS_UNAVAILABLE).values_list("error", flat=True))
    assert calls, "no tool call was made"
    answer = response.json()["answer"]
    assert all(error.startswith("ConnectError") for error in calls)  # the rows keep the detail for operators
    assert answer.count("não consegui consultar agora (unavailable: telecom could not be reached).") == len(calls)


def test_calls_on_an_open_session_to_a_server_that_froze_each_end_within_the_limit_and_recover_after():
    """The probe's case: a session already open, then the server stops answering (SIGSTOP). Cancelling the SDK's
    call in place waited, shielded, to tell the frozen server — the second call took the limit plus ~5 s."""
    import os
    import signal

    from tests.mcp_processes import MCPServerProcess

    server = MCPServerProcess("telecom").start()
    try:
        endpoint = Endpoint("telecom", server.url, timeout=LIMIT_SECONDS)
        arguments = {"msisdn": "5511999999999"}

        def call(tool: str):
            started = time.monotonic()
            result = asyncio.run(tool_call(endpoint=endpoint, tool=tool, arguments=arguments, schema=SCHEMA))
            return result, time.monotonic() - started

        assert call("consultar_fatura")[0].status == "ok"  # the session is open
        assert server.process is not None
        os.kill(server.process.pid, signal.SIGSTOP)
        try:
            for tool in ("consultar_fatura", "consultar_pagamentos", "consultar_fatura"):
                result, seconds = call(tool)
                assert result.status == STATUS_TIMEOUT, (tool, result.error)
                assert seconds < LIMIT_SECONDS + MARGIN_SECONDS, (tool, seconds)
        finally:
            os.kill(server.process.pid, signal.SIGCONT)
        deadline = time.monotonic() + 10
        while (result := call("consultar_pagamentos")[0]).status != "ok" and time.monotonic() < deadline:
            time.sleep(0.2)
        assert result.status == "ok", result.error  # no restart of anything: a new session
    finally:
        server.stop()


def test_a_tools_output_over_the_limit_is_cut_with_a_marker_before_anyone_reads_it(hostile_mcp, settings):
    from common.sizes import json_size
    from tests.hostile_mcp import BIG_CHARS

    result = asyncio.run(
        tool_call(endpoint=Endpoint("hostile", hostile_mcp, 10), tool="big_report", arguments={}, schema={})
    )

    assert result.ok and result.cut > BIG_CHARS
    assert json_size(result.result) <= settings.MCP_TOOL_OUTPUT_MAX_BYTES
    assert result.result["rows"] == BIG_CHARS  # the rest of the result as it was
    assert result.result["explanation"].startswith("BBB") and "…[cut:" in result.result["explanation"]
    assert result.as_dict()["cut"] == result.cut


def test_a_tools_output_within_the_limit_is_not_marked(hostile_mcp):
    result = asyncio.run(
        tool_call(endpoint=Endpoint("hostile", hostile_mcp, 10), tool="notify", arguments={"message": "oi"}, schema={})
    )

    assert result.result == {"sent": True, "explanation": "Avisado."}
    assert result.cut == 0 and "cut" not in result.as_dict()
