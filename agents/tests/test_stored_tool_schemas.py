"""Argument schemas stored before the platform's bounds on schemas (agents/structured/): a call with one is refused
as ``invalid_arguments``, so a system check lists them and the tool's admin page says why."""

from __future__ import annotations

import asyncio

import pytest
from django.core.checks import run_checks

from agents.mcp import STATUS_INVALID, Endpoint, tool_call
from agents.models import McpTool
from tests.adminkit import change_url

pytestmark = pytest.mark.django_db

LOOKAHEAD = {"type": "object", "properties": {"code": {"type": "string", "pattern": "^(?=a)a+$"}}}
ELSEWHERE = {"type": "object", "properties": {"code": {"$ref": "https://example.com/code.json"}}}
WHY_LOOKAHEAD = "is not one the platform runs"
WHY_ELSEWHERE = "Only references inside the schema are followed"


@pytest.fixture
def refused_tools(telecom) -> list[McpTool]:
    """Two of the profile's tools with schemas stored before the bounds (an update skips the field's validator, as a
    row written before them did), a third disabled."""
    McpTool.objects.filter(name="consultar_fatura").update(args_schema=LOOKAHEAD)
    McpTool.objects.filter(name="consultar_pagamentos").update(args_schema=ELSEWHERE)
    McpTool.objects.filter(name="consultar_pedido").update(args_schema=ELSEWHERE, enabled=False)
    return list(McpTool.objects.filter(name__in=["consultar_fatura", "consultar_pagamentos"]).order_by("name"))


def stored_schema_warnings() -> list:
    return [message for message in run_checks(databases=["default"]) if message.id == "agents.W005"]


def test_a_call_with_a_stored_schema_the_bounds_refuse_is_invalid(refused_tools):
    endpoint = Endpoint("telecom", "http://127.0.0.1:9/mcp", timeout=1)  # never reached

    result = asyncio.run(
        tool_call(endpoint=endpoint, tool="consultar_fatura", arguments={"code": "a"}, schema=LOOKAHEAD)
    )

    assert result.status == STATUS_INVALID and WHY_LOOKAHEAD in result.error


def test_a_system_check_lists_each_enabled_tool_whose_stored_schema_the_bounds_refuse(refused_tools):
    fatura, pagamentos = refused_tools

    warnings = stored_schema_warnings()

    assert [warning.obj for warning in warnings] == [fatura, pagamentos]  # not the disabled one, nor the others
    assert "consultar_fatura" in warnings[0].msg and WHY_LOOKAHEAD in warnings[0].msg
    assert "consultar_pagamentos" in warnings[1].msg and WHY_ELSEWHERE in warnings[1].msg
    assert "invalid_arguments" in warnings[0].msg and "admin" in warnings[0].hint


def test_the_check_is_quiet_when_every_stored_schema_is_taken(telecom):
    assert stored_schema_warnings() == []


@pytest.mark.sqlite_too  # an operator's admin page, on the embedded default's database too
def test_the_tools_admin_page_says_why_its_stored_schema_is_refused(staff_client, refused_tools):
    fatura = refused_tools[0]
    refused = staff_client.get(change_url(fatura)).content.decode()
    taken = staff_client.get(change_url(McpTool.objects.get(name="consultar_entrega"))).content.decode()

    assert WHY_LOOKAHEAD in refused and "every call of it is refused" in refused
    assert "every call of it is refused" not in taken
