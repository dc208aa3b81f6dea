"""A tool that runs only as a background task (``execution.taskSupport: required``) is refused at sync, with the
reason, rather than imported to fail on every call — against a real server (``mcp_servers.all_content``)."""

from __future__ import annotations

import pytest

from agents.models import McpServer, McpTool
from agents.services import mcp_tools_sync
from mcp_servers.all_content.server import TASK_ONLY
from tests.factories import McpToolFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def server(all_content_mcp):
    return McpServer.objects.create(name="tasks", endpoint=all_content_mcp, timeout=10)


def test_a_task_only_tool_is_not_imported_and_the_report_says_why(server):
    report = mcp_tools_sync(server=server)

    assert not McpTool.objects.filter(server=server, name=TASK_ONLY).exists()
    assert report.refused == [TASK_ONLY] and "1 refused" in str(report)
    assert f"{TASK_ONLY}: not imported — it runs only as a background task" in "\n".join(report.lines)
    assert McpTool.objects.filter(server=server, name="tiny_image").exists()  # the others arrive


def test_a_task_only_tool_imported_before_is_disabled(server):
    McpToolFactory(name=TASK_ONLY, server=server, enabled=True)

    report = mcp_tools_sync(server=server)

    assert McpTool.objects.get(name=TASK_ONLY).enabled is False
    assert any(line.startswith(f"{TASK_ONLY}: disabled — ") for line in report.lines)


@pytest.mark.sqlite_too  # an operator's admin page, on the embedded default's database too
def test_the_admin_sync_shows_why_a_task_only_tool_was_refused(server, client, staff_user):
    client.force_login(staff_user)

    response = client.post(
        "/admin/agents/mcpserver/", {"action": "sync_tools", "_selected_action": [server.pk]}, follow=True
    )

    said = [message.message for message in response.context["messages"]]
    assert any("1 refused" in message for message in said)
    assert any(TASK_ONLY in message and "execution.taskSupport: required" in message for message in said)
