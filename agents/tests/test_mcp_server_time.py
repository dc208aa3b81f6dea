"""A held-out check: ``mcp-server-time`` from PyPI (the MCP project's time server, pinned in requirements-dev.txt),
a stdio server nobody in the project wrote, declared by the operator (``MCP_STDIO_SERVERS``), registered, synced and
called from a customer's turn of a profile — the way an operator adds a published server."""

from __future__ import annotations

import sys
from io import StringIO

import pytest
from django.core.management import call_command

from agents.mcp import runtime
from agents.models import McpServer, McpTool, McpTransport
from agents.services import mcp_tools_sync
from common.config_version import config_version_bump

# No daylight saving in either zone since 2019: 14:30 in São Paulo (UTC-3) is 02:30 the next day in Tokyo (UTC+9).
CONVERSION = {"source_timezone": "America/Sao_Paulo", "time": "14:30", "target_timezone": "Asia/Tokyo"}


@pytest.fixture
def time_server(settings):
    settings.MCP_STDIO_SERVERS = {"time": [sys.executable, "-m", "mcp_server_time", "--local-timezone", "UTC"]}
    yield
    runtime.run_sync(runtime.close_all())


def turn(api, session_id: str, context: dict) -> dict:
    """A product question to the demo profile, with ``context`` as the caller's data (where the arguments come from)."""
    text = "Qual plano de internet fibra vocês têm?"
    payload = {"text": text, "session_id": session_id, "context": context}
    return api.post("/api/gateway/message", {"agent_id": "telecom_contas", "payload": payload}, format="json").json()


@pytest.mark.django_db
def test_its_tools_are_synced_and_a_turn_calls_one_with_the_callers_context_and_answers_with_its_result(
    time_server, api, telecom
):
    out = StringIO()
    call_command("mcp_stdio_servers", stdout=out)
    server = McpServer.objects.get(name="time")
    assert server.transport == McpTransport.STDIO and "time: registered (stdio:time: " in out.getvalue()
    report = mcp_tools_sync(server=server)
    assert set(report.created) == {"get_current_time", "convert_time"} and not report.refused
    convert = McpTool.objects.get(server=server, name="convert_time")
    assert set(convert.args_schema["required"]) == set(CONVERSION) and convert.read_only is True

    telecom.specialists.get(name="product_agent").allowed_tools.add(convert)
    telecom.intents.get(name="product_information").mcp_tools.add(convert)
    config_version_bump()
    body = turn(api, "s-time", CONVERSION)

    assert body["metadata"]["route_decision"]["intent"] == "product_information"
    [result] = body["metadata"]["mcp_results"]
    assert (result["tool"], result["status"]) == ("convert_time", "ok")
    assert "Asia/Tokyo" in body["answer"] and "02:30" in body["answer"] and "+12.0h" in body["answer"]

    refused = turn(api, "s-time-unknown", {**CONVERSION, "target_timezone": "Mars/Olympus_Mons"})
    [result] = refused["metadata"]["mcp_results"]
    assert result["status"] == "error" and "Invalid timezone" in result["error"]  # its isError result, its words
    assert "Mars/Olympus_Mons" in refused["answer"] and "02:30" not in refused["answer"]
