"""sync_mcp_tools and the debug MCP endpoints, against the running example servers."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from agents.models import McpServer, McpTool
from common.config_version import config_version_bump

pytestmark = pytest.mark.django_db


def test_sync_mcp_tools_updates_descriptions_and_schemas_from_tools_list(live_mcp):
    out = StringIO()
    call_command("sync_mcp_tools", "telecom", stdout=out)

    fatura = McpTool.objects.get(name="consultar_fatura")
    assert fatura.description
    assert fatura.args_schema["required"] == ["msisdn"]
    assert "invoice_id" in fatura.args_schema["properties"]
    # diagnosticar_linha is on the server but not among the fixture's tools.
    assert "telecom: 1 created, 2 updated, 0 unchanged" in out.getvalue()
    assert McpTool.objects.get(name="diagnosticar_linha").server.name == "telecom"

    again = StringIO()
    call_command("sync_mcp_tools", "telecom", stdout=again)
    assert "0 created, 0 updated, 3 unchanged" in again.getvalue()


def test_sync_mcp_tools_keeps_the_permission_gate_of_a_known_tool(live_mcp):
    from tests.factories import McpToolFactory

    McpToolFactory(name="diagnosticar_linha", server=McpServer.objects.get(name="telecom"), needs_permission=True)

    call_command("sync_mcp_tools", "telecom", stdout=StringIO())

    diagnosis = McpTool.objects.get(name="diagnosticar_linha")
    assert diagnosis.args_schema["required"] == ["msisdn"]
    assert diagnosis.needs_permission is True


def test_sync_mcp_tools_creates_tools_it_did_not_know(live_mcp):
    McpTool.objects.filter(name="consultar_entrega").delete()

    call_command("sync_mcp_tools", "retail", stdout=StringIO())

    assert McpTool.objects.get(name="consultar_entrega").server.name == "retail"


def test_sync_mcp_tools_without_a_name_syncs_every_enabled_server(live_mcp):
    out = StringIO()
    call_command("sync_mcp_tools", stdout=out)
    assert "telecom:" in out.getvalue() and "retail:" in out.getvalue()


def test_sync_mcp_tools_reports_a_server_that_is_down(live_mcp):
    McpServer.objects.filter(name="retail").update(endpoint="http://127.0.0.1:9/mcp", timeout=2)
    err = StringIO()

    with pytest.raises(CommandError):
        call_command("sync_mcp_tools", "retail", stdout=StringIO(), stderr=err)

    assert "retail:" in err.getvalue()


def test_sync_mcp_tools_refuses_an_unknown_server(db):
    with pytest.raises(CommandError, match="Unknown MCP server"):
        call_command("sync_mcp_tools", "nope", stdout=StringIO())


def test_the_debug_tools_list_shows_every_tool_with_its_server(debug_api, live_mcp):
    tools = {tool["name"]: tool for tool in debug_api.get("/api/debug/mcp/tools").json()["tools"]}

    assert set(tools) == {"consultar_fatura", "consultar_pagamentos", "consultar_pedido", "consultar_entrega"}
    assert tools["consultar_pedido"]["server"] == "retail"


def test_a_debug_key_sees_each_tools_server_address_without_its_credentials_and_the_call_still_works(
    debug_api, live_mcp
):
    with_secrets = live_mcp["telecom"].replace("http://", "http://mcpuser:mcp-pa55@") + "?token=mcp-t0ken"
    McpServer.objects.filter(name="telecom").update(endpoint=with_secrets)
    config_version_bump()

    listed = debug_api.get("/api/debug/mcp/tools").json()
    called = debug_api.post("/api/debug/mcp/call/consultar_fatura", {"msisdn": "5511999999999"}, format="json")

    endpoints = {tool["name"]: tool["endpoint"] for tool in listed["tools"]}
    assert endpoints["consultar_fatura"] == live_mcp["telecom"].replace("http://", "http://***@") + "?token=***"
    assert "mcp-pa55" not in str(listed) and "mcp-t0ken" not in str(listed)
    assert called.json()["status"] == "ok"


def test_the_debug_call_runs_the_tool_over_mcp(debug_api, live_mcp):
    call_command("sync_mcp_tools", stdout=StringIO())

    fatura = debug_api.post(
        "/api/debug/mcp/call/consultar_fatura", {"msisdn": "5511999999999", "invoice_id": "INV001"}, format="json"
    ).json()
    pedido = debug_api.post(
        "/api/debug/mcp/call/consultar_pedido", {"order_id": "P100", "customer_id": "C001"}, format="json"
    ).json()

    assert fatura["status"] == "ok" and fatura["result"]["invoice_id"] == "INV001"
    assert pedido["status"] == "ok" and pedido["result"]["order_id"] == "P100"


def test_the_debug_call_validates_arguments_against_the_schema(debug_api, live_mcp):
    call_command("sync_mcp_tools", stdout=StringIO())

    body = debug_api.post("/api/debug/mcp/call/consultar_fatura", {"invoice_id": "INV001"}, format="json").json()

    assert body["status"] == "invalid_arguments"
    assert "msisdn" in body["error"]


def test_the_debug_call_of_an_unknown_tool_is_not_found(debug_api, live_mcp):
    assert debug_api.post("/api/debug/mcp/call/nope", {}, format="json").status_code == 404


def test_the_debug_mcp_routes_need_a_debug_key(api, live_mcp):
    assert api.get("/api/debug/mcp/tools").status_code == 403
    assert api.post("/api/debug/mcp/call/consultar_fatura", {}, format="json").status_code == 403


def test_the_admin_action_syncs_a_servers_tools(client, staff_user, live_mcp):
    McpTool.objects.filter(name="consultar_entrega").delete()
    client.force_login(staff_user)
    retail = McpServer.objects.get(name="retail")

    response = client.post(
        "/admin/agents/mcpserver/",
        {"action": "sync_tools", "_selected_action": [retail.pk]},
        follow=True,
    )

    assert response.status_code == 200
    assert [m.message for m in response.context["messages"]] == ["retail: 1 created, 1 updated, 0 unchanged"]
    assert McpTool.objects.filter(name="consultar_entrega", server=retail).exists()


def test_the_admin_action_reports_a_server_that_is_down(client, staff_user, live_mcp):
    McpServer.objects.filter(name="retail").update(endpoint="http://127.0.0.1:9/mcp", timeout=2)
    client.force_login(staff_user)

    response = client.post(
        "/admin/agents/mcpserver/",
        {"action": "sync_tools", "_selected_action": [McpServer.objects.get(name="retail").pk]},
        follow=True,
    )

    (message,) = [m.message for m in response.context["messages"]]
    assert message.startswith("retail:")
    assert "ConnectError" in message
