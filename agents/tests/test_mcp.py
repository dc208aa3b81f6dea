"""The MCP client against the real example servers, started as processes."""

from __future__ import annotations

import asyncio
import socket

import pytest

from agents.mcp import (
    STATUS_ERROR,
    STATUS_INVALID,
    STATUS_OK,
    STATUS_TIMEOUT,
    STATUS_UNAVAILABLE,
    Endpoint,
    McpUnavailable,
    arguments_from_context,
    runtime,
    tool_call,
    tools_list,
)
from mcp_servers.telecom import server as telecom_server

FATURA_SCHEMA = {
    "type": "object",
    "properties": {"msisdn": {"type": "string"}, "invoice_id": {"type": "string"}},
    "required": ["msisdn"],
}


def call(endpoint, tool, arguments, schema=FATURA_SCHEMA):
    return asyncio.run(tool_call(endpoint=endpoint, tool=tool, arguments=arguments, schema=schema))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def telecom(mcp_servers):
    return Endpoint("telecom", mcp_servers["telecom"], timeout=5)


def test_a_tool_call_returns_the_servers_structured_result(telecom):
    result = call(telecom, "consultar_fatura", {"msisdn": "5511999999999", "invoice_id": "INV001"})

    assert result.status == STATUS_OK, result.error
    assert result.result["invoice_id"] == "INV001"
    assert result.latency_ms > 0
    assert result.as_dict()["tool"] == "consultar_fatura"


def test_many_calls_share_one_session(telecom):
    results = [call(telecom, "consultar_pagamentos", {"msisdn": "5511999999999"}, {}) for _ in range(5)]

    assert all(result.ok for result in results)
    connection = runtime.connections[telecom]
    first = connection.session
    assert first is not None
    call(telecom, "consultar_pagamentos", {"msisdn": "5511999999999"}, {})
    assert connection.session is first


def test_concurrent_calls_from_one_loop_all_succeed(telecom):
    async def many():
        return await asyncio.gather(
            *(
                tool_call(endpoint=telecom, tool="consultar_fatura", arguments={"msisdn": "5511999999999"}, schema={})
                for _ in range(20)
            )
        )

    assert all(result.ok for result in asyncio.run(many()))


def test_a_tool_error_is_reported_not_raised(telecom):
    result = call(telecom, "consultar_fatura", {"msisdn": "0000"})

    assert result.status == STATUS_ERROR
    assert telecom_server.LINE_NOT_FOUND.format(line=telecom_server.line_label("0000")) in result.error


def test_arguments_are_validated_before_the_call(telecom):
    result = call(telecom, "consultar_fatura", {"invoice_id": "INV001"})

    assert result.status == STATUS_INVALID
    assert "msisdn" in result.error


def test_arguments_are_checked_within_the_platforms_bounds_whatever_the_tools_schema_says():
    endpoint = Endpoint("down", f"http://127.0.0.1:{free_port()}/mcp", timeout=2)  # refused before any call
    pattern = {"type": "object", "properties": {"code": {"type": "string", "pattern": "^(a|aa)*$"}}}
    elsewhere = {"type": "object", "properties": {"code": {"$ref": "https://example.com/code.json"}}}

    backtracking = call(endpoint, "consultar", {"code": "a" * 5_000 + "!"}, pattern)  # exponential in Python's re
    remote = call(endpoint, "consultar", {"code": 5}, elsewhere)

    assert backtracking.status == STATUS_INVALID and "does not match" in backtracking.error
    assert remote.status == STATUS_INVALID and "Only references inside the schema" in remote.error


def test_a_server_that_is_down_is_reported_as_unavailable():
    endpoint = Endpoint("down", f"http://127.0.0.1:{free_port()}/mcp", timeout=2)

    result = call(endpoint, "consultar_fatura", {"msisdn": "5511999999999"})

    assert result.status == STATUS_UNAVAILABLE
    assert "Connect" in result.error


def test_a_slow_server_times_out_within_its_timeout(slow_telecom_server):
    endpoint = Endpoint("slow", slow_telecom_server, timeout=1)

    result = call(endpoint, "consultar_fatura", {"msisdn": "5511999999999"})

    assert result.status == STATUS_TIMEOUT
    assert result.latency_ms < 2500


def test_tools_list_gives_names_descriptions_and_schemas(telecom):
    tools = {tool.name: tool for tool in asyncio.run(tools_list(telecom))}

    assert set(tools) == {"consultar_fatura", "consultar_pagamentos", "diagnosticar_linha"}
    assert tools["consultar_fatura"].input_schema["required"] == ["msisdn"]
    assert tools["consultar_fatura"].description


def test_tools_list_of_a_server_that_is_down_raises_unavailable():
    with pytest.raises(McpUnavailable):
        asyncio.run(tools_list(Endpoint("down", f"http://127.0.0.1:{free_port()}/mcp", timeout=2)))


def test_a_server_that_never_answers_is_named_without_the_credentials_of_its_endpoint():
    with socket.socket() as silent:  # accepts connections (the backlog), never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        port = silent.getsockname()[1]
        endpoint = Endpoint("silent", f"http://mcpuser:mcp-pa55@127.0.0.1:{port}/mcp?token=mcp-t0ken", timeout=0.5)

        with pytest.raises(McpUnavailable) as raised:
            asyncio.run(tools_list(endpoint))

    message = str(raised.value)
    assert f"http://***@127.0.0.1:{port}/mcp?token=***" in message
    assert "mcp-pa55" not in message and "mcp-t0ken" not in message
    assert "mcp-pa55" not in repr(endpoint)


def test_arguments_come_from_the_context_by_the_schemas_property_names():
    context = {"msisdn": "5511999999999", "invoice_id": "INV001", "order_id": "P100", "empty": None}
    assert arguments_from_context(FATURA_SCHEMA, context) == {"msisdn": "5511999999999", "invoice_id": "INV001"}
    assert arguments_from_context(FATURA_SCHEMA, context, {"invoice_id": "INV000"})["invoice_id"] == "INV000"
