"""A tool's description follows its server only while nobody edited it; its argument schema always does."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command

from agents.models import McpServer, McpTool
from agents.services import mcp_tools_sync
from tests.adminkit import change_url, form_data

pytestmark = pytest.mark.django_db


@pytest.fixture
def synced(live_mcp) -> McpServer:
    server = McpServer.objects.get(name="telecom")
    mcp_tools_sync(server=server)
    return server


def test_a_first_sync_records_what_the_server_said(synced):
    fatura = McpTool.objects.get(name="consultar_fatura")

    assert fatura.description and fatura.synced_description == fatura.description


def test_a_description_edited_in_the_admin_survives_a_resync(synced, staff_client):
    fatura = McpTool.objects.get(name="consultar_fatura")
    server_said = fatura.synced_description
    data = form_data(staff_client.get(change_url(fatura)))
    data["description"] = "Lê a fatura do cliente (texto do negócio)."
    assert staff_client.post(change_url(fatura), data).status_code == 302

    out = StringIO()
    call_command("sync_mcp_tools", "telecom", stdout=out)

    fatura.refresh_from_db()
    assert fatura.description == "Lê a fatura do cliente (texto do negócio)."
    assert fatura.synced_description == server_said
    assert "kept the edited description of consultar_fatura" in out.getvalue()


def test_an_unedited_description_changes_with_the_server(synced):
    # As if the server had said something else at the last sync: the description still equals it (unedited).
    McpTool.objects.filter(name="consultar_pagamentos").update(
        description="Old server text.", synced_description="Old server text."
    )

    report = mcp_tools_sync(server=synced)

    pagamentos = McpTool.objects.get(name="consultar_pagamentos")
    assert pagamentos.description != "Old server text." and pagamentos.description
    assert pagamentos.synced_description == pagamentos.description
    assert report.updated == ["consultar_pagamentos"] and report.kept_edited == []


def test_an_edited_description_keeps_while_the_schema_and_the_servers_text_follow_the_server(synced):
    McpTool.objects.filter(name="consultar_pagamentos").update(
        description="Edited by the business.", synced_description="Old server text.", args_schema={"type": "object"}
    )

    report = mcp_tools_sync(server=synced)

    pagamentos = McpTool.objects.get(name="consultar_pagamentos")
    assert pagamentos.description == "Edited by the business."
    assert pagamentos.synced_description not in ("", "Old server text.")
    assert pagamentos.args_schema["required"] == ["msisdn"]
    assert report.updated == ["consultar_pagamentos"] and report.kept_edited == ["consultar_pagamentos"]


def test_a_resync_of_an_unchanged_server_writes_nothing(synced):
    before = dict(McpTool.objects.values_list("name", "updated_at"))

    report = mcp_tools_sync(server=synced)

    assert report.created == [] and report.updated == []
    assert dict(McpTool.objects.values_list("name", "updated_at")) == before
