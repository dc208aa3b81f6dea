"""A server's output schemas: its tools' results checked against them within the platform's bounds, and a schema
the bounds refuse refused at sync. Against MCP servers the tests serve (the official SDK, streamable HTTP)."""

from __future__ import annotations

import asyncio
from typing import Annotated

import pytest
from django.core.exceptions import ValidationError
from pydantic import BaseModel, WithJsonSchema

from agents.mcp import STATUS_ERROR, STATUS_OK, Endpoint, runtime, tool_call, tools_list
from agents.models import McpServer, McpTool
from agents.services import mcp_tools_sync
from agents.structured import CHECK_MAX_STEPS
from mcp_servers.common import new_server
from tests.mcp_inline import mcp_serving

BACKTRACKING = "^(a+)+$"  # Python's re takes 2**n steps to refuse n a's and a "!": no end in sight at n = 5,000
NOT_MATCHING = "a" * 5_000 + "!"


class Code(BaseModel):
    code: Annotated[str, WithJsonSchema({"type": "string", "pattern": BACKTRACKING})]


class Codes(BaseModel):
    codes: list[Code]


class Elsewhere(BaseModel):
    code: Annotated[str, WithJsonSchema({"$ref": "https://example.com/code.json"})]


def codes_server():
    """Tools whose output schema holds a pattern Python's re backtracks on: one answers a code that fails it (a
    server broken or hostile: the SDK it runs does not check its own results), one a code that matches it."""
    server = new_server("codes", title="Codes (test)", instructions="Codes.")

    def hostile_code() -> Code:
        """A code that does not match the schema's pattern."""
        return Code(code=NOT_MATCHING)

    def good_code() -> Code:
        """A code that matches it."""
        return Code(code="aaa")

    def many_codes() -> Codes:
        """More codes than a check of its result may take steps for."""
        return Codes(codes=[Code(code="a")] * 5_000)

    server.add_tool(hostile_code)
    server.add_tool(good_code)
    server.add_tool(many_codes)
    return server


def elsewhere_server():
    """A tool whose output schema refers outside itself: one the platform does not check against."""
    server = new_server("elsewhere", title="Elsewhere (test)", instructions="Codes from elsewhere.")

    def remote_code() -> Elsewhere:
        """A code described by a schema somewhere else."""
        return Elsewhere(code="x")

    server.add_tool(remote_code)
    return server


@pytest.fixture
def codes():
    with mcp_serving(codes_server()) as url:
        yield Endpoint("codes", url, timeout=5)


@pytest.fixture
def elsewhere():
    with mcp_serving(elsewhere_server()) as url:
        yield Endpoint("elsewhere", url, timeout=5)


def call(endpoint: Endpoint, tool: str):
    return asyncio.run(tool_call(endpoint=endpoint, tool=tool, arguments={}, schema={}))


def test_a_result_is_checked_against_the_output_schema_within_the_platforms_bounds(codes):
    hostile = call(codes, "hostile_code")
    session = runtime.connections[codes].session
    good = call(codes, "good_code")

    assert hostile.status == STATUS_ERROR and hostile.result is None
    assert "hostile_code" in hostile.error and "does not match" in hostile.error
    assert len(hostile.error) < 1_000  # the server's value is not quoted whole
    assert good.status == STATUS_OK and good.result == {"code": "aaa"}
    assert runtime.connections[codes].session is session  # a result that fails its schema breaks no session


def test_a_result_whose_check_takes_more_steps_than_its_budget_is_an_error_saying_so(codes):
    result = call(codes, "many_codes")

    assert result.status == STATUS_ERROR and result.result is None
    assert f"more than {CHECK_MAX_STEPS:,} steps" in result.error


def test_a_result_whose_output_schema_the_platform_does_not_take_is_an_error_naming_why(elsewhere):
    result = call(elsewhere, "remote_code")

    assert result.status == STATUS_ERROR and result.result is None
    assert "Only references inside the schema" in result.error


def test_tools_list_gives_each_tools_output_schema(codes):
    tools = {tool.name: tool for tool in asyncio.run(tools_list(codes))}

    assert tools["good_code"].output_schema["properties"]["code"]["pattern"] == BACKTRACKING


@pytest.mark.django_db
def test_a_sync_refuses_an_output_schema_the_bounds_refuse_naming_the_tool_and_stores_nothing(elsewhere):
    server = McpServer.objects.create(name="elsewhere", endpoint=elsewhere.url, timeout=5)

    with pytest.raises(ValidationError) as refused:
        mcp_tools_sync(server=server)

    assert "remote_code" in str(refused.value) and "Only references inside the schema" in str(refused.value)
    assert not McpTool.objects.exists()
